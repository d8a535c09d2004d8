"""A study's Markdown page, one layout for every study: its bases, every snapshot group's gaps to its own base,
block diffusion's gaps to NTP, the fits of the gaps against the study's x axis, the paper's values, and the planned
snapshots without rows.

The gap tables name a row by its model (and lever), then its base, parameters and pretraining where those differ
between the study's rows (a column the same on every row is left out: the bases table gives it), then its budget
and adaptation tokens per parameter.
"""
from __future__ import annotations

import pandas as pd

from analysis.study_axis import Axis, axis
from analysis.study_frame import fmt, levers_as_text, model_label, ordered, read_back
from analysis.study_paper import GAP_COLUMNS, paper_gaps
from analysis.tables import markdown_table

IDENTITY = {"base": "base", "parameters": "parameters", "pretraining": "pretraining tokens / param"}


def _gap_cell(s: pd.DataFrame, quantity: str, column: str) -> str:
    """``-15.6 ± 3.3 (below, 3 seeds)``: the gap, its model's 95% half-width, the verdict and the seeds."""
    r = s[(s["quantity"] == quantity) & (s["column"] == column)]
    if not len(r):
        return ""
    r = r.iloc[0]
    seeds = int(r["seeds"])
    return f"{fmt(r['difference'], sign=True)} ± {fmt((r['ci_high'] - r['ci_low']) / 2)} ({r['verdict']}, " \
           f"{seeds} seed{'s' * (seeds > 1)})"


def _value_cell(s: pd.DataFrame, quantity: str, digits: int = 2) -> str:
    r = s[s["quantity"] == quantity]
    return fmt(float(r["value"].iloc[0]), digits) if len(r) else ""


def _shown(summary: pd.DataFrame) -> dict:
    """Which of the identity columns (:data:`IDENTITY`) the gap tables show: those that differ between rows."""
    s = summary[summary["quantity"] != "base"]
    return {"base": s["base"].nunique() > 1, "parameters": s["size_params"].nunique() > 1,
            "pretraining": s["pretrain"].nunique() > 1}


def _identity(r, shown: dict, labels: dict | None) -> list[str]:
    """A group's cells before its numbers: model (and lever), the shown identity columns, budget, tokens/param."""
    cells = [model_label(labels, r["model"], r["lever"], r["lever_value"])]
    cells += [r["base"]] if shown["base"] else []
    cells += [f"{float(r['size_params']) / 1e6:.2f}M"] if shown["parameters"] else []
    cells += [fmt(r["pretrain_tokens_per_param"], 2)] if shown["pretraining"] else []
    return cells + [f"{int(r['budget'])}x", fmt(r["tokens_per_param"], 2)]


def _identity_head(shown: dict) -> list[str]:
    return ["model", *(h for k, h in IDENTITY.items() if shown[k]), "budget", "tokens / param"]


def _groups(summary: pd.DataFrame, quantities) -> list[pd.DataFrame]:
    """The summary's groups that have a row of ``quantities``, in :func:`analysis.study_frame.ordered` order."""
    s = ordered(summary[summary["quantity"] != "base"])
    keys = ["model", "lever", "lever_value", "budget", "base"]
    return [g for _, g in s.groupby(keys, sort=False) if g["quantity"].isin(quantities).any()]


def _bases_table(summary: pd.DataFrame, shown: dict) -> list[str]:
    pre = shown["pretraining"]
    rows = []
    for b, g in summary[summary["quantity"] == "base"].groupby("base", sort=False):
        cells = {r["column"]: f"{float(r['value']):.1f} ± {(float(r['ci_high']) - float(r['ci_low'])) / 2:.1f}"
                 for _, r in g.iterrows()}
        first = g.iloc[0]
        rows.append([b, f"{float(first['size_params']) / 1e6:.2f}M",
                     *([fmt(first["pretrain_tokens_per_param"], 2)] if pre else []),
                     *(cells.get(c, "n/a") for c in GAP_COLUMNS)])
    return markdown_table(["base", "parameters", *([IDENTITY["pretraining"]] if pre else []), "Avg.", "GSM8K stand-in",
                           "HumanEval stand-in"], rows)


def _main_table(summary: pd.DataFrame, threshold: float, labels: dict | None, shown: dict) -> list[str]:
    rows = []
    for g in _groups(summary, ["accuracy"]):
        r = g.iloc[0]
        speed = _value_cell(g, "speedup_b1")
        cells = [fmt(r["passes"], 2), fmt(r["final_loss"], 3),
                 *(_gap_cell(g, "accuracy", c) for c in GAP_COLUMNS),
                 _value_cell(g, "tokens_per_forward") or "-", _gap_cell(g, "accuracy_speed", "avg") or "-",
                 f"{speed}x" if speed else "n/a"]
        rows.append(_identity(r, shown, labels) + cells)
    return markdown_table(_identity_head(shown) + [
        "passes", "final loss", "Avg. gap to its base", "GSM8K gap", "HumanEval gap",
        f"tokens / forward (t={threshold:g})", f"Avg. change t=1.0 -> {threshold:g}", "batch-1 speed / its base"], rows)


def _ntp_table(summary: pd.DataFrame, labels: dict | None, shown: dict) -> list[str]:
    rows = [_identity(g.iloc[0], shown, labels) + [_gap_cell(g, "accuracy_vs_ntp", c) for c in GAP_COLUMNS]
            for g in _groups(summary, ["accuracy_vs_ntp"])]
    return markdown_table(_identity_head(shown) + ["Avg. minus NTP", "GSM8K minus NTP", "HumanEval minus NTP"], rows)


def _fit_table(fits: pd.DataFrame, labels: dict | None, shown: dict, x: Axis) -> list[str]:
    """One line per fit: the series (model; its base or budget, whichever the axis does not run along), the gap,
    the points fitted, the slope per decade of x and the verdict."""
    base = x.along != "base" and shown["base"]
    budget = x.along != "budget"
    to = {"accuracy": x.to_base, "accuracy_vs_ntp": x.to_ntp}
    rows = [[model_label(labels, r["model"], r["lever"], r["lever_value"]), *([r["base"]] if base else []),
             *([f"{int(r['budget'])}x"] if budget else []), to[r["quantity"]], r["column"], r["along"],
             f"{r['slope']:+.1f} ({r['slope_low']:+.1f} to {r['slope_high']:+.1f})", r["verdict"]]
            for _, r in levers_as_text(fits).iterrows()]
    return markdown_table(["model", *(["base"] * base), *(["budget"] * budget), "gap to", "column", x.plural,
                           f"points per decade of {x.label} (95%)", "verdict"], rows)


def _paper_section(x: Axis) -> list[str]:
    own = "; ".join(f"{kind} {p['size']} {p['column']} {p['gap']:+.1f}" for kind in ("recipe", "ntp")
                    for p in paper_gaps(kind))
    return ["## The paper's values", "",
            f"The paper's own gaps (Table 1, real benchmarks, model minus its Qwen2.5-Instruct base): {own}.", "",
            x.marks_text(), ""]


def _notes(summary: pd.DataFrame, threshold: float, labels: dict | None) -> list[str]:
    scored = summary.loc[summary["quantity"].isin(["base", "accuracy"]), "column"]
    averaged = [c for c in dict.fromkeys(scored) if c != "avg"]
    keys = ", ".join(f"`{k}` = {v}" for k, v in (labels or {}).items() if v != k)
    return [f"Columns averaged in Avg.: {', '.join(averaged)}. A gap is the model's mean (over seeds) minus the "
            "reference's; ± is the model's 95% half-width; the verdict compares the two 95% intervals (overlapping: "
            f"within noise). Tokens per forward and the change from threshold 1.0 to {threshold:g} (against the "
            "model's own accuracy): block diffusion only. Batch-1 speed: the snapshot's tokens/s over its base's, "
            "timed in one job (range over seeds).", "",
            *([f"The CSVs name each model by its config key: {keys}.", ""] if keys else [])]


def markdown(summary: pd.DataFrame, fits: pd.DataFrame, missing: list[str], threshold: float, provenance: str,
             labels: dict | None = None, x: str | Axis = "params", more: list[str] = ()) -> str:
    """The study's page: the bases, every group's gaps to its own base, block diffusion's gaps to NTP, the fits
    against ``x`` (:data:`analysis.study_axis.AXES`), the paper's values, the lines ``more`` (the bases' cost), and
    the planned snapshots that have no rows yet; models named by ``labels`` (``{key: name}``; the CSVs keep the
    keys)."""
    x, s = axis(x), read_back(summary)
    shown = _shown(s)
    vs_ntp = "; ".join(f"{p['size']} {p['column']} {p['gap']:+.1f}" for p in paper_gaps("recipe_vs_ntp"))
    out = ["## The bases (the AR models the chains start from; 95% Wilson intervals over the test items)", "",
           *_bases_table(s, shown), "", "## Gaps to each group's own base", "",
           *_main_table(s, threshold, labels, shown), "", *_notes(s, threshold, labels),
           "## Block diffusion minus NTP (same base, data and tokens)", "",
           "Where more training on the adaptation data still moves a base (the NTP arm above it), a gap to the base "
           "mixes the base's shortfall with block diffusion's cost; against NTP both arms share it.", "",
           *_ntp_table(s, labels, shown), "",
           f"The paper's (Table 1, real benchmarks; Fast-dLLM v2 minus Qwen2.5-Nemo-FT): {vs_ntp}.", "",
           f"## Fits of the gap against log10 {x.label}", "", *_fit_table(fits, labels, shown, x), "",
           f"Each fit is a weighted least-squares line through the {x.plural}' gaps (weights: the gap's variance from "
           "both intervals; scaled up by the reduced chi-square when the points scatter more than that). Where the "
           f"slope is above zero beyond noise, {x.at_zero} where the line reaches zero is an extrapolation with its "
           "95% (Fieller) interval.", "", *_paper_section(x), *more]
    if missing:
        out += [f"Planned but not yet run ({len(missing)}): {', '.join(missing)}.", ""]
    return "\n".join(out + [provenance]) + "\n"
