"""The scorer's side of a sandboxed run (see :mod:`fastdllm_core.evaluation.sandbox`): :func:`run` forks the
sandbox's outer process (:func:`.children._child_a`), waits for it under the wall-clock limit, kills the whole
sandbox and reaps it, and removes the working directory.  Call it from a dedicated process (the EvalPlus worker):
that process becomes a child subreaper and reaps the processes it adopts from the sandboxes."""
from __future__ import annotations

import math
import mmap
import os
import select
import shutil
import signal
import struct
import tempfile
import time

from .children import _child_a
from .kernel import _HDR, _UNKNOWN, PR_SET_CHILD_SUBREAPER, _mode, _prctl

_STATE = {"subreaper": 0, "counter": 0}


def _rmtree(path: str) -> None:
    def onerror(func, p, exc_info):
        try:
            os.chmod(os.path.dirname(p) or p, 0o700)
            os.chmod(p, 0o700)
        except OSError:
            pass
        try:
            (shutil.rmtree if os.path.isdir(p) and not os.path.islink(p) else os.unlink)(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=onerror)


def _wait_timeout(pid: int, timeout: float, watch=None) -> bool:
    """True when child ``pid`` exited within ``timeout`` seconds, or when ``watch()`` (called every few
    milliseconds while waiting) returned True; the child is not reaped."""
    slice_s = 0.005 if watch is not None else None
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pfd = None
    end = time.monotonic() + timeout
    if pfd is not None:
        try:
            p = select.poll()
            p.register(pfd, select.POLLIN)
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                try:
                    if p.poll((left if slice_s is None else min(left, slice_s)) * 1000):
                        return True
                except InterruptedError:
                    continue
                if watch is not None and watch():
                    return True
        finally:
            os.close(pfd)
    delay = 0.0005
    while time.monotonic() < end:
        r = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if r is not None or (watch is not None and watch()):
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.005 if watch is not None else 0.02)
    return False


def _reap(pid: int) -> int | None:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def run(target, data_bytes: int, wall_timeout: float, memory_bytes: int | None = None, watch=None) -> dict:
    """Run ``target(shm)`` in a sandboxed child; returns ``stat``, ``progress``, ``data`` (the ``used`` bytes the
    child wrote after the header, at most ``data_bytes``), ``flags`` (what was in force), ``timed_out`` and
    ``signal`` (what killed the solution process, if any).  ``watch(shm)``, called every few milliseconds while
    the child runs, ends it early by returning True (the scorer has its verdict)."""
    if _STATE["subreaper"] != os.getpid():  # not inherited by forked children (a process pool's workers)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _STATE["subreaper"] = os.getpid()
    mode = _mode()
    shm = mmap.mmap(-1, _HDR + max(data_bytes, 1))
    struct.pack_into("iiiiiiii", shm, 0, _UNKNOWN, 0, 0, 0, 0, 0, 0, 0)
    # 0700, empty; under $FASTDLLM_SANDBOX_DIR (the EvalPlus worker's: its caller removes it even if the worker is
    # killed before it could remove this), else the system's temporary directory
    # absolute: the child enters it (chdir) before it hands it to the private uid (chown) and to Landlock; a relative
    # path (a DAG job's results/...) would then name nothing and root's private uid would be lost
    workdir = os.path.abspath(tempfile.mkdtemp(prefix="fastdllm-sandbox-",
                                               dir=os.environ.get("FASTDLLM_SANDBOX_DIR") or None))
    _STATE["counter"] += 1  # a uid no one else uses, unique per (scoring process, check): root's sandboxes run as it
    private_id = 0x40000000 + ((os.getpid() & 0x3FFFFF) << 8) + (_STATE["counter"] & 0xFF)
    cpu_s = int(math.ceil(wall_timeout)) + 1
    try:
        pid_a = os.fork()
        if pid_a == 0:
            _child_a(shm, workdir, target, memory_bytes, cpu_s, mode, private_id)
        timed_out = not _wait_timeout(pid_a, wall_timeout, None if watch is None else lambda: watch(shm))
        with _suppress():  # A is unreaped (alive or a zombie): its process group id is still the sandbox's
            os.killpg(pid_a, signal.SIGKILL)
        _reap(pid_a)
        stat, progress, flags_a, flags_b, pid_b, abi, err, used = struct.unpack_from("iiiiiiii", shm, 0)
        sig = None
        if pid_b > 0:  # B is now this process's child (subreaper) or already a zombie: its pid is still ours
            with _suppress():
                os.kill(pid_b, signal.SIGKILL)  # B is PID 1 of its namespace: every process in it dies too
            st = _reap(pid_b)
            if st is not None and os.WIFSIGNALED(st) and os.WTERMSIG(st) != signal.SIGKILL:
                sig = os.WTERMSIG(st)
            elif st is not None and os.WIFSIGNALED(st) and not timed_out:
                sig = signal.SIGKILL
        flags = flags_a | flags_b
        while True:  # processes of the sandbox adopted by this subreaper
            try:
                p, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if p == 0:
                break
        used = max(0, min(used, data_bytes))
        return {"stat": stat, "progress": max(0, progress), "data": bytes(shm[_HDR:_HDR + used]), "flags": flags,
                "timed_out": timed_out, "signal": sig, "landlock_abi": abi, "setup_error": err}
    finally:
        shm.close()
        _rmtree(workdir)


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, et, ev, tb):
        return et is not None and issubclass(et, (ProcessLookupError, PermissionError, ChildProcessError))
