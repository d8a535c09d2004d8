"""Sandbox for model-written code: every EvalPlus check runs in a contained child process.

:func:`untrusted_check` is a drop-in for ``evalplus.eval.untrusted_check`` (same statuses, same per-test time
limits, same overall wall-clock limit, EvalPlus' own in-process guard; its oracles applied by the scorer), but the
code runs in a child process that the operating system contains, with no root needed (README, "Sandbox for
model-written code"):

* a new session / process group, killed as a whole (SIGKILL) when the check ends or times out, and a new PID
  namespace in which the solution is PID 1, so that every process it started dies with it, even one that left
  the process group; ``PR_SET_PDEATHSIG`` ties it to the scoring process;
* run as root: a private uid (unique per check) with no capability but ``CAP_DAC_READ_SEARCH`` (read and search
  only, so that Python can still import modules from wherever root can read them), because the kernel never
  applies ``RLIMIT_NPROC`` to uid 0; run as another user: a new user namespace (the same uid inside) with no
  capabilities, in which ``RLIMIT_NPROC`` counts only the sandbox's processes; new network and IPC namespaces
  (no network at all);
* resource limits: ``RLIMIT_AS`` (the EvalPlus memory limit), ``RLIMIT_CPU`` (the wall-clock limit plus 1 s),
  ``RLIMIT_NPROC`` (16 more processes), ``RLIMIT_FSIZE`` (64 MiB), ``RLIMIT_NOFILE`` (128), ``RLIMIT_CORE`` 0;
* an empty private working directory (also ``TMPDIR``; made under ``$FASTDLLM_SANDBOX_DIR`` when set), removed
  afterwards; the scorer's file descriptors are closed, stdin/stdout/stderr are ``/dev/null``;
* no read access outside that directory, the Python installation and the system's libraries (Landlock only:
  ``landlock-read``; :func:`.sandbox_setup.read_roots`);
* no write access outside that directory: Landlock (``landlock_create_ruleset``, ABI >= 1) where the kernel has
  it, and a mount namespace in which every mount is read-only except the working directory (both where the
  kernel allows both; either alone is still a fence for file contents and names); Landlock ABI >= 4 also denies
  TCP bind/connect, ABI >= 6 signals to processes outside the sandbox; no new privileges;
* seccomp: creating a process (fork/vfork/clone without ``CLONE_THREAD``), executing a program or
  ``open_by_handle_at`` kills the solution (scored ``fail``): a HumanEval/MBPP solution never needs them;
  threads stay allowed.  ``socket()`` (any family: pathname UNIX sockets outside the directory are reachable
  through every namespace and through Landlock), ``io_uring_setup``, metadata changes (chmod, chown, utimes,
  extended attributes, ``file_setattr``; Landlock does not cover them), the keyrings and the ioctl requests
  TIOCSTI, TIOCLINUX, FS_IOC_SETFLAGS and FS_IOC_FSSETXATTR fail with EPERM (EvalPlus' guard already takes
  ``os.chmod`` and friends away from solutions; ``socketpair()`` stays allowed).

A mechanism the kernel refuses is skipped and reported: :func:`probe` (``python -m
fastdllm_core.evaluation.sandbox``) says what is in force, and the EvalPlus worker logs it (a warning when weaker
than the full set); a mode that cannot be set up at all falls back to the next weaker one
(:func:`probe_with_fallback`, logged).  ``FASTDLLM_SANDBOX=mountns`` skips Landlock (the read-only mount
namespace alone) and ``FASTDLLM_SANDBOX=weak`` skips namespaces, Landlock and seccomp (session, rlimits, private
uid, working directory and EvalPlus' guard only): the fallbacks, for tests.

The verdict is not the solution's to write: the solution's process compares nothing, and before the solution
runs it clears its copy (it is a fork of the scorer) of the problems and the expected outputs
(:func:`.verdict.forget_secrets`; freed bytes may remain, for a solution that scans raw memory); it sends back each
output in a restricted serialisation (exact built-in types only) and the scoring process decodes and judges it
with EvalPlus' rules (:mod:`.verdict`), so that an object equal to everything, a subclass of ``int`` or ``str``
with a lying ``__eq__`` or a forged status page is scored ``fail``.

Call it from a dedicated process (the EvalPlus worker): that process becomes a child subreaper and reaps the
processes it adopts from the sandboxes.
"""
from __future__ import annotations

import logging
import math
import mmap
import os
import select
import shutil
import signal
import struct
import tempfile
import time

from . import verdict
from .sandbox_setup import (FAIL, FLAG_NAMES, F_LANDLOCK_FS, F_MOUNT_RO, F_NO_CAPS, F_NO_NEW_PRIVS, F_NPROC, F_PIDNS,
                            F_READ_CAP_ONLY, F_RLIMITS, F_SECCOMP, F_SESSION, F_WORKDIR, MODES, PASS,
                            PR_SET_CHILD_SUBREAPER, TIMEOUT, _FAILED, _HDR, _STATE, _SUCCESS, _UNKNOWN, _child_a,
                            _mode, _prctl)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------ scorer side
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


def describe(flags: int, abi: int | None = None) -> str:
    parts = [name for bit, name in FLAG_NAMES.items() if flags & bit]
    if flags & F_LANDLOCK_FS and abi:
        parts = [f"landlock-abi{abi}" if p == "landlock-fs" else p for p in parts]
    return "+".join(parts) or "none"


REQUIRED = F_SESSION | F_RLIMITS | F_WORKDIR | F_NO_NEW_PRIVS


def is_full(flags: int) -> bool:
    """Writes outside the working directory denied by the OS, PID namespace, seccomp."""
    return not missing(flags)


def missing(flags: int) -> list[str]:
    """What the full set needs and ``flags`` lacks, by name (empty: the full set)."""
    out = [name for bit, name in FLAG_NAMES.items() if bit & REQUIRED and not flags & bit]
    for need, name in ((F_LANDLOCK_FS | F_MOUNT_RO, "landlock-fs or mountns-readonly"), (F_PIDNS, "pidns"),
                       (F_SECCOMP, "seccomp"), (F_NPROC, "nproc-bound (as root: private-uid)"),
                       (F_NO_CAPS | F_READ_CAP_ONLY, "no-caps or cap-dac-read-search-only")):
        if not flags & need:
            out.append(name)
    return out


def probe() -> dict:
    """Run an empty sandbox: what is in force on this machine (``flags``, ``description``, ``full``)."""
    def target(shm):
        struct.pack_into("i", shm, 0, _SUCCESS)

    r = run(target, 0, 10.0)
    flags = r["flags"]
    return {"flags": flags, "description": describe(flags, r["landlock_abi"]), "full": is_full(flags),
            "mode": _mode(), "landlock_abi": r["landlock_abi"], "ok": r["stat"] == _SUCCESS,
            "setup_error": r["setup_error"]}


def probe_with_fallback() -> dict:
    """:func:`probe` in the mode asked for (``$FASTDLLM_SANDBOX``); when a sandbox cannot even be set up there (a
    kernel or security module that allows a namespace but not its use, say), the next weaker mode that works is
    put into ``$FASTDLLM_SANDBOX`` for this process and its children, and ``fallback_from`` says what failed.
    Without this every check would end without a verdict and every solution would be scored as a timeout.
    Raises RuntimeError when no mode works."""
    first = probe()
    if first["ok"]:
        return {**first, "fallback_from": None}
    failed = [f"{first['mode']} (setup error: {os.strerror(first['setup_error']) if first['setup_error'] else '?'})"]
    for m in MODES[MODES.index(first["mode"]) + 1:]:
        os.environ["FASTDLLM_SANDBOX"] = m
        r = probe()
        if r["ok"]:
            return {**r, "fallback_from": "; ".join(failed)}
        failed.append(f"{m} (setup error: {os.strerror(r['setup_error']) if r['setup_error'] else '?'})")
    raise RuntimeError(f"the sandbox for model-written code cannot be set up on this machine: {'; '.join(failed)}")


# ------------------------------------------------------------------------------------------------ EvalPlus check
OUTPUT_BYTES = 32 << 20  # room for a check's encoded outputs; an output that does not fit is a failed input


def _execute(entry_point, code, inputs, time_limits, fast_check, memory_bytes, shm):
    """EvalPlus 0.3.1's ``unsafe_execute`` (same guard and time limits) without its comparison: each output is
    sent back to the scorer as a record (:mod:`.verdict`: exact built-in types only) and judged there, so that
    neither the expected outputs nor the verdict are ever in the solution's process.

    Header: ``progress`` (offset 4) counts the records written, ``used`` (offset 28) their bytes.  An exception
    (or a per-input time limit) is an error record; with ``fast_check`` it ends the run (``_FAILED``), as in
    EvalPlus.  The scorer stops the child at the first output that fails under ``fast_check``
    (:func:`untrusted_check`).
    """
    from evalplus.eval.utils import reliability_guard, swallow_io, time_limit

    pos = _HDR

    def record(i, kind, payload=b""):
        nonlocal pos
        try:
            pos = verdict.write_record(shm, pos, kind, payload)
        except OverflowError:
            pos = verdict.write_record(shm, pos, verdict.REC_ERROR, b"")
        struct.pack_into("i", shm, 28, pos - _HDR)
        struct.pack_into("i", shm, 4, i + 1)

    reliability_guard(maximum_memory_bytes=memory_bytes)
    exec_globals: dict = {}
    try:
        with swallow_io():
            exec(code, exec_globals)  # noqa: S102 - the point of this module
            fn = exec_globals[entry_point]
        for i, inp in enumerate(inputs):
            try:
                with time_limit(time_limits[i]):
                    with swallow_io():
                        out = fn(*inp)
                    payload = verdict.encode(out)  # under the time limit too: a huge output is a failed input
            except BaseException:
                record(i, verdict.REC_ERROR)
                if fast_check:
                    raise
                continue
            record(i, verdict.REC_OUTPUT, payload)
        struct.pack_into("i", shm, 0, _SUCCESS)
    except BaseException:
        struct.pack_into("i", shm, 0, _FAILED)


def untrusted_check(dataset: str, code: str, inputs: list, entry_point: str, expected, atol, ref_time: list,
                    fast_check: bool = False, min_time_limit: float = 1.0, gt_time_limit_factor: float = 4.0,
                    memory_bytes: int | None = None) -> tuple[str, list[bool], dict]:
    """(status, per-input details, sandbox report): ``evalplus.eval.untrusted_check`` in the sandbox.

    Time limits as EvalPlus: ``max(min_time_limit, gt_time_limit_factor * ground-truth time)`` per input, the whole
    run ``min($EVALPLUS_TIMEOUT_PER_TASK or 60, sum) + 1 (+1 without fast_check) + 1`` seconds.  A solution killed
    by the sandbox (seccomp: it tried to start a process or a program) is ``fail``; one killed by the wall-clock
    limit, or dead without a verdict, is ``timeout`` (EvalPlus' mapping).
    """
    if memory_bytes is None:
        from evalplus.eval import query_maximum_memory_bytes

        memory_bytes = query_maximum_memory_bytes()
    time_limits = [max(min_time_limit, gt_time_limit_factor * t) for t in ref_time]
    timeout = min(float(os.environ.get("EVALPLUS_TIMEOUT_PER_TASK", 60)), sum(time_limits)) + 1
    if not fast_check:
        timeout += 1

    def target(shm):
        verdict.forget_secrets(expected)  # this child's copy only: the scorer keeps its own
        _execute(entry_point, code, inputs, time_limits, fast_check, memory_bytes, shm)

    judge = verdict.Judge(dataset, entry_point, inputs, expected, atol, fast_check)

    def watch(shm):  # judge the outputs as they arrive: stop at the first failure under fast_check, as EvalPlus
        count = struct.unpack_from("i", shm, 4)[0]  # read before `used`: the child writes `used` first
        used = max(0, min(struct.unpack_from("i", shm, 28)[0], OUTPUT_BYTES))
        judge.feed(shm, _HDR, _HDR + used, count, live=True)
        return fast_check and not all(judge.details)

    r = run(target, OUTPUT_BYTES, timeout + 1, memory_bytes, watch)
    final = verdict.Judge(dataset, entry_point, inputs, expected, atol, fast_check)  # on the child's last word
    final.feed(r["data"], 0, len(r["data"]), r["progress"])
    details = final.details
    if fast_check and not all(details):
        return FAIL, details, r
    stat = {_SUCCESS: PASS, _FAILED: FAIL}.get(r["stat"])
    if stat is None:
        stat = FAIL if r["signal"] == signal.SIGSYS else TIMEOUT
    if stat == PASS and (len(details) != len(inputs) or not all(details)):
        stat = FAIL
    return stat, details, r


if __name__ == "__main__":  # python -m fastdllm_core.evaluation.sandbox: what this machine's sandbox enforces
    import json

    print(json.dumps(probe(), indent=2))
