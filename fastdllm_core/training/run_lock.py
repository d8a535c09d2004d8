"""One training run per output directory, and temporary names no two processes share.

* :func:`run_lock`: the main process of a run holds ``<run>/.fastdllm.lock`` from its data check to its end
  (:func:`~fastdllm_core.provenance.out_dir_lock`, as evaluation holds its output directory): a second run on the
  directory gets :class:`~fastdllm_core.provenance.OutDirBusy` naming the holder.  The kernel drops the lock
  when its holder dies; the file records the host, the pid and the SLURM job, and is touched every
  :data:`HEARTBEAT_S`.  A lock file left on this host by a process that is gone is taken over; one left by another
  host (a retried job on another node) is taken over when its SLURM job is no longer running or its file has not
  been touched for :data:`STALE_S`.  Under the lock, the temporaries of earlier runs that died are removed
  (:func:`clean_stale`).
* :func:`unique_dir`: a temporary directory named ``<prefix><host>.<pid>.<random>``; :func:`remove_stale` removes
  those whose process is gone (this host) or that were not written to for :data:`STALE_S` (another host).
* :func:`file_lock`: an exclusive, waiting ``flock`` on a file removed at release (the store build's).
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from ..provenance import LOCK_NAME, _umask, out_dir_lock, pid_alive

log = logging.getLogger(__name__)
HEARTBEAT_S = 60.0
STALE_S = 600.0


@contextlib.contextmanager
def run_lock(output_dir, is_main: bool = True):
    """Hold the run's lock (module docstring) in the main process; the other processes of the run hold none."""
    if not is_main:
        yield None
        return
    output_dir = Path(output_dir)
    _drop_foreign_stale_lock(output_dir / LOCK_NAME)
    job = os.environ.get("SLURM_JOB_ID")
    with out_dir_lock(output_dir, "training", extra={"slurm_job_id": job} if job else None) as path:
        beat = _Heartbeat(path)
        try:
            clean_stale(output_dir)
            yield path
        finally:
            beat.stop()


class _Heartbeat:
    def __init__(self, path: Path):
        self.path, self.done = path, threading.Event()
        self.thread = threading.Thread(target=self._run, name="run-lock-heartbeat", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(HEARTBEAT_S):
            with contextlib.suppress(OSError):
                os.utime(self.path)

    def stop(self) -> None:
        self.done.set()


def _drop_foreign_stale_lock(path: Path) -> None:
    """Remove a lock file written on another host whose run is over, or an unreadable one nothing touched for
    :data:`STALE_S` (module docstring)."""
    try:
        age = time.time() - path.stat().st_mtime
        holder = json.loads(path.read_text() or "{}")
    except OSError:
        return
    except ValueError:
        holder = {"host": "(unreadable)"}
    if not isinstance(holder, dict):
        holder = {"host": "(unreadable)"}
    if holder.get("host") in (None, socket.gethostname()):
        return
    job = holder.get("slurm_job_id")
    ended = job is not None and slurm_job_ended(str(job))
    if ended or age > STALE_S:
        why = f"its SLURM job {job} is over" if ended else f"it was last touched {age:.0f} s ago"
        log.warning("removing the lock %s of pid %s on host %s: %s", path, holder.get("pid"), holder.get("host"), why)
        with contextlib.suppress(OSError):
            path.unlink()


def slurm_job_ended(job: str, run=subprocess.run) -> bool:
    """Whether SLURM says job ``job`` is over: ``squeue`` answers with a state that is not pending or running, or
    no longer knows the job ("Invalid job id").  Any other failure of ``squeue`` (a controller that does not
    answer, no squeue here) keeps the lock, with a warning saying why."""
    try:
        out = run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("squeue could not be asked about SLURM job %s (%s): its lock is kept", job, exc)
        return False
    if out.returncode != 0:
        err = (getattr(out, "stderr", "") or "").strip()
        if "invalid job id" in err.lower():
            return True
        log.warning("squeue failed for SLURM job %s (exit %s: %s): its lock is kept", job, out.returncode,
                    err[:200] or "no message")
        return False
    return (out.stdout or "").strip() not in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED")


def clean_stale(output_dir: Path) -> list[Path]:
    """The temporaries of dead runs in ``output_dir`` removed (the caller holds the run's lock, so no live run
    writes them): a half-written final model, checkpoint or token store."""
    gone = [p for p in output_dir.glob(".final.tmp*") if p.is_dir()]
    gone += [p for p in (output_dir / "checkpoints").glob(".tmp-step-*") if p.is_dir()]
    for p in gone:
        shutil.rmtree(p, ignore_errors=True)
    gone += remove_stale(output_dir, ".data.tmp.") + remove_stale(output_dir, ".data.old.")
    if gone:
        log.warning("removed the temporaries of an earlier run that did not finish: %s", [str(p) for p in gone])
    return gone


def unique_dir(parent, prefix: str) -> Path:
    """A new directory ``<parent>/<prefix><host>.<pid>.<random>`` (:func:`remove_stale` knows its owner)."""
    parent = Path(parent)
    parent.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=f"{prefix}{socket.gethostname()}.{os.getpid()}.", dir=parent))
    os.chmod(path, 0o777 & ~_umask())  # mkdtemp makes 0700; what it becomes gets the usual mode
    return path


def remove_stale(parent, prefix: str, stale_s: float = STALE_S) -> list[Path]:
    """Remove the :func:`unique_dir` directories under ``parent`` with a name starting with ``prefix`` whose
    process is gone (this host), or that nothing was written to for ``stale_s`` (another host)."""
    out = []
    for p in Path(parent).glob(f"{prefix}*"):
        owner = p.name[len(prefix):].rsplit(".", 2)  # <host>.<pid>.<random>
        if not p.is_dir() or len(owner) != 3 or not owner[1].isdigit():
            continue
        host, pid = owner[0], int(owner[1])
        if (host == socket.gethostname() and not pid_alive(pid)) or (host != socket.gethostname()
                                                                  and _idle_s(p) > stale_s):
            shutil.rmtree(p, ignore_errors=True)
            out.append(p)
    return out


def _idle_s(d: Path) -> float:
    try:
        newest = max([d.stat().st_mtime] + [f.stat().st_mtime for f in d.iterdir()])
    except OSError:
        return 0.0
    return time.time() - newest


@contextlib.contextmanager
def file_lock(path):
    """An exclusive ``flock`` on ``path``, waited for; the file is removed at release (a waiter that locked the
    removed file tries again)."""
    import fcntl

    path = Path(path)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        except BaseException:
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)
    try:
        yield path
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)
