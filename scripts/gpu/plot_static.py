"""The figure of scripts/gpu/static_session.sh, drawn from its CSVs: tokens/s (left) and milliseconds per forward
against the bandwidth roofline's time per forward (right) of the decoders (AR eager = HF generate, AR static, AR
compiled, block diffusion eager, static, compiled: those the CSVs hold), per model shape and batch size.

    python scripts/gpu/plot_static.py --results results/gpu/static --out results/gpu/static/fig_static_decoding
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

PATHS = [("ar", "eager", "AR eager (HF generate)"), ("ar", "static", "AR static"), ("ar", "compiled", "AR compiled"),
         ("bd", "eager", "block diffusion eager"), ("bd", "static", "block diffusion static"),
         ("bd", "compiled", "block diffusion compiled")]
PREFIXES = ("static_", "compiled_")  # static_session.sh's bench CSVs: <prefix><shape>.csv


def load(results: Path) -> pd.DataFrame:
    """One row per bench row of every static_<shape>_roofline.csv and compiled_<shape>_roofline.csv (the roofline
    rows carry tokens/s, the time per forward and its bound), with the shape and the device."""
    frames = []
    for prefix in PREFIXES:
        for f in sorted(results.glob(f"{prefix}*_roofline.csv")):
            d = pd.read_csv(f)
            d["shape"] = f.name[len(prefix):-len("_roofline.csv")]
            frames.append(d)
    if not frames:
        raise SystemExit(f"no static_/compiled_*_roofline.csv under {results}: run the session's roofline step first")
    return pd.concat(frames, ignore_index=True)


def _short(shape: str) -> str:
    """'qwen2.5-1.5b' -> '1.5B' (the tick labels of eight groups must fit)."""
    return shape.rsplit("-", 1)[-1].upper() if shape.startswith("qwen") else shape


def plot(d: pd.DataFrame, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(d.groupby(["shape", "batch_size"], sort=True).groups)
    fig, axes = plt.subplots(1, 2, figsize=(14, 4.6))
    paths = [p for p in PATHS if ((d["mode"] == p[0]) & (d["decode_path"] == p[1])).any()]
    width = 0.8 / len(paths)
    for k, (mode, path, label) in enumerate(paths):
        tps, ms = [], []
        for shape, b in groups:
            r = d[(d["shape"] == shape) & (d["batch_size"] == b) & (d["mode"] == mode) & (d["decode_path"] == path)]
            tps.append(float(r["tokens_per_s"].iloc[0]) if len(r) else float("nan"))
            ms.append(1e3 * float(r["time_per_forward_s"].iloc[0]) if len(r) else float("nan"))
        xs = [i + (k - (len(paths) - 1) / 2) * width for i in range(len(groups))]
        axes[0].bar(xs, tps, width, label=label)
        axes[1].bar(xs, ms, width, label=label)
    for i, (shape, _b) in enumerate(groups):
        bound = 1e3 * float(d[(d["shape"] == shape)]["roofline_time_per_forward_s"].iloc[0])
        axes[1].hlines(bound, i - 0.45, i + 0.45, colors="k", linestyles="--",
                       label="bandwidth roofline (weights once)" if i == 0 else None)
    names = [f"{_short(s)}\nbatch {b}" for s, b in groups]
    for ax, title in zip(axes, ("tokens/s, log scale (higher is better)", "ms per forward (lower is better)")):
        ax.set_xticks(range(len(groups)), names)
        ax.set_title(title)
    axes[0].set_yscale("log")  # batch 1 and batch 64 differ by 30x: a linear axis hides the small batches
    axes[1].legend(fontsize=8)
    dev = ", ".join(sorted(set(d["device_name"].astype(str))))
    how = "static/compiled = CUDA graphs replayed" if (d["device_type"] == "cuda").all() else \
        "static/compiled = not captured (no GPU)"
    acc = d[d["mode"] == "bd"]["tokens_per_forward"]
    bits = 8 * int(d["bytes_per_param"].iloc[0])
    fig.suptitle(f"eager, static and compiled decoding on {dev}, {how} (random weights, {bits}-bit; block diffusion at "
                 f"forced acceptance, {acc.mean():.2f} tokens per forward)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    for ext in ("png", "pdf"):
        fig.savefig(out.with_suffix(f".{ext}"), dpi=130)
    print(f"wrote {out}.png/.pdf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results/gpu/static")
    ap.add_argument("--out", default="results/gpu/static/fig_static_decoding")
    a = ap.parse_args()
    plot(load(Path(a.results)), Path(a.out))


if __name__ == "__main__":
    main()
