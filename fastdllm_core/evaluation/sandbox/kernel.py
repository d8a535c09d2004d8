"""The kernel interfaces the sandbox's two processes (:mod:`.children`) use before the solution runs (see
:mod:`fastdllm_core.evaluation.sandbox`): the flags they report, the shared page's header and statuses, the
modes, and prctl, a read-only mount namespace, Landlock, seccomp, capabilities, rlimits and a private uid."""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

# ------------------------------------------------------------------------------------------------ constants
F_SESSION, F_RLIMITS, F_USERNS = 1 << 0, 1 << 1, 1 << 3
F_PIDNS, F_NETNS, F_IPCNS, F_MOUNT_RO = 1 << 4, 1 << 5, 1 << 6, 1 << 7
F_LANDLOCK_FS, F_LANDLOCK_NET, F_LANDLOCK_SCOPE, F_NO_NEW_PRIVS = 1 << 8, 1 << 9, 1 << 10, 1 << 11
F_NO_CAPS, F_SECCOMP, F_WORKDIR = 1 << 12, 1 << 13, 1 << 14
F_PRIVATE_UID, F_NPROC, F_READ_CAP_ONLY, F_LANDLOCK_READ = 1 << 15, 1 << 16, 1 << 17, 1 << 18
FLAG_NAMES = {F_SESSION: "session", F_RLIMITS: "rlimits", F_PRIVATE_UID: "private-uid", F_NPROC: "nproc-bound",
              F_USERNS: "userns", F_PIDNS: "pidns", F_NETNS: "netns", F_IPCNS: "ipcns", F_MOUNT_RO: "mountns-readonly",
              F_LANDLOCK_FS: "landlock-fs", F_LANDLOCK_NET: "landlock-net", F_LANDLOCK_SCOPE: "landlock-scope",
              F_NO_NEW_PRIVS: "no-new-privs", F_NO_CAPS: "no-caps", F_READ_CAP_ONLY: "cap-dac-read-search-only",
              F_SECCOMP: "seccomp", F_WORKDIR: "workdir", F_LANDLOCK_READ: "landlock-read"}

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET, CLONE_THREAD = 0x20000000, 0x40000000, 0x00010000
MS_RDONLY, MS_BIND, MS_REC, MS_PRIVATE = 1, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER = 1, 38, 22, 36
PR_CAPBSET_DROP, PR_SET_SECUREBITS, SECBIT_NOROOT, SECBIT_NOROOT_LOCKED = 24, 28, 1, 2
PR_SET_KEEPCAPS, CAP_DAC_READ_SEARCH = 8, 2
SECCOMP_MODE_FILTER = 2
AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = -100, 0x8000, 0x1

# syscall numbers (landlock and mount_setattr are in the generic table: the same on x86_64 and aarch64)
SYS_MOUNT_SETATTR, SYS_LL_CREATE, SYS_LL_ADD_RULE, SYS_LL_RESTRICT = 442, 444, 445, 446
LL_CREATE_RULESET_VERSION, LL_RULE_PATH_BENEATH = 1, 1
LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
LL_REMOVE_DIR, LL_REMOVE_FILE, LL_MAKE_CHAR, LL_MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
LL_MAKE_REG, LL_MAKE_SOCK, LL_MAKE_FIFO, LL_MAKE_BLOCK = 1 << 8, 1 << 9, 1 << 10, 1 << 11
LL_MAKE_SYM, LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 12, 1 << 13, 1 << 14, 1 << 15
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1 << 0, 1 << 1
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1 << 0, 1 << 1

# seccomp, per architecture: audit arch; syscalls that kill the solution (creating a process, executing a program,
# open_by_handle_at); syscalls that fail with EPERM: socket() (no socket of any family: a pathname UNIX socket
# outside the working directory, e.g. an ssh-agent or a container runtime's, is reachable through every
# namespace and Landlock ABI <= 7; socketpair() stays allowed), io_uring_setup (io_uring performs socket and
# other operations that seccomp cannot see), changes of file metadata (chmod, chown, utimes, extended attributes,
# file_setattr: Landlock does not cover them) and the kernel keyrings; ioctl; clone; clone3
_SECCOMP_ARCH = {
    "x86_64": (0xC000003E, {"fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "open_by_handle_at": 304},
               {"socket": 41, "io_uring_setup": 425, "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452,
                "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260, "utime": 132, "utimes": 235,
                "futimesat": 261, "utimensat": 280, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190,
                "removexattr": 197, "lremovexattr": 198, "fremovexattr": 199, "setxattrat": 463,
                "removexattrat": 466, "file_setattr": 469, "add_key": 248, "request_key": 249, "keyctl": 250},
               16, 56, 435),
    "aarch64": (0xC00000B7, {"execve": 221, "execveat": 281, "open_by_handle_at": 265},
                {"socket": 198, "io_uring_setup": 425, "fchmod": 52, "fchmodat": 53, "fchmodat2": 452,
                 "fchown": 55, "fchownat": 54, "utimensat": 88, "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7,
                 "removexattr": 14, "lremovexattr": 15, "fremovexattr": 16, "setxattrat": 463,
                 "removexattrat": 466, "file_setattr": 469, "add_key": 217, "request_key": 218, "keyctl": 219},
                29, 220, 435),
}
# ioctl requests that fail with EPERM (on a file opened read-only outside the working directory they would still
# act): TIOCSTI / TIOCLINUX (type into a terminal), FS_IOC_SETFLAGS (64- and 32-bit) / FS_IOC_FSSETXATTR (inode
# flags); the kernel compares the request as 32 bits
DENIED_IOCTLS = (0x5412, 0x541C, 0x40086602, 0x40046602, 0x401C5820)
SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO, SECCOMP_RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000

LIMITS = {"nproc_extra": 16, "fsize_bytes": 64 << 20, "nofile": 128}
PASS, FAIL, TIMEOUT = "pass", "fail", "timeout"
_SUCCESS, _FAILED, _UNKNOWN = 0, 1, 3
_HDR = 32  # shared page: stat, progress, A's flags, B's flags, B's pid, landlock ABI, setup error (int32 each)

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _check(ret: int, what: str) -> int:
    if ret < 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{what}: {os.strerror(e)}")
    return ret


def _prctl(option: int, arg2: int = 0) -> int:
    return _check(_libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0),
                              ctypes.c_ulong(0)), f"prctl({option})")


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    r = _libc.syscall(SYS_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(LL_CREATE_RULESET_VERSION))
    return int(r) if r > 0 else 0


MODES = ("auto", "mountns", "weak")  # strongest first


def _mode() -> str:
    m = os.environ.get("FASTDLLM_SANDBOX", "auto").strip().lower() or "auto"
    if m not in MODES:
        raise ValueError(f"FASTDLLM_SANDBOX={m!r}: choose auto, mountns or weak")
    return m


# ------------------------------------------------------------------------------------------------ kernel interfaces
def _mount_readonly(workdir: str) -> None:
    """In a fresh mount namespace: every mount read-only, the working directory a writable bind mount."""
    def mount(src, dst, flags):
        _check(_libc.mount(src, dst, None, ctypes.c_ulong(flags), None), f"mount {dst}")

    mount(None, b"/", MS_REC | MS_PRIVATE)
    wd = workdir.encode()
    mount(wd, wd, MS_BIND | MS_REC)
    attr = struct.pack("QQQQ", MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(_libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, b"/", AT_RECURSIVE, attr, len(attr)), "mount_setattr /")
    attr = struct.pack("QQQQ", 0, MOUNT_ATTR_RDONLY, 0, 0)
    _check(_libc.syscall(SYS_MOUNT_SETATTR, AT_FDCWD, wd, 0, attr, len(attr)), "mount_setattr workdir")


# what a solution may read besides its own working directory (Landlock): the Python installation and the system's
# shared libraries (so that modules and C extensions still import), nothing else: not the dataset file, not
# EvalPlus' ground-truth cache, not the project, not $HOME
SYSTEM_READ_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")
SYSTEM_READ_FILES = ("/etc/ld.so.cache", "/etc/localtime", "/dev/null", "/dev/urandom", "/dev/zero")


def read_roots() -> tuple[list[str], list[str]]:
    """(directories, files) a solution may read beneath: ``sys.prefix``/``base_prefix``/``exec_prefix``, the
    site-packages directories, the system's library directories and a few files (the dynamic loader's cache)."""
    import site

    dirs = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *SYSTEM_READ_DIRS]
    try:
        dirs += [*site.getsitepackages(), site.getusersitepackages()]
    except AttributeError:  # a virtualenv's old site module
        pass
    dirs = sorted({os.path.realpath(d) for d in dirs if d and os.path.isdir(d)})
    return dirs, [f for f in SYSTEM_READ_FILES if os.path.exists(f)]


def _ll_rule(rfd: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        rule = struct.pack("=Qi", access, fd)
        _check(_libc.syscall(SYS_LL_ADD_RULE, rfd, LL_RULE_PATH_BENEATH, rule, 0), f"landlock rule {path}")
    finally:
        os.close(fd)


def _landlock(abi: int) -> int:
    """Restrict this process: writes of any kind only beneath the cwd (and /dev/null); reads only beneath the cwd
    and :func:`read_roots`; no TCP; scoped signals."""
    fs = (LL_WRITE_FILE | LL_REMOVE_DIR | LL_REMOVE_FILE | LL_MAKE_CHAR | LL_MAKE_DIR | LL_MAKE_REG | LL_MAKE_SOCK
          | LL_MAKE_FIFO | LL_MAKE_BLOCK | LL_MAKE_SYM | LL_READ_FILE | LL_READ_DIR)
    fs |= LL_REFER if abi >= 2 else 0
    fs |= LL_TRUNCATE if abi >= 3 else 0
    fs |= LL_IOCTL_DEV if abi >= 5 else 0
    net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP if abi >= 4 else 0
    scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    dirs, files = read_roots()  # computed (and opened) before the ruleset applies
    rfd = _check(_libc.syscall(SYS_LL_CREATE, attr, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)),
                 "landlock_create_ruleset")
    try:
        _ll_rule(rfd, ".", fs)
        _ll_rule(rfd, "/dev/null", LL_WRITE_FILE | LL_READ_FILE | (LL_TRUNCATE if abi >= 3 else 0))
        for d in dirs:
            _ll_rule(rfd, d, LL_READ_FILE | LL_READ_DIR)
        for f in files:
            if f != "/dev/null":
                _ll_rule(rfd, f, LL_READ_FILE)
        _check(_libc.syscall(SYS_LL_RESTRICT, rfd, 0), "landlock_restrict_self")
    finally:
        os.close(rfd)
    return F_LANDLOCK_FS | F_LANDLOCK_READ | (F_LANDLOCK_NET if net else 0) | (F_LANDLOCK_SCOPE if scoped else 0)


def _seccomp() -> bool:
    """Kill the process on fork/vfork/execve/execveat/open_by_handle_at and on clone without CLONE_THREAD (threads
    stay allowed); clone3 fails with ENOSYS (its flags cannot be inspected; libc then falls back to clone); the
    syscalls and ioctl requests of :data:`_SECCOMP_ARCH` / :data:`DENIED_IOCTLS` fail with EPERM."""
    spec = _SECCOMP_ARCH.get(platform.machine())
    if spec is None:
        return False
    arch, kill_nrs, eperm_nrs, nr_ioctl, nr_clone, nr_clone3 = spec
    LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JSET|K, BPF_RET|K
    kill = (RET, 0, 0, SECCOMP_RET_KILL_PROCESS)
    eperm, allow = (RET, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM), (RET, 0, 0, SECCOMP_RET_ALLOW)
    prog = [(LD, 0, 0, 4), (JEQ, 1, 0, arch), kill, (LD, 0, 0, 0)]  # seccomp_data: nr at 0, arch at 4
    if platform.machine() == "x86_64":  # x32 ABI numbers
        prog += [(0x35, 0, 1, 0x40000000), kill]  # BPF_JGE
    for nr in sorted(kill_nrs.values()):
        prog += [(JEQ, 0, 1, nr), kill]
    prog += [(JEQ, 0, 1, nr_clone3), (RET, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS)]
    for nr in sorted(eperm_nrs.values()):
        prog += [(JEQ, 0, 1, nr), eperm]
    # ioctl: the request (args[1], low 32 bits at offset 24 on a little-endian machine) against DENIED_IOCTLS
    n = len(DENIED_IOCTLS)
    prog += [(JEQ, 0, n + 3, nr_ioctl), (LD, 0, 0, 24 if sys.byteorder == "little" else 28)]
    prog += [(JEQ, n - i, 0, req) for i, req in enumerate(DENIED_IOCTLS)]
    prog += [allow, eperm]
    # clone: args[0] (flags) at offset 16; a thread (CLONE_THREAD) is allowed, a process kills
    prog += [(JEQ, 0, 3, nr_clone), (LD, 0, 0, 16), (JSET, 1, 0, CLONE_THREAD), kill]
    prog += [allow]
    filt = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(filt)
    fprog = struct.pack("=HxxxxxxQ" if struct.calcsize("P") == 8 else "=HxxI", len(prog), ctypes.addressof(buf))
    _check(_libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.c_char_p(fprog),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)), "seccomp")
    return True


def _drop_caps() -> None:
    """No capabilities left (also none that uid 0 would regain by executing a program)."""
    if _libc.prctl(PR_SET_SECUREBITS, ctypes.c_ulong(SECBIT_NOROOT | SECBIT_NOROOT_LOCKED), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0:
        for cap in range(64):
            if _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), ctypes.c_ulong(0), ctypes.c_ulong(0),
                           ctypes.c_ulong(0)) != 0:
                break
    hdr = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    _check(_libc.capset(ctypes.c_char_p(hdr), ctypes.c_char_p(bytes(24))), "capset")


def _count_tasks(uid: int) -> int:
    """Threads of ``uid`` on the machine (what RLIMIT_NPROC counts without a user namespace)."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as fh:
                st = fh.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in st.splitlines() if ":" in line)
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            n += int(fields.get("Threads", "1"))
    return n


def _set_rlimits(memory_bytes: int | None, cpu_s: int, nproc: int) -> None:
    import resource

    def lim(kind, soft, hard=None):
        hard = soft if hard is None else hard
        cur_soft, cur_hard = resource.getrlimit(kind)
        if cur_hard != resource.RLIM_INFINITY:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        resource.setrlimit(kind, (soft, hard))

    if memory_bytes:
        lim(resource.RLIMIT_AS, memory_bytes)
    lim(resource.RLIMIT_CPU, cpu_s, cpu_s + 1)
    lim(resource.RLIMIT_NPROC, nproc)
    lim(resource.RLIMIT_FSIZE, LIMITS["fsize_bytes"])
    lim(resource.RLIMIT_NOFILE, LIMITS["nofile"])
    lim(resource.RLIMIT_CORE, 0)


def _become_private_uid(uid: int) -> None:
    """Root only: continue as ``uid`` (used by no one else) with one capability, CAP_DAC_READ_SEARCH, so that the
    solution can still import Python modules from anywhere root can read them (read and search only, never write),
    while RLIMIT_NPROC, which the kernel never applies to uid 0, applies to it."""
    for cap in range(64):  # the bounding set: nothing but CAP_DAC_READ_SEARCH can ever come back
        if cap != CAP_DAC_READ_SEARCH and _libc.prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), ctypes.c_ulong(0),
                                                      ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
            break
    _prctl(PR_SET_KEEPCAPS, 1)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    keep = 1 << CAP_DAC_READ_SEARCH
    hdr = struct.pack("=Ii", 0x20080522, 0)
    data = struct.pack("=IIIIII", keep, keep, 0, 0, 0, 0)  # (effective, permitted, inheritable) x (low, high)
    _check(_libc.capset(ctypes.c_char_p(hdr), ctypes.c_char_p(data)), "capset")
    _prctl(PR_SET_KEEPCAPS, 0)
