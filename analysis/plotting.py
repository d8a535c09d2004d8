"""What every figure shares: saving, empty panels, titles and footers, the paper's values, and the look-ups of
tokens/s (per throughput sweep) and accuracy intervals in the results CSVs."""
from __future__ import annotations

import contextlib
import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import paper_values as pv  # noqa: E402
from .results_io import _of_sweep, lookup, measured_on  # noqa: E402,F401 - re-exported to the figures

PAPER_STYLE = dict(marker="*", s=160, color="#c44e52", zorder=5)


# A label drawn above every figure saved while it is set (:func:`labelled`), and written as the files' title
# metadata: a rehearsal's figures (stand-in weights) can never pass for results.
BANNER: str | None = None


@contextlib.contextmanager
def labelled(text: str | None):
    """Figures saved inside carry ``text`` (None: no label) above them and as their PNG / PDF title."""
    global BANNER
    old, BANNER = BANNER, text
    try:
        yield
    finally:
        BANNER = old


def save(fig, png, pdf) -> None:
    from fastdllm_core.provenance import atomic_path

    meta = {}
    if BANNER:
        fig.text(0.5, 1.0, BANNER, ha="center", va="bottom", fontsize=12, fontweight="bold", color="#c00000",
                 transform=fig.transFigure)
        meta = {"png": {"Title": BANNER, "Description": BANNER}, "pdf": {"Title": BANNER, "Subject": BANNER}}
    for path in (png, pdf):
        fmt = Path(path).suffix.lstrip(".")
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, bbox_inches="tight", dpi=120, metadata=meta.get(fmt))
    plt.close(fig)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _tps(thr: pd.DataFrame, model: str, mode: str, batch: int, decode: dict | None = None, sweep: str | None = None):
    return lookup(_of_sweep(thr, sweep), "tokens_per_s", decode if mode != "ar" else None, model=model, mode=mode,
                  batch_size=batch)[0]


def _tps_range(thr: pd.DataFrame, model: str, mode: str, batch: int, decode: dict | None = None,
               sweep: str | None = None):
    """(low, high) tokens/s over the run's timed repeats (``total_tokens`` over ``wall_time_s_max`` / ``_min``),
    or None when the CSV has no per-repeat times."""
    rows, decode = _of_sweep(thr, sweep), decode if mode != "ar" else None
    lo, hi, n = (lookup(rows, col, decode, model=model, mode=mode, batch_size=batch)[0]
                 for col in ("wall_time_s_max", "wall_time_s_min", "total_tokens"))
    return (n / lo, n / hi) if lo and hi and n else None


def _repro_title(label: str, scale: str) -> str:
    """"Reproduced: <label>", naming the scale unless the label already does (no "(tiny) (tiny)")."""
    return f"Reproduced: {label}" if re.search(rf"\b{re.escape(scale)}\b", label) else \
        f"Reproduced ({scale} scale): {label}"


def _repro_tick(label: str, scale: str) -> str:
    """"reproduced", naming the scale unless ``label`` (printed below it) already does."""
    return "reproduced" if re.search(rf"\b{re.escape(scale)}\b", label) else f"reproduced ({scale} scale)"


def _wrap(text: str, width: int = 30) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def _footer(fig, lines: list[str]) -> None:
    """Source lines under the figure (kept inside the saved image by ``bbox_inches="tight"``)."""
    if lines:
        fig.text(0.01, 0.0, "\n".join(lines), fontsize=7, color="#555555", ha="left", va="top")


def _finding(figure: str, where_prefix: str):
    return next((f for f in pv.FINDINGS if f.figure == figure and f.where.startswith(where_prefix)), None)


def _interval(acc, dec, spec, value):
    """(low, high) of the accuracy's 95% interval from the accuracy CSV's ci_low / ci_high columns (same units as
    ``value``), or None when the CSV has none or they do not bracket the value."""
    sel = dict(model=spec["model"], task=spec["task"], metric=spec["metric"],
               **({"mode": spec["mode"]} if "mode" in spec else {}))
    lo, hi = (lookup(acc, col, dec, **sel)[0] for col in ("ci_low", "ci_high"))
    if lo is None or hi is None or not (lo - 1e-9 <= value <= hi + 1e-9):
        return None
    return lo, hi


def _size_axis(ax, sizes) -> None:
    """Log2 axis labelled with the sizes themselves (2, 4, 8, ...), not powers of two."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(sizes))
    ax.set_xticklabels([str(s) for s in sorted(sizes)])
    ax.minorticks_off()
