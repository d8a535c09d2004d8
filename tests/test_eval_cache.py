"""The evaluation cache of the DAG's accuracy jobs (workflow/scripts/evaluate.py via jobs.py): an n/a point is
never reused, and the key follows the data source, the data-choosing environment and the checkpoint's contents
(issue 24)."""
import csv
import json
import os
from pathlib import Path

import pytest

from fastdllm_core.provenance import config_hash
from fastdllm_dag.job import common as jobs

ROOT = Path(__file__).resolve().parents[1]


def _write_point(tmp_path, rows, key="k1"):
    kf, cf = tmp_path / "p.key.json", tmp_path / "p.csv"
    with open(cf, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    kf.write_text(json.dumps({"key": key}))
    return kf, cf


def test_na_point_is_not_reused(tmp_path):
    kf, cf = _write_point(tmp_path, [{"metric": "", "value": "", "status": "n/a", "note": "no data"}])
    assert jobs.cached_rows(kf, cf, "k1") is None


def test_measured_point_is_reused_with_its_key_only(tmp_path):
    rows = [{"metric": "pass@1_base", "value": "50.0", "status": "ok", "note": ""},
            {"metric": "pass@1_plus", "value": "", "status": "n/a", "note": "base tests only"}]
    kf, cf = _write_point(tmp_path, rows)
    assert [r["metric"] for r in jobs.cached_rows(kf, cf, "k1")] == ["pass@1_base", "pass@1_plus"]
    assert jobs.cached_rows(kf, cf, "k2") is None
    assert jobs.cached_rows(tmp_path / "none.json", cf, "k1") is None


def test_data_key_follows_file_content_at_same_size_and_mtime(tmp_path):
    f = tmp_path / "test.jsonl"
    f.write_text('{"q": 1}\n')
    st = f.stat()
    a = jobs.data_fingerprint(f, environ={})
    f.write_text('{"q": 2}\n')  # same size
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the same mtime
    assert jobs.data_fingerprint(f, environ={}) != a


@pytest.mark.parametrize("var", ["HUMANEVAL_OVERRIDE_PATH", "MBPP_OVERRIDE_PATH", "FASTDLLM_GSM8K_PATH"])
def test_data_key_follows_env_overrides_and_their_files(tmp_path, var):
    f = tmp_path / "data.jsonl"
    f.write_text("a\n")
    none = jobs.data_fingerprint(None, environ={})
    set_ = jobs.data_fingerprint(None, environ={var: str(f)})
    assert set_ != none and set_[var]["value"] == str(f)
    f.write_text("b\n")
    assert jobs.data_fingerprint(None, environ={var: str(f)}) != set_
    assert jobs.data_fingerprint(None, environ={var: str(tmp_path / "other.jsonl")}) != set_
    offline = jobs.data_fingerprint(None, environ={"HF_DATASETS_OFFLINE": "1"})
    assert offline != none  # an n/a under offline is not the answer online


def _checkpoint(d, weights: bytes):
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text('{"model_type": "qwen2"}')
    (d / "model.safetensors").write_bytes(weights)


def test_model_key_follows_a_checkpoint_replaced_at_the_same_path(tmp_path, monkeypatch):
    ck = tmp_path / "ck"
    _checkpoint(ck, b"\0" * 4096)
    st = (ck / "model.safetensors").stat()
    a = jobs.model_fingerprint(str(ck), [])  # a released checkpoint (no job input): its path is fingerprinted
    assert a["files"] and a == jobs.model_fingerprint(str(ck), [str(ck)]) == jobs.model_fingerprint("x", str(ck))
    _checkpoint(ck, b"\1" * 4096)
    os.utime(ck / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns))
    assert jobs.model_fingerprint(str(ck), []) != a
    # large weights are sampled, not read whole: a changed sample or mtime still changes the key
    monkeypatch.setattr(jobs, "FULL_HASH_BYTES", 1024)
    b = jobs.model_fingerprint(str(ck), [])
    assert b["files"][1][2].startswith("sampled:")
    os.utime(ck / "model.safetensors", ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert jobs.model_fingerprint(str(ck), []) != b


def test_hub_model_key_is_the_cached_snapshot(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert jobs.model_fingerprint("org/model", []) == {"hub": "org/model", "snapshot": "not cached"}
    ref = tmp_path / "models--org--model" / "refs" / "main"
    ref.parent.mkdir(parents=True)
    ref.write_text("abc123\n")
    assert jobs.model_fingerprint("org/model", [])["snapshot"] == "abc123"
    key = config_hash({"model_files": jobs.model_fingerprint("org/model", [])})
    ref.write_text("def456\n")
    assert config_hash({"model_files": jobs.model_fingerprint("org/model", [])}) != key


def _run_evaluate(tmp_path, data_path, monkeypatch, measured):
    """workflow/scripts/evaluate.py with a stand-in snakemake object; run_task and load_model replaced (no model):
    run_task measures when ``measured`` else reports the data missing.  Returns the names of the points run."""
    import runpy
    from types import SimpleNamespace

    import fastdllm_core.evaluation as ev
    import fastdllm_core.evaluation.lm_model  # noqa: F401 - imported before the patch below, which would otherwise
    import fastdllm_core.evaluation.runner  # noqa: F401 - stay bound in their namespaces for later tests
    import fastdllm_core.loading as fm
    from fastdllm_core.evaluation import TaskUnavailable

    ran = []

    def fake_run_task(model, task, *, extra, **kw):
        ran.append(extra["point"])
        if not measured:
            raise TaskUnavailable(f"{task}: no data at {data_path}")
        return [{"model": "src", "model_label": "m", "task": task, "metric": "acc", "value": 50.0, "n": 2,
                 "status": "ok", "note": "", **extra}]

    monkeypatch.setattr(ev, "run_task", fake_run_task)
    monkeypatch.setattr(fm, "load_model", lambda *a, **k: object())
    monkeypatch.setattr(jobs, "code_fingerprint", lambda: "code")
    params = SimpleNamespace(source=str(tmp_path / "ck"), points={"gsm8k": ["bd_b32_s8_t1_c0"]},
                             data_paths={"gsm8k": str(data_path)}, mode="bd", max_new_tokens=16, batch_size=2,
                             limit=2, cache_dir=str(tmp_path / "cache"), model="m", label="m",
                             verdict_cache=str(tmp_path / "verdicts"), mdm_loglikelihood="mc", mc_num=128)
    config = {"seed": 0, "device": "cpu", "scale": "t", "models": {"m": {"mode": "bd"}}}
    sm = SimpleNamespace(params=params, config=config, input=SimpleNamespace(model=[]), log=[], threads=1,
                         output=[str(tmp_path / "out.csv")], scriptdir=str(ROOT / "workflow" / "scripts"),
                         rule="evaluate")
    runpy.run_path(str(ROOT / "workflow" / "scripts" / "evaluate.py"), init_globals={"snakemake": sm})
    return ran


def test_evaluate_script_retries_na_and_reuses_measurements(tmp_path, monkeypatch):
    _checkpoint(tmp_path / "ck", b"\0" * 64)
    data = tmp_path / "test.jsonl"
    assert _run_evaluate(tmp_path, data, monkeypatch, measured=False) == ["bd_b32_s8_t1_c0"]  # n/a row written
    assert "n/a" in (tmp_path / "out.csv").read_text()
    assert _run_evaluate(tmp_path, data, monkeypatch, measured=False) == ["bd_b32_s8_t1_c0"]  # same key: not reused
    data.write_text('{"question": "1+1", "answer": "#### 2"}\n')  # the data arrives: measured, not the cached n/a
    assert _run_evaluate(tmp_path, data, monkeypatch, measured=True) == ["bd_b32_s8_t1_c0"]
    assert _run_evaluate(tmp_path, data, monkeypatch, measured=True) == []  # reused
    _checkpoint(tmp_path / "ck", b"\1" * 64)  # a new checkpoint at the same path: measured again
    assert _run_evaluate(tmp_path, data, monkeypatch, measured=True) == ["bd_b32_s8_t1_c0"]
