"""Benchmark (not a test): the CPU thread policy against OpenMP threads, on the embedded default's AR-pretraining
config, optionally beside competing 2-thread torch processes.

    python scripts/dev/thread_policy.py --data results/tiny/data/synthetic/pretrain.jsonl --steps 60 [--busy 1]

Trains ``--steps`` steps three ways -- 2 processes of one thread (the policy, ``train_processes``), one process of
2 OpenMP threads, one process of one thread -- and prints each one's median steps/s over its logged intervals
(the first interval, which holds start-up, left out).  ``--busy N`` keeps N competing 2-thread matmul processes
running meanwhile (stopped afterwards).
"""
from __future__ import annotations

import argparse
import csv
import multiprocessing as mp
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _compete() -> None:
    import torch

    torch.set_num_threads(2)
    a = torch.randn(512, 512)
    while True:
        a = torch.tanh(a @ a)


def config(data: str, steps: int) -> dict:
    """The DAG's training config of ``ar_pretrained`` (the same merge the workflow makes), on ``data``."""
    sys.path.insert(0, str(REPO / "workflow" / "lib"))
    import plan

    cfg = plan.training_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()), "ar_pretrained", [data])
    cfg["optim"]["max_steps"] = steps
    cfg["train"].update(save_every=10**6, log_every=10)
    return cfg


def steps_per_s(run: Path) -> float:
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    per_step = int(rows[0]["tokens_seen"]) / int(rows[0]["step"])
    return statistics.median(float(r["tokens_per_s"]) / per_step for r in rows[1:] or rows)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="pretraining JSONL (the synthetic suite's pretrain.jsonl)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--busy", type=int, default=0, help="competing 2-thread torch processes")
    args = ap.parse_args(argv)
    if args.steps < 20 or args.busy < 0:
        ap.error(f"--steps must be >= 20 (two logged intervals) and --busy >= 0, got {args.steps} and {args.busy}")
    if not Path(args.data).is_file():
        ap.error(f"--data: file not found: {args.data}")
    import torch

    from fastdllm_core.training.launch import train_processes
    from fastdllm_core.training.loop import train

    cfg = config(args.data, args.steps)
    competitors = [mp.get_context("spawn").Process(target=_compete, daemon=True) for _ in range(args.busy)]
    for p in competitors:
        p.start()
    work = Path(tempfile.mkdtemp(prefix="thread_policy_"))
    try:
        for name, procs, threads in (("2 processes x 1 thread", 2, 1), ("1 process x 2 threads", 1, 2),
                                     ("1 process x 1 thread", 1, 1)):
            run = work / f"p{procs}t{threads}"
            if procs > 1:
                train_processes(cfg, run, procs)
            else:
                torch.set_num_threads(threads)
                train(cfg, run, progress=False)
            print(f"{name}: {steps_per_s(run):.2f} steps/s ({args.busy} competitor(s))", flush=True)
    finally:
        for p in competitors:
            p.terminate()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
