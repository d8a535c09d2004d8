"""Evaluation: an lm-eval model (``fast_dllm_v2``), EvalPlus code scoring, offline datasets and the synthetic
task suite of the embedded default (its data: :mod:`fastdllm_core.synthetic`).  Entry point for the DAG:
:func:`run_task`.  See docs/evaluation.md."""
from __future__ import annotations

import os
from pathlib import Path

SYNTH_TASKS = ("synth_arith", "synth_math", "synth_code", "synth_mbpp", "synth_mc", "synth_ifeval")
TASKS = (*SYNTH_TASKS, "gsm8k", "humaneval", "mbpp", "minerva_math", "ifeval", "mmlu", "gpqa")
PROMPT_STYLES = ("paper", "boxed", "plain", "evalplus")


class TaskUnavailable(RuntimeError):
    """The task's data cannot be loaded here; the message names the path or variable that fixes it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def offline() -> bool:
    """True when the Hugging Face / network downloads are switched off by the usual variables."""
    return any(os.environ.get(v, "0").lower() not in ("0", "", "false")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "FASTDLLM_OFFLINE"))


def shared_dir() -> Path:
    """The read-only shared material: ``$FASTDLLM_SHARED_DIR`` or ``../shared`` next to the repository root."""
    env = os.environ.get("FASTDLLM_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared"


def local_test_file(data_path, env_var: str, fname: str, missing: str, not_found: str) -> Path:
    """A task's local test file: ``data_path`` (the file, or the suite directory holding ``fname``), else
    ``$env_var``.  :class:`TaskUnavailable` with ``missing`` when neither is given, with ``not_found`` (``{p}``:
    the path looked at) when there is no such file."""
    p = data_path or os.environ.get(env_var)
    if not p:
        raise TaskUnavailable(missing)
    p = Path(p)
    if p.is_dir():
        p = p / fname
    if not p.is_file():
        raise TaskUnavailable(not_found.replace("{p}", str(p)))
    return p


def run_task(*args, **kwargs):
    """See :func:`fastdllm_core.evaluation.runner.run_task`."""
    from .runner import run_task as _run

    return _run(*args, **kwargs)


__all__ = ["TASKS", "PROMPT_STYLES", "TaskUnavailable", "run_task", "offline", "shared_dir"]
