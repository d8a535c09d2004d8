"""Helpers that run inside the DAG's jobs (not at parse time): the device a model job runs on, and the
fingerprints of files and code that key the evaluation cache."""
from __future__ import annotations

import csv
import hashlib
import json
import os
import re
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


# environment variables that choose where an evaluation's data comes from (fastdllm_core.evaluation): part of the
# evaluation cache key, with the files they name
DATA_ENV_VARS = ("HUMANEVAL_OVERRIDE_PATH", "MBPP_OVERRIDE_PATH", "FASTDLLM_HUMANEVAL_PATH", "FASTDLLM_GSM8K_PATH",
                 "FASTDLLM_SYNTH_ARITH_PATH", "FASTDLLM_SYNTH_MATH_PATH", "FASTDLLM_SYNTH_MC_PATH",
                 "FASTDLLM_SYNTH_IFEVAL_PATH", "FASTDLLM_SYNTH_CODE_PATH", "FASTDLLM_SYNTH_MBPP_PATH",
                 "FASTDLLM_SHARED_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "FASTDLLM_OFFLINE", "HF_HOME",
                 "HF_DATASETS_CACHE")
FULL_HASH_BYTES = 32 << 20  # files up to this size are hashed whole; larger ones (weights) by size, mtime, samples
_SAMPLE = 1 << 20


def file_digest(f: Path) -> str:
    """sha256 of a file's content; a file over :data:`FULL_HASH_BYTES` (model weights) is keyed by its size,
    mtime (ns) and three 1 MiB samples (start, middle, end): cheap, and a checkpoint replaced at the same path
    changes it."""
    h = hashlib.sha256()
    st = f.stat()
    with open(f, "rb") as fh:
        if st.st_size <= FULL_HASH_BYTES:
            for chunk in iter(lambda: fh.read(_SAMPLE), b""):
                h.update(chunk)
            return h.hexdigest()
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
        for off in (0, st.st_size // 2, max(st.st_size - _SAMPLE, 0)):
            fh.seek(off)
            h.update(fh.read(_SAMPLE))
    return "sampled:" + h.hexdigest()


def fingerprint_files(paths) -> list:
    """(path, size, content digest) of every file under the given paths (symlinks followed): changes when a
    checkpoint or data file changes, also when it is replaced at the same path within the same second."""
    out = []
    for p in paths:
        p = Path(p)
        files = sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else ([p] if p.is_file() else [])
        out += [(str(f), f.stat().st_size, file_digest(f)) for f in files]
    return out


def model_fingerprint(source: str, inputs) -> dict:
    """What the evaluation cache knows of a model: its files (the job's inputs, or the source when it is a local
    path) or, for a Hub id, the commit of its snapshot in the local Hugging Face cache (``refs/main``)."""
    inputs = [inputs] if isinstance(inputs, (str, Path)) else list(inputs or [])  # one named input: a string
    paths = inputs or ([source] if Path(source).exists() else [])
    if paths:
        return {"files": fingerprint_files(paths)}
    from huggingface_hub import constants

    ref = Path(constants.HF_HUB_CACHE) / f"models--{source.replace('/', '--')}" / "refs" / "main"
    return {"hub": source, "snapshot": ref.read_text().strip() if ref.is_file() else "not cached"}


def data_fingerprint(data_path, environ=None) -> dict:
    """What the evaluation cache knows of a task's data: the data file(s) given (content digests), and every
    data-choosing environment variable that is set (:data:`DATA_ENV_VARS`) with the files it names."""
    env = os.environ if environ is None else environ
    out = {"data_path": str(data_path) if data_path else None,
           "files": fingerprint_files([data_path] if data_path else [])}
    for var in DATA_ENV_VARS:
        if v := env.get(var):
            out[var] = {"value": v, "files": fingerprint_files([v]) if var.endswith("_PATH") else []}
    if not data_path:  # the library's fallbacks to the shared copies (gsm8k, the original humaneval)
        from fastdllm_core.evaluation import shared_dir

        base = Path(env["FASTDLLM_SHARED_DIR"]) if env.get("FASTDLLM_SHARED_DIR") else shared_dir()
        out["shared"] = fingerprint_files([base / "data/gsm8k/test.jsonl",
                                           base / "data/humaneval/HumanEval.jsonl.gz"])
    return out


def cached_rows(key_file, csv_file, key: str):
    """The rows cached for ``key``, or None: no cache, another key, or no measured row (only ``n/a`` rows:
    missing data, a missing extra -- never a measurement, so tried again on a rerun).  A measured point keeps
    its companion ``n/a`` rows (HumanEval without plus inputs: ``pass@1_plus``)."""
    key_file, csv_file = Path(key_file), Path(csv_file)
    if not (key_file.is_file() and csv_file.is_file()) or json.loads(key_file.read_text()).get("key") != key:
        return None
    with open(csv_file, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return rows if any(r.get("status") == "ok" for r in rows) else None


def code_fingerprint() -> str:
    """Hash of the installed fastdllm_core sources and data files (so cached measurements are redone when the code
    changes)."""
    import fastdllm_core

    h = hashlib.sha256()
    root = Path(fastdllm_core.__file__).parent
    for f in sorted(p for pattern in ("*.py", "*.json") for p in root.rglob(pattern)):  # code and its data
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def dag_na_reason(task: str, reason: str) -> str:
    """A task's n/a reason as a DAG user reads it: the library's ``data_path=`` (an argument of ``run_task``) is
    the config key ``data.eval_paths.<task>`` here, so the message names that key."""
    key = f"data.eval_paths.{task}"
    out = re.sub(r"\bpass data_path=(\S*)",
                 lambda m: f"set {key} in the config" + (f" to {m[1]}" if m[1] else ""), reason)
    out = re.sub(r"\bfix data_path=", f"fix {key} in the config", out)
    out = re.sub(r"\bdata_path=", key, out)
    return out if key in out else f"{out} (set {key} in the config to a local copy)"


def na_rows(p, config: dict, reason: str, points: dict) -> list[dict]:
    """One ``n/a`` row per task and point of ``points`` (task -> points), ``note`` = ``reason``: a model that
    cannot be trained here (the keys to set) or loaded (a Hub refusal: the repository and ``HF_TOKEN``)."""
    from fastdllm_core.provenance import run_metadata

    m = config["models"][p.model]
    return [{"model": p.model, "model_label": p.label, "task": task, "metric": "", "value": "", "n": 0,
             "status": "n/a", "note": reason, "mode": p.mode, "max_new_tokens": "", "model_key": p.model,
             "scale": config["scale"], "point": point, "model_group": m.get("seed_of", p.model), "train_seed": "",
             "model_source": "", **run_metadata({"task": task, "point": point}, seed=config["seed"])}
            for task, pts in points.items() for point in pts]


def checked_and_loaded(p, config: dict, device: str, data_paths: dict):
    """Every task's data of ``data_paths`` ({task: path}) checked -- bad data (a missing field, a line that is not
    JSON, an empty file) fails here, before the load; data that is not available offline becomes n/a rows later --
    then the model loaded: ``(loaded model, "")``, or ``(None, reason)`` when it cannot be loaded (a gated or
    missing Hub model: fastdllm_core.bench.unavailable.load_or_reason), so that its rows read n/a and every table
    still builds."""
    from fastdllm_core.bench.unavailable import load_or_reason
    from fastdllm_core.evaluation import TaskUnavailable
    from fastdllm_core.evaluation.runner import check_data
    from fastdllm_core.loading import load_model

    for task, path in data_paths.items():
        try:
            check_data(task, path)
        except TaskUnavailable:
            pass
    loaded, reason = load_or_reason(lambda: load_model(p.source, device=device, dtype=config.get("dtype", "auto")),
                                    p.source)
    if loaded is None:
        print(f"{p.model}: not loaded, its rows are n/a: {reason}")
    return loaded, reason


def start_run(run_dir, train: dict, config, name: str) -> Path:
    """A training job's run directory, made, with ``train`` (the training config as given) in its
    ``train_config.yaml``.  It keeps its checkpoints so that an interrupted job of the same run resumes; a job rerun
    because a setting of the model changed (its training config ``config``, its init model, its data) trains from
    step 0 (:func:`fastdllm_core.training.run_identity.start_over_if_changed`)."""
    import yaml

    from fastdllm_core.provenance import write_text_atomic
    from fastdllm_core.training.run_identity import start_over_if_changed

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomic(run_dir / "train_config.yaml", yaml.safe_dump(train, sort_keys=False))
    why = start_over_if_changed(run_dir, config)
    if why:
        print(f"{name}: {run_dir} held checkpoints of another run ({'; '.join(why)}): removed, training from step 0",
              flush=True)
    return run_dir


def write_metrics(run_dir, out, extra: dict) -> list[dict]:
    """A finished training run's ``metrics.csv`` rows, each with ``extra``'s fields first, written to ``out``
    (an error when it has no rows)."""
    from fastdllm_core.provenance import write_csv_atomic

    path = Path(run_dir) / "metrics.csv"
    with open(path, newline="") as fh:
        rows = [dict(extra, **r) for r in csv.DictReader(fh)]
    if not rows:
        raise RuntimeError(f"{path} has no rows")
    write_csv_atomic(out, rows)
    return rows
