"""Benchmark (not a test): seconds per optimiser step of the tiny Qwen2 of tests/test_train.py on the CPU, three
ways in one run -- 1 process, DDP over 2 gloo processes, FSDP2 over 2 gloo processes (one thread each).

    python scripts/dev/engine_speed.py [--steps 30] [--hidden 128] [--layers 4]

Prints each way's median seconds per step over its logged intervals (the first, which holds start-up, left out),
the ratios to the single process, and the share of the machine's CPUs other processes took meanwhile (metrics.csv
``host_other_cpu_frac`` per logged interval), so that a busy machine is visible beside the numbers.
"""
from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def config(data: str, steps: int, hidden: int, layers: int, engine: str) -> dict:
    return {"recipe": "bd_pad_cm",
            "model": {"init": "tiny", "tiny": {"hidden_size": hidden, "layers": layers, "heads": 4, "kv_heads": 2}},
            "data": {"train_files": [data], "seq_len": 128},
            "objective": {"block_size": 32},
            "optim": {"lr": 1e-3, "warmup_steps": 2, "max_steps": steps, "batch_size": 8, "micro_batch_size": 2},
            "train": {"save_every": 10**6, "log_every": 5, "seed": 0, "device": "cpu", "engine": engine}}


def seconds_per_step(run: Path) -> tuple[float, str]:
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    per_step = int(rows[0]["tokens_seen"]) / int(rows[0]["step"])
    s = statistics.median(per_step / float(r["tokens_per_s"]) for r in rows[1:] or rows)
    other = [r["host_other_cpu_frac"] for r in rows[1:] or rows]
    return s, f"other processes' CPU share {other}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    args = ap.parse_args(argv)
    if args.steps < 10:
        ap.error(f"--steps must be >= 10 (two logged intervals), got {args.steps}")
    sys.path.insert(0, str(REPO))
    import torch

    from fastdllm_core.training.config import TrainConfig
    from fastdllm_core.training.launch import train_processes

    torch.set_num_threads(1)  # the single process gets one thread, like each of the two
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "sft.jsonl"
        data.write_text("\n".join(json.dumps({"prompt": f"{a}+{b}=?", "response": f"{a + b}"})
                                  for a in range(16) for b in range(16)))
        out = {}
        for name, procs, engine in (("1 process", 1, "auto"), ("DDP x2", 2, "ddp"), ("FSDP x2", 2, "fsdp")):
            cfg = TrainConfig.from_dict(config(str(data), args.steps, args.hidden, args.layers, engine))
            train_processes(cfg, Path(tmp) / name.replace(" ", "_"), procs)
            out[name] = seconds_per_step(Path(tmp) / name.replace(" ", "_"))
    base = out["1 process"][0]
    for name, (s, load) in out.items():  # load: what else ran meanwhile
        print(f"{name:10s} {s:.4f} s/step  ratio to 1 process {s / base:.2f}  ({load})")


if __name__ == "__main__":
    main()
