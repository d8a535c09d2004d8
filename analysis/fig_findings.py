"""The summary page's picture (``results/<scale>/summary.png``, rule ``summary``): each adapted row's Avg. gap to
its AR base in this run beside the paper's own gap for the same pair.

A pure function of the page's accuracy cells (:func:`picture_rows`, then :func:`draw_findings`).  The run's bar
carries the page's noise: the two rows' 95% half-widths added, so that it crosses 0 exactly when the two intervals
overlap ("within noise", the rule of the page's comparisons).  The paper's bar is its gap over the same columns
(Tables 1 and 2 of the paper; no interval printed there): real benchmarks at 1.5B/7B, shown for orientation, not
comparable with the miniature's stand-in tasks.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from . import paper_values as pv
from .plotting import _wrap, plt
from .summary_findings import judge

RUN_BEYOND, RUN_WITHIN, PAPER_COLOR = "#1f5a96", "#9ecae1", "#c44e52"


def _half(c: dict) -> float:
    return (c["hi"] - c["lo"]) / 2


def _paper_gap(g: dict, col_ids: list[str]) -> tuple[float | None, str]:
    """(the paper's mean gap over ``col_ids``, its label) for one row's paper pair; None where a cell is missing."""
    if not g.get("paper") or not g.get("paper_baseline"):
        return None, "no paper pair"
    (t, row), (bt, brow) = g["paper"], g["paper_baseline"]
    text = pv.label_of(t, row) + (" (Table 2)" if t == "table2" else "") + " - " + pv.label_of(bt, brow)
    diffs = []
    for c in col_ids:
        a, b = pv.paper_value(bt, brow, c), pv.paper_value(t, row, c)
        if a is None or b is None:
            return None, f"{text}: no paper value for {c}"
        diffs.append(b.value - a.value)
    return sum(diffs) / len(diffs), text


def picture_rows(spec: dict, cells: dict) -> list[dict]:
    """One dict per row of ``spec['gaps']`` (workflow/fastdllm_dag/job/summary_pairs.gap_rows): ``label``, ``baseline``,
    ``gap`` (b - a of the Avg. cells, None when n/a), ``noise`` (the two half-widths added), ``verdict``,
    ``paper_label``, ``paper_gap`` (None when the paper gives no pair) and ``columns`` (how many columns the Avg. is
    over)."""
    label = {g["model"]: g["label"] for g in spec["groups"]}
    col_ids = [c["id"] for c in spec["columns"] if c["id"] != "avg"]
    out = []
    for g in spec.get("gaps", []):
        a, b = cells[(g["baseline"], "avg")], cells[(g["model"], "avg")]
        j = judge(a, b)
        paper_gap, paper_label = _paper_gap(g, col_ids)
        out.append({"label": label[g["model"]], "baseline": label[g["baseline"]],
                    "gap": j["d"] if j else None, "noise": _half(a) + _half(b) if j else None,
                    "verdict": ("beyond noise" if j["apart"] else "within noise") if j else "n/a",
                    "paper_label": paper_label, "paper_gap": paper_gap, "columns": len(col_ids)})
    return out


def _signed(v: float) -> str:
    text = f"{v:+.1f}"
    return "0.0" if text in ("+0.0", "-0.0") else text


def _bars(ax, rows: list[dict], h: float, right: float) -> None:
    """Per row: the run's bar (its verdict's colour, the noise as error bar) above the paper's; their values and
    the verdict written right of 0."""
    n = len(rows)
    for i, r in enumerate(rows):
        y = n - 1 - i
        if r["gap"] is not None:
            color = RUN_BEYOND if r["verdict"] == "beyond noise" else RUN_WITHIN
            ax.barh(y + h / 2, r["gap"], height=h, color=color, xerr=r["noise"],
                    error_kw=dict(ecolor="#333333", capsize=3, lw=1))
        text = f"{_signed(r['gap'])}, {r['verdict']}" if r["gap"] is not None else "n/a"
        ax.text(right, y + h / 2, text, ha="left", va="center", fontsize=8)
        if r["paper_gap"] is not None:
            ax.barh(y - h / 2, r["paper_gap"], height=h, color=PAPER_COLOR)
        ax.text(right, y - h / 2, f"{_signed(r['paper_gap'])} paper" if r["paper_gap"] is not None else "paper: n/a",
                ha="left", va="center", fontsize=8, color=PAPER_COLOR)


def picture_note(spec: dict) -> str:
    """What this run's bars are measured on: stand-in tasks (not comparable with the paper) or the paper's
    benchmarks (the columns' ``comparable``)."""
    cols = [c for c in spec["columns"] if c["id"] != "avg"]
    if all(c.get("comparable") for c in cols):
        return "This run: the paper's benchmarks, evaluated here."
    return "This run: stand-in tasks, not comparable with the paper's numbers."


def draw_findings(rows: list[dict], path, banner: str | None = None, note: str = "") -> str:
    """Draw the picture of ``rows`` (:func:`picture_rows`) to the PNG ``path`` (written atomically, about 800 px
    wide); returns its sha256.  ``banner``: a label drawn above it and written as its title (a rehearsal's);
    ``note``: what the run's bars are measured on (:func:`picture_note`), first in the footer."""
    from matplotlib.patches import Patch

    from fastdllm_core.provenance import atomic_path

    if not rows:
        raise ValueError("no rows to draw: the spec has no adapted row with an AR baseline (spec['gaps'])")
    n, h = len(rows), 0.38
    top = 0.75 + (0.3 if banner else 0.0)  # inches above the axes: legend and title (and the banner)
    height = 0.55 * n + 0.95 + top
    fig, ax = plt.subplots(figsize=(8.0, height), dpi=100)
    fig.subplots_adjust(left=0.41, right=0.80, top=1 - top / height, bottom=0.95 / height)
    runs = [(r["gap"], r["noise"]) for r in rows if r["gap"] is not None]
    papers = [r["paper_gap"] for r in rows if r["paper_gap"] is not None] + [0]
    lows, highs = [g - e for g, e in runs] + papers, [g + e for g, e in runs] + papers
    span = max(highs) - min(lows) or 1.0
    right = max(highs) + 0.04 * span
    ax.set_xlim(min(lows) - 0.04 * span, right)
    _bars(ax, rows, h, right + 0.02 * span)
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(n))
    bases = list(dict.fromkeys(r["baseline"] for r in rows))
    ax.set_yticklabels([_wrap(r["label"] + ("" if len(bases) == 1 else " - " + r["baseline"]), 50) + "\n" +
                        _wrap(f"paper: {r['paper_label']}", 50) for r in reversed(rows)], fontsize=8)
    ax.set_xlabel(f"Avg. gap to the AR {'base' if len(bases) == 1 else 'baseline'} (points, mean of "
                  f"{rows[0]['columns']} columns)", fontsize=8.5)
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title(f"Against the AR base ({bases[0]})" if len(bases) == 1 else "Each row against its own AR baseline",
                 fontsize=9, loc="left")
    ax.legend(handles=[Patch(color=RUN_BEYOND, label="this run, beyond noise"),
                       Patch(color=RUN_WITHIN, label="this run, within noise"),
                       Patch(color=PAPER_COLOR, label="paper (real benchmarks, 1.5B/7B)")],
              fontsize=7.5, loc="lower left", bbox_to_anchor=(-0.66, 1.08), ncol=3, frameon=False)
    fig.text(0.01, 0.01, f"{note + ' ' if note else ''}Error bar: the two rows' 95% half-widths added:\nit crosses "
             "0 exactly when the intervals overlap (within noise). Paper: its gap over the same columns.",
             fontsize=7, color="#555555", ha="left", va="bottom")
    meta = {"Software": None}
    if banner:
        fig.text(0.5, 1.0, banner, ha="center", va="top", fontsize=11, fontweight="bold", color="#c00000")
        meta.update(Title=banner, Description=banner)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100, metadata=meta)
    plt.close(fig)
    return sha256_of(path)


def sha256_of(path) -> str:
    """The sha256 (hex) of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
