"""The sandbox's two processes (see :mod:`fastdllm_core.evaluation.sandbox`), forked by the scorer
(:func:`.process.run`): A (session, namespaces, uid) and B (limits, Landlock, seccomp, then the solution), with
the kernel interfaces of :mod:`.kernel`."""
from __future__ import annotations

import os
import signal
import struct
import sys
import tempfile

from .kernel import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    F_IPCNS,
    F_MOUNT_RO,
    F_NETNS,
    F_NO_CAPS,
    F_NO_NEW_PRIVS,
    F_NPROC,
    F_PIDNS,
    F_PRIVATE_UID,
    F_READ_CAP_ONLY,
    F_RLIMITS,
    F_SECCOMP,
    F_SESSION,
    F_USERNS,
    F_WORKDIR,
    LIMITS,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    _become_private_uid,
    _count_tasks,
    _drop_caps,
    _landlock,
    _libc,
    _mount_readonly,
    _prctl,
    _seccomp,
    _set_rlimits,
    landlock_abi,
)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _enter_namespaces(workdir: str, mode: str, root: bool, uid: int, gid: int) -> tuple[int, int]:
    """(namespaces entered, their flags): the strongest set the kernel allows; with a mount namespace every other
    mount becomes read-only."""
    flags = 0
    ns = 0
    if mode == "weak":
        return ns, flags
    # the read-only mount namespace is used with Landlock too: it also stops what Landlock does not
    # cover (metadata and inode-flag changes through any syscall); without Landlock it is the only fence
    base = CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWNS
    tries = [base, base & ~CLONE_NEWNET, CLONE_NEWPID | CLONE_NEWNS]
    if mode == "auto" and landlock_abi() >= 1:
        tries.append(CLONE_NEWPID)  # no mount namespace to be had: Landlock alone fences writes
    # root creates the namespaces itself (and then becomes a private uid); anyone else needs a user
    # namespace (same uid inside), in which RLIMIT_NPROC counts only the sandbox's processes
    for fl in (tries if root else []) + [CLONE_NEWUSER | f for f in tries]:
        if _libc.unshare(fl) == 0:
            ns = fl
            if fl & CLONE_NEWUSER:
                _write("/proc/self/setgroups", "deny")
                _write("/proc/self/uid_map", f"{uid} {uid} 1")
                _write("/proc/self/gid_map", f"{gid} {gid} 1")
            break
    flags |= ((F_USERNS if ns & CLONE_NEWUSER else 0) | (F_PIDNS if ns & CLONE_NEWPID else 0)
              | (F_NETNS if ns & CLONE_NEWNET else 0) | (F_IPCNS if ns & CLONE_NEWIPC else 0))
    if ns & CLONE_NEWNS:
        try:
            _mount_readonly(workdir)
            flags |= F_MOUNT_RO
        except OSError:
            pass
    return ns, flags


def _private_uid(workdir: str, private_id: int, root: bool, ns: int) -> tuple[bool, int]:
    """(a private uid was taken, flags): root without a user namespace becomes a private uid (RLIMIT_NPROC does
    not apply to uid 0); anyone else is already bounded by RLIMIT_NPROC."""
    flags = 0
    private = False
    if root and not ns & CLONE_NEWUSER:
        try:
            os.chown(workdir, private_id, private_id)
            _become_private_uid(private_id)
            private = True
            flags |= F_PRIVATE_UID | F_NPROC
        except OSError:  # e.g. a container whose uid map lacks the id: stays uid 0 (RLIMIT_NPROC exempt)
            pass
    elif not root:
        flags |= F_NPROC
    return private, flags


def _wait_without_reaping(pid: int) -> None:
    """Wait for B without reaping it: B stays this process's (then, by subreaping, the scorer's) child, so its pid
    cannot be reused before the scorer has killed and reaped it."""
    while True:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
            break
        except InterruptedError:
            continue


def _child_a(shm, workdir, target, memory_bytes, cpu_s, mode, private_id):
    """The sandbox's outer process: session, namespaces, private uid (root); forks the solution process B."""
    flags = 0
    try:
        parent = os.getppid()
        os.setsid()
        flags |= F_SESSION
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        uid, gid = os.getuid(), os.getgid()
        root = os.geteuid() == 0
        ns, ns_flags = _enter_namespaces(workdir, mode, root, uid, gid)
        flags |= ns_flags
        os.chdir(workdir)
        flags |= F_WORKDIR
        private, uid_flags = _private_uid(workdir, private_id, root, ns)
        flags |= uid_flags
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # a change of uid clears it: set it again
        if os.getppid() != parent:  # the scorer died before that
            os._exit(70)
        # RLIMIT_NPROC counts a uid's processes (in its user namespace): here the sandbox's own, A and B
        own = 2 if (private or ns & CLONE_NEWUSER or root) else _count_tasks(uid) + 1
        struct.pack_into("i", shm, 8, flags)
        pid = os.fork()
        if pid == 0:
            _child_b(shm, workdir, target, memory_bytes, cpu_s, own + LIMITS["nproc_extra"], ns, mode, private)
        struct.pack_into("i", shm, 16, pid)
        _wait_without_reaping(pid)
        os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - never return into the scorer's code
        try:
            struct.pack_into("i", shm, 8, flags)
            struct.pack_into("i", shm, 24, getattr(exc, "errno", None) or 1)
        finally:
            os._exit(70)


def _child_b(shm, workdir, target, memory_bytes, cpu_s, nproc, ns, mode, private):
    """The solution process: limits, Landlock, seccomp, then ``target(shm)``."""
    flags = 0
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGCHLD):
            signal.signal(s, signal.SIG_DFL)
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 1 << 16)  # the scorer's pipes, files and sockets
        os.environ["TMPDIR"] = workdir
        tempfile.tempdir = workdir
        sys.dont_write_bytecode = True
        _set_rlimits(memory_bytes, cpu_s, nproc)
        flags |= F_RLIMITS
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        flags |= F_NO_NEW_PRIVS
        if private:
            flags |= F_READ_CAP_ONLY  # CAP_DAC_READ_SEARCH (read/search), nothing else, not even in the bounds
        else:
            _drop_caps()
            flags |= F_NO_CAPS
        abi = landlock_abi() if mode == "auto" else 0
        struct.pack_into("i", shm, 20, abi)
        if abi >= 1:
            flags |= _landlock(abi)
        if mode != "weak":
            try:
                flags |= F_SECCOMP if _seccomp() else 0
            except OSError:
                pass
        struct.pack_into("i", shm, 12, flags)
    except BaseException as exc:  # noqa: BLE001
        struct.pack_into("i", shm, 12, flags)
        struct.pack_into("i", shm, 24, getattr(exc, "errno", None) or 2)
        os._exit(71)
    try:
        target(shm)
    finally:
        os._exit(0)
