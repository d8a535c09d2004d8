"""Memory stated honestly (fastdllm_core.training.footprint, token_store): anonymous and file-backed resident memory
reported apart, and the token store read with ``pread``, not memory maps, so that reading the whole store does not
grow the process' resident set."""
from __future__ import annotations

import csv
import json
import sys
import threading

import numpy as np
import pytest

from fastdllm_core.training import footprint
from fastdllm_core.training.data import IGNORE, pack_stream
from fastdllm_core.training.token_store import TokenStore, build_store

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/self/status is Linux's")


@linux
def test_anonymous_and_file_backed_peaks_are_measured_apart():
    now = footprint.status()
    assert {"anon", "file", "shmem", "rss", "hwm"} <= set(now) and now["rss"] > 0
    peak = footprint.PeakRss(interval=0.01)
    big = np.ones(200 * 2**20, dtype=np.uint8)  # 200 MiB, touched
    big.sum()
    del big
    peaks = peak.stop().peaks
    assert peaks["anon"] - now["anon"] > 150 and footprint.status()["anon"] < peaks["anon"] - 150
    assert "anonymous peak" in peak.text() and "file-backed peak" in peak.text()


def _synthetic_store(path, n=4096, L=2048):
    """A 40 MiB store (uint32 ids, uint8 mask) written directly."""
    path.mkdir()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 50_000, size=(n, L), dtype=np.uint32)
    sup = (rng.random((n, L)) < 0.5).astype(np.uint8)
    ids.tofile(path / "ids.u32")
    sup.tofile(path / "sup.u8")
    (path / "meta.json").write_text(json.dumps({"sequences": n, "seq_len": L, "examples": n, "packing": "pad",
                                                "block_size": 32}))
    return ids, sup


@linux
def test_reading_the_whole_store_does_not_grow_the_resident_set(tmp_path):
    ids, sup = _synthetic_store(tmp_path / "data")
    store = TokenStore(tmp_path / "data")
    before = footprint.status()
    for start in range(0, len(store), 256):  # every sequence once, a batch at a time, as the steps read them
        idx = list(range(start, min(start + 256, len(store))))
        x, y = store.input_ids[idx], store.labels[idx]
    after = footprint.status()
    assert after["file"] - before["file"] < 8, (before, after)  # a memory map would add the 40 MiB it touched
    assert x.tolist() == ids[idx].astype(np.int64).tolist()
    assert y.tolist() == np.where(sup[idx] == 1, ids[idx].astype(np.int64), IGNORE).tolist()
    assert store.input_ids[-1].tolist() == ids[-1].tolist() and store.input_ids[[0, -1]].shape == (2, 2048)
    with pytest.raises(IndexError):
        store.input_ids[[len(store)]]


def test_a_damaged_store_is_named_and_not_reused(tmp_path, tokenizer):
    from fastdllm_core.training.token_store import current_store

    _synthetic_store(tmp_path / "data", n=8, L=64)
    with open(tmp_path / "data" / "sup.u8", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(ValueError, match=r"damaged: sup\.u8 has 513 bytes, not 8 x 64 x 1"):
        TokenStore(tmp_path / "data")
    assert current_store(tmp_path / "data", None) is None


def test_the_build_maps_no_file(tmp_path, tokenizer, monkeypatch):
    def no_memmap(*a, **k):
        raise AssertionError("np.memmap: its pages would count in the build's resident memory")

    monkeypatch.setattr(np, "memmap", no_memmap)
    f = tmp_path / "a.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"q{i}", "response": f"a{i}"}) + "\n" for i in range(50)))
    store = build_store(tokenizer, [str(f)], tmp_path / "run" / "data", seq_len=64, block_size=16, packing="pad",
                        pad_id=3, progress=False)
    assert len(store) > 0 and store.meta["build_disk_bytes"] > 0


def _reference_pack(examples, L, D, packing, pad):
    """The packing as a plain list, cut by slicing (what pack_stream yields, written the simplest way)."""
    ids, lab = [], []
    for e, f in examples:
        n = -(-len(e) // D) * D if packing == "pad" else len(e)
        ids += list(e) + [pad] * (n - len(e))
        lab += list(f) + [IGNORE] * (n - len(f))
    out = [(ids[i:i + L], lab[i:i + L]) for i in range(0, len(ids), L)]
    if out and len(out[-1][0]) < L:
        k = L - len(out[-1][0])
        out[-1] = (out[-1][0] + [pad] * k, out[-1][1] + [IGNORE] * k)
    return out


@pytest.mark.parametrize("packing", ["pad", "naive"])
def test_pack_stream_is_linear_in_a_long_example_and_unchanged(packing):
    rng = np.random.default_rng(1)
    examples = [(rng.integers(4, 99, n).tolist(), rng.integers(4, 99, n).tolist()) for n in (5, 70, 3, 1000, 17)]
    assert list(pack_stream(examples, 64, 16, packing, 3)) == _reference_pack(examples, 64, 16, packing, 3)
    one = list(range(4, 2_000_004))  # one row of 2M tokens: cut from a moving start (re-slicing the rest after
    seqs = []  # every cut is quadratic: hours here); a generous deadline, not a timing
    worker = threading.Thread(target=lambda: seqs.extend(pack_stream([(one, one)], 64, 16, packing, 3)), daemon=True)
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "packing one long row is not linear in its length"
    assert len(seqs) == 31_250 and seqs[-1][0][-1] == one[-1] and seqs[100][0][0] == one[6400]


def test_training_metrics_report_the_peaks_apart(tmp_path, data_file):
    from fastdllm_core.training import loop

    cfg = {"recipe": "ntp", "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2,
                                                               "kv_heads": 1}},
           "data": {"train_files": [data_file], "seq_len": 64}, "objective": {"block_size": 16},
           "optim": {"max_steps": 1, "batch_size": 2, "micro_batch_size": 2, "warmup_steps": 0},
           "train": {"device": "cpu", "save_every": 10}}
    loop.train(cfg, tmp_path / "run", progress=False)
    [row] = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert float(row["peak_rss_mib"]) > 0
    if sys.platform.startswith("linux"):
        assert 0 < float(row["peak_rss_anon_mib"]) <= float(row["peak_rss_mib"])
        assert 0 < float(row["peak_rss_file_mib"]) <= float(row["peak_rss_mib"])


@linux
@pytest.mark.slow
def test_the_footprint_script_measures_what_the_doc_states(tmp_path):
    """scripts/cluster/store_footprint.py (docs/training_at_scale.md, section 4) on two small sets: one CSV row per
    size with the build's anonymous and file-backed peaks apart, its temporary disk, and the extrapolation lines."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "fp.csv"
    r = subprocess.run([sys.executable, "scripts/cluster/store_footprint.py", "--tokens", "2e4", "8e4",
                        "--out", str(out)],
                       cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = list(csv.DictReader(open(out)))
    assert [int(x["target_tokens"]) for x in rows] == [20000, 80000]
    for x in rows:
        assert 0 < float(x["build_anon_peak_mib"]) < float(x["build_hwm_mib"])
        assert 0 < float(x["build_file_peak_mib"]) < float(x["build_hwm_mib"])
        assert float(x["build_disk_peak_mib"]) >= float(x["store_mib"]) > 0  # sampled: at least the store
        assert int(x["build_disk_bytes_meta"]) > 2**20 * float(x["store_mib"])  # examples and store at the peak
    assert "extrapolated to 1B tokens" in r.stdout
