"""CPU training on several data-parallel processes: :func:`train_processes` starts ``torchrun`` (gloo) with one
thread per process, each running ``fastdllm train`` (:func:`.loop.train`) on the same resolved config."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from .config import TrainConfig
from .loop import check_split, train

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "GOTO_NUM_THREADS")


def train_processes(cfg: TrainConfig | dict, output_dir: str | Path, processes: int) -> Path:
    """Train on the CPU with ``processes`` data-parallel processes of one thread each (``torchrun``, gloo), or
    in this process when ``processes`` is 1.

    On a 2-core machine two single-threaded processes train faster than one process with two OpenMP threads, and
    they do not collapse when another program takes a core (OpenMP threads spin at barriers while a sibling is
    preempted; a single-threaded process just runs at its share).  Batches, masks and results are those of a
    single process (see :mod:`.loop`)."""
    if not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    cfg = cfg if isinstance(cfg, TrainConfig) else TrainConfig.from_dict(cfg)  # named errors before any process
    if processes == 1:
        return train(cfg, output_dir)
    check_split(cfg.optim, processes)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=output_dir, delete=False) as fh:
        yaml.safe_dump(cfg.to_dict(), fh, sort_keys=False)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
           "-m", "fastdllm_core.cli", "train", "--config", fh.name, "--output-dir", str(output_dir)]
    # one thread per process: every threading library's variable (a workflow manager may have set MKL's to the
    # job's cores, and torch takes the largest)
    env = dict(os.environ, **{v: "1" for v in THREAD_VARIABLES})
    out = {k: f for k, f in (("stdout", sys.stdout), ("stderr", sys.stderr)) if _has_fileno(f)}  # e.g. a log
    try:
        subprocess.run(cmd, env=env, check=True, **out)
    finally:
        os.unlink(fh.name)
    return output_dir / "final"


def _has_fileno(f) -> bool:
    try:
        f.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True
