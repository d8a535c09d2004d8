"""Figures of the paper as pure functions of the results CSVs, with the paper's quoted points overlaid.

Absolute throughput of a tiny CPU model and of a 7B model on an A100 are not comparable, so every overlay of a
paper throughput value is drawn next to the like-for-like *ratio* (speed-up) measured here.
"""
from __future__ import annotations

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


def _tps(thr: pd.DataFrame, model: str, mode: str, batch: int, decode: dict | None = None):
    v, _ = lookup(thr, "tokens_per_s", decode if mode == "bd" else None, model=model, mode=mode, batch_size=batch)
    return v


def _paper(table, row, col):
    return pv.paper_value(table, row, col)


# --------------------------------------------------------------------------------------------------------- fig 1
def fig1a_throughput_vs_accuracy(acc, thr, spec: dict, scale: str, png, pdf):
    """spec: models [{model, label, mode}], bd_reference / ar_reference (model keys of the speed pair: the
    speed-up is bd_reference over ar_reference, like the paper's Fast-dLLM v2 7B over Qwen2.5-7B-Instruct),
    task, metric, speed_decode, batch.  Models other than the pair are drawn as grey context points."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    dec, batch = spec["speed_decode"], spec.get("batch", 1)
    bd_ref, ar_ref = spec.get("bd_reference"), spec["ar_reference"]
    labels_of = {m["model"]: m["label"] for m in spec["models"]}
    pts = []
    for m in spec["models"]:
        x = _tps(thr, m["model"], m["mode"], batch, dec)
        y, _ = lookup(acc, "value", dec if m["mode"] == "bd" else None, model=m["model"], task=spec["task"],
                      metric=spec["metric"])
        if x is not None and y is not None:
            pts.append((m, x, y))
            pair = m["model"] in (bd_ref, ar_ref)
            ax.scatter([x], [y], s=70 if pair else 30, color=None if pair else "#999999", zorder=3 if pair else 2)
            iv = _interval(acc, dec if m["mode"] == "bd" else None, dict(spec, model=m["model"]), y)
            if iv:  # 95% interval of the accuracy
                ax.errorbar([x], [y], yerr=[[y - iv[0]], [iv[1] - y]], fmt="none", ecolor="#555555", capsize=3)
            ax.annotate(m["label"], (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8,
                        color="k" if pair else "#666666")
    if not pts:
        _empty(ax, "no throughput/accuracy pair in the results CSVs")
    else:
        ax.margins(x=0.25, y=0.12)  # room for the labels
    ax.set_xlabel(f"throughput (tokens/s, batch {batch})")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)")
    ax.set_title(f"Throughput vs accuracy (reproduced, {scale})")
    ref = _tps(thr, ar_ref, "ar", batch)
    bd = _tps(thr, bd_ref, "bd", batch, dec) if bd_ref else None
    bars, labels, colors = [], [], []
    if ref and bd:
        bars.append(bd / ref)
        labels.append(f"reproduced ({scale})\n{labels_of.get(bd_ref, bd_ref)}\nvs {labels_of.get(ar_ref, ar_ref)}")
        colors.append("#4c72b0")
    p = _paper("fig1a", "Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", "speedup")
    if p:
        bars.append(p.value)
        labels.append("paper (A100)\nFast-dLLM v2 (7B)\nvs Qwen2.5-7B-Instruct")
        colors.append(PAPER_STYLE["color"])
    bx.bar(range(len(bars)), bars, color=colors)
    bx.set_xticks(range(len(bars)))
    bx.set_xticklabels(labels, fontsize=7)
    for i, b in enumerate(bars):
        bx.text(i, b, f"{b:.2f}x", ha="center", va="bottom")
    bx.axhline(1.0, color="k", lw=0.8, ls="--")
    bx.set_ylabel("speed-up over AR (batch 1)")
    bx.set_title("Block diffusion vs AR")
    if p:
        fig.text(0.01, -0.02, f"paper: {p.value}x ({p.source_text})", fontsize=7)
    save(fig, png, pdf)


def fig1b_throughput_batch(thr, spec: dict, scale: str, png, pdf):
    """spec: models [{model, label, mode}] (the speed pair), bd_model (whose batch scaling is drawn beside the
    paper's points), batches [1, 4], speed_decode."""
    batches = spec.get("batches", [1, 4])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / max(1, len(spec["models"]))
    any_bar = False
    for i, m in enumerate(spec["models"]):
        ys = [_tps(thr, m["model"], m["mode"], b, spec["speed_decode"]) for b in batches]
        xs = [j + i * width for j in range(len(batches))]
        ax.bar(xs, [y or 0 for y in ys], width=width, label=m["label"])
        for x, y in zip(xs, ys):
            ax.text(x, y or 0, "n/a" if y is None else f"{y:.0f}", ha="center", va="bottom", fontsize=7)
        any_bar |= any(y is not None for y in ys)
    ax.set_xticks([j + width * (len(spec["models"]) - 1) / 2 for j in range(len(batches))])
    ax.set_xticklabels([f"batch {b}" for b in batches])
    ax.set_ylabel("tokens/s")
    ax.set_title(f"Throughput by batch size (reproduced, {scale})")
    ax.legend(fontsize=7)
    if not any_bar:
        _empty(ax, "no throughput rows in the results CSV")
    p1 = _paper("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1")
    p4 = _paper("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4")
    if p1 and p4:
        bx.scatter([1, 4], [p1.value, p4.value], label="paper: Fast-dLLM v2 (7B, A100)", **PAPER_STYLE)
        for b, v in ((1, p1.value), (4, p4.value)):
            bx.annotate(f"{v}", (b, v), textcoords="offset points", xytext=(6, -4), fontsize=8)
    bdm = next((m for m in spec["models"] if m["model"] == spec.get("bd_model")),
               next((m for m in spec["models"] if m["mode"] == "bd"), None))
    if bdm:
        y1 = _tps(thr, bdm["model"], "bd", batches[0], spec["speed_decode"])
        y4 = _tps(thr, bdm["model"], "bd", batches[-1], spec["speed_decode"])
        if y1 and y4 and p1:
            # reproduced scaling drawn at the paper's batch-1 level, so the slopes compare like for like
            bx.plot([batches[0], batches[-1]], [p1.value, p1.value * y4 / y1], "o--", color="#4c72b0",
                    label=f"reproduced scaling x{y4 / y1:.2f} ({scale}, rescaled to paper bs1)")
    bx.set_xlabel("batch size")
    bx.set_ylabel("tokens/s (paper scale)")
    bx.set_title("Paper's quoted points (project page)")
    bx.legend(fontsize=7)
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
    """spec: model, label, task, metric, thresholds, decode (block/sub-block/cache), batch.

    Three stacked panels sharing the threshold axis: accuracy (with its 95% interval as error bars where the
    accuracy CSV has ``ci_low``/``ci_high``), throughput in tokens/s, and throughput relative to threshold 1.0
    beside the paper's own 39.1 -> 101.7 tokens/s (2.6x), which is drawn and labelled as the paper's."""
    fig, (ax, tx, sx) = plt.subplots(3, 1, figsize=(7.5, 9), sharex=True,
                                     gridspec_kw={"height_ratios": [1, 1, 1], "hspace": 0.35})
    ths = sorted(float(t) for t in spec["thresholds"])
    name = spec.get("label", spec["model"])
    accs, ivs, tps = [], [], []
    for th in ths:
        dec = dict(spec["decode"], threshold=th)
        a, _ = lookup(acc, "value", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
        accs.append(a)
        ivs.append(_interval(acc, dec, spec, a) if a is not None else None)
        tps.append(_tps(thr, spec["model"], "bd", spec.get("batch", 1), dec))
    # (1) accuracy
    xa = [t for t, a in zip(ths, accs) if a is not None]
    ya = [a for a in accs if a is not None]
    if xa:
        ax.plot(xa, ya, "o-", color="#4c72b0", label=f"reproduced ({scale})")
        have = [(t, a, iv) for t, a, iv in zip(ths, accs, ivs) if a is not None and iv is not None]
        if have:
            ax.errorbar([t for t, _, _ in have], [a for _, a, _ in have],
                        yerr=[[a - iv[0] for _, a, iv in have], [iv[1] - a for _, a, iv in have]],
                        fmt="none", ecolor="#4c72b0", capsize=4, lw=1, label="95% interval")
        else:
            ax.text(0.99, 0.04, "no intervals in the accuracy CSV (ci_low / ci_high)", transform=ax.transAxes,
                    ha="right", va="bottom", fontsize=7, color="#666666")
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "no accuracy rows for this sweep in the results CSV", transform=ax.transAxes,
                ha="center", va="center", fontsize=9, color="#666666")
        ax.set_yticks([])
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{spec['task']} {spec['metric']}: {name}", fontsize=10)
    # (2) throughput
    xt = [t for t, v in zip(ths, tps) if v is not None]
    yt = [v for v in tps if v is not None]
    if xt:
        tx.plot(xt, yt, "s-", color="#55a868", label=f"reproduced ({scale}, batch {spec.get('batch', 1)})")
        tx.legend(fontsize=7, loc="upper right")
    else:
        tx.text(0.5, 0.5, "no throughput rows for this sweep in the results CSV", transform=tx.transAxes,
                ha="center", va="center", fontsize=9, color="#666666")
        tx.set_yticks([])
    tx.set_ylabel("tokens/s")
    tx.set_title("Throughput (this machine; not comparable in absolute terms to the paper's A100)", fontsize=10)
    # (3) speed-up over threshold 1.0: like for like with the paper
    base = tps[ths.index(1.0)] if 1.0 in ths else None
    ratios = [v / base for v in yt] if base else []
    if base:
        sx.plot(xt, ratios, "o-", color="#4c72b0", label=f"reproduced ({scale})")
    elif xt:
        sx.text(0.5, 0.85, "threshold 1.0 not in the sweep: no reproduced ratio", transform=sx.transAxes,
                ha="center", fontsize=8, color="#666666")
    p10 = _paper("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@1.0")
    p09 = _paper("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9")
    if p10 and p09:
        sx.scatter([1.0, 0.9], [1.0, p09.value / p10.value],
                   label=f"paper: {p10.value:g} -> {p09.value:g} tokens/s ({p09.value / p10.value:.1f}x at 0.9)",
                   **PAPER_STYLE)
        sx.annotate(f"paper: {p09.value / p10.value:.1f}x", (0.9, p09.value / p10.value), textcoords="offset points",
                    xytext=(0, 10), ha="center", fontsize=8, color=PAPER_STYLE["color"])
    sx.axhline(1.0, color="k", lw=0.6, ls=":")
    top = max(ratios + ([p09.value / p10.value] if p10 and p09 else []) + [1.0])
    sx.set_ylim(min(ratios + [1.0]) - 0.15 * top, top * 1.3)  # headroom for the legend
    pad = 0.04 * (max(ths) - min(ths) or 1.0)
    sx.set_xlim(min(ths) - pad, max(ths) + pad)
    sx.set_ylabel("speed-up vs threshold 1.0")
    sx.set_title("Speed-up from parallel unmasking", fontsize=10)
    sx.set_xlabel("confidence threshold")
    sx.set_xticks(ths)
    sx.set_xticklabels([f"{t:g}" for t in ths])
    sx.legend(fontsize=7, loc="upper center", ncol=2)
    fig.suptitle(f"Figure 4: threshold sweep (reproduced, {scale})", fontsize=11)
    if p10:
        fig.text(0.01, 0.005, f"paper values: {p10.source_text}", fontsize=6, color="#666666")
    save(fig, png, pdf)


# ------------------------------------------------------------------------------------------------------- GPU batch
NO_GPU_TEXT = "No GPU results: Figure 5 is drawn only from rows with device_type == 'cuda' (none here)."


def fig_gpu_batch_throughput(thr, spec: dict, png, pdf) -> list[str]:
    """AR vs block diffusion by batch size, one panel per GPU type found in rows with device_type == 'cuda';
    returns the GPU names drawn (empty: the figure says there are no GPU results)."""
    gpu = thr[thr["device_type"].astype(str) == "cuda"] if not thr.empty and "device_type" in thr.columns else thr.iloc[0:0]
    names = list(dict.fromkeys(gpu["device_name"].astype(str))) if not gpu.empty else []
    paper = {v.row: v for v in pv.values_of("fig_gpu_batch")}
    if not names:  # one clear line, no axes (an empty frame would look like a broken plot)
        fig = plt.figure(figsize=(9, 0.7))
        fig.text(0.5, 0.5, NO_GPU_TEXT, ha="center", va="center", fontsize=11)
        save(fig, png, pdf)
        return []
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        g = gpu[gpu["device_name"].astype(str) == name]
        ar = select(g, None, mode="ar", model=spec["ar_model"])
        bd = select(g, spec.get("decode"), mode="bd", model=spec["bd_model"])
        ar_b = ar.groupby("batch_size")["tokens_per_s"].mean()
        bd_b = bd.groupby("batch_size")["tokens_per_s"].mean()
        ax.plot(ar_b.index, ar_b.values, "o-", label=f"AR: {spec.get('ar_label', spec['ar_model'])}")
        ax.plot(bd_b.index, bd_b.values, "s-", label=f"block diffusion: {spec.get('bd_label', spec['bd_model'])}")
        ax.set_xscale("log", base=2)
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
        ax2.set_ylabel("speed-up over AR")
        d = spec.get("decode") or {}
        setting = (f" (diffusion: threshold {d['threshold']:g}, sub-block cache "
                   f"{'on' if to_bool(d.get('use_sub_block_cache')) else 'off'})" if "threshold" in d else "")
        ax.set_title(name + setting, fontsize=9)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7)
    save(fig, png, pdf)
    return names


# ------------------------------------------------------------------------------------------------------ sub-block
def fig_subblock_accuracy(acc, spec: dict, scale: str, png, pdf):
    """spec: model, task, metric, sub_blocks, caches [False, True], decode (block size, threshold)."""
    fig, ax = plt.subplots(figsize=(6, 4.2))
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
    if not drawn:
        _empty(ax, "no sub-block sweep rows in the results CSV")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sub-block size")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)")
    ax.set_title(f"Accuracy vs sub-block size: {spec.get('label', spec['model'])} ({scale})", fontsize=10)
    ax.legend(fontsize=8)
    save(fig, png, pdf)


def fig_subblock_throughput(thr, spec: dict, scale: str, png, pdf):
    """spec: model, sub_blocks, caches, batches [1, 32], decode (block size, threshold)."""
    batches = spec["batches"]
    fig, axes = plt.subplots(1, len(batches), figsize=(5.5 * len(batches), 4.2), squeeze=False)
    for ax, b in zip(axes[0], batches):
        drawn = False
        for cache in spec["caches"]:
            xs, ys = [], []
            for s in spec["sub_blocks"]:
                dec = dict(spec["decode"], sub_block_size=s, use_sub_block_cache=cache)
                v = _tps(thr, spec["model"], "bd", b, dec)
                if v is not None:
                    xs.append(s)
                    ys.append(v)
            if xs:
                drawn = True
                ax.plot(xs, ys, "o-" if not to_bool(cache) else "s--",
                        label=f"sub-block cache {'on' if to_bool(cache) else 'off'}")
        if not drawn:
            _empty(ax, f"no throughput rows for batch {b}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sub-block size")
        ax.set_ylabel("tokens/s")
        ax.set_title(f"{spec.get('label', spec['model'])}, batch {b} ({scale})", fontsize=10)
        ax.legend(fontsize=8)
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
