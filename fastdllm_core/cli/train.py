"""``fastdllm train --config CFG.yaml [--output-dir DIR] [--max-steps N] [--stop-after N] [--set key=value]
[--allow-data-change] [--allow-config-change]``: one training run (:func:`fastdllm_core.training.loop.train` on a
:class:`~fastdllm_core.training.config.TrainConfig`).  Exit status: 0 done; 2 a named error (config, data, an
output directory in use, a resume on changed data or under a changed config, a write the disk refused); 3 the
run diverged (a non-finite loss or gradient norm: no final model, the last finite checkpoint kept); 75 stopped by
a signal (SIGTERM, SIGUSR1, Ctrl-C) or the job's deadline, with a checkpoint (resumable); 130 a second Ctrl-C,
which ends the run at once (resumable from the checkpoint before)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

import yaml

from ..provenance import OutDirBusy
from ..training import loop
from ..training.config import TrainConfig, UnknownKey, paper_budget_warning, set_key
from ..training.data import check_train_files
from ..training.failures import EXIT_DIVERGED, TrainingDiverged, WriteFailed
from ..training.row_reader import DataError
from ..training.run_identity import ConfigChanged
from ..training.run_lock import run_lock
from ..training.stopping import Stopper, StopRequested, TrainingInterrupted, interrupted_before_training
from ..training.store_key import DataChanged, MainProcessFailed

NAMED = (UnknownKey, DataError, DataChanged, ConfigChanged, MainProcessFailed, OutDirBusy, WriteFailed,
         FileNotFoundError)  # exit 2, one line


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
    p.add_argument("--allow-data-change", action="store_true",
                   help="resume a run whose checkpoint was trained on other data, another tokenizer or other packing "
                        "settings (data.seq_len, ...): refused otherwise")
    p.add_argument("--allow-config-change", action="store_true",
                   help="continue a run whose checkpoint was trained under another config (optim.lr, the recipe, "
                        "...) or from other start weights (model.init): refused otherwise")
    args = p.parse_args(argv)
    cfg = yaml.safe_load(Path(args.config).read_text()) or {}
    for kv in args.set:
        if "=" not in kv:
            p.error(f"--set expects KEY=VALUE, got {kv!r}")
        set_key(cfg, *kv.split("=", 1))
    is_main = os.environ.get("RANK", "0") == "0"
    stop = Stopper(is_main, immediate=True, deadline=False)  # a stop signal from here on: a message and exit 75
    try:
        return _run(p, args, cfg, is_main, stop)
    except StopRequested as exc:
        out = args.output_dir or (cfg.get("train") or {}).get("output_dir") or "."
        exc = interrupted_before_training(out, stop.setup_reason(exc))
        print(f"fastdllm train: {exc}", file=sys.stderr, flush=True)
        return exc.exit_status
    finally:
        stop.close()


def _run(p: argparse.ArgumentParser, args, cfg: dict, is_main: bool, stop: Stopper) -> int:
    try:
        config = TrainConfig.from_dict(cfg)  # unknown keys and bad values fail here
    except (UnknownKey, ValueError, FileNotFoundError) as exc:
        print(f"fastdllm train: error: {exc}", file=sys.stderr)
        return 2
    out = args.output_dir or (cfg.get("train") or {}).get("output_dir")
    if not out:
        p.error("give --output-dir or train.output_dir in the config")
    try:
        stop.phase = "while waiting for the run's lock"
        with run_lock(out, is_main):  # a second run on this directory is refused
            stop.phase = "during the data check"
            # bad data (file, line, field) in one line, before anything is printed or built
            check_train_files(config.data.train_files)
            warning = paper_budget_warning(cfg, args.config, max_steps_given=args.max_steps is not None)
            if warning:  # the first line of output: the paper-scale budget is never used silently
                print(warning, file=sys.stderr, flush=True)
            logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
            final = loop.train(config, out, max_steps=args.max_steps, progress=not args.no_progress,
                               data_checked=True, stop_after=args.stop_after,
                               allow_data_change=args.allow_data_change,
                               allow_config_change=args.allow_config_change)
    except NAMED as exc:
        print(f"fastdllm train: error: {exc}", file=sys.stderr)
        return 2
    except TrainingDiverged as exc:
        print(f"fastdllm train: error: {exc}", file=sys.stderr)
        return EXIT_DIVERGED
    except TrainingInterrupted as exc:  # a signal or the job's deadline: resumable
        print(f"fastdllm train: {exc}", file=sys.stderr, flush=True)
        return exc.exit_status
    print(final)
    return 0


if __name__ == "__main__":
    sys.exit(main())
