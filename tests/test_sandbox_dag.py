"""The sandbox a DAG job's scoring gets (issue 22, part 4): workflow/scripts/evaluate.py, run as Snakemake runs it
(relative paths under the working directory), scores model-written code with the same mechanisms as the probe
(`python -m fastdllm_core.evaluation.sandbox`).  A relative working directory once lost root's private uid: the
sandbox's child enters the directory before it hands it to chown, so the relative name then named nothing."""
import json
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_dag_scoring_gets_the_probed_sandbox(tmp_path, monkeypatch):
    from fastdllm_core import synthetic
    from fastdllm_core.evaluation import sandbox
    from fastdllm_core.tiny import write_tiny_checkpoint

    probe = sandbox.probe()
    if "private-uid" not in probe["description"]:
        pytest.skip(f"this machine's probe has no private uid (not root): {probe['description']}")
    monkeypatch.chdir(tmp_path)  # every path below is relative, as in a DAG job
    ck = write_tiny_checkpoint(Path("ck"), seed=1)
    suite = synthetic.write_suite(Path("suite"), n_pretrain=0, n_sft=2, n_adapt=0, n_eval=2)
    params = SimpleNamespace(source=str(ck), points={"synth_code": ["ar"]},
                             data_paths={"synth_code": str(suite["synth_code_test"])}, mode="ar", max_new_tokens=8,
                             batch_size=2, limit=2, cache_dir="results/accuracy/m", model="m", label="m",
                             verdict_cache="results/cache/verdicts", mdm_loglikelihood="mc", mc_num=128)
    sm = SimpleNamespace(params=params, config={"seed": 0, "device": "cpu", "scale": "t",
                                                "models": {"m": {"mode": "ar"}}},
                         input=SimpleNamespace(model=[]), log=[], threads=1, output=["results/accuracy/m.csv"],
                         scriptdir=str(ROOT / "workflow" / "scripts"), rule="evaluate")
    monkeypatch.setattr(sys, "path", list(sys.path))
    runpy.run_path(str(ROOT / "workflow" / "scripts" / "evaluate.py"), init_globals={"snakemake": sm})
    info = json.loads(next(Path("results/accuracy/m/synth_code").glob("*/results.json")).read_text())
    used = json.dumps(info)
    assert f'"sandbox": "{probe["description"]}' in used or probe["description"] in used, used[:2000]
    assert "private-uid" in used and "nproc-bound" in used
    # the DAG's verdict cache (relative path, as the rule gives it): filled by this job's checks
    assert info["info"]["verdicts_reused"] == 0 and any(Path("results/cache/verdicts").rglob("*.json"))


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_missing_names_what_the_full_set_lacks():
    from fastdllm_core.evaluation import sandbox
    from fastdllm_core.evaluation.sandbox.kernel import F_NPROC, F_PRIVATE_UID, F_READ_CAP_ONLY

    full = sandbox.probe()["flags"]
    if not sandbox.is_full(full):
        pytest.skip("no full sandbox on this machine")
    assert sandbox.missing(full) == []
    weaker = full & ~(F_PRIVATE_UID | F_NPROC | F_READ_CAP_ONLY)
    assert not sandbox.is_full(weaker)
    assert any("nproc-bound" in m for m in sandbox.missing(weaker))
