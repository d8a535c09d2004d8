"""Helpers that run inside the DAG's jobs (not at parse time): the device a model job runs on, and the
fingerprints of files and code that key the evaluation cache."""
from __future__ import annotations

from pathlib import Path


def require_device(config: dict) -> str:
    """The device a model job runs on; with ``gpu: true`` fail clearly (before any work) when CUDA is missing."""
    import torch

    want = config.get("device", "auto")
    if config.get("gpu") or want == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("this job is configured for a GPU (gpu: true / device: cuda) but no CUDA device is "
                               "available on this machine; run the embedded default (config/config.yaml) on CPU, "
                               "or set gpu: false and device: cpu -- CPU numbers are never labelled as GPU numbers")
        return "cuda"
    if want == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return want


def fingerprint_files(paths) -> list:
    """(name, size, mtime) of every file under the given paths: changes when a checkpoint or data file changes."""
    out = []
    for p in paths:
        p = Path(p)
        files = sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else ([p] if p.is_file() else [])
        out += [(str(f), f.stat().st_size, int(f.stat().st_mtime)) for f in files]
    return out


def code_fingerprint() -> str:
    """Hash of the installed fastdllm_core sources and data files (so cached measurements are redone when the code
    changes)."""
    import hashlib

    import fastdllm_core

    h = hashlib.sha256()
    root = Path(fastdllm_core.__file__).parent
    for f in sorted(p for pattern in ("*.py", "*.json") for p in root.rglob(pattern)):  # code and its data
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]
