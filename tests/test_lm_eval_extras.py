"""A task whose lm-eval definition needs a module that is not installed (lm-eval's math / ifeval extras) becomes
an n/a row naming the fix; the other tasks of the job still run (issue 24)."""
import runpy
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from fastdllm_core.evaluation import TaskUnavailable

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ck(tmp_path_factory):
    from fastdllm_core.tiny import write_tiny_checkpoint

    return write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ck", seed=1)


def _missing(name):
    def build(*a, **k):
        raise ModuleNotFoundError(f"No module named '{name}'", name=name)
    return build


@pytest.mark.parametrize("task,module,fix", [("minerva_math", "math_verify", "pip install 'lm-eval[math]'"),
                                             ("ifeval", "langdetect", "pip install 'lm-eval[ifeval]'"),
                                             ("mmlu", "somemod", "pip install somemod")])
def test_missing_module_while_building_names_the_fix(ck, tmp_path, monkeypatch, task, module, fix):
    from fastdllm_core.evaluation import run_task, tasks

    monkeypatch.setattr(tasks, "build_lm_eval_tasks", _missing(module))
    with pytest.raises(TaskUnavailable) as e:
        run_task(str(ck), task, mode="ar", limit=1, out_dir=tmp_path / "o")
    assert module in e.value.reason and fix in e.value.reason


def test_missing_module_while_evaluating_names_the_fix(ck, tmp_path, monkeypatch):
    import lm_eval

    from fastdllm_core.evaluation import run_task, tasks

    monkeypatch.setattr(tasks, "build_lm_eval_tasks", lambda *a, **k: ([{"task": "ifeval"}], {"task_manager": None,
                                                                                               "source": "x"}))
    monkeypatch.setattr(lm_eval, "simple_evaluate", _missing("langdetect"))
    with pytest.raises(TaskUnavailable, match=r"langdetect.*pip install 'lm-eval\[ifeval\]'"):
        run_task(str(ck), "ifeval", mode="ar", limit=1, out_dir=tmp_path / "o")


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_evaluation_job_goes_on_past_a_task_missing_its_extra(ck, tmp_path, monkeypatch):
    """workflow/scripts/evaluate.py (stand-in snakemake object, real run_task on a tiny checkpoint): minerva_math
    cannot be built (math_verify missing): its row is n/a with the fix; synth_arith is measured."""
    from fastdllm_core import synthetic
    from fastdllm_core.evaluation import tasks

    real = tasks.build_lm_eval_tasks
    monkeypatch.setattr(tasks, "build_lm_eval_tasks",
                        lambda task, *a, **k: _missing("math_verify")(task) if task == "minerva_math" else
                        real(task, *a, **k))
    suite = synthetic.write_suite(tmp_path / "suite", n_pretrain=0, n_sft=2, n_adapt=0, n_eval=2)
    params = SimpleNamespace(source=str(ck), points={"minerva_math": ["ar"], "synth_arith": ["ar"]},
                             data_paths={"minerva_math": None, "synth_arith": suite["synth_arith_test"]},
                             mode="ar", max_new_tokens=8, batch_size=2, limit=1, cache_dir=str(tmp_path / "cache"),
                             model="m", label="m", verdict_cache=str(tmp_path / "verdicts"),
                             mdm_loglikelihood="mc", mc_num=128)
    config = {"seed": 0, "device": "cpu", "scale": "t", "models": {"m": {"mode": "ar"}}}
    sm = SimpleNamespace(params=params, config=config, input=SimpleNamespace(model=[]), log=[], threads=1,
                         output=[str(tmp_path / "out.csv")], scriptdir=str(ROOT / "workflow" / "scripts"),
                         rule="evaluate")
    monkeypatch.setattr(sys, "path", list(sys.path))
    runpy.run_path(str(ROOT / "workflow" / "scripts" / "evaluate.py"), init_globals={"snakemake": sm})
    import csv

    rows = list(csv.DictReader(open(tmp_path / "out.csv")))
    math_rows = [r for r in rows if r["task"] == "minerva_math"]
    assert len(math_rows) == 1 and math_rows[0]["status"] == "n/a"
    assert "math_verify" in math_rows[0]["note"] and "lm-eval[math]" in math_rows[0]["note"]
    assert any(r["task"] == "synth_arith" and r["status"] == "ok" for r in rows)
