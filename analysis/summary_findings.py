"""The first section of the summary page, ``## Findings``: one sentence per comparison of the page and one from the
batch throughput sweep, each a verdict written from the page's own numbers by the page's own rule.

Accuracy: a difference is a finding ("beyond noise") only when the two 95% intervals do not overlap (:func:`judge`,
the rule of the page's ``## Comparisons`` lines too).  Each sentence gives the two rows' Avg. with its interval,
their difference, and the columns beyond noise.

Speed: the batch sweep times every model in interleaved rounds (``workflow/fastdllm_dag/job/bench_run.measure_rounds``)
and keeps every round's tokens/s (``tokens_per_s_rounds``; round r of every row is the same pass over the models).  An
AR row adapted from the AR base (NTP) has the base's architecture, so the same work per token: without timing noise
its ratio to the base would be 1 in every round.  The largest distance from 1 of that ratio over the rounds is the
timing noise; the recipe is "slower (faster) than the AR base beyond the timing noise" at a batch size only when
its ratio to the base is below (above) that band in every round (:func:`speed_verdict`).
"""
from __future__ import annotations

import math

import pandas as pd

from .results_io import select

SLOWER, FASTER = "slower than the AR base beyond the timing noise", "faster than the AR base beyond the timing noise"
WITHIN_TIMING = "within the timing noise"


# ------------------------------------------------------------------------------------------------- accuracy
def judge(a: dict, b: dict) -> dict | None:
    """``b - a`` as ``{d, apart, direction}`` (None when either cell is n/a): ``apart`` when the two 95% intervals
    do not overlap; ``direction`` "higher"/"lower" for a difference beyond noise, "" otherwise."""
    if a.get("mean") is None or b.get("mean") is None:
        return None
    d = b["mean"] - a["mean"]
    apart = a["hi"] < b["lo"] or b["hi"] < a["lo"]
    return {"d": d, "apart": apart, "direction": ("higher" if d > 0 else "lower") if apart else ""}


def interval_text(c: dict) -> str:
    """``mean ± half-width`` of a cell (one decimal)."""
    return f"{c['mean']:.1f} ± {(c['hi'] - c['lo']) / 2:.1f}"


def _names(titles: list[str]) -> str:
    return titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]


def _count(k: int) -> str:
    return f"{k} column" if k == 1 else f"{k} columns"


def pair_sentence(label_a: str, label_b: str, parts: list[tuple[str, dict, dict]], avg: tuple[dict, dict]) -> str:
    """One finding: ``label_b`` against ``label_a``.  ``parts``: (column title, cell of a, cell of b) per column;
    ``avg``: the two Avg. cells.  Says the Avg. of both with intervals and their difference, its verdict, and
    which columns are beyond noise in which direction; "within noise on every column" when none is."""
    head = f"- **{label_b} vs {label_a}:** "
    a, b = avg
    j = judge(a, b)
    nums = f"({interval_text(b)} against {interval_text(a)}, {j['d']:+.1f})" if j else "(n/a)"
    judged = [(t, judge(x, y)) for t, x, y in parts]
    beyond = {d: [t for t, v in judged if v and v["direction"] == d] for d in ("lower", "higher")}
    within = [t for t, v in judged if v and not v["apart"]]
    na = [t for t, v in judged if v is None]
    if j is not None and not j["apart"] and not beyond["lower"] and not beyond["higher"] and not na:
        return head + f"within noise on every column (Avg. {nums[1:-1]})."
    if j is None and len(na) == len(parts):
        return head + "n/a on every column (no measurement in the results CSVs)."
    clauses = []
    if j is not None and j["apart"]:
        same, other = beyond[j["direction"]], beyond["higher" if j["direction"] == "lower" else "lower"]
        clauses.append(f"{j['direction']} beyond noise on Avg. {nums}" + (f" and on {_names(same)}" if same else
                                                                          " but on no column alone"))
        if other:
            clauses.append(f"{'higher' if j['direction'] == 'lower' else 'lower'} beyond noise on {_names(other)}")
    else:
        clauses.append(f"{'within noise' if j else 'n/a'} on Avg. {nums}")
        clauses += [f"{d} beyond noise on {_names(beyond[d])}" for d in ("lower", "higher") if beyond[d]]
    if within:
        some = beyond["lower"] or beyond["higher"]
        clauses.append(f"within noise on the other {_count(len(within))}" if some else
                       f"within noise on each of the {_count(len(within))}")
    if na:
        clauses.append(f"n/a on {_names(na)}")
    return head + "; ".join(clauses) + "."


def accuracy_findings(spec: dict, cells: dict) -> list[str]:
    """One sentence per comparison of ``spec`` (the page's pairs, in page order); the main AR model
    (``spec['ar_base']``) is called "the AR base"."""
    label = {g["model"]: g["label"] for g in spec["groups"]}
    if spec.get("ar_base") in label:
        label[spec["ar_base"]] = "the AR base"
    cols = [c for c in spec["columns"] if c["id"] != "avg"]
    out = []
    for comp in spec["comparisons"]:
        a, b = comp["a"], comp["b"]
        parts = [(c["title"], cells[(a, c["id"])], cells[(b, c["id"])]) for c in cols]
        out.append(pair_sentence(label[a], label[b], parts, (cells[(a, "avg")], cells[(b, "avg")])))
    return out


# ------------------------------------------------------------------------------------------------- speed
def rounds_of(thr: pd.DataFrame, model: str, mode: str, sweep: str, batch) -> list[float] | None:
    """The tokens/s in every round (``tokens_per_s_rounds``, ``;``-separated) of the last throughput row of
    ``model`` in ``mode`` at ``batch`` in ``sweep``; None without such a row or when it keeps none (a sweep measured
    before rounds were kept)."""
    sel = select(thr, None, model=model, mode=mode, sweep=sweep, batch_size=batch)
    got = str(sel.iloc[-1].get("tokens_per_s_rounds", "") if len(sel) else "").strip()
    if not got or got.lower() == "nan":
        return None
    vals = [float(x) for x in got.split(";")]
    return vals if all(math.isfinite(v) and v > 0 for v in vals) else None


def speed_verdict(bd: list[float], ar: list[float], noise: list[float]) -> dict:
    """The recipe's per-round ratio to the AR base against the timing noise band (``1 ± max |noise_r / ar_r - 1|``
    over the rounds): ``{ratios, lo, hi, verdict}``; :data:`SLOWER` / :data:`FASTER` only when every round's ratio is
    below / above the band, else :data:`WITHIN_TIMING`."""
    if not (len(bd) == len(ar) == len(noise)) or not ar:
        raise ValueError(f"rounds differ in number: recipe {len(bd)}, AR base {len(ar)}, noise pair {len(noise)}")
    ratios = [x / y for x, y in zip(bd, ar)]
    half = max(abs(x / y - 1) for x, y in zip(noise, ar))
    lo, hi = 1 - half, 1 + half
    verdict = SLOWER if all(r < lo for r in ratios) else FASTER if all(r > hi for r in ratios) else WITHIN_TIMING
    return {"ratios": ratios, "lo": lo, "hi": hi, "verdict": verdict}


def speed_finding(spec: dict, thr: pd.DataFrame) -> str:
    """The speed sentence: the recipe's tokens/s against the AR base at each batch of the sweep, per round, judged
    against the timing noise band of the noise pair (:func:`speed_verdict`)."""
    sp = spec["speed"]
    pair, label = sp["pair"], {g["model"]: g["label"] for g in spec["groups"]}
    name = lambda m: label.get(m, m)  # noqa: E731
    head = f"- **Speed ({sp['sweep']} sweep):** {name(pair['bd'])} tokens/s over the AR base's, per round: "
    if not pair.get("noise"):
        return head + ("no verdict: the sweep times no AR row adapted from the AR base (same architecture) whose "
                       "ratio to it would measure the timing noise.")
    parts, noise_n = [], None
    for b in sp["batches"]:
        got = [rounds_of(thr, pair[k], mode, sp["sweep"], b)
               for k, mode in (("bd", "bd"), ("ar", "ar"), ("noise", "ar"))]
        if any(g is None for g in got) or len({len(g) for g in got}) != 1:
            parts.append(f"batch {b} no verdict (a row or its per-round tokens/s is missing)")
            continue
        v = speed_verdict(*got)
        band = "" if noise_n else "a noise band of "  # named once
        noise_n = len(got[0])
        parts.append(f"batch {b} {', '.join(f'{r:.2f}x' for r in v['ratios'])} against {band}"
                     f"{v['lo']:.2f}x-{v['hi']:.2f}x, {v['verdict']}")
    why = (f" (band: 1 ± the largest distance from 1 of {name(pair['noise'])} over the AR base in the same "
           f"{noise_n} rounds; same architecture)" if noise_n else "")
    return head + "; ".join(parts) + why + "."


def findings_section(spec: dict, cells: dict, thr: pd.DataFrame, ns: list[int]) -> list[str]:
    """``## Findings``: the rule in one line, then one sentence per comparison and the speed sentence."""
    seeds = spec.get("seeds") or []
    rows = (f"rows of adaptations are means of {len(seeds)} seeds ({', '.join(map(str, seeds))})" if len(seeds) > 1
            else "one training run per row")
    base = {g["model"]: g["label"] for g in spec["groups"]}.get(spec.get("ar_base"))
    rule = (f"n = {', '.join(map(str, ns)) or 'n/a'} test items per task; {rows}"
            + (f"; the AR base: {base}" if base else "") + ". Per sentence: the two rows' Avg. (mean ± 95% interval), "
            "then the difference; a difference is beyond noise only when the two 95% intervals do not overlap.")
    return ["## Findings", "", rule, ""] + accuracy_findings(spec, cells) + [speed_finding(spec, thr)]
