"""Small statistics for accuracy rows: Wilson score intervals, the interval of a mean over training seeds, and
reading a number from a CSV cell."""
from __future__ import annotations

import math

Z95 = 1.959963984540054


def finite_float(v) -> float | None:
    """``v`` as a float (a CSV cell, a number), or None when it is not a number or NaN."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def wilson(k: float, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of a proportion with ``k`` successes out of ``n`` (as fractions in [0, 1])."""
    if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
        raise ValueError(f"n must be a positive integer, got {n!r}")
    if not 0 <= k <= n:
        raise ValueError(f"k must be in [0, n={n}], got {k!r}")
    p = k / n
    den = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return lo, hi


def wilson_pct(value_pct: float, n: int) -> tuple[float, float]:
    """The Wilson interval of an accuracy given in percent (0-100) over ``n`` items, in percent."""
    k = round(value_pct * n / 100.0)
    lo, hi = wilson(k, n)
    return 100.0 * lo, 100.0 * hi


def intervals_overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """True when two intervals overlap: the difference is then reported as "within noise"."""
    return a[0] <= b[1] and b[0] <= a[1]


def seed_interval(values_pct: list[float], n: int) -> tuple[float, float, float]:
    """``(mean, low, high)`` in percent of an accuracy measured on the same ``n`` test items by S models that differ
    only in their training seed, with an interval for what another draw of items *and* seeds would give.

    One model: the Wilson interval (:func:`wilson_pct`).  S >= 2: the mean over seeds ± t * sqrt(v_items + v_seeds),
    where v_seeds = s^2 / S (s^2: the sample variance of the S accuracies, which share their items, so it is
    the seeds' own spread) and v_items = m (1 - m) / n (m: the mean as a fraction; the binomial variance bounds the
    variance of the per-item mean over seeds from above), with the 97.5% quantile of Student's t at the
    Welch-Satterthwaite degrees of freedom of the two parts (S - 1 for the seeds' part, n - 1 for the items'),
    clipped to [0, 100]."""
    if not values_pct:
        raise ValueError("seed_interval needs at least one value")
    if len(values_pct) == 1:
        lo, hi = wilson_pct(values_pct[0], n)
        return float(values_pct[0]), lo, hi
    if not isinstance(n, int) or isinstance(n, bool) or n <= 1:
        raise ValueError(f"n must be an integer > 1, got {n!r}")
    from statistics import fmean, variance

    from scipy.stats import t as student_t

    s_count = len(values_pct)
    m = fmean(values_pct) / 100.0
    v_seeds = variance([v / 100.0 for v in values_pct]) / s_count
    v_items = m * (1.0 - m) / n
    total = v_seeds + v_items
    if total <= 0.0:  # every seed at 0% or 100% on every item: nothing varies
        return 100.0 * m, 100.0 * m, 100.0 * m
    df = total * total / (v_seeds ** 2 / (s_count - 1) + v_items ** 2 / (n - 1))
    half = float(student_t.ppf(0.975, df)) * math.sqrt(total)
    return 100.0 * m, max(0.0, 100.0 * (m - half)), min(100.0, 100.0 * (m + half))


# metrics that are not a share of n independent items get no binomial interval (IFEval's instruction-level
# accuracy counts instructions, several per prompt)
NO_INTERVAL = ("inst_level_strict_acc", "inst_level_loose_acc")


def row_interval(metric: str, value, n) -> dict:
    """95% Wilson interval (percent) of an accuracy row over ``n`` items; empty where it does not apply."""
    if metric in NO_INTERVAL or not isinstance(value, (int, float)) or math.isnan(value) or not n:
        return {"ci_low": "", "ci_high": ""}
    lo, hi = wilson_pct(float(value), int(n))
    return {"ci_low": round(lo, 4), "ci_high": round(hi, 4)}
