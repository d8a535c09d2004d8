"""``fastdllm eval --model M --task T [--mode bd|ar] [decode options] [--limit N] --out-dir D``."""
from __future__ import annotations

import argparse
import json
import sys

from . import PROMPT_STYLES, TASKS, TaskUnavailable


def _bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {s!r}")


def _length(s: str):
    if s.strip().lower() == "task":
        return "task"
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'task', got {s!r}") from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastdllm eval", description="Score a model on one task (lm-eval / EvalPlus / "
                                "synthetic); writes results.json, samples.jsonl and accuracy.csv to --out-dir.")
    p.add_argument("--model", required=True, help="Hub id, local directory or .gguf file")
    p.add_argument("--task", required=True, help=f"one of {', '.join(TASKS)}")
    p.add_argument("--mode", default="bd", choices=["bd", "ar"])
    p.add_argument("--ar-baseline", default="hf", choices=["hf", "hf_static"])
    p.add_argument("--block-size", type=int, default=None, help="default: the checkpoint's bd_size, else 32")
    p.add_argument("--sub-block-size", type=int, default=8)
    p.add_argument("--threshold", type=float, default=0.9)
    p.add_argument("--use-sub-block-cache", type=_bool, default=False)
    p.add_argument("--max-new-tokens", type=_length, default=256,
                   help="generation length: an integer, or 'task' for each benchmark's own (lm-eval task "
                        "max_gen_toks, else 256; EvalPlus 768)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--data-path", default=None, help="local dataset file (or directory) instead of the default")
    p.add_argument("--prompt-style", default="paper", choices=PROMPT_STYLES)
    p.add_argument("--model-label", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="auto")
    p.add_argument("--min-time-limit", type=float, default=1.0, help="EvalPlus per-test minimum time limit (s)")
    p.add_argument("--memory-limit-mb", type=int, default=4096, help="EvalPlus memory limit per solution")
    p.add_argument("--parallel", type=int, default=1, help="EvalPlus worker processes")
    p.add_argument("--truncate-prompts", choices=["none", "left"], default="none",
                   help="a prompt that does not fit the model's context with --max-new-tokens: refused (none, the "
                        "default) or cut from the left (left; counted in the truncated_prompts column)")
    p.add_argument("--out-dir", required=True)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.task not in TASKS:
        print(f"fastdllm eval: unknown task {args.task!r}; choose from {', '.join(TASKS)}", file=sys.stderr)
        return 2
    from ..decoding import DecodeConfig
    from ..model import load_model
    from .runner import run_task

    try:
        decode = DecodeConfig(block_size=args.block_size or 32, sub_block_size=args.sub_block_size,
                              threshold=args.threshold, use_sub_block_cache=args.use_sub_block_cache,
                              max_new_tokens=256 if args.max_new_tokens == "task" else args.max_new_tokens,
                              seed=args.seed).validate()
    except ValueError as exc:
        print(f"fastdllm eval: {exc}", file=sys.stderr)
        return 2
    import contextlib

    from ..provenance import OutDirBusy, out_dir_lock

    with contextlib.ExitStack() as stack:
        try:
            from .runner import _check_args, check_data

            _check_args(args.task, args.mode, args.prompt_style, args.batch_size, args.limit)
            # held for the whole run: a second writer of --out-dir is refused before any model is loaded
            stack.enter_context(out_dir_lock(args.out_dir, f"fastdllm eval ({args.task})"))
            check_data(args.task, args.data_path, args.out_dir)
            model = load_model(args.model, device=args.device, dtype=args.dtype, block_size=args.block_size)
            if args.block_size is None:
                decode = decode.with_block_size(model.block_size).validate()
            rows = run_task(model, args.task, mode=args.mode, decode=decode, batch_size=args.batch_size,
                            limit=args.limit, out_dir=args.out_dir, data_path=args.data_path,
                            prompt_style=args.prompt_style, model_label=args.model_label, seed=args.seed,
                            ar_baseline=args.ar_baseline, truncate_prompts=args.truncate_prompts == "left",
                            max_new_tokens="task" if args.max_new_tokens == "task" else None,
                            code_opts={"min_time_limit": args.min_time_limit,
                                       "memory_limit_mb": args.memory_limit_mb, "parallel": args.parallel})
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
