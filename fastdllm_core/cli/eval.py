"""``fastdllm eval --model M --task T [--mode bd|ar] [decode options] [--limit N] --out-dir D``."""
from __future__ import annotations

import argparse
import contextlib
import json
import sys

from ..evaluation import PROMPT_STYLES, TASKS, TaskUnavailable
from .args import add_decode_args, add_mode_args, add_model_args, add_truncate_arg, decode_config


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastdllm eval", description="Score a model on one task (lm-eval / EvalPlus / "
                                "synthetic); writes results.json, samples.jsonl and accuracy.csv to --out-dir.")
    add_model_args(p, "Hub id, local directory or .gguf file")
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    add_mode_args(p)
    add_decode_args(p, task_length=True, sampling=False)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--data-path", default=None, help="local dataset file (or directory) instead of the default")
    p.add_argument("--prompt-style", default="paper", choices=PROMPT_STYLES)
    p.add_argument("--model-label", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mc-num", type=int, default=128,
                   help="masked-diffusion modes: Monte Carlo samples of the multiple-choice likelihood")
    p.add_argument("--min-time-limit", type=float, default=1.0, help="EvalPlus per-test minimum time limit (s)")
    p.add_argument("--memory-limit-mb", type=int, default=4096, help="EvalPlus memory limit per solution")
    p.add_argument("--parallel", type=int, default=1, help="EvalPlus worker processes")
    add_truncate_arg(p)
    p.add_argument("--out-dir", required=True)
    return p


def _run(args, decode):
    """Check, lock --out-dir, load the model and score it (the rows)."""
    from ..evaluation.runner import _check_args, check_data, run_task
    from ..loading import load_model
    from ..provenance import out_dir_lock

    with contextlib.ExitStack() as stack:
        _check_args(args.task, args.mode, args.prompt_style, args.batch_size, args.limit)
        # held for the whole run: a second writer of --out-dir is refused before any model is loaded
        stack.enter_context(out_dir_lock(args.out_dir, f"fastdllm eval ({args.task})"))
        check_data(args.task, args.data_path, args.out_dir)
        model = load_model(args.model, device=args.device, dtype=args.dtype, block_size=args.block_size)
        if args.block_size is None and args.mode == "bd":
            decode = decode.with_block_size(model.block_size).validate()
        return run_task(model, args.task, mode=args.mode, decode=decode, batch_size=args.batch_size,
                        limit=args.limit, out_dir=args.out_dir, data_path=args.data_path,
                        prompt_style=args.prompt_style, model_label=args.model_label, seed=args.seed,
                        ar_baseline=args.ar_baseline, truncate_prompts=args.truncate_prompts == "left",
                        max_new_tokens="task" if args.max_new_tokens == "task" else None, mc_num=args.mc_num,
                        code_opts={"min_time_limit": args.min_time_limit,
                                   "memory_limit_mb": args.memory_limit_mb, "parallel": args.parallel})


def main(argv=None) -> int:
    from ..provenance import OutDirBusy

    args = build_parser().parse_args(argv)
    if args.task not in TASKS:
        print(f"fastdllm eval: unknown task {args.task!r}; choose from {', '.join(TASKS)}", file=sys.stderr)
        return 2
    try:
        decode = decode_config(args, max_new_tokens=256 if args.max_new_tokens == "task" else None,
                               seed=args.seed)
    except ValueError as exc:
        print(f"fastdllm eval: {exc}", file=sys.stderr)
        return 2
    try:
        rows = _run(args, decode)
    except TaskUnavailable as exc:
        print(f"fastdllm eval: task unavailable: {exc}", file=sys.stderr)
        return 3
    except (ValueError, FileNotFoundError, OutDirBusy) as exc:
        print(f"fastdllm eval: {exc}", file=sys.stderr)
        return 2
    for r in rows:
        print(json.dumps({k: r[k] for k in ("task", "metric", "value", "n", "status", "note", "tokens_per_s")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
