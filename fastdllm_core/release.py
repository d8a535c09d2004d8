"""A released checkpoint kept in the repository: a trained Hugging Face directory copied with a manifest that says
what built it, so that a run can start from it as the paper starts from a released Qwen2.5-Instruct.

The manifest (``manifest.json``) records the build (the commit, the resolved training configs of every stage, the
synthetic data settings), the machine and CPU kernel path it was trained on, its scores, a sha256 of every file,
and two digests that say when it is stale: :func:`config_digest` of the build settings and :func:`numerics_digest`
of the stored training numerics of its recipes (``tests/data/numerics/training.json``: they move exactly when the
code that trains those recipes changes its numbers).  :func:`problems` lists what no longer matches.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

MANIFEST = "manifest.json"
# left out of a release: markers of the workflow manager, not part of the checkpoint
NOT_RELEASED = (".snakemake_timestamp",)


def config_digest(obj) -> str:
    """sha256 of ``obj`` as canonical JSON (sorted keys)."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def numerics_digest(store: str | Path, cases: list[str]) -> str:
    """sha256 of the stored numerics values of ``cases`` (their ``values`` only, not when they were written);
    a case the store lacks is an error naming it."""
    stored = json.loads(Path(store).read_text())["cases"]
    missing = [c for c in cases if c not in stored]
    if missing:
        raise KeyError(f"{store}: no stored numerics for {missing}; stored: {sorted(stored)}")
    return config_digest({c: stored[c]["values"] for c in cases})


def file_hashes(directory: str | Path) -> dict[str, str]:
    """sha256 of every file of ``directory`` but the manifest, by relative path."""
    d = Path(directory)
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != MANIFEST}


def write_release(final: str | Path, out: str | Path, manifest: dict) -> Path:
    """Copy the checkpoint directory ``final`` to ``out`` with ``manifest`` (plus the files' hashes); ``out`` is
    replaced whole, never left half-written."""
    final, out = Path(final), Path(out)
    if not (final / "config.json").is_file():
        raise FileNotFoundError(f"{final} is not a Hugging Face checkpoint directory (no config.json)")
    tmp, old = out.with_name(out.name + ".tmp"), out.with_name(out.name + ".old")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(final, tmp, ignore=shutil.ignore_patterns(*NOT_RELEASED), copy_function=shutil.copyfile)
    for p in [tmp, *tmp.rglob("*")]:  # plain modes (a protected checkpoint is read-only; git keeps 644 / 755)
        p.chmod(0o755 if p.is_dir() else 0o644)
    doc = {**manifest, "files": file_hashes(tmp)}
    (tmp / MANIFEST).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def read_manifest(directory: str | Path) -> dict:
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: {directory} is not a released checkpoint of this project")
    return json.loads(path.read_text())


def problems(directory: str | Path, config_key: str, numerics_key: str) -> list[str]:
    """What makes the release at ``directory`` stale or damaged against today's build settings (``config_key``,
    :func:`config_digest`) and stored numerics (``numerics_key``); [] when it is current."""
    man, out = read_manifest(directory), []
    files = file_hashes(directory)
    if files != man["files"]:
        changed = sorted(set(files) ^ set(man["files"]) | {f for f in files if man["files"].get(f) != files[f]})
        out.append(f"its files differ from the manifest's hashes: {changed}")
    if man["config_digest"] != config_key:
        out.append("the settings that build it changed since it was built (config_digest)")
    if man["numerics_digest"] != numerics_key:
        out.append("the stored training numerics of its recipes changed since it was built (numerics_digest): "
                   "the code that trains it now gives other numbers")
    return out
