"""Provenance for every result row, and atomic writes.

Every tidy results CSV row carries :func:`run_metadata` columns: git commit, config hash, hardware (GPU name and
driver when present), package versions and seed.  Files are written to a temporary file in the same directory
and renamed into place, so a killed job never leaves a half-written result; they get the mode a plain ``open``
would give them (``0666`` minus the umask, i.e. 0644 under the usual umask 022), not ``mkstemp``'s 0600.
"""
from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
import io
import json
import logging
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

log = logging.getLogger(__name__)

NOT_AVAILABLE = "not available"
META_COLUMNS = [
    "git_commit", "config_hash", "hostname", "device_type", "device_name", "gpu_driver", "cuda_version",
    "cpu", "cpu_isa", "mkl_cbwr", "torch_version", "transformers_version", "accelerate_version", "lm_eval_version",
    "python_version", "seed",
]


def package_version(dist: str) -> str:
    """The installed version of distribution ``dist`` (read from its metadata, nothing imported), or
    ``not installed``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


@functools.lru_cache(maxsize=1)
def git_commit() -> str:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        commit = out.stdout.strip()
        if out.returncode != 0 or not commit:
            return "unknown"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def config_hash(config) -> str:
    """Short stable hash of a JSON-serialisable config (dicts hashed with sorted keys)."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


def hardware(device: str | None = None) -> dict:
    import torch

    info = {"device_type": "cpu", "device_name": platform.processor() or platform.machine(),
            "gpu_driver": NOT_AVAILABLE, "cuda_version": NOT_AVAILABLE, "cpu": _cpu_name()}
    dev = torch.device(device) if device else None
    if (dev is None or dev.type == "cuda") and torch.cuda.is_available():
        idx = dev.index if dev is not None and dev.index is not None else torch.cuda.current_device()
        info.update(device_type="cuda", device_name=torch.cuda.get_device_name(idx),
                    cuda_version=str(torch.version.cuda))
        info["gpu_driver"] = _nvml_driver() or NOT_AVAILABLE
    else:
        info["device_name"] = info["cpu"]
    return info


@functools.lru_cache(maxsize=1)
def _cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _nvml_driver() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            drv = pynvml.nvmlSystemGetDriverVersion()
            return drv.decode() if isinstance(drv, bytes) else str(drv)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # noqa: BLE001 - no NVML means "not available"
        return None


def run_metadata(config=None, seed=None, device: str | None = None) -> dict:
    import torch
    import transformers

    from .cpu_numerics import describe

    meta = {"git_commit": git_commit(), "config_hash": config_hash(config) if config is not None else "",
            "hostname": socket.gethostname(), **hardware(device), **describe(), "torch_version": torch.__version__,
            "transformers_version": transformers.__version__, "accelerate_version": package_version("accelerate"),
            "lm_eval_version": package_version("lm_eval"), "python_version": platform.python_version(),
            "seed": "" if seed is None else seed}
    return {k: meta[k] for k in META_COLUMNS}


def _umask() -> int:
    """The process umask, read without changing it (``/proc/self/status``), else via ``os.umask``."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a result file gets the usual 0644 (umask 022)
    finally:
        os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text_atomic(path, text: str) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text)


def write_json_atomic(path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_csv_atomic(path, rows: list[dict], columns: list[str] | None = None) -> None:
    """Write dict rows as CSV atomically; columns default to the union of keys in first-seen order."""
    if columns is None:
        columns = []
        for r in rows:
            columns += [k for k in r if k not in columns]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="raise", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in columns})
    write_text_atomic(path, buf.getvalue())


# ------------------------------------------------------------------------------------------------ out_dir lock
LOCK_NAME = ".fastdllm.lock"
_HELD: dict[str, list] = {}  # lock path -> [fd, depth] for the locks this process holds (re-entrant)


class OutDirBusy(RuntimeError):
    """Another run is writing the same output directory."""


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` of this host is alive (this process is; one of another user counts as alive): the
    one liveness check of the run lock and the output-directory lock."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder_text(h: dict) -> str:
    return (f"pid {h.get('pid')} on host {h.get('host')}, started {h.get('started')}"
            + (f" ({h.get('what')}: {h.get('argv')})" if h.get("argv") else f" ({h.get('what')})"))


@contextlib.contextmanager
def out_dir_lock(out_dir, what: str = "run", extra: dict | None = None):
    """Hold ``out_dir/.fastdllm.lock`` while writing ``out_dir``: a second concurrent writer gets
    :class:`OutDirBusy` naming the holder (pid, host, start time).  The lock is an ``flock`` (released by the kernel
    when the holder dies) plus the holder's description in the file (with ``extra``'s keys); a file left by a
    process that is gone from this host is taken over with a warning, one written on another host is respected
    (delete it when that run is gone).  Re-entrant within a process; the file is removed on release."""
    out_dir = Path(out_dir)
    created = [p for p in [out_dir, *out_dir.parents] if not p.exists()]  # removed again if left empty
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / LOCK_NAME
    key = str(path.resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield path
        finally:
            _HELD[key][1] -= 1
        return
    fd = _acquire(path, out_dir)
    try:
        _check_holder(fd, path, out_dir)
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "what": what, "argv": " ".join(sys.argv)[:300],
                **(extra or {})}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info) + "\n").encode(), 0)
    except BaseException:
        os.close(fd)
        raise
    _HELD[key] = [fd, 1]
    try:
        yield path
    finally:
        del _HELD[key]
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)
        for d in created:  # a failed run leaves no empty output directory behind
            try:
                d.rmdir()
            except OSError:
                break


def _acquire(path: Path, out_dir: Path) -> int:
    """An open, ``flock``-ed descriptor of the lock file ``path`` (:class:`OutDirBusy` when another process
    holds it)."""
    import fcntl

    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise OutDirBusy(f"{out_dir} is being written by another {holder.get('what', 'run')}: "
                             f"{_holder_text(holder)}; lock file {path}") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the holder removed the file between our open and flock: try again


def _check_holder(fd: int, path: Path, out_dir: Path) -> None:
    """The description left in the lock file: another host's is respected (:class:`OutDirBusy`), a live process's
    too, a dead process's is taken over with a warning."""
    old = _read_holder(fd)
    if not old:
        return
    host = socket.gethostname()
    if old.get("host") != host:
        raise OutDirBusy(f"{out_dir} has a lock from another host: {_holder_text(old)}; lock file {path} "
                         "(delete it if that run is gone)")
    pid = int(old.get("pid", 0) or 0) if str(old.get("pid", "")).isdigit() else 0
    if pid != os.getpid():
        if pid and pid_alive(pid):
            raise OutDirBusy(f"{out_dir} is being written by another {old.get('what', 'run')}: "
                             f"{_holder_text(old)}; lock file {path}")
        msg = f"taking over the stale lock {path} of {_holder_text(old)}: that process is gone"
        log.warning(msg)
        print(f"warning: {msg}", file=sys.stderr)


def _read_holder(fd: int) -> dict:
    try:
        raw = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        return json.loads(raw) if raw else {}
    except (OSError, ValueError):
        return {"pid": "?", "host": "?", "started": "?", "what": "run (unreadable lock file)"}


# what can move a number of a DAG run: the library, the workflow, the analysis and the embedded default's config
SOURCE_GLOBS = ("Snakefile", "workflow/**/*.py", "workflow/**/*.smk", "workflow/schemas/*.yaml",
                "fastdllm_core/**/*.py", "fastdllm_core/**/*.json", "analysis/**/*.py", "analysis/**/*.csv",
                "config/config.yaml")


def _normalised_source(path: Path) -> bytes:
    """A file's content as far as behaviour goes: Python without docstrings and comments (its AST), YAML as data,
    Snakemake files without comment lines; anything else as bytes."""
    import ast

    raw = path.read_bytes()
    if path.suffix == ".py":
        try:
            tree = ast.parse(raw)
        except SyntaxError:
            return raw
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                    and isinstance(getattr(body[0], "value", None), ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
        return ast.dump(tree).encode()
    if path.suffix == ".yaml":
        import yaml

        return json.dumps(yaml.safe_load(raw), sort_keys=True, default=str).encode()
    if path.suffix == ".smk" or path.name == "Snakefile":
        return b"\n".join(ln.rstrip() for ln in raw.splitlines() if ln.strip() and not ln.lstrip().startswith(b"#"))
    return raw


def source_fingerprint(root: str | os.PathLike) -> str:
    """Hash of everything under ``root`` that can move a result of the DAG (:data:`SOURCE_GLOBS`), insensitive to
    comments and docstrings: the summary page records it, and a test checks that the committed results page was
    made by the code that is committed beside it."""
    root = Path(root)
    h = hashlib.sha256()
    files = sorted({p for g in SOURCE_GLOBS for p in root.glob(g) if p.is_file() and "__pycache__" not in p.parts})
    for p in files:
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(_normalised_source(p)).digest())
    return h.hexdigest()[:16]
