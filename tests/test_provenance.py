"""Atomic result writes: the file lands whole and with the mode a plain open() would give it (not 0600)."""
from __future__ import annotations

import os
import stat

import pytest

from fastdllm_core.provenance import atomic_path, write_csv_atomic, write_json_atomic, write_text_atomic


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_result_files_honour_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        write_text_atomic(tmp_path / "a.txt", "x\n")
        write_json_atomic(tmp_path / "b.json", {"a": 1})
        write_csv_atomic(tmp_path / "c.csv", [{"a": 1}])
        ref = tmp_path / "ref.txt"
        ref.write_text("plain open")
    finally:
        os.umask(old)
    want = stat.S_IMODE(ref.stat().st_mode)
    assert want == 0o666 & ~umask
    for name in ("a.txt", "b.json", "c.csv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == want, name
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_default_umask_gives_0644(tmp_path):
    old = os.umask(0o022)
    try:
        write_text_atomic(tmp_path / "r.csv", "a\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "r.csv").stat().st_mode) == 0o644


def test_atomic_rename_keeps_old_file_on_failure(tmp_path):
    p = tmp_path / "keep.txt"
    write_text_atomic(p, "old\n")
    with pytest.raises(RuntimeError):
        with atomic_path(p) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert p.read_text() == "old\n"
    assert [x.name for x in tmp_path.iterdir()] == ["keep.txt"]


def test_rows_record_the_package_versions_of_the_run():
    """Each results row names the versions that produced it (constraints.txt pins what CI tested)."""
    from importlib.metadata import version

    import torch
    import transformers

    from fastdllm_core.provenance import META_COLUMNS, package_version, run_metadata

    meta = run_metadata(config={"x": 1}, seed=0, device="cpu")
    assert list(meta) == META_COLUMNS
    assert meta["torch_version"] == torch.__version__ and meta["transformers_version"] == transformers.__version__
    assert meta["accelerate_version"] == version("accelerate") and meta["lm_eval_version"] == version("lm_eval")
    assert package_version("no-such-distribution-xyz") == "not installed"
