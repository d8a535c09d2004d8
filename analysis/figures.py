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
    """spec: models [{model, label, mode}], ar_reference (model key), task, metric, speed_decode, batch."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    dec, batch = spec["speed_decode"], spec.get("batch", 1)
    pts = []
    for m in spec["models"]:
        x = _tps(thr, m["model"], m["mode"], batch, dec)
        y, _ = lookup(acc, "value", dec if m["mode"] == "bd" else None, model=m["model"], task=spec["task"],
                      metric=spec["metric"])
        if x is not None and y is not None:
            pts.append((m, x, y))
            ax.scatter([x], [y], s=70)
            ax.annotate(m["label"], (x, y), textcoords="offset points", xytext=(5, 5), fontsize=8)
    if not pts:
        _empty(ax, "no throughput/accuracy pair in the results CSVs")
    ax.set_xlabel(f"throughput (tokens/s, batch {batch})")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)")
    ax.set_title(f"Throughput vs accuracy (reproduced, {scale})")
    ref = _tps(thr, spec["ar_reference"], "ar", batch)
    bd = next(((x, m) for m, x, _ in pts if m["mode"] == "bd"), None)
    bars, labels, colors = [], [], []
    if ref and bd:
        bars.append(bd[0] / ref)
        labels.append(f"reproduced\n({scale})")
        colors.append("#4c72b0")
    p = _paper("fig1a", "Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", "speedup")
    if p:
        bars.append(p.value)
        labels.append("paper\n(7B, A100)")
        colors.append(PAPER_STYLE["color"])
    bx.bar(labels, bars, color=colors)
    for i, b in enumerate(bars):
        bx.text(i, b, f"{b:.2f}x", ha="center", va="bottom")
    bx.axhline(1.0, color="k", lw=0.8, ls="--")
    bx.set_ylabel("speed-up over AR (batch 1)")
    bx.set_title("Block diffusion vs AR")
    if p:
        fig.text(0.01, -0.02, f"paper: {p.value}x ({p.source_text})", fontsize=7)
    save(fig, png, pdf)


def fig1b_throughput_batch(thr, spec: dict, scale: str, png, pdf):
    """spec: models [{model, label, mode}], batches [1, 4], speed_decode."""
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
    bdm = next((m for m in spec["models"] if m["mode"] == "bd"), None)
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
def fig_threshold_gsm8k(acc, thr, spec: dict, scale: str, png, pdf):
    """spec: model, task, metric, thresholds, decode (block/sub-block/cache), batch."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    ths = sorted(spec["thresholds"])
    accs, tps = [], []
    for th in ths:
        dec = dict(spec["decode"], threshold=th)
        a, _ = lookup(acc, "value", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
        accs.append(a)
        tps.append(_tps(thr, spec["model"], "bd", spec.get("batch", 1), dec))
    ax.plot([t for t, a in zip(ths, accs) if a is not None], [a for a in accs if a is not None], "o-",
            color="#4c72b0", label="accuracy")
    ax.set_xlabel("confidence threshold")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)", color="#4c72b0")
    ax2 = ax.twinx()
    ax2.plot([t for t, v in zip(ths, tps) if v is not None], [v for v in tps if v is not None], "s--",
             color="#55a868", label="throughput")
    ax2.set_ylabel("tokens/s", color="#55a868")
    ax.set_title(f"Threshold sweep (reproduced, {scale})")
    if all(a is None for a in accs) and all(v is None for v in tps):
        _empty(ax, "no threshold-sweep rows in the results CSVs")
    # like-for-like: speed-up relative to threshold 1.0
    p10 = _paper("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@1.0")
    p09 = _paper("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9")
    base = tps[ths.index(1.0)] if 1.0 in ths else None
    if base:
        bx.plot([t for t, v in zip(ths, tps) if v is not None], [v / base for v in tps if v is not None], "o-",
                color="#4c72b0", label=f"reproduced ({scale})")
    if p10 and p09:
        bx.scatter([1.0, 0.9], [1.0, p09.value / p10.value],
                   label=f"paper: {p10.value} -> {p09.value} tokens/s (Figure 4)", **PAPER_STYLE)
    bx.set_xlabel("confidence threshold")
    bx.set_ylabel("throughput / throughput at threshold 1.0")
    bx.set_title("Speed-up from parallel unmasking")
    bx.legend(fontsize=7)
    save(fig, png, pdf)


# ------------------------------------------------------------------------------------------------------- GPU batch
def fig_gpu_batch_throughput(thr, spec: dict, png, pdf) -> list[str]:
    """AR vs block diffusion by batch size, one panel per GPU type found in rows with device_type == 'cuda';
    returns the GPU names drawn (empty: the figure says there are no GPU results)."""
    gpu = thr[thr["device_type"].astype(str) == "cuda"] if not thr.empty and "device_type" in thr.columns else thr.iloc[0:0]
    names = list(dict.fromkeys(gpu["device_name"].astype(str))) if not gpu.empty else []
    fig, axes = plt.subplots(1, max(1, len(names)), figsize=(5.5 * max(1, len(names)), 4.2), squeeze=False)
    paper = {v.row: v for v in pv.values_of("fig_gpu_batch")}
    if not names:
        lines = ["No GPU results found (no rows with device_type == 'cuda').",
                 "Run the DAG with --configfile config/paper.yaml on a GPU machine;",
                 "CPU rows are never drawn as GPU numbers."]
        lines += [f"paper: up to {v.value}x on {k}" + (" at batch 64" if v.column.endswith("@bs64") else "")
                  for k, v in paper.items()]
        _empty(axes[0][0], "\n".join(lines))
        axes[0][0].set_title("AR vs block diffusion by batch size (GPU)")
        save(fig, png, pdf)
        return []
    for ax, name in zip(axes[0], names):
        g = gpu[gpu["device_name"].astype(str) == name]
        ar = select(g, None, mode="ar", model=spec["ar_model"])
        bd = select(g, spec.get("decode"), mode="bd", model=spec["bd_model"])
        ar_b = ar.groupby("batch_size")["tokens_per_s"].mean()
        bd_b = bd.groupby("batch_size")["tokens_per_s"].mean()
        ax.plot(ar_b.index, ar_b.values, "o-", label="AR")
        ax.plot(bd_b.index, bd_b.values, "s-", label="block diffusion")
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
        ax.set_title(name)
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
        xs, ys = [], []
        for s in spec["sub_blocks"]:
            dec = dict(spec["decode"], sub_block_size=s, use_sub_block_cache=cache)
            a, _ = lookup(acc, "value", dec, model=spec["model"], task=spec["task"], metric=spec["metric"])
            if a is not None:
                xs.append(s)
                ys.append(a)
        if xs:
            drawn = True
            ax.plot(xs, ys, "o-" if not to_bool(cache) else "s--", label=f"sub-block cache {'on' if to_bool(cache) else 'off'}")
    if not drawn:
        _empty(ax, "no sub-block sweep rows in the results CSV")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sub-block size")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)")
    ax.set_title(f"Accuracy vs sub-block size ({scale})")
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
        ax.set_title(f"batch {b} ({scale})")
        ax.legend(fontsize=8)
    save(fig, png, pdf)


def fig_attention_masks(png, pdf, seq_len: int = 8, block_size: int = 2):
    from fastdllm_core.masks import draw_masks

    fig = draw_masks(seq_len, block_size)
    save(fig, png, pdf)
