"""The lm-eval floor: the task code needs lm_eval.tasks._yaml_loader and typed TaskManager.task_index entries,
new in lm-eval 0.4.12; the declared requirement says so and an older lm-eval is refused naming the fix (issue 24)."""
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.version import Version

from fastdllm_core.evaluation import tasks

ROOT = Path(__file__).resolve().parents[1]


def _declared_floor() -> str:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("lm-eval"))
    return re.search(r">=\s*([0-9.]+)", spec)[1]


def test_declared_floor_is_the_version_with_the_apis_used():
    assert _declared_floor() == tasks.LM_EVAL_MIN == "0.4.12"
    assert Version(version("lm_eval")) >= Version(tasks.LM_EVAL_MIN)
    from lm_eval.tasks import _yaml_loader  # noqa: F401 - the module official_config imports

    entry = tasks._task_manager("gsm8k").task_index["gsm8k"]
    assert entry.kind.name == "TASK" and entry.yaml_path is not None


@pytest.mark.parametrize("old", ["0.4.9", "0.4.11"])
def test_older_lm_eval_is_refused_naming_the_fix(old):
    with pytest.raises(RuntimeError, match=rf"lm-eval {re.escape(old)} is too old.*>=0\.4\.12"):
        tasks.check_lm_eval_version(old)
    tasks.check_lm_eval_version("0.4.12")
    tasks.check_lm_eval_version("0.4.13")
