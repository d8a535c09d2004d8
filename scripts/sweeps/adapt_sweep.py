"""Adaptation sweep (exploration, not part of the DAG): train one recipe variant from a given AR base, evaluate
checkpoints on a subset of the synthetic suite, append one CSV row per (variant, steps, task, metric).

    python scripts/sweeps/adapt_sweep.py --base results/tiny/models/ar_base/run/final \\
        --data results/tiny/data/synthetic --name cm_lr5e-4 --recipe bd_pad_cm \\
        --set optim.lr=0.0005 --eval-at 200 400 --tasks synth_arith synth_code --limit 128 \\
        --out results/sweeps/adapt.csv

The training config is the embedded default's adaptation config (``config/config.yaml`` ``training:``) with the
``--set`` overrides; the schedule must be one that a longer run continues unchanged (``constant``) when several
``--eval-at`` points are asked for, since each point resumes the previous run with a larger ``max_steps``
(``--cosine-per-point`` trains every point from scratch instead).  Accuracy rows carry ``n`` and a Wilson 95%
interval.  One torch thread unless ``--threads``.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import sys
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

TASK_FILES = {"synth_arith": "arith_test.jsonl", "synth_math": "math_test.jsonl", "synth_code": "code_test.jsonl.gz",
              "synth_mbpp": "mbpp_test.jsonl.gz", "synth_mc": "mc_test.jsonl", "synth_ifeval": "ifeval_test.jsonl"}
MAIN_METRIC = {"synth_arith": "exact_match_strict", "synth_math": "exact_match", "synth_code": "pass@1_base",
               "synth_mbpp": "pass@1_base", "synth_mc": "acc", "synth_ifeval": "prompt_level_strict_acc"}


def train_config(args) -> dict:
    from fastdllm_core.training.config import set_key

    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())["training"]
    cfg = json.loads(json.dumps(base))
    cfg["recipe"] = args.recipe
    cfg.setdefault("model", {})["init"] = str(args.base)
    cfg["data"]["train_files"] = [str(Path(args.data) / f"{args.dataset}.jsonl")]
    for kv in args.set:
        set_key(cfg, *kv.split("=", 1))
    return cfg


def evaluate(model_dir: Path, args, steps: int, wall_train: float) -> list[dict]:
    from fastdllm_core.decoding import DecodeConfig
    from fastdllm_core.evaluation import run_task
    from fastdllm_core.loading import load_model

    lm = load_model(str(model_dir), device="cpu", dtype="float32")
    rows = []
    for task in args.tasks:
        dec = DecodeConfig(block_size=args.block_size, sub_block_size=args.sub_block_size,
                           threshold=args.threshold, max_new_tokens=64)
        out = Path(args.work) / f"eval_{steps}_{task}"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        res = run_task(lm, task, mode=args.mode, decode=dec, batch_size=64, limit=args.limit, out_dir=out,
                       data_path=str(Path(args.data) / TASK_FILES[task]))
        for r in res:
            if r["metric"] != MAIN_METRIC[task]:
                continue
            rows.append({"name": args.name, "recipe": args.recipe, "steps": steps, "task": task,
                         "metric": r["metric"], "value": r["value"], "n": r["n"], "ci_low": r.get("ci_low"),
                         "ci_high": r.get("ci_high"), "tokens_per_forward": r.get("tokens_per_forward"),
                         "mode": args.mode, "threshold": args.threshold, "block_size": args.block_size,
                         "train_wall_s": round(wall_train, 1), "eval_wall_s": round(time.perf_counter() - t0, 1),
                         "overrides": " ".join(args.set)})
            print(f"{args.name} step {steps} {task}: {r['value']:.1f} (n={r['n']})", flush=True)
    return rows


def append_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the AR base checkpoint (directory)")
    ap.add_argument("--data", required=True, help="the synthetic suite directory")
    ap.add_argument("--dataset", default="adapt")
    ap.add_argument("--name", required=True)
    ap.add_argument("--recipe", default="bd_pad_cm")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE override of the training config")
    ap.add_argument("--eval-at", type=int, nargs="+", required=True)
    ap.add_argument("--cosine-per-point", action="store_true")
    ap.add_argument("--tasks", nargs="+", default=["synth_arith", "synth_code", "synth_mbpp"])
    ap.add_argument("--limit", type=int, default=128)
    ap.add_argument("--mode", choices=["bd", "ar"], default=None)
    ap.add_argument("--threshold", type=float, default=1.0)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--sub-block-size", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default="results/sweeps/adapt.csv")
    args = ap.parse_args(argv)
    args.mode = args.mode or ("ar" if args.recipe in ("ntp", "sft", "ar_pretrain") else "bd")
    args.work = args.work or f"/tmp/adapt_sweep/{args.name}"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import torch

    torch.set_num_threads(args.threads)
    from fastdllm_core.training.loop import train

    cfg = train_config(args)
    run = Path(args.work) / "run"
    wall = 0.0
    for steps in sorted(args.eval_at):
        if steps == 0:
            append_rows(Path(args.out), evaluate(Path(args.base), args, 0, 0.0))
            continue
        if args.cosine_per_point:
            shutil.rmtree(run, ignore_errors=True)
            wall = 0.0
        t0 = time.perf_counter()
        final = train(cfg, run, max_steps=steps, progress=False)
        wall += time.perf_counter() - t0
        append_rows(Path(args.out), evaluate(Path(final), args, steps, wall))
    return 0


if __name__ == "__main__":
    sys.exit(main())
