"""The speed figures: Figure 1a (throughput vs accuracy, the speed-up over AR), 1b (throughput by batch size) and
5 (AR vs block diffusion by batch size on GPUs).  Every paper throughput value is drawn next to the like-for-like
ratio measured here (absolute tokens/s of a tiny CPU model and of a 7B model on an A100 do not compare)."""
from __future__ import annotations

from . import paper_values as pv
from .plotting import (
    PAPER_STYLE,
    _empty,
    _footer,
    _interval,
    _of_sweep,
    _repro_tick,
    _size_axis,
    _tps,
    _tps_range,
    _wrap,
    measured_on,
    plt,
    save,
)
from .results_io import lookup, select, to_bool


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


def _point_decode(m: dict, dec):
    """The decode filter of one drawn point: its own (a masked-diffusion sampler's), else the figure's speed
    setting (block diffusion); AR rows take none."""
    return None if m["mode"] == "ar" else m.get("decode") or dec


def _fig1a_points(ax, acc, thr, spec: dict, dec, batch: int, sweep: str) -> None:
    """Left panel: accuracy against tokens/s of every model at each of its speed points (the speed pair in
    colour, the others grey; a masked-diffusion model twice: its own sampler and Fast-dLLM v1)."""
    bd_ref, ar_ref = spec.get("bd_reference"), spec["ar_reference"]
    pts = []
    for m in spec["models"]:
        d = _point_decode(m, dec)
        x = _tps(thr, m["model"], m["mode"], batch, d, sweep)
        y, _ = lookup(acc, "value", d, model=m["model"], task=spec["task"], metric=spec["metric"], mode=m["mode"])
        if x is not None and y is not None:
            pts.append((m, x, y))
    if pts:
        # each point numbered beside its marker and named in the legend: labels never overlap, however close
        for i, (m, x, y) in enumerate(pts, 1):
            pair = m["model"] in (bd_ref, ar_ref) and m["mode"] in ("ar", "bd")
            ax.scatter([x], [y], s=70 if pair else 30, color=None if pair else "#999999", zorder=3 if pair else 2,
                       label=_wrap(f"{i}: {m['label']}", 48))
            iv = _interval(acc, _point_decode(m, dec), dict(spec, model=m["model"], mode=m["mode"]), y)
            if iv:  # 95% interval of the accuracy
                ax.errorbar([x], [y], yerr=[[y - iv[0]], [iv[1] - y]], fmt="none", ecolor="#555555", capsize=3)
            ax.annotate(str(i), (x, y), textcoords="offset points", xytext=(6, 4), fontsize=9,
                        color="k" if pair else "#666666")
        ax.margins(x=0.15, y=0.15)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    else:
        _empty(ax, "no throughput/accuracy pair in the results CSVs")


def _fig1a_speedups(bx, thr, spec: dict, dec, batch: int, sweep: str, scale: str):
    """Right panel: the reproduced speed-up of the pair beside the paper's; (reproduced, paper value)."""
    bd_ref, ar_ref = spec.get("bd_reference"), spec["ar_reference"]
    labels_of = {m["model"]: m["label"] for m in spec["models"]}
    bars = []  # (speed-up, its (low, high) or None, tick label, colour)
    sp = speedup_pair(thr, bd_ref, ar_ref, dec, batch, sweep) if bd_ref else None
    if sp:
        pair = f"{labels_of.get(bd_ref, bd_ref)} vs {labels_of.get(ar_ref, ar_ref)}"
        bars.append((*sp, _repro_tick(pair, scale) + "\n" + _wrap(pair, 28), "#4c72b0"))
    p = pv.paper_value("fig1a", "Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", "speedup")
    if p:
        bars.append((p.value, None, "paper (A100)\n" + _wrap("Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", 28),
                     PAPER_STYLE["color"]))
    values = [b[0] for b in bars]
    bx.bar(range(len(bars)), values, color=[b[3] for b in bars], width=0.6)
    for i, (b, e, _, _) in enumerate(bars):
        if e:
            bx.errorbar([i], [b], yerr=[[b - e[0]], [e[1] - b]], fmt="none", ecolor="k", capsize=4, lw=1)
        bx.text(i, (e[1] if e else b), f"{b:.2f}x", ha="center", va="bottom", fontsize=9)
    bx.set_xticks(range(len(bars)))
    bx.set_xticklabels([b[2] for b in bars], fontsize=8)
    bx.set_xlim(-0.6, len(bars) - 0.4)
    bx.set_ylim(0, max(values + [1.0]) * 1.2)
    bx.axhline(1.0, color="k", lw=0.8, ls="--")
    bx.set_ylabel(f"speed-up over AR (batch {batch})")
    bx.set_title("Block diffusion vs AR\n" + _wrap(measured_on(thr, sweep, [bd_ref, ar_ref]), 50), fontsize=10)
    return sp, p


def fig1a_throughput_vs_accuracy(acc, thr, spec: dict, scale: str, png, pdf):
    """spec: models [{model, label, mode}], bd_reference / ar_reference (model keys of the speed pair: the
    speed-up is bd_reference over ar_reference, like the paper's Fast-dLLM v2 7B over Qwen2.5-7B-Instruct),
    task, metric, speed_decode, batch, sweep (the throughput sweep the numbers come from, default "batch"),
    notes (printed under the figure, e.g. where a point's evaluation departs from its authors').
    Models other than the pair are drawn as grey context points."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(12, 4.8 + 0.25 * len(spec["models"])),
                                 gridspec_kw={"width_ratios": [3, 2]}, layout="constrained")
    dec, batch, sweep = spec["speed_decode"], spec.get("batch", 1), spec.get("sweep", "batch")
    _fig1a_points(ax, acc, thr, spec, dec, batch, sweep)
    ax.set_xlabel(f"throughput (tokens/s, batch {batch})")
    ax.set_ylabel(f"{spec['task']} {spec['metric']} (%)")
    dev = measured_on(thr, sweep, [m["model"] for m in spec["models"]])
    ax.set_title(f"Throughput vs accuracy (reproduced, {scale} scale)\n" + _wrap(f"speed {dev}", 80), fontsize=10)
    sp, p = _fig1a_speedups(bx, thr, spec, dec, batch, sweep, scale)
    notes = []
    if sp and sp[1]:
        notes.append(f"Reproduced bar: both models from the '{sweep}' throughput sweep; error bar: range over "
                     "every timed repeat of every round. Error bars on the left: 95% intervals of the accuracy.")
    if p:
        notes.append(f"Paper value {p.value}x: {p.source_text}.")
    _footer(fig, notes + [_wrap(n, 170) for n in spec.get("notes", [])])
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
        y0, y1 = (_tps(thr, m["model"], m["mode"], b, _point_decode(m, spec["speed_decode"]), sweep) for b in (b0, b1))
        if y0 and y1:
            out.append({"label": m["label"], "ratio": y1 / y0, "source": "reproduced", "tokens_per_s": (y0, y1)})
    p1 = pv.paper_value("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1")
    p4 = pv.paper_value("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4")
    if p1 and p4 and (b0, b1) == (1, 4):
        out.append({"label": "Fast-dLLM v2 (7B), A100", "ratio": p4.value / p1.value, "source": p1.source_text,
                    "tokens_per_s": (p1.value, p4.value)})
    return out


def fig1b_throughput_batch(thr, spec: dict, scale: str, png, pdf):
    """spec: models [{model, label, mode}] (the speed pair), batches [1, 4], speed_decode, sweep (default
    "batch").  Left: reproduced tokens/s per batch size (range over every timed repeat of every round as error
    bars); right: the gain from the first to the last batch size, reproduced beside the paper's Fast-dLLM v2 (7B)
    (a ratio: absolute tokens/s of a small CPU model and a 7B model on an A100 do not compare)."""
    batches, sweep = spec.get("batches", [1, 4]), spec.get("sweep", "batch")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(max(12, 2.4 * (len(spec["models"]) + 1)), 5.6), layout="constrained")
    width = 0.8 / max(1, len(spec["models"]))
    top = 0.0
    for i, m in enumerate(spec["models"]):
        d = _point_decode(m, spec["speed_decode"])
        ys = [_tps(thr, m["model"], m["mode"], b, d, sweep) for b in batches]
        rs = [_tps_range(thr, m["model"], m["mode"], b, d, sweep) for b in batches]
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
    dev = measured_on(thr, sweep, [m["model"] for m in spec["models"]])
    ax.set_title(f"Throughput by batch size (reproduced, {scale} scale)\n" + _wrap(dev, 80), fontsize=10)
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
                        + "\n" + _wrap(it["label"], 20) for it in items], fontsize=7)
    bx.set_xlim(-0.6, max(len(items), 1) - 0.4)
    bx.set_ylim(0, max([it["ratio"] for it in items] + [1.0]) * 1.3)
    bx.axhline(1.0, color="k", lw=0.8, ls="--")
    bx.set_ylabel(f"tokens/s at batch {batches[-1]} / batch {batches[0]}")
    bx.set_title(f"Gain from batch {batches[0]} to {batches[-1]}", fontsize=11)
    if not items:
        _empty(bx, "no throughput pair in the results CSV")
    paper = next((it for it in items if it["source"] != "reproduced"), None)
    notes = [f"Reproduced: the '{sweep}' throughput sweep; error bars: range over every timed repeat of every round."]
    if paper:
        notes.append(f"Paper's Fast-dLLM v2 (7B) tokens/s: {paper['source']} ("
                     f"{pv.NON_PAPER_EXCEPTIONS[('fig1b', 'Fast-dLLM v2 (7B)', 'tokens_per_s@bs1')]}).")
    _footer(fig, notes)
    save(fig, png, pdf)


NO_GPU_TEXT = "No GPU results: Figure 5 is drawn only from rows with device_type == 'cuda' (none here)."


def fig_gpu_batch_throughput(thr, spec: dict, png, pdf) -> list[str]:
    """AR vs block diffusion by batch size, one panel per GPU type found in rows with device_type == 'cuda';
    returns the GPU names drawn (empty: the figure says there are no GPU results)."""
    thr = _of_sweep(thr, spec.get("sweep", "gpu_batch"))  # not the batch-1/4 rows of Figure 1's sweep
    gpu = (thr[thr["device_type"].astype(str) == "cuda"] if not thr.empty and "device_type" in thr.columns
           else thr.iloc[0:0])
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
            ax2.scatter([64], [paper[key].value], label=f"paper: up to {paper[key].value}x ({key}, bs 64)",
                        **PAPER_STYLE)
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
