"""Evaluation: an lm-eval model (``fast_dllm_v2``), EvalPlus code scoring, offline datasets and the synthetic
task suite of the embedded default (its data: :mod:`fastdllm_core.synthetic`).  Entry point for the DAG:
:func:`run_task`.  See docs/evaluation.md."""
from __future__ import annotations

from .task_common import (  # noqa: F401
    PROMPT_STYLES,
    SYNTH_TASKS,
    TASKS,
    TaskUnavailable,
    local_test_file,
    offline,
    shared_dir,
)


def run_task(*args, **kwargs):
    """See :func:`fastdllm_core.evaluation.runner.run_task`."""
    from .runner import run_task as _run

    return _run(*args, **kwargs)


__all__ = ["TASKS", "PROMPT_STYLES", "TaskUnavailable", "run_task", "offline", "shared_dir"]
