"""The run's token store (fastdllm_core.training.token_store): the sequences of build_dataset token for token,
read through memory maps, reused when nothing changed, rebuilt when anything did, never left half-written."""
import json
from pathlib import Path

import pytest
import torch

from fastdllm_core.training.data import build_dataset, read_train_files
from fastdllm_core.training.token_store import TokenStore, build_store, prepared_store, store_key

MASK = 3


def _rows(k):
    chat = [{"prompt": f"q{i}" * (1 + i % 7), "response": f"a{i}" * (1 + i % 11)} for i in range(k)]
    multi = [{"messages": [{"role": "user", "content": "u" * i}, {"role": "assistant", "content": "b" * i},
                           {"role": "user", "content": "c"}, {"role": "assistant", "content": "d" * (i + 1)}]}
             for i in range(1, 6)]
    text = [{"text": "t" * (5 + 9 * i)} for i in range(4)]
    return chat, multi + text


@pytest.fixture
def files(tmp_path):
    a, b = _rows(40)
    paths = []
    for name, rows in (("a.jsonl", a), ("b.jsonl", b)):
        p = tmp_path / name
        p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")  # a blank line is skipped
        paths.append(str(p))
    return paths


@pytest.mark.parametrize("packing,L,D", [("pad", 64, 16), ("naive", 64, 16), ("whole", 128, 32), ("pad", 96, 8)])
@pytest.mark.parametrize("seed,max_examples", [(0, None), (3, None), (1, 17)])
def test_store_equals_build_dataset(tmp_path, tokenizer, files, packing, L, D, seed, max_examples):
    kw = dict(seq_len=L, block_size=D, packing=packing, pad_id=MASK, seed=seed, max_examples=max_examples)
    ref = build_dataset(tokenizer, read_train_files(files), **kw)
    store = build_store(tokenizer, files, tmp_path / "data", progress=False, **kw)
    assert len(store) == len(ref) and store.n_examples == ref.n_examples
    idx = list(range(len(ref)))[::-1]  # any order of rows, as a step's batch
    assert torch.equal(store.input_ids[idx], ref.input_ids[idx])
    assert torch.equal(store.labels[idx], ref.labels[idx])
    assert store.input_ids[idx].dtype == torch.long
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["ids.u32", "meta.json", "sup.u8"]
    assert TokenStore(tmp_path / "data").meta["tokens"] == len(ref) * L


def test_reused_when_unchanged_and_rebuilt_when_anything_changes(tmp_path, tokenizer, files):
    kw = dict(seq_len=64, block_size=16, packing="pad", pad_id=MASK, seed=0, max_examples=None,
              drop_after_answer=True)
    out = tmp_path / "data"
    prepared_store(tokenizer, files, out, is_main=True, progress=False, **kw)
    built = (out / "meta.json").stat().st_mtime_ns
    prepared_store(tokenizer, files, out, is_main=True, progress=False, **kw)
    assert (out / "meta.json").stat().st_mtime_ns == built
    key = store_key(files, tokenizer, **kw)
    for change in (dict(kw, seed=1), dict(kw, packing="naive"), dict(kw, pad_id=4)):
        assert store_key(files, tokenizer, **change) != key
    Path(files[1]).write_text(Path(files[1]).read_text() + json.dumps({"text": "new"}) + "\n")
    assert store_key(files, tokenizer, **kw) != key
    store = prepared_store(tokenizer, files, out, is_main=True, progress=False, **kw)
    assert store.meta["key"] == store_key(files, tokenizer, **kw) and store.meta["examples"] == 50


def test_a_waiting_process_times_out_naming_the_store(tmp_path, tokenizer, files):
    kw = dict(seq_len=64, block_size=16, packing="pad", pad_id=MASK, seed=0, max_examples=None,
              drop_after_answer=True)
    with pytest.raises(TimeoutError, match="data"):
        prepared_store(tokenizer, files, tmp_path / "data", is_main=False, timeout_s=0.0, **kw)


def test_a_bad_row_is_named_and_nothing_is_left(tmp_path, tokenizer, files):
    Path(files[0]).write_text(Path(files[0]).read_text() + '{"prompt": "a", "response": 7}\n')
    with pytest.raises(ValueError, match=r"a\.jsonl:42: field 'response' must be a string"):
        build_store(tokenizer, files, tmp_path / "d" / "data", seq_len=64, block_size=16, packing="pad",
                    pad_id=MASK, progress=False)
    assert list((tmp_path / "d").iterdir()) == []


def test_empty_files_are_named(tmp_path, tokenizer):
    f = tmp_path / "empty.jsonl"
    f.write_text("\n")
    with pytest.raises(ValueError, match=f"training dataset is empty.*{f}"):
        build_store(tokenizer, [str(f)], tmp_path / "data", seq_len=64, block_size=16, packing="pad",
                    pad_id=MASK, progress=False)
