"""The budget study's summary, table and figure: pure functions of its CSVs (rule budget_report).

Inputs: the snapshots' accuracy rows (each with ``budget``, ``lever``, ``train_seed``, ``model_group`` and the
point), their batch-1 speed rows (the snapshot and the AR base timed in one job), their training rows, and the AR
base's own accuracy rows.  Output: one long summary (:func:`summarize`, a row per model, lever, budget, quantity
and column), its Markdown table and a four-panel figure against adaptation tokens per parameter.

Intervals follow the tables' conventions: a column over seeds is :func:`fastdllm_core.intervals.seed_interval`, the
average over columns has the half-widths added in quadrature over the number of columns, and a difference is
"within noise" when the two intervals overlap.
"""
from __future__ import annotations

import math

import pandas as pd

from fastdllm_core.intervals import intervals_overlap, seed_interval, wilson_pct

# the paper's adaptation tokens (appendix: 6,000 x 524,288 and 2,500 x 524,288) over Qwen2.5's parameter counts
# (1.54B and 7.61B, Qwen2.5's model cards, not the paper): the paper's tokens per parameter
PAPER_RATIOS = {"paper 1.5B": 3.15e9 / 1.54e9, "paper 7B": 1.31e9 / 7.61e9}
KEYS = ["model", "lever", "lever_value", "budget"]
SUMMARY_NUMBERS = ["budget", "tokens_per_param", "passes", "final_loss", "value", "ci_low", "ci_high", "ref_value",
                   "difference", "n", "seeds"]


def _num(df: pd.DataFrame, cols) -> pd.DataFrame:
    df = df.copy()
    for c in cols:
        if c in df:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def _levers(df: pd.DataFrame) -> pd.DataFrame:
    """``lever`` and ``lever_value`` as text, empty for the models' own runs (read back from CSV as NaN)."""
    df = df.copy()
    for c in ("lever", "lever_value"):
        df[c] = df[c].astype(object).where(df[c].notna(), "").astype(str) if c in df else ""
    return df


def _interval(values: list[float], n: int) -> tuple[float, float, float]:
    return seed_interval([float(v) for v in values], int(n))


def _verdict(a: tuple, b: tuple) -> str:
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (*a, *b)):
        return ""
    if intervals_overlap(a[1:], b[1:]):
        return "within noise"
    return "above" if a[0] > b[0] else "below"


def _average(parts: list[tuple]) -> tuple[float, float, float]:
    """Mean of column intervals, half-widths in quadrature over the count (the tables' Avg. column)."""
    mean = sum(p[0] for p in parts) / len(parts)
    half = math.sqrt(sum(((p[2] - p[1]) / 2) ** 2 for p in parts)) / len(parts)
    return mean, mean - half, mean + half


def _column_values(acc: pd.DataFrame, columns: dict, point: str) -> dict:
    """``{column: (values over seeds, n)}`` of one snapshot group at ``point``."""
    out = {}
    for cid, c in columns.items():
        sel = acc[(acc["task"] == c["task"]) & (acc["metric"] == c["metric"]) & (acc["point"] == point)
                  & (acc["status"] == "ok")]
        if len(sel):
            out[cid] = (sel.sort_values("train_seed")["value"].tolist(), int(sel["n"].min()))
    return out


def reference(ar: pd.DataFrame, columns: dict) -> dict:
    """The AR base's ``{column: (value, low, high)}`` (Wilson intervals) and its Avg."""
    ar = _num(ar, ["value", "n"])
    out = {}
    for cid, c in columns.items():
        sel = ar[(ar["task"] == c["task"]) & (ar["metric"] == c["metric"]) & (ar["status"] == "ok")]
        if len(sel):
            v, n = float(sel["value"].iloc[0]), int(sel["n"].iloc[0])
            out[cid] = (v, *wilson_pct(v, n))
    if len(out) == len(columns):
        out["avg"] = _average(list(out.values()))
    return out


def _rows(base: dict, quantity: str, cols: dict, ref: dict) -> list[dict]:
    """Summary rows of one quantity: each column over seeds beside its reference, and their average."""
    rows, parts = [], {}
    for cid, (values, n) in cols.items():
        parts[cid] = _interval(values, n)
    if parts and len(parts) == len(cols):
        parts["avg"] = _average([parts[c] for c in cols])
    for cid, iv in parts.items():
        r = ref.get(cid)
        seeds = len(cols[cid][0]) if cid in cols else min(len(v) for v, _ in cols.values())
        rows.append(dict(base, quantity=quantity, column=cid, seeds=seeds, value=iv[0], ci_low=iv[1],
                         ci_high=iv[2], n=cols[cid][1] if cid in cols else "",
                         ref_value=r[0] if r else None, ref_low=r[1] if r else None, ref_high=r[2] if r else None,
                         difference=iv[0] - r[0] if r else None, verdict=_verdict(iv, r) if r else ""))
    return rows


def _tokens_per_forward(acc: pd.DataFrame, point: str) -> float | None:
    """Generated tokens over the forwards each sequence took, over every generation task of ``point`` and every
    snapshot of the group: each task row's forwards are its tokens over its ``tokens_per_forward`` (``nfe`` counts
    batched forwards, not a sequence's), as the evaluation's shards merge them."""
    sel = _num(acc[acc["point"] == point], ["total_tokens", "tokens_per_forward"])
    sel = sel[sel["tokens_per_forward"] > 0].drop_duplicates(["snapshot_model", "task"])
    forwards = (sel["total_tokens"] / sel["tokens_per_forward"]).sum()
    return float(sel["total_tokens"].sum() / forwards) if len(sel) else None


def summarize(acc: pd.DataFrame, speed: pd.DataFrame, metrics: pd.DataFrame, ar: pd.DataFrame, columns: dict,
              points: dict) -> pd.DataFrame:
    """The long summary: per model, lever and budget, ``accuracy`` (at ``points['accuracy']``, against the AR
    base), ``accuracy_speed`` (block diffusion at ``points['speed']``, against its own accuracy setting),
    ``tokens_per_forward`` at the speed setting and ``speedup_b1`` (batch-1 tokens/s over the AR base's)."""
    acc = _num(_levers(acc), ["value", "n", "budget", "train_seed", "n_params"])
    speed = _num(_levers(speed), ["budget", "speedup_vs_main_ar"])
    metrics = _num(_levers(metrics), ["budget", "step", "passes", "loss"])
    ref, rows = reference(ar, columns), []
    acc = acc.rename(columns={"model": "snapshot_model"}).rename(columns={"model_group": "model"})
    for key, g in acc.groupby(KEYS, sort=True):
        base = dict(zip(KEYS, key))
        m = metrics[(metrics["model_group"] == base["model"]) & (metrics["budget"] == base["budget"])
                    & (metrics["lever"] == base["lever"]) & (metrics["lever_value"] == base["lever_value"])]
        last = m.sort_values("step").groupby("snapshot").tail(1)
        base.update(budget_tokens=int(g["budget_tokens"].iloc[0]), n_params=int(g["n_params"].iloc[0]),
                    tokens_per_param=float(g["budget_tokens"].iloc[0]) / float(g["n_params"].iloc[0]),
                    passes=float(last["passes"].mean()) if len(last) else None,
                    final_loss=float(last["loss"].mean()) if len(last) else None)
        acc_point = points["accuracy"] if (g["mode"] == "bd").any() else "ar"
        cols = _column_values(g, columns, acc_point)
        accuracy = _rows(base, "accuracy", cols, ref)
        rows += accuracy
        if (g["mode"] == "bd").any():
            own = {r["column"]: (r["value"], r["ci_low"], r["ci_high"]) for r in accuracy}
            rows += _rows(base, "accuracy_speed", _column_values(g, columns, points["speed"]), own)
            tpf = _tokens_per_forward(g, points["speed"])
            rows.append(dict(base, quantity="tokens_per_forward", column="all", value=tpf,
                             seeds=g["train_seed"].nunique()))
        s = speed[(speed["side"] == "snapshot") & speed["snapshot"].isin(g["snapshot"])]
        if len(s):
            v = s["speedup_vs_main_ar"].tolist()
            rows.append(dict(base, quantity="speedup_b1", column="all", value=sum(v) / len(v),
                             ci_low=min(v), ci_high=max(v), seeds=len(v)))
    return pd.DataFrame(rows)


def _fmt(v, digits=1, sign=False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "n/a"
    return f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _cell(s: pd.DataFrame, quantity: str, column: str, kind: str = "gap") -> str:
    r = s[(s["quantity"] == quantity) & (s["column"] == column)]
    if not len(r):
        return ""
    r = r.iloc[0]
    if kind == "value":
        return _fmt(r["value"], 2)
    half = (r["ci_high"] - r["ci_low"]) / 2
    return f"{_fmt(r['difference'], sign=True)} ± {_fmt(half)} ({r['verdict']}, {int(r['seeds'])} seed" \
           f"{'s' if int(r['seeds']) > 1 else ''})"


def _read_back(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary as :func:`summarize` returns it, from itself or from budget_study.csv read back as text."""
    return _num(_levers(summary), SUMMARY_NUMBERS)


def markdown(summary: pd.DataFrame, columns: dict, speed_threshold: float, provenance: str) -> str:
    """The study's table: per model, lever and budget, the gap to the AR base (Avg. and the GSM8K and HumanEval
    stand-ins), tokens per forward and accuracy change at the speed threshold, batch-1 speed against AR."""
    summary = _read_back(summary)
    head = ["model", "budget", "tokens / param", "passes", "final loss", "Avg. gap to AR base", "GSM8K gap",
            "HumanEval gap", f"tokens / forward (t={speed_threshold:g})",
            f"Avg. change t=1.0 -> {speed_threshold:g}", "batch-1 speed / AR"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for _key, s in summary.groupby(KEYS, sort=False):
        base = s.iloc[0]
        name = _label(base["model"], base["lever"], base["lever_value"])
        speed = s[s["quantity"] == "speedup_b1"]
        cells = [name, f"{int(base['budget'])}x", _fmt(base["tokens_per_param"], 2), _fmt(base["passes"], 2),
                 _fmt(base["final_loss"], 3), _cell(s, "accuracy", "avg"), _cell(s, "accuracy", "gsm8k"),
                 _cell(s, "accuracy", "humaneval_base"), _cell(s, "tokens_per_forward", "all", "value") or "-",
                 _cell(s, "accuracy_speed", "avg") or "-",
                 f"{speed['value'].iloc[0]:.2f}x" if len(speed) else "n/a"]
        lines.append("| " + " | ".join(cells) + " |")
    notes = [
        "", f"Columns averaged: {', '.join(columns)} (the stand-ins of Table 2's columns). A gap is the model's "
        "accuracy minus the AR base's, ± half its interval (95%: over seeds and items, tables' convention); "
        "'within noise' when the two intervals overlap. Tokens per forward and the change at the speed threshold: "
        "block diffusion only. Batch-1 speed: the snapshot's tokens/s over the AR base's, timed in one job (range "
        "over seeds). Tokens per parameter of the paper (its tokens over Qwen2.5's parameter counts): "
        + ", ".join(f"{k} {v:.2f}" for k, v in PAPER_RATIOS.items()) + ".", "", provenance]
    return "\n".join(lines + notes) + "\n"


def _series(summary: pd.DataFrame, quantity: str, column: str):
    """``{line label: DataFrame sorted by tokens per parameter}`` of one quantity and column."""
    s = summary[(summary["quantity"] == quantity) & (summary["column"] == column)]
    return {_label(*key): g.sort_values("tokens_per_param")
            for key, g in s.groupby(["model", "lever", "lever_value"], sort=False)}


def _label(model: str, lever: str, value) -> str:
    return model + (f" [{lever} = {value}]" if lever else "")


def _colours(summary: pd.DataFrame) -> dict:
    """One colour per line (model and lever) in every panel that draws it, in the summary's order."""
    keys = summary[["model", "lever", "lever_value"]].drop_duplicates().itertuples(index=False)
    return {_label(*k): f"C{i}" for i, k in enumerate(keys)}


def _log_axis(ax, xs: list[float]) -> None:
    """Log x axis over ``xs`` with plain labels at 1, 2 and 5 times the powers of ten, minor ticks unlabelled."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_xlim(min(xs) / 1.6, max(xs) * 1.6)
    ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("adaptation tokens per parameter")


def _paper_marks(ax) -> None:
    for i, (name, x) in enumerate(PAPER_RATIOS.items()):
        ax.axvline(x, color="#c44e52", ls=":", lw=1)
        ax.text(x, 0.98 - 0.08 * i, f" {name}", color="#c44e52", fontsize=7, va="top",
                transform=ax.get_xaxis_transform())


def _errorbars(ax, g: pd.DataFrame, y: str, label: str, **kw) -> None:
    v = g[y].astype(float)
    lo, hi = (v - g["ci_low"].astype(float)).clip(lower=0), (g["ci_high"].astype(float) - v).clip(lower=0)
    ax.errorbar(g["tokens_per_param"], v, yerr=[lo.fillna(0), hi.fillna(0)], marker="o", capsize=3, label=label,
                **kw)


def figure(summary: pd.DataFrame, png, pdf, recipe: str, speed_threshold: float, footer: str) -> None:
    """(a) the recipe's gap to the AR base per column; (b) the Avg. gap of every model and lever; (c) tokens per
    forward at the speed threshold; (d) batch-1 speed over the AR base's; all against tokens per parameter."""
    summary = _read_back(summary)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .plotting import save

    fig, grid = plt.subplots(2, 2, figsize=(13, 9.5))
    (a, b), (c, d) = grid
    axes = grid.ravel()
    for col, g in ((k, v) for k, v in _one_model(summary, recipe, "accuracy").items() if k != "avg"):
        a.plot(g["tokens_per_param"], g["difference"], marker="o", label=col)
    a.set_title(f"(a) {recipe}: accuracy gap to the AR base\nper stand-in (mean over seeds)", fontsize=10)
    colour = _colours(summary)
    for label, g in _series(summary, "accuracy", "avg").items():
        g = g.assign(gap=g["difference"], ci_low=g["ci_low"] - g["ref_value"], ci_high=g["ci_high"] - g["ref_value"])
        _errorbars(b, g, "gap", label, color=colour[label])
    b.set_title("(b) Avg. gap to the AR base\n(95% interval of the model's Avg.)", fontsize=10)
    for label, g in _series(summary, "tokens_per_forward", "all").items():
        c.plot(g["tokens_per_param"], g["value"], marker="o", label=label, color=colour[label])
    c.axhline(1.0, color="grey", lw=0.8)
    c.set_title(f"(c) tokens per forward at threshold {speed_threshold:g}\n(block diffusion)", fontsize=10)
    for label, g in _series(summary, "speedup_b1", "all").items():
        _errorbars(d, g, "value", label, color=colour[label])
    d.axhline(1.0, color="grey", lw=0.8)
    d.set_title("(d) batch-1 tokens/s over the AR base's\n(timed in one job; range over seeds)", fontsize=10)
    for ax in (a, b):
        ax.axhline(0.0, color="grey", lw=0.8)
        ax.set_ylabel("points")
    xs = summary["tokens_per_param"].dropna().astype(float).tolist() + list(PAPER_RATIOS.values())
    for ax in axes:
        _log_axis(ax, xs)
        _paper_marks(ax)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower left")
    fig.text(0.01, -0.01, footer, fontsize=8, ha="left", va="top", wrap=True)
    fig.tight_layout()
    save(fig, png, pdf)


def _one_model(summary: pd.DataFrame, model: str, quantity: str) -> dict:
    s = summary[(summary["quantity"] == quantity) & (summary["model"] == model) & (summary["lever"] == "")]
    return {col: g.sort_values("tokens_per_param") for col, g in s.groupby("column", sort=False)}
