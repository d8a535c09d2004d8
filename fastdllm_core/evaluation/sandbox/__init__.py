"""Sandbox for model-written code: every EvalPlus check runs in a contained child process.

:func:`untrusted_check` is a drop-in for ``evalplus.eval.untrusted_check`` (same statuses, same per-test time
limits, same overall wall-clock limit, EvalPlus' own in-process guard; its oracles applied by the scorer), but the
code runs in a child process that the operating system contains, with no root needed (docs/sandbox.md, "Sandbox for
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
  ``landlock-read``; :func:`.kernel.read_roots`);
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

Modules: :mod:`.check` (:func:`untrusted_check`, an EvalPlus check in the sandbox), :mod:`.process` (the scorer's
side: :func:`run`), :mod:`.children` (the sandbox's two processes), :mod:`.kernel` (the kernel interfaces they
set up: namespaces, Landlock, seccomp, capabilities, rlimits), :mod:`.probe` (what is in force),
:mod:`.verdict` (the scorer's encoding and judging of the outputs) and :mod:`.worker` (the out-of-process EvalPlus
scorer, ``python -m fastdllm_core.evaluation.sandbox.worker``; not imported here).
"""
from __future__ import annotations

from .check import OUTPUT_BYTES, untrusted_check
from .kernel import FAIL, PASS, TIMEOUT
from .probe import describe, is_full, missing, probe, probe_with_fallback
from .process import run

__all__ = ["FAIL", "OUTPUT_BYTES", "PASS", "TIMEOUT", "describe", "is_full", "missing", "probe",
           "probe_with_fallback", "run", "untrusted_check"]
