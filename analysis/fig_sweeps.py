"""The decoding sweeps: Figure 4 (confidence threshold: accuracy, throughput, speed-up beside the paper's) and
Figure 6 (sub-block size, sub-block cache on and off: accuracy, throughput)."""
from __future__ import annotations

from . import paper_values as pv
from .plotting import (
    PAPER_STYLE,
    _empty,
    _finding,
    _footer,
    _interval,
    _repro_title,
    _size_axis,
    _tps,
    _tps_range,
    _wrap,
    measured_on,
    plt,
    save,
)
from .results_io import lookup, to_bool


# ----------------------------------------------------------------------------------------------------- threshold
def _series_panel(ax, ths, vals, ranges, *, fmt: str, color: str, label: str, range_label: str, empty: str,
                  no_range_note: str | None = None, floor: float | None = None) -> None:
    """One panel of Figure 4: ``vals`` over the thresholds, ``ranges`` (low, high) as error bars where known."""
    xs = [t for t, v in zip(ths, vals) if v is not None]
    ys = [v for v in vals if v is not None]
    if not xs:  # the panel says so, without a y axis
        ax.text(0.5, 0.5, empty, transform=ax.transAxes, ha="center", va="center", fontsize=9, color="#666666")
        ax.set_yticks([])
        return
    ax.plot(xs, ys, fmt, color=color, label=label)
    have = [(t, v, r) for t, v, r in zip(ths, vals, ranges) if v is not None and r]
    if have:
        ax.errorbar([t for t, _, _ in have], [v for _, v, _ in have],
                    yerr=[[v - r[0] for _, v, r in have], [r[1] - v for _, v, r in have]],
                    fmt="none", ecolor=color, capsize=4, lw=1, label=range_label)
    elif no_range_note:
        ax.text(0.99, 0.04, no_range_note, transform=ax.transAxes, ha="right", va="bottom", fontsize=7,
                color="#666666")
    lo = min(ys + [r[0] for _, _, r in have])
    hi = max(ys + [r[1] for _, _, r in have])
    low = lo - 0.1 * (hi - lo or 1)
    ax.set_ylim(low if floor is None else max(floor, low), hi + 0.45 * (hi - lo or 1))  # headroom for the legend
    ax.legend(fontsize=8, loc="upper center", ncol=2)


def _threshold_speedup(sx, ths, tps, scale: str):
    """(c) tokens/s relative to threshold 1.0 beside the paper's 39.1 -> 101.7 tokens/s; the paper's two values
    (or None)."""
    xt = [t for t, v in zip(ths, tps) if v is not None]
    yt = [v for v in tps if v is not None]
    base = tps[ths.index(1.0)] if 1.0 in ths else None
    ratios = [v / base for v in yt] if base else []
    if base:
        sx.plot(xt, ratios, "o-", color="#4c72b0", label=f"reproduced ({scale} scale)")
    elif xt:
        sx.text(0.5, 0.5, "threshold 1.0 not in the sweep: no reproduced ratio", transform=sx.transAxes,
                ha="center", fontsize=8, color="#666666")
    p10 = pv.paper_value("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@1.0")
    p09 = pv.paper_value("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9")
    pr = p09.value / p10.value if p10 and p09 else None
    if pr:
        sx.scatter([0.9], [pr], label=f"paper: {p10.value:g} -> {p09.value:g} tokens/s = {pr:.1f}x at 0.9 (A100)",
                   **PAPER_STYLE)
        sx.annotate(f"paper: {pr:.1f}x", (0.9, pr), textcoords="offset points", xytext=(12, -4), ha="left",
                    fontsize=8, color=PAPER_STYLE["color"])
    sx.axhline(1.0, color="k", lw=0.6, ls=":")
    top = max(ratios + ([pr] if pr else []) + [1.0])
    sx.set_ylim(0, top * 1.45)  # headroom for the legend
    pad = 0.04 * (max(ths) - min(ths) or 1.0)
    sx.set_xlim(min(ths) - pad, max(ths) + pad)
    sx.set_ylabel("speed-up vs threshold 1.0")
    sx.set_title("(c) Speed-up from parallel unmasking (like for like with the paper)", fontsize=10)
    sx.set_xlabel("confidence threshold")
    sx.set_xticks(ths)
    sx.set_xticklabels([f"{t:.1f}" if abs(round(t, 1) - t) < 1e-9 else f"{t:g}" for t in ths])  # 1.0, 0.9, 0.85
    if base or pr:
        sx.legend(fontsize=8, loc="upper center", ncol=1)
    return (p10, p09) if pr else None


def fig_threshold_gsm8k(acc, thr, spec: dict, scale: str, png, pdf):
    """spec: model, label, task, metric, thresholds, decode (block/sub-block/cache), batch, sweep (default
    "threshold").

    Three stacked panels sharing the threshold axis: accuracy (with its 95% interval as error bars where the
    accuracy CSV has ``ci_low``/``ci_high``), throughput in tokens/s (range over every timed repeat of every round),
    and throughput relative to threshold 1.0 beside the paper's own 39.1 -> 101.7 tokens/s (2.6x), which is drawn and
    labelled as the paper's."""
    fig, (ax, tx, sx) = plt.subplots(3, 1, figsize=(7.5, 10), sharex=True, layout="constrained")
    ths = sorted(float(t) for t in spec["thresholds"])
    sweep, batch = spec.get("sweep", "threshold"), spec.get("batch", 1)
    accs, ivs, tps, rgs = [], [], [], []
    for th in ths:
        dec = dict(spec["decode"], threshold=th)
        a, _ = lookup(acc, "value", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
        accs.append(a)
        ivs.append(_interval(acc, dec, spec, a) if a is not None else None)
        tps.append(_tps(thr, spec["model"], "bd", batch, dec, sweep))
        rgs.append(_tps_range(thr, spec["model"], "bd", batch, dec, sweep))
    _series_panel(ax, ths, accs, ivs, fmt="o-", color="#4c72b0", label=f"reproduced ({scale} scale)",
                  range_label="95% interval", empty="no accuracy rows for this sweep in the results CSV",
                  no_range_note="no intervals in the accuracy CSV (ci_low / ci_high)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"(a) Accuracy: {spec['task']} {spec['metric']}", fontsize=10)
    _series_panel(tx, ths, tps, rgs, fmt="s-", color="#55a868", label=f"reproduced ({scale} scale, batch {batch})",
                  range_label="range over every timed repeat",
                  empty="no throughput rows for this sweep in the results CSV",
                  floor=0.0)
    tx.set_ylabel("tokens/s")
    tx.set_title("(b) Throughput, " + _wrap(measured_on(thr, sweep, [spec["model"]]), 70)
                 + "\n(absolute tokens/s do not compare with the paper's A100)", fontsize=10)
    paper = _threshold_speedup(sx, ths, tps, scale)
    fig.suptitle(f"Figure 4: confidence-threshold sweep\n{_repro_title(spec.get('label', spec['model']), scale)}",
                 fontsize=11)
    notes = [f"Throughput from the '{sweep}' throughput sweep (batch {batch})."]
    if paper:
        notes.append(f"Paper values: {paper[1].source_text}; the paper does not state the model size for Figure 4.")
    _footer(fig, notes)
    save(fig, png, pdf)


# ------------------------------------------------------------------------------------------------------ sub-block
def _cache_panel(ax, spec: dict, value_and_range, legend: str, empty: str, ylabel: str) -> None:
    """One line per sub-block cache setting (off: circles, on: squares, shifted so the error bars stay readable)
    of ``value_and_range(decode) -> (value, (low, high) or None)`` over the sub-block sizes (``empty`` written on
    the panel where no setting has a value), on a sub-block size axis."""
    drawn = False
    for cache in spec["caches"]:
        xs, ys, err = [], [], [[], []]
        for s in spec["sub_blocks"]:
            v, r = value_and_range(dict(spec["decode"], sub_block_size=s, use_sub_block_cache=cache))
            if v is not None:
                r = r or (v, v)
                xs.append(s * (1.04 if to_bool(cache) else 1.0))  # side by side: the intervals stay readable
                ys.append(v)
                err[0].append(v - r[0])
                err[1].append(r[1] - v)
        if xs:
            drawn = True
            ax.errorbar(xs, ys, yerr=err, fmt="o-" if not to_bool(cache) else "s--", capsize=3,
                        label=f"sub-block cache {'on' if to_bool(cache) else 'off'}{legend}")
    if drawn:
        ax.legend(fontsize=8)
    else:
        _empty(ax, empty)
    _size_axis(ax, spec["sub_blocks"])
    ax.set_xlabel("sub-block size")
    ax.set_ylabel(ylabel)


def fig_subblock_accuracy(acc, spec: dict, scale: str, png, pdf):
    """spec: model, task, metric, sub_blocks, caches [False, True], decode (block size, threshold)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.6), layout="constrained")

    def accuracy(dec):
        a, _ = lookup(acc, "value", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
        return a, (_interval(acc, dec, spec, a) if a is not None else None)

    _cache_panel(ax, spec, accuracy, " (95% intervals)", "no sub-block sweep rows in the results CSV",
                 f"{spec['task']} {spec['metric']} (%)")
    ax.set_title(f"Figure 6a: accuracy vs sub-block size\n{_repro_title(spec.get('label', spec['model']), scale)}",
                 fontsize=10)
    f = _finding("fig_subblock", "Figure 6(a)")
    _footer(fig, [_wrap(f"The paper's finding ({f.where}): {f.statement}", 110)] if f else [])
    save(fig, png, pdf)


def fig_subblock_throughput(thr, spec: dict, scale: str, png, pdf):
    """spec: model, sub_blocks, caches, batches [1, 32], decode (block size, threshold), sweep (default
    "subblock"); error bars: range over every timed repeat of every round."""
    batches, sweep = spec["batches"], spec.get("sweep", "subblock")
    fig, axes = plt.subplots(1, len(batches), figsize=(5.8 * len(batches), 4.6), squeeze=False, layout="constrained")
    for ax, b in zip(axes[0], batches):
        def tokens_per_s(dec, b=b):
            v = _tps(thr, spec["model"], "bd", b, dec, sweep)
            return v, (_tps_range(thr, spec["model"], "bd", b, dec, sweep) if v is not None else None)

        _cache_panel(ax, spec, tokens_per_s, "", f"no throughput rows for batch {b}", "tokens/s")
        ax.set_title(f"batch size {b}", fontsize=10)
    fig.suptitle(f"Figure 6b: throughput vs sub-block size\n{_repro_title(spec.get('label', spec['model']), scale)}"
                 f"\n{measured_on(thr, sweep, [spec['model']])}", fontsize=11)
    f = _finding("fig_subblock", "Figure 6(b)")
    notes = [f"Throughput from the '{sweep}' throughput sweep; error bars: range over every timed repeat of every "
             "round."]
    _footer(fig, notes + ([_wrap(f"The paper's finding ({f.where}): {f.statement}", 150)] if f else []))
    save(fig, png, pdf)
