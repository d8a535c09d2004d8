"""One task (lm-eval or EvalPlus) split into shards over contiguous item ranges, and their rows merged back into
the rows the unsharded run gives.

Shard k of n (1-based) takes, in every leaf task of ``N`` items (``min(N, limit)``), the items
``[(k-1) N // n, k N // n)`` (:func:`.lm_eval_run.shard_samples`): the shards together are the unsharded run's
items.  :func:`merge_shards` recomputes
each metric from the shards' per-item results (``samples.jsonl`` of :func:`.runner.run_task`) the way lm-eval
aggregates them (a leaf's mean over its items, IFEval's instruction-level scores flattened first; groups weighted
by item count, :func:`.lm_eval_run.metric_rows`), so value, ``n`` and the 95% interval are the unsharded run's.
A metric that is not such a mean is refused (each shard's own value is recomputed and compared first).  EvalPlus'
code tasks split their sorted, limited problem list the same way (:func:`.runner.run_task`), their pass@1 rows
recomputed from each item's verdicts.  A few-shot task whose sampler draws in item order (GPQA's random sampler)
builds every context up to the shard's last item and keeps the shard's (:func:`.lm_eval_run.shard_samples`), so
each item's prompt, few-shot examples included, is the unsharded run's."""
from __future__ import annotations

import math

from ..intervals import row_interval
from .lm_eval_run import _metric_name, metric_rows, no_extracted_answer

THROUGHPUT_SUMS = ("total_tokens", "nfe", "truncated_prompts")


def _leaf_metrics(samples: list[dict]) -> tuple[dict, dict]:
    """({(metric, filter): [(leaf value, leaf items)]}, {filter: answers with nothing extracted}) from per-item
    results, leaves in the order they first appear."""
    by_leaf: dict[str, list[dict]] = {}
    for s in samples:
        by_leaf.setdefault(s["task"], []).append(s)
    metrics: dict = {}
    no_answer: dict = {}
    for _leaf, items in by_leaf.items():
        items = sorted(items, key=lambda s: s["doc_id"])
        values: dict = {}
        for s in items:
            for flt, scores in s["correct"].items():
                for m, v in scores.items():
                    values.setdefault((m, flt), []).extend(v if isinstance(v, list) else [v])
            for flt, ext in s["extracted"].items():
                no_answer[flt] = no_answer.get(flt, 0) + int(no_extracted_answer(ext))
        for (m, flt), vals in values.items():
            mk = _metric_name(f"{m},{flt}")
            if mk is not None:
                metrics.setdefault(mk, []).append((float(sum(vals) / len(vals)), len(items)))
    return metrics, {f: c for f, c in no_answer.items() if c}


def _recomputed(samples: list[dict], code_plus: bool | None = None) -> dict[str, dict]:
    """metric -> value, n, note and interval from per-item results (``code_plus``: an EvalPlus task, with or
    without plus inputs; None: an lm-eval task)."""
    from .codeeval import pass_rows

    rows = metric_rows(*_leaf_metrics(samples)) if code_plus is None else pass_rows(samples, code_plus)
    out = {}
    for r in rows:
        v = r["value"]
        v = round(v, 4) if isinstance(v, float) and not math.isnan(v) else v
        out[r["metric"]] = {"value": v, "n": r["n"], "note": r["note"], **row_interval(r["metric"], r["value"], r["n"])}
    return out


def _code_plus(parts: list[dict]) -> bool | None:
    """None for an lm-eval task; for an EvalPlus task whether its plus row is measured (else ``n/a``: base-only
    data) in every shard."""
    from .runner import CODE_TASKS

    rows = parts[0]["rows"]
    if not rows or rows[0].get("task") not in CODE_TASKS:
        return None
    plus = {any(r["metric"] == "pass@1_plus" and r.get("status", "ok") == "ok" for r in p["rows"]) for p in parts}
    if len(plus) != 1:
        raise ValueError("merge_shards: the shards of an EvalPlus task disagree on its plus inputs (measured in "
                         "some, n/a in others): they were run on different data")
    return plus.pop()


def merge_shards(parts: list[dict]) -> list[dict]:
    """The rows of the unsharded run from shards ``[{"rows": run_task rows, "samples": per-item results}]`` in
    shard order: every row of the first shard with value, n, interval and note recomputed from all items (an
    EvalPlus task: pass@1 base and plus from each item's ``correct`` / ``correct_plus``,
    :func:`.codeeval.pass_rows`), and the throughput columns summed over the shards."""
    if not parts:
        raise ValueError("merge_shards: no shards")
    code_plus = _code_plus(parts)
    for i, part in enumerate(parts, 1):
        own = _recomputed(part["samples"], code_plus)
        for r in part["rows"]:
            if r.get("status", "ok") == "ok" and own.get(r["metric"], {}).get("value") != r["value"]:
                raise ValueError(f"shard {i}: metric {r['metric']!r} = {r['value']} is not the mean of its per-item "
                                 f"results ({own.get(r['metric'], {}).get('value')}): it cannot be merged from shards")
    merged = _recomputed([s for part in parts for s in part["samples"]], code_plus)
    out = []
    for r in parts[0]["rows"]:
        row = dict(r, **merged.get(r["metric"], {}), **_throughput([p["rows"] for p in parts], r["metric"]))
        out.append(row)
    return out


def _throughput(rows_per_part: list[list[dict]], metric: str) -> dict:
    rows = [next(r for r in rows if r["metric"] == metric) for rows in rows_per_part]
    if any(r.get("total_tokens", "") == "" for r in rows):
        return {}
    out = {k: sum(int(r[k]) for r in rows) for k in THROUGHPUT_SUMS if k in rows[0]}
    wall = sum(float(r["wall_time_s"]) for r in rows)
    forwards = sum(float(r["total_tokens"]) / float(r["tokens_per_forward"]) for r in rows
                   if r.get("tokens_per_forward") not in ("", None, 0))
    out.update(wall_time_s=round(wall, 6), tokens_per_s=round(out["total_tokens"] / wall, 4) if wall > 0 else "",
               tokens_per_forward=round(out["total_tokens"] / forwards, 4) if forwards else "")
    return out
