"""Provenance for every result row, and atomic writes.

Every tidy results CSV row carries :func:`run_metadata` columns: git commit, config hash, hardware (GPU name and
driver when present), package versions and seed.  Files are written to a temporary file in the same directory
and renamed into place, so a killed job never leaves a half-written result.
"""
from __future__ import annotations

import contextlib
import csv
import functools
import hashlib
import io
import json
import os
import platform
import socket
import subprocess
import tempfile
from pathlib import Path

NOT_AVAILABLE = "not available"
META_COLUMNS = [
    "git_commit", "config_hash", "hostname", "device_type", "device_name", "gpu_driver", "cuda_version",
    "cpu", "torch_version", "transformers_version", "python_version", "seed",
]


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

    meta = {"git_commit": git_commit(), "config_hash": config_hash(config) if config is not None else "",
            "hostname": socket.gethostname(), **hardware(device), "torch_version": torch.__version__,
            "transformers_version": transformers.__version__, "python_version": platform.python_version(),
            "seed": "" if seed is None else seed}
    return {k: meta[k] for k in META_COLUMNS}


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike):
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
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
