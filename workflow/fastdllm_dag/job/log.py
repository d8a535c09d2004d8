"""Run a workflow job script with stdout/stderr (progress bars included) going to its Snakemake log file, with
the job's thread count and the CPU kernel path pinned before torch's first kernel.

Every script of ``workflow/scripts/`` imports this module first and runs in ``with logged(snakemake) as sm:``."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
import traceback


@contextlib.contextmanager
def logged(snakemake):
    log = snakemake.log[0] if snakemake.log else None
    threads = max(1, int(getattr(snakemake, "threads", 1) or 1))
    os.environ.setdefault("OMP_NUM_THREADS", str(threads))
    from fastdllm_core import cpu_numerics

    # before torch's first kernel: the same bits on every x86 CPU with AVX2 (and in torchrun's children)
    cpu_numerics.pin()
    with contextlib.suppress(ImportError):
        import torch

        torch.set_num_threads(threads)
    if not log:
        yield snakemake
        return
    os.makedirs(os.path.dirname(log) or ".", exist_ok=True)
    with open(log, "w", buffering=1) as fh:
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = fh
        logging.basicConfig(level=logging.INFO, stream=fh, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                            force=True)
        try:
            yield snakemake
        except BaseException as exc:
            traceback.print_exc(file=fh)
            print(f"error in {snakemake.rule}: {exc} (log: {log})", file=old_err)
            raise
        finally:
            sys.stdout, sys.stderr = old_out, old_err
