"""An lm-eval task (every task but the code tasks) for :func:`.runner.run_task`: ``lm_eval.simple_evaluate`` on
the task's definition (:func:`.tasks.build_lm_eval_tasks`), its results turned into metric rows (groups: a micro
average over the subtasks) and per-item samples; a dataset or module that is missing here is
:class:`TaskUnavailable` naming the fix."""
from __future__ import annotations

import json

from .task_common import TaskUnavailable


def _jsonable(x):
    try:
        json.dumps(x)
        return x
    except TypeError:
        return str(x)


def _metric_name(key: str) -> tuple[str, str] | None:
    if "_stderr" in key or "," not in key:
        return None
    metric, flt = key.split(",", 1)
    short = {"strict-match": "strict", "flexible-extract": "flexible", "none": ""}.get(flt, flt)
    return (f"{metric}_{short}" if short else metric), flt


# lm-eval's extras that its task definitions import (task utils.py files): the fix a missing module names
LM_EVAL_EXTRAS = {"minerva_math": "math", "ifeval": "ifeval", "synth_ifeval": "ifeval"}


def missing_module_reason(task: str, exc: ImportError) -> str:
    """The n/a reason of a task whose lm-eval definition needs a module that is not installed, naming the fix."""
    mod = getattr(exc, "name", None) or str(exc)
    extra = LM_EVAL_EXTRAS.get(task)
    fix = f"pip install 'lm-eval[{extra}]'" if extra else f"pip install {mod.split('.')[0]}"
    return (f"{task}: lm-eval's task needs the module {mod!r}, which is not installed ({type(exc).__name__}: "
            f"{exc}); fix: {fix}")


def _evaluate_lm_eval(lm, task, data_path, prompt_style, limit, seed, shard=None, progress=None):
    """Build the task and run ``lm_eval.simple_evaluate``; a missing module (an lm-eval extra such as
    ``math_verify`` or ``langdetect``) raises :class:`TaskUnavailable` naming the fix, so the caller records
    the task as n/a and goes on with the others.  ``shard`` (k, n): items of :func:`shard_samples` only;
    ``progress``: lm-eval's request cache (a per-request sqlite file, filled as the model answers) at that path."""
    import lm_eval

    from .tasks import build_lm_eval_tasks

    specs = []
    try:
        specs, info = build_lm_eval_tasks(task, data_path, prompt_style)
        samples = None
        if shard is not None:  # the leaves built once here, handed to lm-eval as they are
            from lm_eval.tasks import get_task_dict

            leaves = _leaves(get_task_dict(specs, info["task_manager"]))
            samples, limit, specs = shard_samples(leaves, limit, shard), None, list(leaves.values())
        res = lm_eval.simple_evaluate(
            model=lm, tasks=specs, limit=limit, samples=samples, use_cache=progress,
            apply_chat_template=True, fewshot_as_multiturn=True,
            log_samples=True, task_manager=info["task_manager"], random_seed=seed, numpy_random_seed=seed,
            torch_random_seed=seed, fewshot_random_seed=seed, bootstrap_iters=0, confirm_run_unsafe_code=False)
    except ImportError as exc:
        raise TaskUnavailable(missing_module_reason(task, exc)) from exc
    except Exception as exc:  # a gated dataset (GPQA: Idavidrein/gpqa) refused by the Hub: n/a naming the fix
        from ..hub_access import describe_refusal, refusal

        if refusal(exc) is None:
            raise
        repo = next((s.get("dataset_path") for s in specs if isinstance(s, dict)), task) if specs else task
        raise TaskUnavailable(f"{task}: {describe_refusal(exc, str(repo), 'dataset')}") from exc
    return res, info


def _leaves(task_dict) -> dict:
    out = {}
    for v in task_dict.values():
        if isinstance(v, dict):
            out.update(_leaves(v))
        else:
            out[v.config.task] = v
    return out


def shard_range(name: str, total: int, shard) -> list[int]:
    """Items ``[(k-1) total // n, k total // n)`` of shard ``(k, n)`` (:mod:`.shards`), refusing a bad shard
    and an empty range (naming ``name``, its item count and the shard)."""
    k, n = shard if isinstance(shard, (tuple, list)) and len(shard) == 2 else (None, None)
    if not (type(k) is int and type(n) is int and 1 <= k <= n):
        raise ValueError(f"shard must be (k, n) with 1 <= k <= n, got {shard!r}")
    ids = list(range((k - 1) * total // n, k * total // n))
    if not ids:  # (lm-eval reads an empty selection as every item)
        raise ValueError(f"{name}: {total} item(s) leave shard {k} of {n} empty; fewer shards (a larger "
                         "eval.shards.job_minutes) or this task unsharded")
    return ids


def shard_samples(leaves: dict, limit, shard) -> dict[str, list[int]]:
    """lm-eval's ``samples=`` of shard ``(k, n)``: leaf task -> its doc indices (:func:`shard_range` of the
    leaf's ``min(items, limit)``).  ``leaves``: name -> the Task object that ``simple_evaluate`` is given.  A leaf
    whose few-shot sampler draws in item order (``num_fewshot`` > 0, any sampler but ``first_n``, e.g. GPQA's
    ``default``: one ``random.Random`` draw per item, in the order the contexts are built) builds the contexts of
    every item up to the shard's last, as the unsharded run does, and keeps the shard's (:func:`_unsharded_draws`):
    each item's prompt, few-shot examples included, is the unsharded run's."""
    out = {}
    for name, task in leaves.items():
        total = len(task.eval_docs)
        total = min(total, int(limit)) if limit else total
        out[name] = shard_range(name, total, shard)
        fc = task.config.fewshot_config or {}
        sampler = fc.get("sampler", "default") if isinstance(fc, dict) else getattr(fc, "sampler", "default")
        if (task.config.num_fewshot or 0) and sampler != "first_n":
            _unsharded_draws(task, out[name])
    return out


def _unsharded_draws(task, ids: list[int]) -> None:
    """Make ``task.build_all_requests`` build the requests of items ``0 .. ids[-1]`` in order (every few-shot
    draw the unsharded run makes up to there) and keep those of ``ids``, their ``doc_id`` renumbered 0, 1, ... as
    lm-eval numbers the items of ``samples=`` (its results then log the true index)."""
    build = task.build_all_requests
    local = {d: i for i, d in enumerate(ids)}

    def build_shard(**kw):
        build(**dict(kw, samples=None, limit=ids[-1] + 1))
        keep = [inst for inst in task.instances if inst.doc_id in local]
        for inst in keep:
            inst.doc_id = local[inst.doc_id]
            inst.metadata = (inst.metadata[0], inst.doc_id, inst.metadata[2])
        task._instances = keep

    task.build_all_requests = build_shard


def run_lm_eval(lm, task, data_path, prompt_style, limit, seed, shard=None, progress=None):
    try:
        res, info = _evaluate_lm_eval(lm, task, data_path, prompt_style, limit, seed, shard, progress)
    except TaskUnavailable:
        raise
    except (ConnectionError, OSError, FileNotFoundError) as exc:
        raise TaskUnavailable(f"{task}: its dataset could not be loaded ({type(exc).__name__}: {exc}); pass "
                              f"data_path= with a local copy") from exc
    except Exception as exc:  # noqa: BLE001 - dataset errors from `datasets` have many types
        text = f"{type(exc).__name__}: {exc}"
        if any(w in text.lower() for w in ("gated", "offline", "connection", "couldn't reach", "401", "403",
                                           "doesn't exist on the hub", "not found on the hugging face")):
            raise TaskUnavailable(f"{task}: dataset unavailable ({text[:400]}); pass data_path= with a local "
                                  "copy" + (" (GPQA is gated on the Hub: accept its terms and set HF_TOKEN)"
                                            if task == "gpqa" else "")) from exc
        raise
    leaves = list(res["results"])
    n_by_task = {t: res.get("n-samples", {}).get(t, {}).get("effective") for t in leaves}
    samples, metrics, by_doc, no_answer = [], {}, {}, {}
    for t in leaves:
        for s in res["samples"].get(t, []):
            flt = s.get("filter", "none")
            rec = by_doc.get((t, s.get("doc_id")))
            if rec is None:
                rec = by_doc[(t, s.get("doc_id"))] = {
                    "task": t, "doc_id": s.get("doc_id"),
                    "prompt": _jsonable(s["arguments"][0][0]) if s.get("arguments") else None,
                    "raw_output": _jsonable(_raw(s.get("resps"))),
                    "target": _jsonable(s.get("target")), "extracted": {}, "correct": {}}
                samples.append(rec)
            ext = _jsonable(s.get("filtered_resps", [None])[0] if s.get("filtered_resps") else None)
            rec["extracted"][flt] = ext
            rec["correct"][flt] = {m: _jsonable(s[m]) for m in s.get("metrics", []) if m in s}
            if no_extracted_answer(ext):
                no_answer[flt] = no_answer.get(flt, 0) + 1
        for key, val in res["results"][t].items():
            mk = _metric_name(key)
            if mk is None or not isinstance(val, (int, float)):
                continue
            metrics.setdefault(mk, []).append((float(val), n_by_task.get(t) or 0))
    rows = metric_rows(metrics, no_answer)
    prompts_used = {t: res["configs"][t].get("doc_to_text") for t in leaves}
    fewshot = {t: res["configs"][t].get("num_fewshot") for t in leaves}
    extra = {"source": info["source"], "lm_eval_configs": {t: _jsonable(res["configs"][t]) for t in leaves},
             "prompt_template": prompts_used, "num_fewshot": fewshot, "n_no_answer": no_answer}
    return rows, samples, extra


def metric_rows(metrics: dict, no_answer: dict) -> list[dict]:
    """Rows of ``{(metric, filter): [(leaf value, leaf items)]}``: groups a micro average over subtasks weighted by
    item count (lm-eval's weight_by_size aggregation); ``no_answer``: filter -> answers with nothing extracted."""
    rows = []
    for (metric, flt), vals in metrics.items():
        n = sum(w for _, w in vals)
        v = sum(x * w for x, w in vals) / n if n else float("nan")
        note = (f"{no_answer[flt]} of {n} answers had no extractable answer (scored wrong)"
                if no_answer.get(flt) else "")
        rows.append({"metric": metric, "value": 100.0 * v, "n": n, "filter": flt, "note": note})
    return rows


def no_extracted_answer(ext) -> bool:
    return isinstance(ext, str) and (ext == "[invalid]" or not ext.strip())


def _raw(resps):
    if isinstance(resps, list) and len(resps) == 1 and isinstance(resps[0], list) and len(resps[0]) == 1:
        return resps[0][0]
    return resps
