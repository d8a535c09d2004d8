"""The scale study's summary, fit, table and figure: pure functions of its CSVs (rule scale_report).

Inputs: the snapshots' accuracy rows (each with ``size``, ``size_params``, ``budget``, ``train_seed``,
``model_group``), their batch-1 speed rows (the snapshot and its own base timed in one job), their training rows,
and each size's base accuracy rows (``base.<size>``).  A gap is a snapshot's accuracy minus its *own size's* base,
with the tables' intervals (:mod:`analysis.budget_study`), and a block-diffusion snapshot's accuracy minus the NTP
arm's of the same size and budget (same base, data and tokens: a base that more training still moves weighs on both
sides); :func:`fit` regresses each gap on log10 parameters.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import pandas as pd

from analysis import budget_study as B
from analysis.paper_values import paper_value


class PaperSize(NamedTuple):
    """One of the paper's sizes: its parameter count and its rows in Table 1."""
    params: float
    base: str
    recipe: str
    ntp: str


# Qwen2.5's parameter counts (its model cards, not the paper) and the paper's Table 1 rows of each size
PAPER_SIZES = {"1.5B": PaperSize(1.54e9, "Qwen2.5-1.5B-Instruct", "Fast-dLLM v2 (1.5B)", "Qwen2.5-1.5B-Nemo-FT"),
               "7B": PaperSize(7.61e9, "Qwen2.5-7B-Instruct", "Fast-dLLM v2 (7B)", "Qwen2.5-7B-Nemo-FT")}
# the paper's rows behind each kind of paper_gaps, as the figure names them
PAPER_SERIES = {"recipe": "Fast-dLLM v2", "ntp": "Qwen2.5-Nemo-FT (NTP)",
                "recipe_vs_ntp": "Fast-dLLM v2 minus Qwen2.5-Nemo-FT"}
GAP_COLUMNS = ("avg", "gsm8k", "humaneval_base")
# the gap quantities and what each is a gap to (the paper's counterpart: paper_gaps)
GAPS = {"accuracy": "its size's AR base", "accuracy_vs_ntp": "NTP at the same size and tokens"}
KEYS = ["size", "model", "budget"]
# the columns summarize() selects on in the speed and training rows (present even when no such rows exist yet)
SPEED_COLUMNS = ["side", "snapshot", "budget", "speedup_vs_main_ar"]
METRICS_COLUMNS = ["snapshot", "budget", "step", "passes", "loss"]
FIT_COLUMNS = ["quantity", "model", "budget", "column", "sizes", "points", "slope", "slope_low", "slope_high",
               "intercept", "chi2", "dof", "x0", "x0_low", "x0_high", "params_at_zero", "verdict"]


def paper_gaps(kind: str) -> list[dict]:
    """The paper's own gaps (Table 1; real benchmarks), ``[{size, params, column, gap}]``: ``recipe`` or ``ntp``
    minus its Qwen2.5-Instruct base, or ``recipe_vs_ntp``: Fast-dLLM v2 minus the NTP model fine-tuned on the same
    data (Nemo-FT)."""
    model, ref = {"recipe": ("recipe", "base"), "ntp": ("ntp", "base"), "recipe_vs_ntp": ("recipe", "ntp")}[kind]
    out = []
    for name, row in PAPER_SIZES.items():
        for col in GAP_COLUMNS:
            a = paper_value("table1", getattr(row, model), col)
            b = paper_value("table1", getattr(row, ref), col)
            if a is not None and b is not None and a.value is not None and b.value is not None:
                out.append(dict(size=name, params=row.params, column=col, gap=a.value - b.value))
    return out


def base_references(bases: pd.DataFrame, columns: dict) -> dict:
    """``{size: {column: (value, low, high)}}``: each size's base with Wilson intervals and its Avg."""
    bases = B._num(bases, ["value", "n"])
    return {size: B.reference(g, columns) for size, g in bases.groupby("size", sort=False)}


def summarize(acc: pd.DataFrame, speed: pd.DataFrame, metrics: pd.DataFrame, bases: pd.DataFrame, columns: dict,
              points: dict) -> pd.DataFrame:
    """The long summary: per size, ``base`` rows (each base's own accuracy), then per size, model and budget
    ``accuracy`` (against its size's base), ``accuracy_vs_ntp`` (block diffusion against the NTP arm of the same
    size and budget), ``accuracy_speed`` (block diffusion at the speed setting against its
    own accuracy setting), ``tokens_per_forward`` and ``speedup_b1`` (batch-1 tokens/s over its base's).  ``speed``
    and ``metrics`` have at least :data:`SPEED_COLUMNS` and :data:`METRICS_COLUMNS` (no rows yet: none more)."""
    refs = base_references(bases, columns)
    params = {str(s): int(p) for s, p in B._num(bases, ["size_params"])[["size", "size_params"]].values}
    rows = [dict(size=size, size_params=params.get(size), model="base", budget=0, quantity="base", column=col,
                 value=v[0], ci_low=v[1], ci_high=v[2], n=_n(bases, size, col, columns))
            for size, ref in refs.items() for col, v in ref.items()]
    acc = B._num(acc, ["value", "n", "budget", "train_seed", "n_params", "size_params", "budget_tokens"])
    speed = B._num(speed, ["budget", "speedup_vs_main_ar"])
    metrics = B._num(metrics, ["budget", "step", "passes", "loss"])
    acc = acc.rename(columns={"model": "snapshot_model"}).rename(columns={"model_group": "model"})
    arms = {}
    for key, g in acc.groupby(KEYS, sort=False):
        base = dict(zip(KEYS, key))
        ref = refs.get(base["size"], {})
        last = metrics[metrics["snapshot"].isin(g["snapshot"])].sort_values("step").groupby("snapshot").tail(1)
        base.update(size_params=int(g["size_params"].iloc[0]), budget_tokens=int(g["budget_tokens"].iloc[0]),
                    tokens_per_param=float(g["budget_tokens"].iloc[0]) / float(g["size_params"].iloc[0]),
                    passes=float(last["passes"].mean()) if len(last) else None,
                    final_loss=float(last["loss"].mean()) if len(last) else None)
        bd = (g["mode"] == "bd").any()
        cols = B._column_values(g, columns, points["accuracy"] if bd else "ar")
        accuracy = B._rows(base, "accuracy", cols, ref)
        rows += accuracy
        arms.setdefault((base["size"], base["budget"]), []).append((base, bd, cols, accuracy))
        if bd:
            own = {r["column"]: (r["value"], r["ci_low"], r["ci_high"]) for r in accuracy}
            rows += B._rows(base, "accuracy_speed", B._column_values(g, columns, points["speed"]), own)
            rows.append(dict(base, quantity="tokens_per_forward", column="all",
                             value=B._tokens_per_forward(g, points["speed"]), seeds=g["train_seed"].nunique()))
        s = speed[(speed["side"] == "snapshot") & speed["snapshot"].isin(g["snapshot"])]
        if len(s):
            v = s["speedup_vs_main_ar"].tolist()
            rows.append(dict(base, quantity="speedup_b1", column="all", value=sum(v) / len(v), ci_low=min(v),
                             ci_high=max(v), seeds=len(v)))
    return pd.DataFrame(rows + _versus_ntp(arms))


def _versus_ntp(arms: dict) -> list[dict]:
    """``accuracy_vs_ntp`` rows: each block-diffusion arm of a size and budget against the one AR-adapted (NTP) arm
    of the same size and budget (none where there is no such arm, or more than one)."""
    rows = []
    for group in arms.values():
        ntp = [accuracy for _, bd, _, accuracy in group if not bd]
        if len(ntp) != 1:
            continue
        own = {r["column"]: (r["value"], r["ci_low"], r["ci_high"]) for r in ntp[0]}
        rows += [r for base, bd, cols, _ in group if bd for r in B._rows(base, "accuracy_vs_ntp", cols, own)]
    return rows


def _n(bases: pd.DataFrame, size: str, col: str, columns: dict):
    c = columns.get(col)
    if not c:
        return ""
    sel = bases[(bases["size"] == size) & (bases["task"] == c["task"]) & (bases["metric"] == c["metric"])]
    return int(sel["n"].iloc[0]) if len(sel) else ""


def _gap_sigma(r) -> float:
    """Standard error of a gap: the model's and its base's 95% half-widths, as normal, in quadrature."""
    half_m = (float(r["ci_high"]) - float(r["ci_low"])) / 2
    half_b = (float(r["ref_high"]) - float(r["ref_low"])) / 2
    return math.hypot(half_m, half_b) / 1.959963984540054


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
    q = stats.t.ppf(0.975, dof) if dof > 0 and scale > 1 else 1.959963984540054
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


def fit(summary: pd.DataFrame) -> pd.DataFrame:
    """Per gap quantity (:data:`GAPS`), model, budget and gap column (:data:`GAP_COLUMNS`): the gap regressed on
    log10 parameters (:func:`fit_line`) over the sizes measured, with the parameter count where the line reaches
    zero (10 to the ``x0``) and its interval."""
    s = B._num(summary[summary["quantity"].isin(list(GAPS))], ["value", "ci_low", "ci_high", "ref_low", "ref_high",
                                                              "difference", "size_params", "budget"])
    rows = []
    keys = ["quantity", "model", "budget", "column"]
    for (quantity, model, budget, col), g in s[s["column"].isin(GAP_COLUMNS)].groupby(keys, sort=False):
        g = g.dropna(subset=["difference", "ci_low", "ref_low"])
        if g["size"].nunique() < 2:
            continue
        line = fit_line([math.log10(p) for p in g["size_params"]], g["difference"].tolist(),
                        [_gap_sigma(r) for _, r in g.iterrows()])
        at_zero = 10 ** line["x0"] if line["slope"] > 0 else float("nan")
        rows.append(dict(quantity=quantity, model=model, budget=int(budget), column=col, sizes=" ".join(g["size"]),
                         **line, params_at_zero=at_zero, verdict=_fit_verdict(line, g["difference"].max())))
    return pd.DataFrame(rows, columns=FIT_COLUMNS)


def _fit_verdict(line: dict, best: float) -> str:
    if best >= 0:
        return "no gap to close: the measured gap is not below zero at some size"
    if line["slope_low"] > 0:
        lo, hi = line["x0_low"], line["x0_high"]
        where = (f"between {10 ** lo:.2g} and {10 ** hi:.2g} parameters" if not math.isnan(lo)
                 else "at a size the fit cannot bound")
        return f"narrows with size beyond noise; the line reaches zero at {10 ** line['x0']:.2g} ({where}; an " \
               "extrapolation)"
    return "does not narrow with size beyond noise: the trend does not point at parity"


def _gap_cell(s: pd.DataFrame, column: str, quantity: str = "accuracy") -> str:
    r = s[(s["quantity"] == quantity) & (s["column"] == column)]
    if not len(r):
        return ""
    r = r.iloc[0]
    half = (float(r["ci_high"]) - float(r["ci_low"])) / 2
    seeds = int(r["seeds"])
    return f"{B._fmt(r['difference'], sign=True)} ± {B._fmt(half)} ({r['verdict']}, {seeds} seed{'s' * (seeds > 1)})"


def _bases_table(summary: pd.DataFrame) -> list[str]:
    lines = ["| base | parameters | Avg. | GSM8K stand-in | HumanEval stand-in |", "|---|---|---|---|---|"]
    b = summary[summary["quantity"] == "base"]
    for size, g in b.groupby("size", sort=False):
        cell = {}
        for col in GAP_COLUMNS:
            r = g[g["column"] == col]
            cell[col] = (f"{float(r['value'].iloc[0]):.1f} ± "
                         f"{(float(r['ci_high'].iloc[0]) - float(r['ci_low'].iloc[0])) / 2:.1f}" if len(r) else "n/a")
        lines.append(f"| {size} | {float(g['size_params'].iloc[0]) / 1e6:.2f}M | {cell['avg']} | {cell['gsm8k']} | "
                     f"{cell['humaneval_base']} |")
    return lines


def _name(labels: dict | None, model: str) -> str:
    """A model's display name (its config ``label``), or its key where none is given."""
    return (labels or {}).get(model, model)


def _main_table(summary: pd.DataFrame, threshold: float, labels: dict | None = None) -> list[str]:
    head = ["model", "size", "parameters", "budget (tokens / param)", "passes", "Avg. gap to its base", "GSM8K gap",
            "HumanEval gap", f"tokens / forward (t={threshold:g})", f"Avg. change t=1.0 -> {threshold:g}",
            "batch-1 speed / its base"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    s = summary[summary["quantity"] != "base"]
    for (model, budget), mb in s.groupby(["model", "budget"], sort=False):
        for size, g in mb.groupby("size", sort=False):
            r = g.iloc[0]
            sp = g[g["quantity"] == "speedup_b1"]
            cells = [_name(labels, model), size, f"{float(r['size_params']) / 1e6:.2f}M",
                     f"{int(budget)}x ({float(r['tokens_per_param']):.2f})", B._fmt(r.get("passes"), 2),
                     _gap_cell(g, "avg"), _gap_cell(g, "gsm8k"), _gap_cell(g, "humaneval_base"),
                     B._cell(g, "tokens_per_forward", "all", "value") or "-",
                     B._cell(g, "accuracy_speed", "avg") or "-",
                     f"{float(sp['value'].iloc[0]):.2f}x" if len(sp) else "n/a"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def _ntp_table(summary: pd.DataFrame, labels: dict | None = None) -> list[str]:
    lines = ["| model | size | parameters | budget (tokens / param) | Avg. minus NTP | GSM8K minus NTP | "
             "HumanEval minus NTP |", "|---|---|---|---|---|---|---|"]
    s = summary[summary["quantity"] == "accuracy_vs_ntp"].sort_values(["budget", "size_params"], kind="stable")
    for (model, budget, size), g in s.groupby(["model", "budget", "size"], sort=False):
        r = g.iloc[0]
        cells = [_name(labels, model), size, f"{float(r['size_params']) / 1e6:.2f}M",
                 f"{int(budget)}x ({float(r['tokens_per_param']):.2f})",
                 *(_gap_cell(g, c, "accuracy_vs_ntp") for c in GAP_COLUMNS)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _fit_table(fits: pd.DataFrame, labels: dict | None = None) -> list[str]:
    lines = ["| model | budget | gap to | column | sizes | points per decade of parameters (95%) | verdict |",
             "|---|---|---|---|---|---|---|"]
    for r in fits.itertuples():
        lines.append(f"| {_name(labels, r.model)} | {r.budget}x | {GAPS[r.quantity]} | {r.column} | {r.sizes} "
                     f"| {r.slope:+.1f} ({r.slope_low:+.1f} to {r.slope_high:+.1f}) | {r.verdict} |")
    return lines


def markdown(summary: pd.DataFrame, fits: pd.DataFrame, missing: list[str], threshold: float, provenance: str,
             labels: dict | None = None) -> str:
    """The study's page: the bases, every snapshot's gaps to its own base, block diffusion's gaps to NTP, the fits,
    the paper's gaps, and the planned snapshots that have no rows yet; models named by ``labels`` (``{key: name}``;
    the CSVs keep the keys)."""
    summary = B._num(summary, B.SUMMARY_NUMBERS + ["size_params", "ref_low", "ref_high"])
    paper = "; ".join(f"{kind} {p['size']} {p['column']} {p['gap']:+.1f}" for kind in ("recipe", "ntp")
                      for p in paper_gaps(kind))
    vs_ntp = "; ".join(f"{p['size']} {p['column']} {p['gap']:+.1f}" for p in paper_gaps("recipe_vs_ntp"))
    keys = ", ".join(f"`{k}` = {v}" for k, v in (labels or {}).items() if v != k)
    out = ["## The bases (each size's AR base; 95% Wilson intervals over the test items)", "", *_bases_table(summary),
           "", "## Gaps to each size's own base", "", *_main_table(summary, threshold, labels), "",
           "A gap is the model's mean (over seeds) minus the reference's; ± is the model's 95% half-width; the verdict "
           "compares the two 95% intervals (overlapping: within noise).", "",
           *([f"The CSVs name each model by its config key: {keys}.", ""] if keys else []),
           "## Block diffusion minus NTP (same base, data and tokens)", "",
           "Where more training on the adaptation data still moves a base (the NTP arm above it), a gap to the base "
           "mixes the base's shortfall with block diffusion's cost; against NTP both arms share it.", "",
           *_ntp_table(summary, labels), "",
           f"The paper's (Table 1, real benchmarks; Fast-dLLM v2 minus Qwen2.5-Nemo-FT): {vs_ntp}.", "",
           "## Fits of the gap against log10 parameters", "", *_fit_table(fits, labels), "",
           "Each fit is a weighted least-squares line through the sizes' gaps (weights: the gap's variance from both "
           "intervals; scaled up by the reduced chi-square when the points scatter more than that). Where the slope "
           "is above zero beyond noise, the parameter count where the line reaches zero is an extrapolation with its "
           "95% (Fieller) interval.", "",
           f"The paper's own gaps (Table 1, real benchmarks, model minus its Qwen2.5-Instruct base): {paper}.", ""]
    if missing:
        out += [f"Planned but not yet run ({len(missing)}): {', '.join(missing)}.", ""]
    return "\n".join(out + [provenance]) + "\n"


def _param_axis(ax, xs: list[float]) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(min(xs) / 2, max(xs) * 2)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"1e{round(math.log10(v))}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("parameters")


def series_colours(summary: pd.DataFrame) -> dict:
    """``{(model, budget): colour}``, one per series of the whole summary (models in order of appearance, budgets
    ascending), so that a series keeps its colour in every panel, whichever series a panel lacks."""
    s = summary[summary["quantity"] != "base"]
    models = list(dict.fromkeys(s["model"]))
    keys = sorted({(m, int(b)) for m, b in zip(s["model"], s["budget"])}, key=lambda k: (models.index(k[0]), k[1]))
    return {k: f"C{i}" for i, k in enumerate(keys)}


def _gap_panel(ax, summary: pd.DataFrame, fits: pd.DataFrame, key: tuple, title: str, colour: dict,
               labels: dict | None = None) -> None:
    """One column's gap (``key``: quantity, column) against parameters per series, its fit (dashed) and the
    paper's counterparts (black)."""
    quantity, column = key
    acc = summary[(summary["quantity"] == quantity) & (summary["column"] == column)]
    for (model, budget), g in acc.groupby(["model", "budget"], sort=False):
        g, c = g.sort_values("size_params"), colour[(model, int(budget))]
        lo = (g["value"] - g["ci_low"]).clip(lower=0)
        hi = (g["ci_high"] - g["value"]).clip(lower=0)
        ax.errorbar(g["size_params"], g["difference"], yerr=[lo, hi], marker="o", capsize=3, color=c,
                    label=f"{_name(labels, model)} {int(budget)}x")
        f = fits[(fits["quantity"] == quantity) & (fits["model"] == model) & (fits["budget"] == budget)
                 & (fits["column"] == column)]
        if len(f):
            f = f.iloc[0]
            xs = [g["size_params"].min(), g["size_params"].max()]
            ax.plot(xs, [f["intercept"] + f["slope"] * math.log10(x) for x in xs], color=c, ls="--", lw=1)
    kinds = (("recipe", "*"), ("ntp", "P")) if quantity == "accuracy" else (("recipe_vs_ntp", "*"),)
    for kind, marker in kinds:
        pts = [p for p in paper_gaps(kind) if p["column"] == column]
        ax.scatter([p["params"] for p in pts], [p["gap"] for p in pts], marker=marker, s=70, color="k",
                   label=f"paper: {PAPER_SERIES[kind]} (Table 1, real benchmarks)", zorder=3)
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_ylabel("points")
    ax.set_title(title, fontsize=10)


def figure(summary: pd.DataFrame, fits: pd.DataFrame, png, pdf, threshold: float, footer: str,
           labels: dict | None = None) -> None:
    """(a-c) the Avg., GSM8K and HumanEval gaps to each size's base against parameters, with the fits (dashed) and
    the paper's gaps; (d-f) the same gaps of block diffusion to NTP at the same size and tokens; (g) tokens per
    forward at the speed threshold; (h) batch-1 speed over the size's base; (i) the bases' own Avg.  Series are
    named by ``labels`` (``{model key: name}``) and budget."""
    summary = B._num(summary, B.SUMMARY_NUMBERS + ["size_params"])
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import save

    fig, grid = plt.subplots(3, 3, figsize=(16, 14))
    colour = series_colours(summary)
    names = {"avg": "Avg.", "gsm8k": "GSM8K stand-in", "humaneval_base": "HumanEval stand-in"}
    for row, (quantity, against) in enumerate(GAPS.items()):
        for i, col in enumerate(GAP_COLUMNS):
            _gap_panel(grid[row][i], summary, fits, (quantity, col),
                       f"({'abcdef'[3 * row + i]}) {names[col]} gap to {against}\n(95% interval of the model; dashed: "
                       "fit against log parameters)", colour, labels)
    g_ax, h_ax, i_ax = grid[2]
    for ax, quantity, title in ((g_ax, "tokens_per_forward", f"(g) tokens per forward at threshold {threshold:g}"),
                                (h_ax, "speedup_b1", "(h) batch-1 tokens/s over the size's AR base")):
        q = summary[summary["quantity"] == quantity]
        for (model, budget), g in q.groupby(["model", "budget"], sort=False):
            g = g.sort_values("size_params")
            ax.plot(g["size_params"], g["value"], marker="o", color=colour[(model, int(budget))],
                    label=f"{_name(labels, model)} {int(budget)}x")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set_title(title, fontsize=10)
    base = summary[(summary["quantity"] == "base") & (summary["column"] == "avg")].sort_values("size_params")
    err = [base["value"] - base["ci_low"], base["ci_high"] - base["value"]]
    i_ax.errorbar(base["size_params"], base["value"], yerr=err, marker="o", capsize=3, color="k",
                  label="AR base (Avg.)")
    i_ax.set_title("(i) each size's AR base: Avg. over the stand-ins", fontsize=10)
    xs = summary["size_params"].dropna().astype(float).tolist() + [p.params for p in PAPER_SIZES.values()]
    legend: dict = {}  # one legend for the figure: a series keeps its name and colour in every panel
    for ax in grid.ravel():
        _param_axis(ax, xs)
        legend.update({t: h for h, t in zip(*ax.get_legend_handles_labels()) if t not in legend})
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.legend(list(legend.values()), list(legend), loc="lower center", bbox_to_anchor=(0.5, 0.01), ncol=3,
               fontsize=9, frameon=False)
    fig.text(0.01, 0.0, footer, fontsize=8, ha="left", va="top", wrap=True)
    save(fig, png, pdf)
