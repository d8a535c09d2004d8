"""Ending a training job before its time limit, with a checkpoint, so that the next job resumes (a scheduler's
time limit, a pre-emption, ``scancel``): the run stops after the step in which

* the process received SIGTERM or SIGUSR1 (a scheduler's warning or its kill: SLURM sends SIGTERM at the limit
  and SIGKILL ``KillWait`` seconds later) or SIGINT (Ctrl-C; a second Ctrl-C ends the run at once, during its
  step and without its checkpoint: exit status 130, the next run resumes from the one before), or
* the job's deadline is nearer than the time of two steps and a checkpoint (and at least
  ``FASTDLLM_STOP_MARGIN_S`` seconds, default 300 under SLURM): the deadline is ``FASTDLLM_TRAIN_DEADLINE`` (Unix
  seconds) when set, else the job's end as SLURM sees it (``squeue -j $SLURM_JOB_ID -o %L``, asked once).

Every process takes part in the decision (one all-reduce of a flag per step), so all of them stop after the same
step; the checkpoint is then written (:func:`~.checkpoints.save_checkpoint`) and :class:`TrainingInterrupted` is
raised: ``fastdllm train`` exits with status 75 (EX_TEMPFAIL), the DAG's job fails, and Snakemake's retry of
``train_model`` (sized from the training plan) resumes from the checkpoint.  Why not SLURM's ``--signal`` warning:
it goes to every process of the job step, and the step's own processes (Snakemake's jobstep, the torchrun agent)
take the default action of SIGUSR1, which ends them; the deadline needs no signal.

Before the first step (the data check, the token store's build -- hours at 1B tokens --, the model's load, the
resume) a signal stops the process where it is: the handler raises :class:`StopRequested` (once; a second signal
is only recorded), temporary files are removed on the way out, and ``train`` raises :class:`TrainingInterrupted`
naming the phase (``fastdllm train`` exits 75 all the same).  :func:`deferred` holds a signal back over a step that
must not be cut in two (the store's rename into place).
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping

import torch

log = logging.getLogger(__name__)
EXIT_INTERRUPTED = 75  # EX_TEMPFAIL: try again (the run resumes)
EXIT_AT_ONCE = 130  # a second Ctrl-C: ended during a step, without its checkpoint (the run resumes all the same)
SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)  # Ctrl-C is a stop like the others
DEADLINE_VAR, MARGIN_VAR = "FASTDLLM_TRAIN_DEADLINE", "FASTDLLM_STOP_MARGIN_S"


class TrainingInterrupted(RuntimeError):
    """The run stopped before ``optim.max_steps``; the next run resumes from ``checkpoint`` (None: step 0)."""

    def __init__(self, step: int, reason: str, checkpoint, before_training: bool = False, at_once: bool = False):
        if at_once:
            nxt = f"resumes from {checkpoint}" if checkpoint else "starts from step 0"
            msg = (f"training stopped at once during step {step + 1} ({reason}), without that step's checkpoint; "
                   f"nothing was left half-written: the next attempt {nxt}")
        elif before_training:
            nxt = f"resumes from {checkpoint}" if checkpoint else "starts from step 0"
            msg = (f"training stopped before its first step ({reason}); nothing was left half-written: the next "
                   f"attempt {nxt}")
        else:
            msg = (f"training stopped after step {step} ({reason}); checkpoint {checkpoint}: the next attempt "
                   "resumes from it")
        super().__init__(msg)
        self.step, self.reason, self.checkpoint, self.at_once = step, reason, checkpoint, at_once

    @property
    def exit_status(self) -> int:
        """75 (EX_TEMPFAIL) for a stop; 130 for a second Ctrl-C, which ended the run at once."""
        return EXIT_AT_ONCE if self.at_once else EXIT_INTERRUPTED


def interrupted_before_training(run_dir, reason: str, during_steps: bool = False) -> TrainingInterrupted:
    """The :class:`TrainingInterrupted` of a run in ``run_dir`` stopped where it was: before its first step, or
    (``during_steps``) at once by a second Ctrl-C."""
    from pathlib import Path

    from .checkpoints import checkpoint_step, checkpoints

    cks = checkpoints(Path(run_dir))
    return TrainingInterrupted(checkpoint_step(cks[-1]) if cks else 0, reason, cks[-1] if cks else None,
                               before_training=True, at_once=during_steps)


class StopRequested(BaseException):
    """A stop signal before the run's first step, raised where the process is (a ``BaseException``, as
    ``KeyboardInterrupt``: no ``except Exception`` on the way swallows it)."""

    def __init__(self, signame: str):
        super().__init__(signame)
        self.signame = signame


_ACTIVE: list = []  # the Stoppers whose handlers are installed, innermost last


@contextlib.contextmanager
def deferred():
    """A signal arriving inside is held until the end of the block, then raised (set-up phase only)."""
    s = _ACTIVE[-1] if _ACTIVE else None
    if s is None or not s.immediate:
        yield
        return
    s.immediate = False
    try:
        yield
    finally:
        s.immediate = True
        if s.signal and not s.raised:
            s.raised = True
            raise StopRequested(s.signal)


def slurm_time_left(job_id: str, run=subprocess.run) -> float | None:
    """Seconds left to SLURM job ``job_id`` (``squeue -o %L``: ``[days-]hours:minutes:seconds``), or None
    (unlimited, not found, no squeue)."""
    try:
        out = run(["squeue", "-h", "-j", str(job_id), "-o", "%L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", (out.stdout or "").strip())
    if out.returncode or not m:
        return None
    d, h, mi, s = (int(g) if g else 0 for g in m.groups())
    return float(((d * 24 + h) * 60 + mi) * 60 + s)


def job_deadline(env: Mapping[str, str], now: float, run=subprocess.run) -> float | None:
    """The Unix time the job must be done by: ``FASTDLLM_TRAIN_DEADLINE``, else SLURM's end of the job, else
    None.  A malformed deadline is a named error."""
    if env.get(DEADLINE_VAR):
        try:
            return float(env[DEADLINE_VAR])
        except ValueError:
            raise ValueError(f"{DEADLINE_VAR}={env[DEADLINE_VAR]!r} is not a Unix time in seconds") from None
    left = slurm_time_left(env["SLURM_JOB_ID"], run) if env.get("SLURM_JOB_ID") else None
    return None if left is None else now + left


class Stopper:
    """Whether to stop after this step (see the module docstring); ``close`` restores the signal handlers."""

    def __init__(self, is_main: bool, env: Mapping[str, str] | None = None, clock=time.time,
                 immediate: bool = False, deadline: bool = True):
        env = os.environ if env is None else env
        self.clock, self.signal, self.immediate, self.raised = clock, None, immediate, False
        self.phase = ""  # what the run is doing before its first step, for the message
        self.in_steps = False  # from the first step on a signal stops the run after its step
        self.deadline = job_deadline(env, clock()) if is_main and deadline else None
        default = "300" if env.get("SLURM_JOB_ID") else "0"
        try:
            self.margin = float(env.get(MARGIN_VAR) or default)
        except ValueError:
            raise ValueError(f"{MARGIN_VAR}={env.get(MARGIN_VAR)!r} is not a number of seconds") from None
        self.step_s = self.save_s = 0.0
        self._old = {}
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._old[sig] = signal.signal(sig, self._on_signal)
            _ACTIVE.append(self)
        if self.deadline is not None:
            log.info("job deadline in %.0f s: the run stops with a checkpoint before it", self.deadline - clock())

    def _on_signal(self, signum, frame) -> None:
        name = signal.Signals(signum).name
        again = self.signal is not None and signum == signal.SIGINT  # a second Ctrl-C: at once
        self.signal = name
        if (self.immediate or again) and not self.raised:
            self.raised = True
            raise StopRequested(f"{name} a second time" if again else name)

    def at_steps(self) -> None:
        """From here on a signal stops the run after the step it is in, with a checkpoint (a second Ctrl-C
        stops it at once)."""
        self.immediate, self.in_steps = False, True

    def setup_reason(self, exc: StopRequested) -> str:
        return f"received {exc.signame}{' ' + self.phase if self.phase else ''}"

    def timed(self, step_s: float, save_s: float = 0.0) -> None:
        """Record the last step's time (and its checkpoint's, if one was written)."""
        self.step_s = max(self.step_s, step_s)
        self.save_s = max(self.save_s, save_s)

    def local_reason(self) -> str | None:
        if self.signal:
            return f"received {self.signal}"
        if self.deadline is not None:
            need = max(self.margin, 2 * self.step_s + 1.5 * self.save_s)
            if self.clock() + need >= self.deadline:
                return f"{self.deadline - self.clock():.0f} s left to the job's deadline, {need:.0f} s needed"
        return None

    def reason(self, device) -> str | None:
        """The local reason, or "another process stopped" when any process has one (all agree)."""
        mine = self.local_reason()
        if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return mine
        flag = torch.tensor([1.0 if mine else 0.0], device=device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        return mine or ("another process stopped" if flag.item() else None)

    def close(self) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        if self._old and self in _ACTIVE:
            _ACTIVE.remove(self)
        self._old = {}
