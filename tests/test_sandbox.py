"""The sandbox for model-written code: hostile "solutions" scored through the real EvalPlus path
(:func:`codeeval.score` -> worker subprocess -> one sandboxed child per check).

Every hostile solution returns the right answer after its escape attempt, so it can only be scored ``fail`` if the
sandbox stopped the attempt; the files, sockets and processes it aimed at are checked afterwards, and a correct
solution scored after all of them shows that the run went on.  The escapes go through ``posix`` (or ``io``) rather
than ``os``, past EvalPlus' in-process guard, which only replaces attributes of ``os``.

They run as root (this machine) and, through ``unshare --user --map-user``, as an ordinary uid: as root the
scorer's checks run as a private uid that owns nothing outside, so changing file metadata there fails anyway; as an
ordinary user the solution owns the victim file and only the sandbox stands in the way."""
from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
import tty
from pathlib import Path

import pytest

from fastdllm_core.evaluation import codeeval

EP = "add_one"
GOOD = f"def {EP}(x):\n    return x + 1\n"


def _probe(mode: str = "auto") -> dict:
    env = {**os.environ, "FASTDLLM_SANDBOX": mode}
    out = subprocess.run([sys.executable, "-m", "fastdllm_core.evaluation.sandbox"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _dataset(tmp_path: Path) -> Path:
    row = {"task_id": "Sandbox/0", "prompt": f"def {EP}(x):\n", "canonical_solution": "    return x + 1\n",
           "entry_point": EP, "base_input": [[1], [2]], "plus_input": [[3]], "atol": 0, "contract": "",
           "test": ""}
    p = tmp_path / "sandbox_problems.jsonl"
    p.write_text(json.dumps(row) + "\n")
    return p


def _hostile(out: Path, home: Path, sock: Path, pty: str) -> dict[str, str]:
    ret = "    return x + 1\n"
    victim = out / "victim"
    return {
        # type a command into a terminal: as a new session's leader, open it as the controlling tty, then TIOCSTI
        "type_into_terminal": (f"import posix, fcntl, termios\ndef {EP}(x):\n"
                               f"    if posix.getsid(0) != posix.getpid():\n        posix.setsid()\n"
                               f"    fd = posix.open('{pty}', posix.O_RDONLY)\n    for c in b'echo pwned\\n':\n"
                               f"        fcntl.ioctl(fd, termios.TIOCSTI, bytes([c]))\n" + ret),
        # inode flags of a file outside, through a read-only descriptor (FS_IOC_SETFLAGS: + FS_NODUMP_FL)
        "chattr_outside": (f"import posix, fcntl, array\ndef {EP}(x):\n"
                           f"    fd = posix.open('{victim}', posix.O_RDONLY)\n"
                           f"    a = array.array('l', [0])\n    fcntl.ioctl(fd, 0x80086601, a)\n"
                           f"    fcntl.ioctl(fd, 0x40086602, array.array('l', [a[0] | 0x40]))\n" + ret),
        # metadata of a file outside (Landlock does not cover it: the read-only mount and seccomp do)
        "utime_outside": f"def {EP}(x):\n    __import__('posix').utime('{victim}', (5, 5))\n" + ret,
        "xattr_outside": f"def {EP}(x):\n    __import__('posix').setxattr('{victim}', 'user.pwned', b'1')\n" + ret,
        "chmod_outside": f"def {EP}(x):\n    __import__('posix').chmod('{victim}', 0o777)\n" + ret,
        # a pathname UNIX socket outside (an ssh-agent, a container runtime): reachable through every namespace
        "unix_socket_outside": (f"import socket\ndef {EP}(x):\n    s = socket.socket(socket.AF_UNIX)\n"
                                f"    s.connect('{sock}')\n    s.sendall(b'leak')\n" + ret),
        "system": f"def {EP}(x):\n    __import__('posix').system('touch {out}/system')\n" + ret,
        "posix_spawn": f"import os\ndef {EP}(x):\n    os.posix_spawn('/bin/touch', ['touch', '{out}/spawn'], "
                       f"dict(os.environ))\n" + ret,
        "unlink_outside": f"def {EP}(x):\n    __import__('posix').unlink('{out}/victim')\n" + ret,
        "io_open_outside": f"import io\ndef {EP}(x):\n    io.open('{out}/io_open', 'w').write('x')\n" + ret,
        "fork_50": (f"import posix, time\ndef {EP}(x):\n    for _ in range(50):\n        if posix.fork() == 0:\n"
                    f"            time.sleep(3)\n            posix._exit(0)\n" + ret),
        "fork_bomb": (f"import posix\ndef {EP}(x):\n    while True:\n        try:\n            posix.fork()\n"
                      f"        except BaseException:\n            pass\n" + ret),
        "alloc_50GB": f"def {EP}(x):\n    b = bytearray(50 * 2 ** 30)\n" + ret,
        "infinite_loop": f"def {EP}(x):\n    while True:\n        pass\n",
        "stubborn_loop": (f"def {EP}(x):\n    while True:\n        try:\n"
                          "            while True:\n                pass\n"
                          f"        except BaseException:\n            pass\n"),
        "write_home": f"import io\ndef {EP}(x):\n    io.open('{home}/pwned', 'w').write('x')\n" + ret,
        "leave_session_and_sleep": (f"import ctypes, os, time\ndef {EP}(x):\n    os.setsid()\n"
                                    f"    ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n    while True:\n"
                                    f"        try:\n            time.sleep(100)\n        except BaseException:\n"
                                    f"            pass\n"),
    }


def _leftover_processes(marker: str) -> list[str]:
    """Processes (other than this one) whose command line names ``marker``: sandboxes are forks of the worker,
    whose command line holds the samples path under ``tmp_path``."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            found.append(f"{d}: {cmd[:200]}")
    return found


class _Listener:
    """A UNIX socket outside every sandbox, recording what reaches it."""

    def __init__(self, path: Path):
        import socket
        import threading

        self.path, self.got = path, []
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(str(path))
        os.chmod(path, 0o666)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        import socket

        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.got.append(conn.recv(100))
                except OSError:
                    self.got.append(b"<connected>")

    def close(self) -> list:
        self.stop.set()
        self.thread.join(5)
        self.sock.close()
        return self.got


# scores the solutions in a child process (as the uid unshare maps): codeeval.score's arguments from a JSON file
_SCORE_SCRIPT = """
import json, sys
from pathlib import Path
from fastdllm_core.evaluation import codeeval
a = json.loads(Path(sys.argv[1]).read_text())
res = codeeval.score(Path(a["dataset"]), "humaneval", a["solutions"], Path(a["work"]), base_only=a["base_only"],
                     min_time_limit=0.3, parallel=2)
Path(sys.argv[2]).write_text(json.dumps(res))
"""
AS_USER = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]


def _can_run_as_user() -> bool:
    try:
        return subprocess.run([*AS_USER, sys.executable, "-c", "import os; assert os.geteuid() == 1000"],
                              capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _score_hostile(tmp_path, monkeypatch, mode, skip=(), base_only=False, as_user=False):
    out, home, tmp = tmp_path / "outside", tmp_path / "home", tmp_path / "tmp"
    for d in (out, home, tmp, tmp_path / "sock"):
        d.mkdir()
    victim = out / "victim"
    victim.write_text("keep me")
    os.chmod(victim, 0o644)
    os.utime(victim, (1000, 1000))
    listener = _Listener(tmp_path / "sock" / "agent.sock")
    pty_master, pty = os.openpty()  # a terminal no one uses, in raw mode: what is typed into it can be read at once
    tty.setraw(pty)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("FASTDLLM_SANDBOX_DIR", str(tmp))  # the sandboxes' working directories are made here
    monkeypatch.setenv("FASTDLLM_SANDBOX", mode)
    hostile = {k: v for k, v in _hostile(out, home, listener.path, os.ttyname(pty)).items() if k not in skip}
    sols = [{"task_id": "Sandbox/0", "solution": GOOD}]
    sols += [{"task_id": "Sandbox/0", "solution": code} for code in hostile.values()]
    sols += [{"task_id": "Sandbox/0", "solution": GOOD}]
    t0 = time.perf_counter()
    try:
        if as_user:
            args = tmp_path / "score_args.json"
            args.write_text(json.dumps({"dataset": str(_dataset(tmp_path)), "solutions": sols,
                                        "work": str(tmp_path / "work"), "base_only": base_only}))
            proc = subprocess.run([*AS_USER, sys.executable, "-c", _SCORE_SCRIPT, str(args),
                                   str(tmp_path / "res.json")], capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr[-3000:]
            res = json.loads((tmp_path / "res.json").read_text())
        else:
            res = codeeval.score(_dataset(tmp_path), "humaneval", sols, tmp_path / "work", base_only=base_only,
                                 min_time_limit=0.3, parallel=2)
    finally:
        elapsed = time.perf_counter() - t0
        time.sleep(0.2)
        received = listener.close()
        os.set_blocking(pty, False)
        with contextlib.suppress(BlockingIOError):
            received.append(os.read(pty, 100))
        os.close(pty)
        os.close(pty_master)
    return res, dict(zip(hostile, res[1:-1])), out, home, tmp, elapsed, received


def _victim_untouched(victim: Path) -> dict:
    """What changed about the victim file (empty when nothing did)."""
    st = victim.stat()
    changed = {}
    if victim.read_text() != "keep me":
        changed["content"] = victim.read_text()
    if st.st_mode & 0o7777 != 0o644:
        changed["mode"] = oct(st.st_mode & 0o7777)
    if int(st.st_mtime) != 1000:
        changed["mtime"] = st.st_mtime
    with contextlib.suppress(OSError):
        if os.listxattr(victim):
            changed["xattrs"] = os.listxattr(victim)
    with contextlib.suppress(OSError), open(victim) as fh:  # FS_IOC_GETFLAGS where the file system has it
        flags = array.array("l", [0])
        fcntl.ioctl(fh.fileno(), 0x80086601, flags)
        if flags[0] & 0x40:
            changed["inode flags"] = hex(flags[0])
    return changed


@pytest.mark.parametrize("mode,as_user", [("auto", False), ("mountns", False), ("auto", True), ("mountns", True)])
def test_hostile_solutions_are_contained_and_scored_failed(tmp_path, monkeypatch, mode, as_user):
    probe = _probe(mode)
    if not probe["full"]:
        pytest.skip(f"this kernel does not give the full sandbox in mode {mode}: {probe['description']}")
    if as_user and not _can_run_as_user():
        pytest.skip("cannot run as an ordinary uid here (unshare --user --map-user)")
    res, by_name, out, home, tmp, elapsed, received = _score_hostile(tmp_path, monkeypatch, mode, as_user=as_user)
    assert res[0]["base_status"] == "pass" and res[0]["plus_status"] == "pass"
    assert res[-1]["base_status"] == "pass" and res[-1]["plus_pass"], "the run did not go on after the hostile ones"
    not_failed = {k: (r["base_status"], r["plus_status"]) for k, r in by_name.items() if r["base_pass"]}
    assert not not_failed, f"escape attempts scored as passing: {not_failed}"
    assert all(r["base_status"] in ("fail", "timeout") for r in by_name.values())
    # nothing outside the sandbox's working directory was written, removed or changed, nothing left through a socket
    assert sorted(p.name for p in out.iterdir()) == ["victim"]
    assert _victim_untouched(out / "victim") == {}
    assert not (home / "pwned").exists()
    assert received == [], f"a solution reached a UNIX socket or a terminal outside the sandbox: {received}"
    # every working directory was removed, and no process of the sandboxes is left
    assert list(tmp.iterdir()) == []
    assert _leftover_processes(str(tmp_path)) == []
    sandbox = set(res[0]["sandbox"].split("+"))
    if not as_user:
        assert sandbox == set(probe["description"].split("+")), (sandbox, probe["description"])
    # mountns: the read-only mount namespace alone; auto: with Landlock where the kernel has it
    assert any(x.startswith("landlock") for x in sandbox) == (mode == "auto" and probe["landlock_abi"] >= 1)
    assert "mountns-readonly" in sandbox or mode == "auto"
    assert {"pidns", "seccomp", "rlimits", "nproc-bound", "session", "workdir"} <= sandbox
    if os.geteuid() == 0 and not as_user:
        assert {"private-uid", "cap-dac-read-search-only"} <= sandbox
    else:
        assert {"userns", "no-caps"} <= sandbox
    assert elapsed < 90


def test_weak_mode_is_reported_and_the_run_goes_on(tmp_path, monkeypatch, caplog):
    """Without namespaces, Landlock and seccomp (FASTDLLM_SANDBOX=weak, what an old kernel gives) the run still
    completes, processes are still cleaned up, and the weaker sandbox is logged and recorded."""
    import logging

    caplog.set_level(logging.WARNING, logger="fastdllm_core.evaluation.codeeval")
    # without seccomp, RLIMIT_NPROC (a private uid when run as root) bounds the forks
    res, by_name, out, home, tmp, _, _ = _score_hostile(tmp_path, monkeypatch, "weak", base_only=True)
    assert res[0]["base_pass"] and res[-1]["base_pass"]
    assert "nproc-bound" in res[0]["sandbox"]
    for name in ("fork_50", "fork_bomb", "alloc_50GB", "infinite_loop", "stubborn_loop",
                 "leave_session_and_sleep"):
        assert not by_name[name]["base_pass"], name
    assert "landlock" not in res[0]["sandbox"] and "seccomp" not in res[0]["sandbox"]
    assert any("weaker sandbox" in r.getMessage() for r in caplog.records)
    assert list(tmp.iterdir()) == []
    assert _leftover_processes(str(tmp_path)) == []  # the process group was killed at the end of each check


def test_probe_reports_this_kernel():
    p = _probe()
    assert p["ok"] and p["mode"] == "auto"
    assert {"session", "rlimits", "workdir", "no-new-privs"} <= set(p["description"].split("+"))
    if p["landlock_abi"]:
        assert "landlock" in p["description"]


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_solutions_can_import_modules_not_loaded_by_the_scorer(tmp_path, monkeypatch):
    """As root the solution runs as a private uid (so that RLIMIT_NPROC applies): it must still import stdlib
    modules that the scorer never loaded (read access is not restricted).  By default the working directories
    are made in the scoring call's private scratch directory, not in the system's temporary directory."""
    monkeypatch.delenv("FASTDLLM_SANDBOX_DIR", raising=False)
    (tmp_path / "systmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "systmp"))
    code = (f"def {EP}(x):\n    import fractions, statistics, decimal, sqlite3, xml.dom.minidom, cmath\n"
            f"    return int(fractions.Fraction(x, 1) + statistics.mean([1, 1]))\n")
    res = codeeval.score(_dataset(tmp_path), "humaneval", [{"task_id": "Sandbox/0", "solution": code}],
                         tmp_path / "work", base_only=False, min_time_limit=0.5)
    assert res[0]["base_pass"] and res[0]["plus_pass"], res
    assert list((tmp_path / "systmp").iterdir()) == [] and list((tmp_path / "work").iterdir()) == []


def test_killing_the_scorer_kills_its_sandboxes(tmp_path):
    marker = f"fastdllm-pdeath-{tmp_path.name}"
    code = ("import evalplus.eval\nfrom fastdllm_core.evaluation import sandbox as sb\nprint('start', flush=True)\n"
            "sol = 'import time\\ndef f(x):\\n    while True:\\n        try:\\n            time.sleep(100)\\n"
            "        except BaseException:\\n            pass\\n'\n"
            "sb.untrusted_check('humaneval', sol, [[1]], 'f', [2], 0, [10.0], fast_check=True, min_time_limit=20)\n")
    p = subprocess.Popen([sys.executable, "-c", code, marker], stdout=subprocess.PIPE, text=True,
                         env={**os.environ, "FASTDLLM_SANDBOX_DIR": str(tmp_path)})  # what a SIGKILL leaves
    try:
        assert p.stdout.readline().strip() == "start"
        deadline = time.time() + 20
        while len(_leftover_processes(marker)) < 3 and time.time() < deadline:  # scorer, A and the solution
            time.sleep(0.2)
        assert len(_leftover_processes(marker)) >= 3
    finally:
        p.kill()
        p.wait()
    deadline = time.time() + 5
    while _leftover_processes(marker) and time.time() < deadline:
        time.sleep(0.1)
    assert _leftover_processes(marker) == []


# the EvalPlus worker with a sandbox whose setup fails in the given modes (as with a security module that lets a
# process create a user namespace but not use it): the modes are read in the sandbox's outer process
_BROKEN_WORKER = """
import errno, os, struct, sys
from fastdllm_core.evaluation.sandbox import process, worker
broken, real = sys.argv[1].split(","), process._child_a
def child_a(shm, workdir, target, memory_bytes, cpu_s, mode, private_id):
    if mode in broken:
        struct.pack_into("i", shm, 24, errno.EPERM)
        os._exit(70)
    real(shm, workdir, target, memory_bytes, cpu_s, mode, private_id)
process._child_a = child_a  # what process.run forks
sys.exit(worker.main(sys.argv[2:]))
"""


@pytest.mark.parametrize("broken,expect_mode", [("auto", "mountns"), ("auto,mountns", "weak"),
                                                ("auto,mountns,weak", None)])
def test_a_sandbox_that_cannot_be_set_up_falls_back_loudly(tmp_path, broken, expect_mode):
    """Before: every check ended without a verdict and every solution, right or wrong, was scored ``timeout``."""
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "Sandbox/0", "solution": GOOD}) + "\n"
                       + json.dumps({"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n    return x\n"}) + "\n")
    env = {**os.environ, "HUMANEVAL_OVERRIDE_PATH": str(_dataset(tmp_path)), "FASTDLLM_SANDBOX": "auto",
           "FASTDLLM_SANDBOX_DIR": str(tmp_path)}
    r = subprocess.run([sys.executable, "-c", _BROKEN_WORKER, broken, "score", "--dataset", "humaneval",
                        "--samples", str(samples), "--out", str(tmp_path / "res.json"), "--min-time-limit", "0.3"],
                       env=env, capture_output=True, text=True, timeout=300)
    if expect_mode is None:
        assert r.returncode == 2 and "cannot be set up on this machine: auto (setup error: Operation not permitted)" \
            in r.stderr, r.stderr
        assert not (tmp_path / "res.json").exists()
        return
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "res.json").read_text())
    assert [x["base_status"] for x in doc["results"]] == ["pass", "fail"]
    assert [x["plus_status"] for x in doc["results"]] == ["pass", "fail"]
    assert doc["sandbox"]["mode"] == expect_mode and doc["sandbox"]["setup_failures"] == 0
    assert doc["sandbox"]["fallback_from"].startswith("auto (setup error: Operation not permitted)")
    assert f"WARNING: weaker sandbox than the full set (mode {expect_mode}, after auto" in r.stderr
