"""One lm-eval task split into shards over contiguous item ranges, and their rows merged back into the rows the
unsharded run gives.

Shard k of n (1-based) takes, in every leaf task of ``N`` items (``min(N, limit)``), the items
``[(k-1) N // n, k N // n)`` (:func:`.lm_eval_run.shard_samples`): the shards together are the unsharded run's
items.  :func:`merge_shards` recomputes
each metric from the shards' per-item results (``samples.jsonl`` of :func:`.runner.run_task`) the way lm-eval
aggregates them (a leaf's mean over its items, IFEval's instruction-level scores flattened first; groups weighted
by item count, :func:`.lm_eval_run.metric_rows`), so value, ``n`` and the 95% interval are the unsharded run's.
A metric that is not such a mean is refused (each shard's own value is recomputed and compared first).  Only
lm-eval tasks are split (EvalPlus' code tasks are not), and only zero-shot or ``first_n`` few-shot tasks (a random
few-shot sampler draws examples in item order, which a shard would change)."""
from __future__ import annotations

import math

from ..stats import row_interval
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
    for leaf, items in by_leaf.items():
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


def _recomputed(samples: list[dict]) -> dict[str, dict]:
    out = {}
    for r in metric_rows(*_leaf_metrics(samples)):
        v = round(r["value"], 4) if not math.isnan(r["value"]) else r["value"]
        out[r["metric"]] = {"value": v, "n": r["n"], "note": r["note"], **row_interval(r["metric"], r["value"], r["n"])}
    return out


def merge_shards(parts: list[dict]) -> list[dict]:
    """The rows of the unsharded run from shards ``[{"rows": run_task rows, "samples": per-item results}]`` in
    shard order: every row of the first shard with value, n, interval and note recomputed from all items, and
    the throughput columns summed over the shards."""
    if not parts:
        raise ValueError("merge_shards: no shards")
    for i, part in enumerate(parts, 1):
        own = _recomputed(part["samples"])
        for r in part["rows"]:
            if r.get("status", "ok") == "ok" and own.get(r["metric"], {}).get("value") != r["value"]:
                raise ValueError(f"shard {i}: metric {r['metric']!r} = {r['value']} is not the mean of its per-item "
                                 f"results ({own.get(r['metric'], {}).get('value')}): it cannot be merged from shards")
    merged = _recomputed([s for part in parts for s in part["samples"]])
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
