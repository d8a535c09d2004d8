"""``fastdllm train --config CFG.yaml [--output-dir DIR] [--max-steps N] [--stop-after N] [--set key=value]``: one training run
(:func:`fastdllm_core.training.loop.train` on a :class:`~fastdllm_core.training.config.TrainConfig`)."""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

import yaml

from ..training import loop
from ..training.config import TrainConfig, UnknownKey, paper_budget_warning, set_key
from ..training.data import check_train_files
from ..training.stopping import EXIT_INTERRUPTED, TrainingInterrupted


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fastdllm train", description=loop.__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True, help="YAML training config")
    p.add_argument("--output-dir", help="run directory (default: train.output_dir in the config)")
    p.add_argument("--max-steps", type=int, help="override optim.max_steps")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set optim.lr=1e-4 (repeatable)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--stop-after", type=int, help="end after N optimiser steps with a checkpoint and no final "
                                                  "model (a controlled kill: the next run resumes)")
    args = p.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text()) or {}
    for kv in args.set:
        if "=" not in kv:
            p.error(f"--set expects KEY=VALUE, got {kv!r}")
        set_key(cfg, *kv.split("=", 1))
    try:
        config = TrainConfig.from_dict(cfg)  # unknown keys and bad values fail here
        # and bad data (file, line, field) in one line, before anything is printed or built
        check_train_files(config.data.train_files)
    except (UnknownKey, ValueError, FileNotFoundError) as exc:
        print(f"fastdllm train: error: {exc}", file=sys.stderr)
        return 2
    warning = paper_budget_warning(cfg, args.config, max_steps_given=args.max_steps is not None)
    if warning:  # the first line of output: the paper-scale budget is never used silently
        print(warning, file=sys.stderr, flush=True)
    out = args.output_dir or (cfg.get("train") or {}).get("output_dir")
    if not out:
        p.error("give --output-dir or train.output_dir in the config")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        final = loop.train(config, out, max_steps=args.max_steps, progress=not args.no_progress,
                           data_checked=True, stop_after=args.stop_after)
    except TrainingInterrupted as exc:  # a signal or the job's deadline: resumable
        print(f"fastdllm train: {exc}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    print(final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
