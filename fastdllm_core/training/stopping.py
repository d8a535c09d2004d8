"""Ending a training job before its time limit, with a checkpoint, so that the next job resumes (a scheduler's
time limit, a pre-emption, ``scancel``): the run stops after the step in which

* the process received SIGTERM or SIGUSR1 (a scheduler's warning or its kill: SLURM sends SIGTERM at the limit
  and SIGKILL ``KillWait`` seconds later), or
* the job's deadline is nearer than the time of two steps and a checkpoint (and at least
  ``FASTDLLM_STOP_MARGIN_S`` seconds, default 300 under SLURM): the deadline is ``FASTDLLM_TRAIN_DEADLINE`` (Unix
  seconds) when set, else the job's end as SLURM sees it (``squeue -j $SLURM_JOB_ID -o %L``, asked once).

Every process takes part in the decision (one all-reduce of a flag per step), so all of them stop after the same
step; the checkpoint is then written (:func:`~.checkpoints.save_checkpoint`) and :class:`TrainingInterrupted` is
raised: ``fastdllm train`` exits with status 75 (EX_TEMPFAIL), the DAG's job fails, and Snakemake's retry of
``train_model`` (sized from the training plan) resumes from the checkpoint.  Why not SLURM's ``--signal`` warning:
it goes to every process of the job step, and the step's own processes (Snakemake's jobstep, the torchrun agent)
take the default action of SIGUSR1, which ends them; the deadline needs no signal.
"""
from __future__ import annotations

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
SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
DEADLINE_VAR, MARGIN_VAR = "FASTDLLM_TRAIN_DEADLINE", "FASTDLLM_STOP_MARGIN_S"


class TrainingInterrupted(RuntimeError):
    """The run stopped before ``optim.max_steps`` with a checkpoint; the next run resumes from it."""

    def __init__(self, step: int, reason: str, checkpoint):
        super().__init__(f"training stopped after step {step} ({reason}); checkpoint {checkpoint}: the next "
                         "attempt resumes from it")
        self.step, self.reason, self.checkpoint = step, reason, checkpoint


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

    def __init__(self, is_main: bool, env: Mapping[str, str] | None = None, clock=time.time):
        env = os.environ if env is None else env
        self.clock, self.signal = clock, None
        self.deadline = job_deadline(env, clock()) if is_main else None
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
        if self.deadline is not None:
            log.info("job deadline in %.0f s: the run stops with a checkpoint before it", self.deadline - clock())

    def _on_signal(self, signum, frame) -> None:
        self.signal = signal.Signals(signum).name

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
        self._old = {}
