"""The fit of a study's gaps against its x axis: each gap (to the base, to NTP) of a series regressed on log10 x
by weighted least squares, with where the line reaches zero and its 95% (Fieller) interval."""
from __future__ import annotations

import math

import pandas as pd

from analysis.study_axis import Axis, axis
from analysis.study_frame import GAPS, read_back
from analysis.study_paper import GAP_COLUMNS
from fastdllm_core.intervals import Z95

FIT_COLUMNS = ["quantity", "base", "model", "lever", "lever_value", "budget", "column", "along", "points", "slope",
               "slope_low", "slope_high", "intercept", "chi2", "dof", "x0", "x0_low", "x0_high", "x_at_zero",
               "verdict"]


def _gap_sigma(r) -> float:
    """Standard error of a gap: the model's and its reference's 95% half-widths, as normal, in quadrature."""
    half_m = (float(r["ci_high"]) - float(r["ci_low"])) / 2
    half_b = (float(r["ref_high"]) - float(r["ref_low"])) / 2
    return math.hypot(half_m, half_b) / Z95


def fit_line(x: list[float], y: list[float], sigma: list[float]) -> dict:
    """Weighted least squares ``y = a + b x`` with known standard errors ``sigma``: the slope and intercept with
    their covariance (scaled up by the reduced chi-square when the points scatter more than their errors say), and
    where the line crosses zero, ``x0 = -a / b``, with its 95% interval (Fieller; open when the slope is not
    resolved from zero)."""
    from scipy import stats

    w = [1.0 / s**2 for s in sigma]
    sw, sx, sy = sum(w), sum(wi * xi for wi, xi in zip(w, x)), sum(wi * yi for wi, yi in zip(w, y))
    sxx, sxy = sum(wi * xi * xi for wi, xi in zip(w, x)), sum(wi * xi * yi for wi, xi, yi in zip(w, x, y))
    det = sw * sxx - sx * sx
    b, a = (sw * sxy - sx * sy) / det, (sxx * sy - sx * sxy) / det
    dof = len(x) - 2
    chi2 = sum(wi * (yi - a - b * xi) ** 2 for wi, xi, yi in zip(w, x, y))
    scale = max(1.0, chi2 / dof) if dof > 0 else 1.0
    vaa, vbb, vab = scale * sxx / det, scale * sw / det, -scale * sx / det
    q = stats.t.ppf(0.975, dof) if dof > 0 and scale > 1 else Z95
    out = dict(points=len(x), slope=b, slope_low=b - q * math.sqrt(vbb), slope_high=b + q * math.sqrt(vbb),
               intercept=a, chi2=chi2, dof=dof, x0=-a / b if b else float("nan"))
    out.update(zip(("x0_low", "x0_high"), _fieller(a, b, vaa, vbb, vab, q)))
    return out


def _fieller(a: float, b: float, vaa: float, vbb: float, vab: float, q: float) -> tuple[float, float]:
    """95% interval of ``x0 = -a / b`` (Fieller): the x where ``|a + b x| <= q * sd(a + b x)``, a quadratic in x;
    (nan, nan) when that set is unbounded (the slope is not resolved from zero)."""
    qa, qb, qc = b * b - q * q * vbb, 2 * (a * b - q * q * vab), a * a - q * q * vaa
    disc = qb * qb - 4 * qa * qc
    if qa <= 0 or disc < 0:
        return float("nan"), float("nan")
    r1, r2 = (-qb - math.sqrt(disc)) / (2 * qa), (-qb + math.sqrt(disc)) / (2 * qa)
    return min(r1, r2), max(r1, r2)


def fit(summary: pd.DataFrame, x: str | Axis) -> pd.DataFrame:
    """Per gap quantity (:data:`analysis.study_frame.GAPS`), series (the keys but the one ``x`` runs along) and gap
    column (:data:`analysis.study_paper.GAP_COLUMNS`): the gap regressed on log10 of ``x``'s column
    (:func:`fit_line`) over the series' points (at least two distinct x), with the x where the line reaches zero
    (10 to the ``x0``, where the gap narrows as x grows) and the verdict."""
    x = axis(x)
    s = read_back(summary)
    s = s[s["quantity"].isin(GAPS) & s["column"].isin(GAP_COLUMNS)]
    keys = ["quantity", *x.series, "column"]
    rows = []
    for key, g in s.groupby(keys, sort=False):
        g = g.dropna(subset=["difference", "ci_low", "ref_low", x.column]).sort_values(x.column, kind="stable")
        if g[x.column].nunique() < 2:
            continue
        line = fit_line([math.log10(v) for v in g[x.column]], g["difference"].tolist(),
                        [_gap_sigma(r) for _, r in g.iterrows()])
        at_zero = _pow10(line["x0"]) if line["slope"] > 0 else float("nan")
        # the series' points in x order, as the fit table lists them: its bases, or its budgets
        along = " ".join(g["base"]) if x.along == "base" else " ".join(f"{int(b)}x" for b in g["budget"])
        row = dict(zip(keys, key), along=along, **line, x_at_zero=at_zero,
                   verdict=_fit_verdict(line, g["difference"].max(), x))
        if "budget" in row:
            row["budget"] = int(row["budget"])
        rows.append(row)
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


def _pow10(v: float) -> float:
    """10 to ``v``; inf beyond a float's range (a line that barely rises reaches zero far out)."""
    return math.inf if v > 300 else 10.0 ** v


def _fit_verdict(line: dict, best: float, x: Axis) -> str:
    if best >= 0:
        return f"no gap to close: the measured gap is not below zero at some {x.noun}"
    if line["slope_low"] > 0:
        lo, hi = line["x0_low"], line["x0_high"]
        where = (f"between {_pow10(lo):.2g} and {_pow10(hi):.2g} {x.label}" if not math.isnan(lo)
                 else f"at a {x.noun} the fit cannot bound")
        return f"narrows with {x.noun} beyond noise; the line reaches zero at {_pow10(line['x0']):.2g} ({where}; an " \
               "extrapolation)"
    return f"does not narrow with {x.noun} beyond noise: the trend does not point at parity"
