"""Dev benchmark (not part of the DAG, not a test): does a model's measured speed depend on what the sweep job
measured before it?  The throughput sweep (workflow/scripts/bench.py) measured each model's rows in one stretch,
one model after the other, in one process (since then it measures in interleaved rounds, ``bench.rounds``); this
script measures checkpoints in a given order, one stretch each (``workflow/lib/bench_run.measure``: the job's
bench settings, one torch thread) and prints each row's time.

    python scripts/dev/bench_order.py --prompts-path results/tiny/data/synthetic/arith_test.jsonl \
        --model base=results/released/tiny_ar_base --model ntp=results/tiny/models/ntp/run/final \
        --model bd=results/tiny/models/bd_pad_cm/run/final --order bd base ntp base [--out order.csv]

A model whose name starts with ``bd`` is measured as block diffusion (threshold 0.9, sub-block 8, sub-block cache
on: the ``batch`` sweep's setting), every other as the AR baseline of config/config.yaml (``bench.ar_baseline``).
Two checkpoints of one architecture generating the same tokens should take the same time; the same checkpoint
measured twice shows the drift within one process.  Measured on 2026-11-28 (README, Speed bullet): the AR base and
NTP 0.85 s / 0.85 s at batch 1, the base 1.00 s then 0.84 s around NTP after a block-diffusion model (batch 4: 0.35 s, 0.39 s).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "workflow" / "scripts"), str(REPO / "workflow" / "lib")]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", required=True, help="NAME=PATH (a checkpoint directory)")
    ap.add_argument("--order", nargs="+", required=True, help="names, repeated as wanted")
    ap.add_argument("--prompts-path", required=True, help="the bench's prompts (synth_arith's test file)")
    ap.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4])
    ap.add_argument("--out", default=None, help="CSV of the rows (model, position, batch, seconds, tokens/s)")
    args = ap.parse_args(argv)
    paths = dict(m.split("=", 1) for m in args.model)
    unknown = [n for n in args.order if n not in paths]
    if unknown:
        raise SystemExit(f"--order names {unknown[0]!r}, not one of --model's {sorted(paths)}")
    for name, path in paths.items():
        if not (Path(path) / "config.json").is_file():
            raise SystemExit(f"--model {name}={path}: no config.json there (a checkpoint directory)")

    import bench_run
    from fastdllm_core import bench
    from fastdllm_core.cli.plan_training import load_config
    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_core.synthetic import user_prompts

    bcfg = load_config([])["bench"]  # config/config.yaml as the DAG reads it (schema-checked)
    torch.set_num_threads(int(bcfg.get("threads", 1)))
    texts = user_prompts("synth_arith", args.prompts_path)[: int(bcfg["num_prompts"])]
    decode = dict(block_size=32, sub_block_size=8, threshold=0.9, use_sub_block_cache=True)
    rows = []
    for pos, name in enumerate(args.order):
        bm = bench.load_bench_model(paths[name], device="cpu", dtype="auto", label=name, seed=0)
        prompts = bench.encode_prompts(bm.tokenizer, texts)
        for b in args.batch_sizes:
            run = dict(model=name, mode="bd" if name.startswith("bd") else "ar", batch_size=b, decode=decode)
            r = bench_run.measure(bm, prompts, run, bcfg, 0, "synth_arith", {}, dict(model=name))[0]
            rows.append(dict(model=name, position=pos, batch_size=b, tokens=r["total_tokens"],
                             seconds_min=round(r["wall_time_s_min"], 4), tokens_per_s=round(r["tokens_per_s"], 1)))
            print(rows[-1], flush=True)
    if args.out:
        write_csv_atomic(args.out, rows)


if __name__ == "__main__":
    main()
