"""What this machine's sandbox enforces (see :mod:`fastdllm_core.evaluation.sandbox`): :func:`probe` runs an
empty sandbox, :func:`describe` / :func:`is_full` / :func:`missing` read its flags, :func:`probe_with_fallback`
falls back to a weaker mode when a mode cannot be set up at all."""
from __future__ import annotations

import os
import struct

from .kernel import (
    _SUCCESS,
    F_LANDLOCK_FS,
    F_MOUNT_RO,
    F_NO_CAPS,
    F_NO_NEW_PRIVS,
    F_NPROC,
    F_PIDNS,
    F_READ_CAP_ONLY,
    F_RLIMITS,
    F_SECCOMP,
    F_SESSION,
    F_WORKDIR,
    FLAG_NAMES,
    MODES,
    _mode,
)
from .process import run


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
