"""A study's figure, one layout for every study, everything against its x axis (:mod:`analysis.study_axis`):
(a-c) the Avg., GSM8K and HumanEval gaps to each group's own base, with the fits (dashed) and the paper's gaps;
(d-f) the same gaps of block diffusion to NTP; (g) tokens per forward at the speed threshold; (h) batch-1 speed over
the base's; (i) the bases' own Avg.  The paper's models are marked on the axis in every panel."""
from __future__ import annotations

import math

import pandas as pd

from analysis.study_axis import Axis, axis
from analysis.study_frame import levers_as_text, ordered, read_back, series_label
from analysis.study_paper import GAP_COLUMNS, PAPER_SERIES, paper_gaps

COLUMN_NAMES = {"avg": "Avg.", "gsm8k": "GSM8K stand-in", "humaneval_base": "HumanEval stand-in"}


def series_colours(summary: pd.DataFrame, x: str | Axis) -> dict:
    """``{series key: colour}``, one per series of the whole summary (a key: the values of ``x``'s series keys),
    in :func:`analysis.study_frame.ordered` order, so that a series keeps its colour in every panel, whichever
    series a panel lacks."""
    keys = axis(x).series
    s = ordered(summary[summary["quantity"] != "base"])
    return {k: f"C{i}" for i, k in enumerate(dict.fromkeys(s[keys].itertuples(index=False, name=None)))}


def _series(rows: pd.DataFrame, x: Axis):
    """``(key, rows sorted along x)`` of each series in ``rows``."""
    for key, g in rows.groupby(x.series, sort=False):
        yield key, g.sort_values(x.column)


def _log_axis(ax, xs: list[float], x: Axis) -> None:
    """Log x axis over ``xs``: labelled ticks at ``x.ticks`` in each decade (as powers of ten or plain numbers),
    minor ticks unlabelled, and the paper's marks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(min(xs) / x.margin, max(xs) * x.margin)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=x.ticks))
    label = (lambda v, _: f"1e{round(math.log10(v))}") if x.powers else (lambda v, _: f"{v:g}")
    ax.xaxis.set_major_formatter(FuncFormatter(label))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(x.label)
    for i, (size, at) in enumerate(x.marks.items()):
        ax.axvline(at, color="#c44e52", ls=":", lw=1)
        ax.text(at, 0.98 - 0.08 * i, f" {x.mark_label.format(size=size)}", color="#c44e52", fontsize=7, va="top",
                transform=ax.get_xaxis_transform())


def _fit_line(ax, fits: pd.DataFrame, want: dict, g: pd.DataFrame, x: Axis, colour: str) -> None:
    """The fit of one series and column (``want``: its fit keys), dashed over the series' x range."""
    f = fits
    for k, v in want.items():
        f = f[f[k].astype(str) == str(v)]
    if len(f):
        f = f.iloc[0]
        xs = [g[x.column].min(), g[x.column].max()]
        ax.plot(xs, [f["intercept"] + f["slope"] * math.log10(v) for v in xs], color=colour, ls="--", lw=1)


def _gap_panel(ax, summary: pd.DataFrame, fits: pd.DataFrame, key: tuple, title: str, x: Axis, style: dict) -> None:
    """One column's gap (``key``: quantity, column) against x per series with its fit (dashed), and the paper's
    counterparts (black) at the paper's models' x."""
    quantity, column = key
    rows = summary[(summary["quantity"] == quantity) & (summary["column"] == column)]
    for k, g in _series(rows, x):
        lo, hi = (g["value"] - g["ci_low"]).clip(lower=0), (g["ci_high"] - g["value"]).clip(lower=0)
        ax.errorbar(g[x.column], g["difference"], yerr=[lo.fillna(0), hi.fillna(0)], marker="o", capsize=3,
                    color=style["colour"][k], label=style["label"](k))
        want = dict(zip(x.series, k), quantity=quantity, column=column)
        if "budget" in want:
            want["budget"] = int(want["budget"])
        _fit_line(ax, fits, want, g, x, style["colour"][k])
    kinds = (("recipe", "*"), ("ntp", "P")) if quantity == "accuracy" else (("recipe_vs_ntp", "*"),)
    for kind, marker in kinds:
        pts = [p for p in paper_gaps(kind) if p["column"] == column and p["size"] in x.marks]
        ax.scatter([x.marks[p["size"]] for p in pts], [p["gap"] for p in pts], marker=marker, s=70, color="k",
                   label=f"paper: {PAPER_SERIES[kind]} (Table 1, real benchmarks)", zorder=3)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_ylabel("points")
    ax.set_title(title, fontsize=10)


def _value_panel(ax, summary: pd.DataFrame, quantity: str, title: str, x: Axis, style: dict) -> None:
    """A quantity per series against x (with its range where it has one), over a line at 1."""
    for k, g in _series(summary[summary["quantity"] == quantity], x):
        v = g["value"]
        err = [(v - g["ci_low"]).clip(lower=0).fillna(0), (g["ci_high"] - v).clip(lower=0).fillna(0)]
        ax.errorbar(g[x.column], v, yerr=err, marker="o", capsize=3, color=style["colour"][k],
                    label=style["label"](k))
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_title(title, fontsize=10)


def _bases_panel(ax, summary: pd.DataFrame, x: Axis) -> None:
    """The bases' Avg.: at their own x where the axis runs along bases, else a band across the panel each."""
    base = summary[(summary["quantity"] == "base") & (summary["column"] == "avg")]
    if x.along == "base":
        base = base.sort_values(x.column)
        err = [base["value"] - base["ci_low"], base["ci_high"] - base["value"]]
        ax.errorbar(base[x.column], base["value"], yerr=err, marker="o", capsize=3, color="k", label="AR base (Avg.)")
    else:
        for i, (_, r) in enumerate(base.iterrows()):
            ax.axhline(r["value"], color="k", lw=1, ls=("-", "--", ":", "-.")[i % 4],
                       label=f"AR base {r['base']} (Avg.)")
            ax.axhspan(r["ci_low"], r["ci_high"], color="k", alpha=0.08)
    ax.set_title("(i) the AR bases: Avg. over the stand-ins\n(95% Wilson interval)", fontsize=10)


def figure(summary: pd.DataFrame, fits: pd.DataFrame, png, pdf, x: str | Axis, threshold: float, footer: str,
           labels: dict | None = None) -> None:
    """The study's figure (see the module) against ``x``; series named by ``labels`` (``{model key: name}``) with
    their lever, and their budget or base (whichever the axis does not run along)."""
    from analysis.plotting import plt, save

    x, summary, fits = axis(x), read_back(summary), levers_as_text(fits)
    several = summary.loc[summary["quantity"] != "base", "base"].nunique() > 1
    style = dict(colour=series_colours(summary, x), label=lambda k: series_label(dict(zip(x.series, k)), labels,
                                                                                  several))
    fig, grid = plt.subplots(3, 3, figsize=(16, 14))
    for row, (quantity, against) in enumerate((("accuracy", x.to_base), ("accuracy_vs_ntp", x.to_ntp))):
        for i, col in enumerate(GAP_COLUMNS):
            title = (f"({'abcdef'[3 * row + i]}) {COLUMN_NAMES[col]} gap to {against}\n(95% interval of the model; "
                     "dashed: its fit on log x)")
            _gap_panel(grid[row][i], summary, fits, (quantity, col), title, x, style)
    _value_panel(grid[2][0], summary, "tokens_per_forward", f"(g) tokens per forward at threshold {threshold:g}\n"
                 "(block diffusion)", x, style)
    _value_panel(grid[2][1], summary, "speedup_b1", "(h) batch-1 tokens/s over its AR base's\n(timed in one job; "
                 "range over seeds)", x, style)
    _bases_panel(grid[2][2], summary, x)
    xs = summary[x.column].dropna().astype(float).tolist() + list(x.marks.values())
    legend: dict = {}  # one legend for the figure: a series keeps its name and colour in every panel
    for ax in grid.ravel():
        _log_axis(ax, xs, x)
        legend.update({t: h for h, t in zip(*ax.get_legend_handles_labels()) if t not in legend})
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.legend(list(legend.values()), list(legend), loc="lower center", bbox_to_anchor=(0.5, 0.01), ncol=3,
               fontsize=9, frameon=False)
    fig.text(0.01, 0.0, footer, fontsize=8, ha="left", va="top", wrap=True)
    save(fig, png, pdf)
