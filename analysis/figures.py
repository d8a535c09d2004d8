"""Figures of the paper as pure functions of the results CSVs, with the paper's quoted points overlaid.

Absolute throughput of a tiny CPU model and of a 7B model on an A100 are not comparable, so every overlay of a
paper throughput value is drawn next to the like-for-like *ratio* (speed-up) measured here.
"""
from __future__ import annotations

import re
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from . import paper_values as pv  # noqa: E402
from .results_io import lookup, select, to_bool  # noqa: E402

PAPER_STYLE = dict(marker="*", s=160, color="#c44e52", zorder=5)


def save(fig, png, pdf) -> None:
    from fastdllm_core.provenance import atomic_path

    for path in (png, pdf):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=Path(path).suffix.lstrip("."), bbox_inches="tight", dpi=120)
    plt.close(fig)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True, fontsize=9, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _of_sweep(thr: pd.DataFrame, sweep: str | None) -> pd.DataFrame:
    """The rows of throughput sweep ``sweep`` (the CSV's ``sweep`` column).  The same model and decoding setting
    can be measured by several sweeps (Figure 1's batch-1 run and Figure 6's sub-block-8 run, say); a figure takes
    its numbers from its own sweep, whose runs were measured together, never from whichever row comes last.
    Rows without a sweep name (CSVs written outside the DAG) are kept."""
    if sweep is None or thr.empty or "sweep" not in thr.columns:
        return thr
    return thr[thr["sweep"].isna() | (thr["sweep"].astype(str) == sweep)]


def _tps(thr: pd.DataFrame, model: str, mode: str, batch: int, decode: dict | None = None, sweep: str | None = None):
    v, _ = lookup(_of_sweep(thr, sweep), "tokens_per_s", decode if mode == "bd" else None, model=model, mode=mode,
                  batch_size=batch)
    return v


def _tps_range(thr: pd.DataFrame, model: str, mode: str, batch: int, decode: dict | None = None,
               sweep: str | None = None):
    """(low, high) tokens/s over the run's timed repeats (``total_tokens`` over ``wall_time_s_max`` / ``_min``),
    or None when the CSV has no per-repeat times."""
    lo, _ = lookup(_of_sweep(thr, sweep), "wall_time_s_max", decode if mode == "bd" else None, model=model,
                   mode=mode, batch_size=batch)
    hi, _ = lookup(_of_sweep(thr, sweep), "wall_time_s_min", decode if mode == "bd" else None, model=model,
                   mode=mode, batch_size=batch)
    n, _ = lookup(_of_sweep(thr, sweep), "total_tokens", decode if mode == "bd" else None, model=model,
                  mode=mode, batch_size=batch)
    if not (lo and hi and n):
        return None
    return n / lo, n / hi


def _paper(table, row, col):
    return pv.paper_value(table, row, col)


def _repro_title(label: str, scale: str) -> str:
    """"Reproduced: <label>", naming the scale unless the label already does (no "(tiny) (tiny)")."""
    return f"Reproduced: {label}" if re.search(rf"\b{re.escape(scale)}\b", label) else \
        f"Reproduced ({scale} scale): {label}"


def _repro_tick(label: str, scale: str) -> str:
    """"reproduced", naming the scale unless ``label`` (printed below it) already does."""
    return "reproduced" if re.search(rf"\b{re.escape(scale)}\b", label) else f"reproduced ({scale} scale)"


def _wrap(text: str, width: int = 30) -> str:
    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False)) or text


def _threshold_tick(t: float) -> str:
    return f"{t:.1f}" if abs(round(t, 1) - t) < 1e-9 else f"{t:g}"


def _footer(fig, lines: list[str]) -> None:
    """Source lines under the figure (kept inside the saved image by ``bbox_inches="tight"``)."""
    if lines:
        fig.text(0.01, 0.0, "\n".join(lines), fontsize=7, color="#555555", ha="left", va="top")


def _finding(figure: str, where_prefix: str):
    return next((f for f in pv.FINDINGS if f.figure == figure and f.where.startswith(where_prefix)), None)


# --------------------------------------------------------------------------------------------------------- fig 1
def speedup_pair(thr, bd_model: str, ar_model: str, decode: dict | None, batch: int = 1, sweep: str = "batch"):
    """(ratio, (low, high) or None) of ``bd_model``'s over ``ar_model``'s tokens/s at ``batch``, both taken from
    the same throughput sweep (measured together); None when either is missing.  The range is over the timed
    repeats (slowest over fastest, fastest over slowest)."""
    bd = _tps(thr, bd_model, "bd", batch, decode, sweep)
    ar = _tps(thr, ar_model, "ar", batch, None, sweep)
    if not bd or not ar:
        return None
    rb, ra = _tps_range(thr, bd_model, "bd", batch, decode, sweep), _tps_range(thr, ar_model, "ar", batch, None, sweep)
    return bd / ar, ((rb[0] / ra[1], rb[1] / ra[0]) if rb and ra else None)


def fig1a_throughput_vs_accuracy(acc, thr, spec: dict, scale: str, png, pdf):
    """spec: models [{model, label, mode}], bd_reference / ar_reference (model keys of the speed pair: the
    speed-up is bd_reference over ar_reference, like the paper's Fast-dLLM v2 7B over Qwen2.5-7B-Instruct),
    task, metric, speed_decode, batch, sweep (the throughput sweep the numbers come from, default "batch").
    Models other than the pair are drawn as grey context points."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 2]}, layout="constrained")
    dec, batch, sweep = spec["speed_decode"], spec.get("batch", 1), spec.get("sweep", "batch")
    bd_ref, ar_ref = spec.get("bd_reference"), spec["ar_reference"]
    labels_of = {m["model"]: m["label"] for m in spec["models"]}
    pts = []
    for m in spec["models"]:
        x = _tps(thr, m["model"], m["mode"], batch, dec, sweep)
        y, _ = lookup(acc, "value", dec if m["mode"] == "bd" else None, model=m["model"], task=spec["task"],
                      metric=spec["metric"])
        if x is not None and y is not None:
            pts.append((m, x, y))
    if pts:
        xmid = (min(x for _, x, _ in pts) + max(x for _, x, _ in pts)) / 2
        for m, x, y in pts:
            pair = m["model"] in (bd_ref, ar_ref)
            ax.scatter([x], [y], s=70 if pair else 30, color=None if pair else "#999999", zorder=3 if pair else 2)
            iv = _interval(acc, dec if m["mode"] == "bd" else None, dict(spec, model=m["model"]), y)
            if iv:  # 95% interval of the accuracy
                ax.errorbar([x], [y], yerr=[[y - iv[0]], [iv[1] - y]], fmt="none", ecolor="#555555", capsize=3)
            right = len(pts) > 1 and x > xmid  # labels of right-hand points go to their left: none leaves the axes
            ax.annotate(_wrap(m["label"], 26), (x, y), textcoords="offset points", xytext=(-8 if right else 8, 0),
                        ha="right" if right else "left", va="center", fontsize=8, color="k" if pair else "#666666")
        ax.margins(x=0.35, y=0.15)  # room for the labels
    else:
        _empty(ax, "no throughput/accuracy pair in the results CSVs")
    ax.set_xlabel(f"throughput (tokens/s, batch {batch})")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)")
    ax.set_title(f"Throughput vs accuracy (reproduced, {scale} scale)", fontsize=11)
    bars, errs, labels, colors = [], [], [], []
    sp = speedup_pair(thr, bd_ref, ar_ref, dec, batch, sweep) if bd_ref else None
    if sp:
        bars.append(sp[0])
        errs.append(sp[1])
        pair = f"{labels_of.get(bd_ref, bd_ref)} vs {labels_of.get(ar_ref, ar_ref)}"
        labels.append(_repro_tick(pair, scale) + "\n" + _wrap(pair, 28))
        colors.append("#4c72b0")
    p = _paper("fig1a", "Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", "speedup")
    if p:
        bars.append(p.value)
        errs.append(None)
        labels.append("paper (A100)\n" + _wrap("Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", 28))
        colors.append(PAPER_STYLE["color"])
    bx.bar(range(len(bars)), bars, color=colors, width=0.6)
    for i, (b, e) in enumerate(zip(bars, errs)):
        if e:
            bx.errorbar([i], [b], yerr=[[b - e[0]], [e[1] - b]], fmt="none", ecolor="k", capsize=4, lw=1)
        bx.text(i, (e[1] if e else b), f"{b:.2f}x", ha="center", va="bottom", fontsize=9)
    bx.set_xticks(range(len(bars)))
    bx.set_xticklabels(labels, fontsize=8)
    bx.set_xlim(-0.6, len(bars) - 0.4)
    bx.set_ylim(0, max(bars + [1.0]) * 1.2)
    bx.axhline(1.0, color="k", lw=0.8, ls="--")
    bx.set_ylabel(f"speed-up over AR (batch {batch})")
    bx.set_title("Block diffusion vs AR", fontsize=11)
    notes = []
    if sp and sp[1]:
        notes.append(f"Reproduced bar: both models from the '{sweep}' throughput sweep; error bar: range over "
                     "the timed repeats. Error bars on the left: 95% intervals of the accuracy.")
    if p:
        notes.append(f"Paper value {p.value}x: {p.source_text}.")
    _footer(fig, notes)
    save(fig, png, pdf)


def batch_scaling(thr, spec: dict) -> list[dict]:
    """The like-for-like content of Figure 1b's right panel: throughput at the last batch size over the first, for
    each reproduced model (both from ``spec['sweep']``, default "batch") and for the paper's Fast-dLLM v2 (7B)
    (from its quoted tokens/s).  Each item: label, ratio, source ("reproduced" | the paper value's source text),
    and the absolute tokens/s it is made of."""
    batches, sweep = spec.get("batches", [1, 4]), spec.get("sweep", "batch")
    b0, b1 = batches[0], batches[-1]
    out = []
    for m in spec["models"]:
        y0 = _tps(thr, m["model"], m["mode"], b0, spec["speed_decode"], sweep)
        y1 = _tps(thr, m["model"], m["mode"], b1, spec["speed_decode"], sweep)
        if y0 and y1:
            out.append({"label": m["label"], "ratio": y1 / y0, "source": "reproduced", "tokens_per_s": (y0, y1)})
    p1 = _paper("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1")
    p4 = _paper("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4")
    if p1 and p4 and (b0, b1) == (1, 4):
        out.append({"label": "Fast-dLLM v2 (7B), A100", "ratio": p4.value / p1.value, "source": p1.source_text,
                    "tokens_per_s": (p1.value, p4.value)})
    return out


def fig1b_throughput_batch(thr, spec: dict, scale: str, png, pdf):
    """spec: models [{model, label, mode}] (the speed pair), batches [1, 4], speed_decode, sweep (default
    "batch").  Left: reproduced tokens/s per batch size (range over the timed repeats as error bars); right: the
    gain from the first to the last batch size, reproduced beside the paper's Fast-dLLM v2 (7B) (a ratio: absolute
    tokens/s of a small CPU model and a 7B model on an A100 do not compare)."""
    batches, sweep = spec.get("batches", [1, 4]), spec.get("sweep", "batch")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    width = 0.8 / max(1, len(spec["models"]))
    top = 0.0
    for i, m in enumerate(spec["models"]):
        ys = [_tps(thr, m["model"], m["mode"], b, spec["speed_decode"], sweep) for b in batches]
        rs = [_tps_range(thr, m["model"], m["mode"], b, spec["speed_decode"], sweep) for b in batches]
        xs = [j + i * width for j in range(len(batches))]
        ax.bar(xs, [y or 0 for y in ys], width=width, label=m["label"])
        for x, y, r in zip(xs, ys, rs):
            if y is not None and r:
                ax.errorbar([x], [y], yerr=[[y - r[0]], [r[1] - y]], fmt="none", ecolor="k", capsize=3, lw=1)
            h = (r[1] if r else y) if y is not None else 0
            ax.text(x, h, "n/a" if y is None else f"{y:.0f}", ha="center", va="bottom", fontsize=8)
            top = max(top, h)
    ax.set_xticks([j + width * (len(spec["models"]) - 1) / 2 for j in range(len(batches))])
    ax.set_xticklabels([f"batch {b}" for b in batches])
    ax.set_ylabel("tokens/s")
    ax.set_title(f"Throughput by batch size (reproduced, {scale} scale)", fontsize=11)
    if top > 0:
        ax.set_ylim(0, top * 1.35)  # headroom: the legend never covers a bar
        ax.legend(fontsize=8, loc="upper left")
    else:
        _empty(ax, "no throughput rows in the results CSV")
    items = batch_scaling(thr, spec)
    colors = [PAPER_STYLE["color"] if it["source"] != "reproduced" else f"C{i}" for i, it in enumerate(items)]
    bx.bar(range(len(items)), [it["ratio"] for it in items], color=colors, width=0.6)
    for i, it in enumerate(items):
        a, b = it["tokens_per_s"]
        bx.text(i, it["ratio"], f"{it['ratio']:.2f}x\n({a:.4g} -> {b:.4g} tokens/s)", ha="center", va="bottom",
                fontsize=8)
    bx.set_xticks(range(len(items)))
    bx.set_xticklabels([("paper (project page)" if it["source"] != "reproduced" else _repro_tick(it["label"], scale))
                        + "\n" + _wrap(it["label"], 26) for it in items], fontsize=8)
    bx.set_xlim(-0.6, max(len(items), 1) - 0.4)
    bx.set_ylim(0, max([it["ratio"] for it in items] + [1.0]) * 1.3)
    bx.axhline(1.0, color="k", lw=0.8, ls="--")
    bx.set_ylabel(f"tokens/s at batch {batches[-1]} / batch {batches[0]}")
    bx.set_title(f"Gain from batch {batches[0]} to {batches[-1]}", fontsize=11)
    if not items:
        _empty(bx, "no throughput pair in the results CSV")
    paper = next((it for it in items if it["source"] != "reproduced"), None)
    notes = [f"Reproduced: the '{sweep}' throughput sweep; error bars: range over the timed repeats."]
    if paper:
        notes.append(f"Paper's Fast-dLLM v2 (7B) tokens/s: {paper['source']} ("
                     f"{pv.NON_PAPER_EXCEPTIONS[('fig1b', 'Fast-dLLM v2 (7B)', 'tokens_per_s@bs1')]}).")
    _footer(fig, notes)
    save(fig, png, pdf)


# ----------------------------------------------------------------------------------------------------- threshold
def _interval(acc, dec, spec, value):
    """(low, high) of the accuracy's 95% interval from the accuracy CSV's ci_low / ci_high columns (same units as
    ``value``), or None when the CSV has none or they do not bracket the value."""
    lo, _ = lookup(acc, "ci_low", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
    hi, _ = lookup(acc, "ci_high", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
    if lo is None or hi is None or not (lo - 1e-9 <= value <= hi + 1e-9):
        return None
    return lo, hi


def fig_threshold_gsm8k(acc, thr, spec: dict, scale: str, png, pdf):
    """spec: model, label, task, metric, thresholds, decode (block/sub-block/cache), batch, sweep (default
    "threshold").

    Three stacked panels sharing the threshold axis: accuracy (with its 95% interval as error bars where the
    accuracy CSV has ``ci_low``/``ci_high``), throughput in tokens/s (range over the timed repeats), and
    throughput relative to threshold 1.0 beside the paper's own 39.1 -> 101.7 tokens/s (2.6x), which is drawn and
    labelled as the paper's."""
    fig, (ax, tx, sx) = plt.subplots(3, 1, figsize=(7.5, 10), sharex=True, layout="constrained")
    ths = sorted(float(t) for t in spec["thresholds"])
    name = spec.get("label", spec["model"])
    sweep, batch = spec.get("sweep", "threshold"), spec.get("batch", 1)
    accs, ivs, tps, rgs = [], [], [], []
    for th in ths:
        dec = dict(spec["decode"], threshold=th)
        a, _ = lookup(acc, "value", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
        accs.append(a)
        ivs.append(_interval(acc, dec, spec, a) if a is not None else None)
        tps.append(_tps(thr, spec["model"], "bd", batch, dec, sweep))
        rgs.append(_tps_range(thr, spec["model"], "bd", batch, dec, sweep))
    # (1) accuracy
    xa = [t for t, a in zip(ths, accs) if a is not None]
    ya = [a for a in accs if a is not None]
    if xa:
        ax.plot(xa, ya, "o-", color="#4c72b0", label=f"reproduced ({scale} scale)")
        have = [(t, a, iv) for t, a, iv in zip(ths, accs, ivs) if a is not None and iv is not None]
        if have:
            ax.errorbar([t for t, _, _ in have], [a for _, a, _ in have],
                        yerr=[[a - iv[0] for _, a, iv in have], [iv[1] - a for _, a, iv in have]],
                        fmt="none", ecolor="#4c72b0", capsize=4, lw=1, label="95% interval")
        else:
            ax.text(0.99, 0.04, "no intervals in the accuracy CSV (ci_low / ci_high)", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color="#666666")
        lo = min([a for a in ya] + [iv[0] for _, _, iv in have])
        hi = max([a for a in ya] + [iv[1] for _, _, iv in have])
        ax.set_ylim(lo - 0.1 * (hi - lo or 1), hi + 0.45 * (hi - lo or 1))  # headroom for the legend
        ax.legend(fontsize=8, loc="upper center", ncol=2)
    else:
        ax.text(0.5, 0.5, "no accuracy rows for this sweep in the results CSV", transform=ax.transAxes,
                ha="center", va="center", fontsize=9, color="#666666")
        ax.set_yticks([])
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"(a) Accuracy: {spec['task']} {spec['metric']}", fontsize=10)
    # (2) throughput
    xt = [t for t, v in zip(ths, tps) if v is not None]
    yt = [v for v in tps if v is not None]
    if xt:
        tx.plot(xt, yt, "s-", color="#55a868", label=f"reproduced ({scale} scale, batch {batch})")
        have = [(t, v, r) for t, v, r in zip(ths, tps, rgs) if v is not None and r]
        if have:
            tx.errorbar([t for t, _, _ in have], [v for _, v, _ in have],
                        yerr=[[v - r[0] for _, v, r in have], [r[1] - v for _, v, r in have]],
                        fmt="none", ecolor="#55a868", capsize=4, lw=1, label="range over timed repeats")
        hi = max(yt + [r[1] for _, _, r in have])
        lo = min(yt + [r[0] for _, _, r in have])
        tx.set_ylim(max(0.0, lo - 0.1 * (hi - lo or 1)), hi + 0.45 * (hi - lo or 1))
        tx.legend(fontsize=8, loc="upper center", ncol=2)
    else:
        tx.text(0.5, 0.5, "no throughput rows for this sweep in the results CSV", transform=tx.transAxes,
                ha="center", va="center", fontsize=9, color="#666666")
        tx.set_yticks([])
    tx.set_ylabel("tokens/s")
    tx.set_title("(b) Throughput on this machine (absolute tokens/s do not compare with the paper's A100)",
                 fontsize=10)
    # (3) speed-up over threshold 1.0: like for like with the paper
    base = tps[ths.index(1.0)] if 1.0 in ths else None
    ratios = [v / base for v in yt] if base else []
    if base:
        sx.plot(xt, ratios, "o-", color="#4c72b0", label=f"reproduced ({scale} scale)")
    elif xt:
        sx.text(0.5, 0.5, "threshold 1.0 not in the sweep: no reproduced ratio", transform=sx.transAxes,
                ha="center", fontsize=8, color="#666666")
    p10 = _paper("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@1.0")
    p09 = _paper("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9")
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
    sx.set_xticklabels([_threshold_tick(t) for t in ths])
    if base or pr:
        sx.legend(fontsize=8, loc="upper center", ncol=1)
    fig.suptitle(f"Figure 4: confidence-threshold sweep\n{_repro_title(name, scale)}", fontsize=11)
    notes = [f"Throughput from the '{sweep}' throughput sweep (batch {batch})."]
    if pr:
        notes.append(f"Paper values: {p09.source_text}; the paper does not state the model size for Figure 4.")
    _footer(fig, notes)
    save(fig, png, pdf)


# ------------------------------------------------------------------------------------------------------- GPU batch
NO_GPU_TEXT = "No GPU results: Figure 5 is drawn only from rows with device_type == 'cuda' (none here)."


def fig_gpu_batch_throughput(thr, spec: dict, png, pdf) -> list[str]:
    """AR vs block diffusion by batch size, one panel per GPU type found in rows with device_type == 'cuda';
    returns the GPU names drawn (empty: the figure says there are no GPU results)."""
    thr = _of_sweep(thr, spec.get("sweep", "gpu_batch"))  # not the batch-1/4 rows of Figure 1's sweep
    gpu = thr[thr["device_type"].astype(str) == "cuda"] if not thr.empty and "device_type" in thr.columns else thr.iloc[0:0]
    names = list(dict.fromkeys(gpu["device_name"].astype(str))) if not gpu.empty else []
    paper = {v.row: v for v in pv.values_of("fig_gpu_batch")}
    if not names:  # one clear line, no axes (an empty frame would look like a broken plot)
        fig = plt.figure(figsize=(9, 0.7))
        fig.text(0.5, 0.5, NO_GPU_TEXT, ha="center", va="center", fontsize=11)
        save(fig, png, pdf)
        return []
    fig, axes = plt.subplots(1, len(names), figsize=(6 * len(names), 5.2), squeeze=False, layout="constrained")
    for ax, name in zip(axes[0], names):
        g = gpu[gpu["device_name"].astype(str) == name]
        ar = select(g, None, mode="ar", model=spec["ar_model"])
        bd = select(g, spec.get("decode"), mode="bd", model=spec["bd_model"])
        ar_b = ar.groupby("batch_size")["tokens_per_s"].mean()
        bd_b = bd.groupby("batch_size")["tokens_per_s"].mean()
        ax.plot(ar_b.index, ar_b.values, "o-", label=f"AR: {spec.get('ar_label', spec['ar_model'])}")
        ax.plot(bd_b.index, bd_b.values, "s-", label=f"block diffusion: {spec.get('bd_label', spec['bd_model'])}")
        sizes = sorted(set(ar_b.index) | set(bd_b.index))
        if sizes:
            _size_axis(ax, sizes)
        ax.set_xlabel("batch size")
        ax.set_ylabel("tokens/s")
        common = sorted(set(ar_b.index) & set(bd_b.index))
        ax2 = ax.twinx()
        if common:
            ax2.plot(common, [bd_b[b] / ar_b[b] for b in common], "k:", label="speed-up (reproduced)")
        key = next((k for k in paper if k.lower() in name.lower()), None)
        if key and paper[key].column.endswith("@bs64"):
            ax2.scatter([64], [paper[key].value], label=f"paper: up to {paper[key].value}x ({key}, bs 64)", **PAPER_STYLE)
        elif key:  # the paper names no batch size for this maximum: a level, not a point
            ax2.axhline(paper[key].value, color=PAPER_STYLE["color"], ls="--", lw=1,
                        label=f"paper: up to {paper[key].value}x ({key}, batch size not stated)")
        ax2.set_ylabel("speed-up over AR (dotted)")
        ax2.set_ylim(0, max([bd_b[b] / ar_b[b] for b in common] + ([paper[key].value] if key else []) + [1.0]) * 1.2)
        d = spec.get("decode") or {}
        setting = (f"\ndiffusion: threshold {d['threshold']:g}, sub-block cache "
                   f"{'on' if to_bool(d.get('use_sub_block_cache')) else 'off'}" if "threshold" in d else "")
        ax.set_title(f"Reproduced on {name}" + setting, fontsize=9)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False)
    fig.suptitle("Figure 5: AR vs block diffusion by batch size (GPU)", fontsize=11)
    _footer(fig, [_wrap(f"The paper ({f.where}): {f.statement}", 50 * len(names) + 40)
                  for f in pv.FINDINGS if f.figure == "fig_gpu_batch"])
    save(fig, png, pdf)
    return names


# ------------------------------------------------------------------------------------------------------ sub-block
def _size_axis(ax, sizes) -> None:
    """Log2 axis labelled with the sizes themselves (2, 4, 8, ...), not powers of two."""
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(sizes))
    ax.set_xticklabels([str(s) for s in sorted(sizes)])
    ax.minorticks_off()


def fig_subblock_accuracy(acc, spec: dict, scale: str, png, pdf):
    """spec: model, task, metric, sub_blocks, caches [False, True], decode (block size, threshold)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.6), layout="constrained")
    drawn = False
    for cache in spec["caches"]:
        xs, ys, err = [], [], [[], []]
        for s in spec["sub_blocks"]:
            dec = dict(spec["decode"], sub_block_size=s, use_sub_block_cache=cache)
            a, _ = lookup(acc, "value", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
            if a is not None:
                iv = _interval(acc, dec, spec, a) or (a, a)
                xs.append(s * (1.04 if to_bool(cache) else 1.0))  # side by side: the intervals stay readable
                ys.append(a)
                err[0].append(a - iv[0])
                err[1].append(iv[1] - a)
        if xs:
            drawn = True
            ax.errorbar(xs, ys, yerr=err, fmt="o-" if not to_bool(cache) else "s--", capsize=3,
                        label=f"sub-block cache {'on' if to_bool(cache) else 'off'} (95% intervals)")
    if drawn:
        ax.legend(fontsize=8)
    else:
        _empty(ax, "no sub-block sweep rows in the results CSV")
    _size_axis(ax, spec["sub_blocks"])
    ax.set_xlabel("sub-block size")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)")
    ax.set_title(f"Figure 6a: accuracy vs sub-block size\n{_repro_title(spec.get('label', spec['model']), scale)}",
                 fontsize=10)
    f = _finding("fig_subblock", "Figure 6(a)")
    _footer(fig, [_wrap(f"The paper's finding ({f.where}): {f.statement}", 110)] if f else [])
    save(fig, png, pdf)


def fig_subblock_throughput(thr, spec: dict, scale: str, png, pdf):
    """spec: model, sub_blocks, caches, batches [1, 32], decode (block size, threshold), sweep (default
    "subblock"); error bars: range over the timed repeats."""
    batches, sweep = spec["batches"], spec.get("sweep", "subblock")
    fig, axes = plt.subplots(1, len(batches), figsize=(5.8 * len(batches), 4.6), squeeze=False, layout="constrained")
    for ax, b in zip(axes[0], batches):
        drawn = False
        for cache in spec["caches"]:
            xs, ys, err = [], [], [[], []]
            for s in spec["sub_blocks"]:
                dec = dict(spec["decode"], sub_block_size=s, use_sub_block_cache=cache)
                v = _tps(thr, spec["model"], "bd", b, dec, sweep)
                if v is not None:
                    r = _tps_range(thr, spec["model"], "bd", b, dec, sweep) or (v, v)
                    xs.append(s * (1.04 if to_bool(cache) else 1.0))
                    ys.append(v)
                    err[0].append(v - r[0])
                    err[1].append(r[1] - v)
            if xs:
                drawn = True
                ax.errorbar(xs, ys, yerr=err, fmt="o-" if not to_bool(cache) else "s--", capsize=3,
                            label=f"sub-block cache {'on' if to_bool(cache) else 'off'}")
        if drawn:
            ax.legend(fontsize=8)
        else:
            _empty(ax, f"no throughput rows for batch {b}")
        _size_axis(ax, spec["sub_blocks"])
        ax.set_xlabel("sub-block size")
        ax.set_ylabel("tokens/s")
        ax.set_title(f"batch size {b}", fontsize=10)
    fig.suptitle(f"Figure 6b: throughput vs sub-block size\n{_repro_title(spec.get('label', spec['model']), scale)}",
                 fontsize=11)
    f = _finding("fig_subblock", "Figure 6(b)")
    notes = [f"Throughput from the '{sweep}' throughput sweep; error bars: range over the timed repeats."]
    _footer(fig, notes + ([_wrap(f"The paper's finding ({f.where}): {f.statement}", 150)] if f else []))
    save(fig, png, pdf)


# ---------------------------------------------------------------------------------------------------------- masks
# The paper's Figure 7 colours (its LaTeX: myblue, mygreen, myorange)
MASK_COLORS = {"bd": "#47B1E1", "obc": "#46D45A", "bc": "#F3AA84", "cache": "#c8c8c8"}


def _block_grid(ax, n_rows, n_cols, D):
    """Faint lines between tokens, darker ones between blocks of D tokens."""
    for c in range(n_cols + 1):
        ax.axvline(c - 0.5, color="#888888" if c % D == 0 else "#dddddd", lw=0.6 if c % D == 0 else 0.3)
    for r in range(n_rows + 1):
        ax.axhline(r - 0.5, color="#888888" if r % D == 0 else "#dddddd", lw=0.6 if r % D == 0 else 0.3)


def fig_attention_masks(png, pdf, seq_len: int = 8, block_size: int = 2):
    """Figure 7, drawn from :mod:`fastdllm_core.masks` (the functions the model uses).

    (a) the training mask over ``[x_t | x_0]`` coloured by its three parts, as in the paper: block diagonal
    (M_BD), offset block causal (M_OBC), block causal (M_BC).  (b) inference: the current noised block's queries
    against the keys they see: the cached clean prefix (shaded: earlier blocks, read from the KV cache and not
    recomputed) and, bidirectionally, the block itself (``inference_mask_mod`` with a cache of L - D tokens)."""
    import torch
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    from fastdllm_core.masks import dense_mask, inference_mask_mod, training_mask_mod

    L, D = int(seq_len), int(block_size)
    n = 2 * L
    q = torch.arange(n)[:, None]
    kv = torch.arange(n)[None, :]
    full = dense_mask(training_mask_mod(L, D), n, n)
    part = torch.zeros(n, n, dtype=torch.long)
    part[full & (q < L) & (kv < L)] = 1  # M_BD
    part[full & (q < L) & (kv >= L)] = 2  # M_OBC
    part[full & (q >= L) & (kv >= L)] = 3  # M_BC
    C = L - D  # decoding the last block of an L-token sequence: L - D tokens are in the cache
    infer = dense_mask(inference_mask_mod(D, cache_len=C), D, C + D)
    cat = torch.zeros(D, C + D, dtype=torch.long)
    cat[infer & (kv[:, : C + D] < C)] = 1  # cached prefix
    cat[infer & (kv[:, : C + D] >= C)] = 2  # the current block, bidirectional

    fig = plt.figure(figsize=(13, 6.2))
    gs = fig.add_gridspec(2, 2, width_ratios=[1, 1.25], height_ratios=[1, 0.001], wspace=0.25)
    ax = fig.add_subplot(gs[0, 0])
    cmap = ListedColormap(["white", MASK_COLORS["bd"], MASK_COLORS["obc"], MASK_COLORS["bc"]])
    ax.imshow(part.numpy(), cmap=cmap, vmin=0, vmax=3, interpolation="nearest")
    _block_grid(ax, n, n, D)
    ax.axhline(L - 0.5, color="k", lw=1.5)
    ax.axvline(L - 0.5, color="k", lw=1.5)
    ax.set_xticks([(L - 1) / 2, L + (L - 1) / 2])
    ax.set_xticklabels(["$x_t$ (noised)", "$x_0$ (clean)"])
    ax.set_yticks([(L - 1) / 2, L + (L - 1) / 2])
    ax.set_yticklabels(["$x_t$", "$x_0$"])
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    ax.set_ylabel("query")
    ax.set_title(f"(a) training mask over $[x_t | x_0]$ (L={L} tokens, block D={D})", pad=24, fontsize=10)
    ax.legend(handles=[
        Patch(color=MASK_COLORS["bd"], label="Block Diagonal ($M_{BD}$): $x_t$ within its block"),
        Patch(color=MASK_COLORS["obc"], label="Offset Block Causal ($M_{OBC}$): $x_t$ to earlier clean blocks"),
        Patch(color=MASK_COLORS["bc"], label="Block Causal ($M_{BC}$): $x_0$ to its own and earlier blocks"),
        Patch(facecolor="white", edgecolor="#888888", label="not attended")],
        loc="upper center", bbox_to_anchor=(0.5, -0.03), fontsize=8, frameon=False)

    bx = fig.add_subplot(gs[0, 1])
    cmap_i = ListedColormap(["white", MASK_COLORS["cache"], MASK_COLORS["bd"]])
    bx.imshow(cat.numpy(), cmap=cmap_i, vmin=0, vmax=2, interpolation="nearest")
    for x0 in range(0, C, D):  # shade the cached blocks
        bx.add_patch(plt.Rectangle((x0 - 0.5, -0.5), D, D, fill=False, hatch="///", edgecolor="#888888", lw=0))
    _block_grid(bx, D, C + D, D)
    bx.axvline(C - 0.5, color="k", lw=1.5)
    bx.set_xticks([(C - 1) / 2, C + (D - 1) / 2])
    bx.set_xticklabels([f"cached prefix: {C // D} earlier block(s)\n(clean $x_0$, KV cache)",
                        "current block\n(noised $x_t$)"], fontsize=8)
    bx.set_yticks([(D - 1) / 2])
    bx.set_yticklabels(["current\nblock"], fontsize=8)
    bx.xaxis.tick_top()
    bx.tick_params(length=0)
    bx.set_ylabel("query")
    bx.set_title("(b) inference: only the current noised block is computed", pad=34, fontsize=10)
    bx.legend(handles=[
        Patch(facecolor=MASK_COLORS["cache"], hatch="///", edgecolor="#888888",
              label="cached prefix (shaded): attended, read from the KV cache"),
        Patch(color=MASK_COLORS["bd"], label="current block: bidirectional within itself")],
        loc="upper center", bbox_to_anchor=(0.5, -0.25), fontsize=8, frameon=False)
    fig.suptitle("Figure 7: block-diffusion attention masks (from fastdllm_core.masks)", fontsize=11)
    save(fig, png, pdf)
