"""Small statistics for accuracy rows: Wilson score intervals and a two-proportion comparison; reading a number
from a CSV cell."""
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
