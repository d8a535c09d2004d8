"""lm-eval task configurations of the stand-ins that are not GSM8K-form (``synth_arith`` reuses lm-eval's own
``gsm8k`` config, see :mod:`fastdllm_core.evaluation.tasks`).

Each follows the config of the benchmark it stands in for, on the same lm-eval code path:

* ``synth_math`` -- like ``minerva_math``: ``generate_until`` (until ``Problem:``), the last ``\\boxed{}`` of the
  answer compared with the target (``exact_match``);
* ``synth_mc`` -- like ``mmlu``: ``multiple_choice`` scored by ``loglikelihood`` (block-diffusion mode scores the
  continuation at a ``[MASK]``), ``acc``; the continuations are the options themselves, as in lm-eval's ARC
  tasks (see :mod:`.choice`);
* ``synth_ifeval`` -- like ``ifeval``: ``generate_until`` with no stop string, ``process_results`` checking every
  constraint, ``prompt_level_strict_acc`` (mean) and ``inst_level_strict_acc`` (flattened mean).
"""
from __future__ import annotations

import re

from . import instruct

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def math_process_results(doc: dict, results: list) -> dict:
    found = _BOXED.findall(results[0] if results else "")
    return {"exact_match": int(bool(found) and found[-1].strip() == str(doc["answer"]).strip())}


def ifeval_process_results(doc: dict, results: list) -> dict:
    return instruct.score(doc["constraints"], results[0] if results else "")


def agg_inst_level(items: list) -> float:
    flat = [x for item in items for x in item]
    return sum(flat) / len(flat) if flat else 0.0


def _local(task: str, path: str) -> dict:
    return {"task": task, "dataset_path": "json", "dataset_name": None,
            "dataset_kwargs": {"data_files": {"test": str(path)}}, "test_split": "test", "num_fewshot": 0,
            "metadata": {"version": 1.0, "stand_in": True}}


def config(task: str, path: str) -> dict:
    """The lm-eval task config of ``task`` over the local test file ``path``."""
    if task == "synth_math":
        return {**_local(task, path), "output_type": "generate_until", "doc_to_text": "Problem: {{problem}}\nSolution:",
                "doc_to_target": "{{answer}}", "process_results": math_process_results,
                "generation_kwargs": {"until": ["Problem:"], "do_sample": False, "temperature": 0.0},
                "metric_list": [{"metric": "exact_match", "aggregation": "mean", "higher_is_better": True}]}
    if task == "synth_mc":
        return {**_local(task, path), "output_type": "multiple_choice",
                "doc_to_text": "{{question}}\n{{choices | join('\n')}}\nAnswer:",
                "doc_to_choice": "{{choices}}", "doc_to_target": "answer",
                "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]}
    if task == "synth_ifeval":
        return {**_local(task, path), "output_type": "generate_until", "doc_to_text": "prompt", "doc_to_target": 0,
                "process_results": ifeval_process_results,
                "generation_kwargs": {"until": [], "do_sample": False, "temperature": 0.0},
                "metric_list": [{"metric": "prompt_level_strict_acc", "aggregation": "mean", "higher_is_better": True},
                                {"metric": "inst_level_strict_acc", "aggregation": agg_inst_level,
                                 "higher_is_better": True}]}
    raise KeyError(f"no lm-eval stand-in config for {task!r}")
