"""Draw fig_gpu_batch_throughput from the GPU bench CSVs (results/gpu/bench_*.csv).

Left panel per model shape: tokens/s vs batch size for the AR baselines (HF dynamic cache, static cache +
torch.compile) and the diffusion decoder under forced acceptance (k tokens per step, sub-block 8, cache off/on).
Right panel: tokens/s at batch 1 vs measured tokens per forward (forced acceptance, weight-independent), with the
trained model's real-acceptance points on top when bench_trained_small.csv exists.  Every number comes from a CSV;
the forced-acceptance curves are labelled as such.

    python scripts/gpu/plot_batch_throughput.py --results results/gpu --out results/gpu/fig_gpu_batch_throughput
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def load(results: Path) -> pd.DataFrame:
    files = sorted(results.glob("bench_*.csv"))
    files = [f for f in files if not f.name.endswith("_roofline.csv")]
    if not files:
        raise FileNotFoundError(f"no bench_*.csv under {results}")
    df = pd.concat([pd.read_csv(f).assign(source_file=f.name) for f in files], ignore_index=True)
    for c in ("tokens_per_s", "tokens_per_forward", "batch_size", "forced_k", "sub_block_size", "threshold"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["use_sub_block_cache"] = df["use_sub_block_cache"].astype(str).str.lower().eq("true")
    return df


def draw(df: pd.DataFrame, out: Path) -> list[Path]:
    random = df[df["weights"] == "random"]
    shapes = sorted(random["model_label"].unique())
    trained = df[df["weights"] == "checkpoint"]
    n = max(len(shapes), 1)
    fig, axes = plt.subplots(n, 2, figsize=(12, 4.2 * n), squeeze=False)
    for i, shape in enumerate(shapes or ["(none)"]):
        ax, ax2 = axes[i]
        d = random[random["model_label"] == shape]
        for bl, style in (("hf", "k-o"), ("hf_static", "k--s")):
            a = d[(d["mode"] == "ar") & (d["baseline"] == bl)].sort_values("batch_size")
            if len(a):
                ax.plot(a["batch_size"], a["tokens_per_s"], style, label=f"AR {bl}")
        b = d[(d["mode"] == "bd") & (d["acceptance"] == "forced_k") & (d["sub_block_size"] == 8)]
        for (k, cache), g in b.groupby(["forced_k", "use_sub_block_cache"]):
            g = g.sort_values("batch_size")
            ax.plot(g["batch_size"], g["tokens_per_s"], "-" if not cache else ":", marker=".",
                    label=f"BD forced k={int(k)}{' +sub-block cache' if cache else ''}")
        ax.set(xscale="log", yscale="log", xlabel="batch size", ylabel="generated tokens/s",
               title=f"{shape} (random weights, {d['device_name'].iloc[0] if len(d) else ''})")
        ax.set_xticks(sorted(d["batch_size"].dropna().unique()))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.get_xaxis().set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.legend(fontsize=7, ncol=2)
        b1 = b[b["batch_size"] == 1]
        for cache, g in b1.groupby("use_sub_block_cache"):
            g = g.sort_values("tokens_per_forward")
            ax2.plot(g["tokens_per_forward"], g["tokens_per_s"], "o-" if not cache else "s:",
                     label=f"BD forced acceptance{' +sub-block cache' if cache else ''}")
        for bl, style in (("hf", "k-"), ("hf_static", "k--")):
            a = d[(d["mode"] == "ar") & (d["baseline"] == bl) & (d["batch_size"] == 1)]
            if len(a):
                ax2.axhline(a["tokens_per_s"].iloc[0], ls=style[1:], color="k", lw=1, label=f"AR {bl} (batch 1)")
        ax2.set(xlabel="tokens per forward (measured)", ylabel="tokens/s at batch 1",
                title=f"{shape}: throughput vs tokens per forward")
        ax2.legend(fontsize=7)
    if len(trained):
        ax = axes[-1][1]
        t = trained[(trained["mode"] == "bd") & (trained["batch_size"] == 1)]
        if len(t):
            ax.scatter(t["tokens_per_forward"], t["tokens_per_s"], marker="*", s=60, color="C3",
                       label=f"{t['model_label'].iloc[0]}: real acceptance (batch 1)")
            ax.legend(fontsize=7)
    fig.tight_layout()
    paths = []
    for ext in ("png", "pdf"):
        p = out.with_suffix(f".{ext}")
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(p, dpi=130)
        paths.append(p)
    plt.close(fig)
    return paths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--results", default="results/gpu")
    ap.add_argument("--out", default="results/gpu/fig_gpu_batch_throughput")
    args = ap.parse_args(argv)
    try:
        df = load(Path(args.results))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for p in draw(df, Path(args.out)):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
