"""Where a throughput sweep's prompts come from: the same data the evaluation reads for the task.

``data.eval_paths.<task>`` (a local file) when given; else, for GSM8K, the evaluation's own resolution
(:func:`fastdllm_core.evaluation.tasks.resolve_gsm8k_path`: ``$FASTDLLM_GSM8K_PATH``, ``../shared``) and then the
Hugging Face Hub with the dataset id, configuration, split and question field of lm-eval's ``gsm8k`` task (the one
the evaluation runs, :func:`~fastdllm_core.evaluation.tasks.official_config`); else :class:`PromptsUnavailable`
naming the config key to set.  Offline (``HF_HUB_OFFLINE=1``) or with the Hub refusing, the error is the named one,
never a traceback from ``datasets``.
"""
from __future__ import annotations

import re

from ..evaluation.task_common import TaskUnavailable
from ..prompts import read_prompt_texts

HUB_TASKS = ("gsm8k",)  # tasks whose prompts the sweep can take from the Hub


class PromptsUnavailable(TaskUnavailable):
    """No prompts for the sweep; the message names ``data.eval_paths.<task>`` (and the variable) that fix it."""


def _key(task: str) -> str:
    return f"data.eval_paths.{task}"


def hub_spec(task: str = "gsm8k") -> dict:
    """The Hub dataset the evaluation of ``task`` reads: ``path``, ``name``, ``split``, ``field`` (the document
    field lm-eval's ``doc_to_text`` puts in the prompt, ``question`` for GSM8K)."""
    from ..evaluation.tasks import LM_EVAL_NAME, _task_manager, official_config

    cfg = official_config(_task_manager(LM_EVAL_NAME[task]), LM_EVAL_NAME[task])
    m = re.search(r"\{\{\s*(\w+)", str(cfg.get("doc_to_text", "")))
    if not m:
        raise RuntimeError(f"lm-eval's {task} doc_to_text names no document field: {cfg.get('doc_to_text')!r}")
    return {"path": cfg["dataset_path"], "name": cfg.get("dataset_name"), "split": cfg["test_split"],
            "field": m[1]}


def hub_prompt_texts(task: str = "gsm8k") -> tuple[list[str], str]:
    """The questions of the Hub dataset of ``task`` and a label of where they came from."""
    spec = hub_spec(task)
    where = f"hub {spec['path']}/{spec['name']}:{spec['split']}"
    try:
        import datasets

        ds = datasets.load_dataset(spec["path"], spec["name"], split=spec["split"])
        texts = [str(row[spec["field"]]) for row in ds]
    except Exception as exc:  # any refusal (offline, gated, network): the named error, the cause chained
        from ..hub_access import describe_refusal

        why = describe_refusal(exc, spec["path"], "dataset")
        raise PromptsUnavailable(f"bench prompts: {where} could not be loaded ({why}); set {_key(task)} to a "
                                 f"local copy (JSONL with a {spec['field']!r} field)") from exc
    return texts, where


def load_prompt_texts(task: str, path: str | None) -> tuple[list[str], str]:
    """A sweep's prompt texts for ``bench.prompts_from=task`` and where they came from: ``path``
    (``data.eval_paths.<task>`` resolved) when given, else the evaluation's local default or the Hub (GSM8K)."""
    if path:
        try:
            return read_prompt_texts(path), str(path)
        except FileNotFoundError as exc:
            raise PromptsUnavailable(f"{exc} (bench.prompts_from={task!r}: set {_key(task)} to a local copy)") \
                from exc
    if task not in HUB_TASKS:
        raise PromptsUnavailable(f"no prompt file for bench.prompts_from={task!r}; set {_key(task)}")
    from ..evaluation.tasks import resolve_gsm8k_path

    try:
        local = resolve_gsm8k_path(task, None)
    except TaskUnavailable as exc:  # offline and no local copy
        raise PromptsUnavailable(f"bench prompts: {exc.reason}; in the workflow set {_key(task)}") from exc
    if local is not None:
        return read_prompt_texts(local), str(local)
    return hub_prompt_texts(task)
