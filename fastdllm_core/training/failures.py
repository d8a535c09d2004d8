"""A run that cannot go on fails by name, with what is kept: a loss or gradient norm that is no longer finite
(:class:`TrainingDiverged`), and a file the disk refused (:class:`WriteFailed`).

Divergence.  The loss of a step (reduced over every process) and its gradient norm (global under DDP and FSDP)
are checked before the optimiser steps, so every process decides alike at the same step and the weights never
take a non-finite update.  ``train.nonfinite_skips`` (default 0) is how many such steps a run may skip (no update,
the learning-rate schedule goes on), as large-scale trainers offer; the next one stops the run.  The weights are
checked once more before each checkpoint, so a checkpoint never holds a non-finite state.  A stopped run writes
no ``final/`` and keeps its last checkpoint, which is finite; ``diverged.json`` records the step, so that a
retry under the same config (a DAG's retries) fails at once instead of computing the same steps again.

Writes.  A checkpoint, the final model, a metrics row or the token store that cannot be written (a full disk, a
quota, any ``OSError``, or torch's and safetensors' own words for one) is one line naming the path and the cause;
the temporary files are removed and the previous checkpoint stays as it was.  Under several processes every
process learns of another's failure (:func:`any_process`) instead of waiting for it at the next collective.
"""
from __future__ import annotations

import contextlib
import errno
import math
import re
import shutil
from pathlib import Path

import torch

EXIT_DIVERGED = 3  # fastdllm train's exit status for a diverged run (2: a named error, 75: stopped, resumable)
MARKER = "diverged.json"
# how torch's zip writer (PytorchStreamWriter, inline_container.cc) and safetensors say that a write failed
_WRITE_WORDS = re.compile(r"write failed|PytorchStreamWriter|inline_container|No space left|os error \d+|I/O error|"
                          r"IoError|File too large|Disk quota", re.IGNORECASE)


class TrainingDiverged(RuntimeError):
    """The loss, the gradient norm or the weights stopped being finite; ``checkpoint``: the last finite one."""

    def __init__(self, step: int, what: str, checkpoint, earlier: bool = False):
        keep = f"the last finite checkpoint is {checkpoint}" if checkpoint else "no checkpoint was written"
        when = "diverged earlier, under this same config," if earlier else "diverged"
        again = f" (a retry under this config stops at once: {MARKER})" if not earlier else f" (or remove {MARKER})"
        super().__init__(f"training {when} at step {step}: {what}; no final model written, {keep}. Lower "
                         f"optim.lr or raise train.nonfinite_skips, then rerun{again}")
        self.step, self.what, self.checkpoint = step, what, checkpoint


class WriteFailed(OSError):
    """A file of the run could not be written: ``path`` and the cause."""


def any_process(flag: bool, device) -> bool:
    """Whether ``flag`` holds in any process (itself where there is one process)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return flag
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
    return bool(t.item())


def finite(x) -> bool:
    return x is None or math.isfinite(float(x))


def weights_finite(model, device) -> bool:
    """Every parameter of this process (its shards under FSDP) finite, in every process."""
    bad = False
    with torch.no_grad():
        for p in model.parameters():
            local = p.to_local() if hasattr(p, "to_local") else p
            if not torch.isfinite(local).all():
                bad = True
                break
    return not any_process(bad, device)


class NonFinitePolicy:
    """Decides, per step, whether a non-finite loss or gradient norm is skipped or stops the run."""

    def __init__(self, skips: int):
        self.skips, self.skipped = skips, 0

    def skip(self, step: int, loss: float, grad_norm, checkpoint) -> bool:
        """False: the step is finite, go on. True: skip its update. Raises :class:`TrainingDiverged`: stop."""
        if finite(loss) and finite(grad_norm):
            return False
        what = f"loss {loss}, gradient norm {'-' if grad_norm is None else float(grad_norm)}"
        if self.skipped < self.skips:
            self.skipped += 1
            return True
        if self.skips:
            what += f" (after {self.skipped} skipped non-finite steps, train.nonfinite_skips={self.skips})"
        raise TrainingDiverged(step, what, checkpoint)


def is_write_error(exc: BaseException) -> bool:
    """An ``OSError``, or a library's error that says a write failed (torch: ``PytorchStreamWriter failed``)."""
    return isinstance(exc, OSError) or bool(_WRITE_WORDS.search(str(exc)))


def why_not_written(path, exc: BaseException) -> str:
    """The cause in a few words: no space (with the bytes free), or the error's own first line."""
    where = Path(path)
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        free = None
    if getattr(exc, "errno", None) == errno.ENOSPC or "No space left" in str(exc) or (free is not None
                                                                                     and free < 2**20):
        return f"no space left on the device ({free} bytes free)"
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return f"{type(exc).__name__}: {first}"


@contextlib.contextmanager
def writing(path, what: str, cleanup=None):
    """Turn a failed write inside into :class:`WriteFailed` naming ``what`` and ``path``; ``cleanup()`` first."""
    try:
        yield
    except Exception as exc:
        if not is_write_error(exc) or isinstance(exc, WriteFailed):
            raise
        if cleanup is not None:
            cleanup()
        raise WriteFailed(f"{what} {path} could not be written: {why_not_written(path, exc)}") from None
