"""Sandbox for model-written code: every EvalPlus check runs in a contained child process.

:func:`untrusted_check` is a drop-in for ``evalplus.eval.untrusted_check`` (same statuses, same per-test time
limits, same overall wall-clock limit, EvalPlus' own in-process guard and oracles), but the code runs in a child
process that the operating system contains, with no root needed (README, "Sandbox for model-written code"):

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

What it does not do: restrict reading, or protect the verdict.  The solution runs in the process that runs
EvalPlus' comparison (as in EvalPlus), so a solution written to cheat the checker (an object equal to
everything, a write into its own status page, the reference solution read from the dataset file) can be scored
``pass``: the sandbox protects the machine, not the score.

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


def _wait_timeout(pid: int, timeout: float) -> bool:
    """True when child ``pid`` exited within ``timeout`` seconds (it is not reaped)."""
    try:
        pfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pfd = None
    if pfd is not None:
        try:
            p = select.poll()
            p.register(pfd, select.POLLIN)
            end = time.monotonic() + timeout
            while True:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                try:
                    if p.poll(left * 1000):
                        return True
                except InterruptedError:
                    continue
        finally:
            os.close(pfd)
    end, delay = time.monotonic() + timeout, 0.0005
    while time.monotonic() < end:
        r = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if r is not None:
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.02)
    return False


def _reap(pid: int) -> int | None:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def run(target, n_details: int, wall_timeout: float, memory_bytes: int | None = None) -> dict:
    """Run ``target(shm)`` in a sandboxed child; returns ``stat``, ``progress``, ``details`` (bytes),
    ``flags`` (what was in force), ``timed_out`` and ``signal`` (what killed the solution process, if any)."""
    if _STATE["subreaper"] != os.getpid():  # not inherited by forked children (a process pool's workers)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _STATE["subreaper"] = os.getpid()
    mode = _mode()
    shm = mmap.mmap(-1, _HDR + max(n_details, 1))
    struct.pack_into("iiiiiii", shm, 0, _UNKNOWN, 0, 0, 0, 0, 0, 0)
    # 0700, empty; under $FASTDLLM_SANDBOX_DIR (the EvalPlus worker's: its caller removes it even if the worker is
    # killed before it could remove this), else the system's temporary directory
    workdir = tempfile.mkdtemp(prefix="fastdllm-sandbox-", dir=os.environ.get("FASTDLLM_SANDBOX_DIR") or None)
    _STATE["counter"] += 1  # a uid no one else uses, unique per (scoring process, check): root's sandboxes run as it
    private_id = 0x40000000 + ((os.getpid() & 0x3FFFFF) << 8) + (_STATE["counter"] & 0xFF)
    cpu_s = int(math.ceil(wall_timeout)) + 1
    try:
        pid_a = os.fork()
        if pid_a == 0:
            _child_a(shm, workdir, target, memory_bytes, cpu_s, mode, private_id)
        timed_out = not _wait_timeout(pid_a, wall_timeout)
        with _suppress():  # A is unreaped (alive or a zombie): its process group id is still the sandbox's
            os.killpg(pid_a, signal.SIGKILL)
        _reap(pid_a)
        stat, progress, flags_a, flags_b, pid_b, abi, err = struct.unpack_from("iiiiiii", shm, 0)
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
        progress = max(0, min(progress, n_details))
        return {"stat": stat, "progress": progress, "details": bytes(shm[_HDR:_HDR + progress]), "flags": flags,
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
    return bool(flags & REQUIRED == REQUIRED and flags & (F_LANDLOCK_FS | F_MOUNT_RO) and flags & F_PIDNS
                and flags & F_SECCOMP and flags & F_NPROC and flags & (F_NO_CAPS | F_READ_CAP_ONLY))


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
def _execute(dataset, entry_point, code, inputs, expected, time_limits, atol, fast_check, memory_bytes, shm):
    """EvalPlus 0.3.1's ``unsafe_execute`` (same guard, time limits and oracles), reporting into ``shm``.

    One difference, a fix: EvalPlus' ``find_zero`` (HumanEval/32) branch checks ``|poly(xs, x)| <= atol`` and then
    skips recording the input as passed, so no program can pass HumanEval/32; here the pass is recorded.
    """
    # HumanEval/32, the cause of 163/164 for the canonical solutions: in EvalPlus 0.3.1's unsafe_execute the
    # find_zero oracle is `assert abs(_poly(*inp, out)) <= atol; continue`.  The `continue` jumps over
    # `details[i] = True; progress.value += 1` at the end of the loop body, so after a fully correct run
    # progress stays 0, untrusted_check keeps details[:0] == [] and turns `stat == PASS` into FAIL because
    # `len(details) != len(inputs)`.  The oracle itself is right (the canonical solution meets |poly(x)| <= 1e-4 on
    # all 100 base inputs): only the bookkeeping was skipped.  Below, record(i, True) precedes the `continue`;
    # tests/test_humaneval_canonical.py scores all 164 canonical solutions (164/164) and a wrong one (0/164).
    from evalplus.eval.utils import reliability_guard, swallow_io, time_limit

    o = _oracles()  # bound before the guard and before the solution runs, as in EvalPlus

    def record(i, ok):
        shm[_HDR + i] = 1 if ok else 0
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
                atol = _check_output(o, dataset, entry_point, inp, out, expected[i], atol)
            except _FindZeroPassed:
                record(i, True)  # EvalPlus 0.3.1 forgets this before its `continue` (see above)
                continue
            except BaseException:
                record(i, False)
                if fast_check:
                    raise
                continue
            record(i, True)
        struct.pack_into("i", shm, 0, _SUCCESS)
    except BaseException:
        struct.pack_into("i", shm, 0, _FAILED)


class _FindZeroPassed(Exception):
    """HumanEval/32's oracle accepted the output (EvalPlus' ``continue`` past the generic comparison)."""


def _oracles():
    """numpy and EvalPlus' comparison helpers and special oracles, imported once."""
    from types import SimpleNamespace

    import numpy as np
    from evalplus.eval import is_floats
    from evalplus.eval._special_oracle import (MBPP_OUTPUT_NOT_NONE_TASKS, MBPP_OUTPUT_SET_EQ_TASKS,
                                               _digit_distance_nums, _poly, _surface_Area)

    return SimpleNamespace(np=np, is_floats=is_floats, set_eq=MBPP_OUTPUT_SET_EQ_TASKS,
                           not_none=MBPP_OUTPUT_NOT_NONE_TASKS, digit_distance_nums=_digit_distance_nums, poly=_poly,
                           surface_area=_surface_Area)


def _check_output(o, dataset: str, entry_point: str, inp, out, exp, atol):
    """EvalPlus 0.3.1's comparison of one output (its special oracles ``o`` included): raises on a mismatch (an
    ``AssertionError``, as EvalPlus), :class:`_FindZeroPassed` when HumanEval/32's oracle accepts it; returns the
    tolerance for the next inputs (EvalPlus sets 1e-6 for good once a float output is expected with ``atol`` 0)."""
    exact_match = out == exp
    if dataset == "mbpp":
        exact_match = _mbpp_match(o, entry_point, inp, out, exp, atol, exact_match)
    if dataset == "humaneval" and "find_zero" == entry_point:
        assert abs(o.poly(*inp, out)) <= atol
        raise _FindZeroPassed
    if atol == 0 and o.is_floats(exp):
        atol = 1e-6
    if not exact_match and atol != 0:
        assert type(out) == type(exp)  # noqa: E721 - EvalPlus' check
        if isinstance(exp, (list, tuple)):
            assert len(out) == len(exp)
        assert o.np.allclose(out, exp, rtol=1e-07, atol=atol)
    else:
        assert exact_match
    return atol


def _mbpp_match(o, entry_point: str, inp, out, exp, atol, exact_match):
    """EvalPlus' special oracles of MBPP tasks whose reference output is not the only right one."""
    if "are_equivalent" == entry_point:
        return exact_match or True
    if "sum_div" == entry_point:
        return exact_match or out == 0
    if "surface_Area" == entry_point:
        return exact_match or abs(out - o.surface_area(*inp)) <= atol
    if "digit_distance_nums" == entry_point:
        return exact_match or out == o.digit_distance_nums(*inp)
    if entry_point in o.set_eq:
        return set(out) == set(exp)
    if entry_point in o.not_none:
        return out == exp if isinstance(out, bool) else exp == (out is not None)
    return exact_match


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
        _execute(dataset, entry_point, code, inputs, expected, time_limits, atol, fast_check, memory_bytes, shm)

    r = run(target, len(inputs), timeout + 1, memory_bytes)
    details = [b == 1 for b in r["details"]]
    stat = {_SUCCESS: PASS, _FAILED: FAIL}.get(r["stat"])
    if stat is None:
        stat = FAIL if r["signal"] == signal.SIGSYS else TIMEOUT
    if stat == PASS and (len(details) != len(inputs) or not all(details)):
        stat = FAIL
    return stat, details, r


if __name__ == "__main__":  # python -m fastdllm_core.evaluation.sandbox: what this machine's sandbox enforces
    import json

    print(json.dumps(probe(), indent=2))
