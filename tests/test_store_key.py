"""No stale token store (fastdllm_core.training.store_key): the key follows the data's content and the whole
tokenizer, the main process computes it once and sends it to the others, and a resume on other data, another
tokenizer or another sequence length is refused unless asked."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from fastdllm_core.training import loop
from fastdllm_core.training import store_key as sk
from fastdllm_core.training.token_store import prepared_store

ROOT = Path(__file__).resolve().parents[1]
KW = dict(seq_len=64, block_size=16, packing="pad", pad_id=3, seed=0, max_examples=None, drop_after_answer=True)


@pytest.fixture
def sft(tmp_path):
    f = tmp_path / "sft.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"{a}+{b}=?", "response": f"{a + b:02d}"}) + "\n"
                         for a in range(6) for b in range(6)))
    return f


def test_data_changed_in_place_with_the_same_size_and_time_rebuilds_the_store(tmp_path, tokenizer, sft):
    store = prepared_store(tokenizer, [str(sft)], tmp_path / "data", is_main=True, progress=False, **KW)
    before, st = store.meta["key"], sft.stat()
    text = sft.read_text()
    sft.write_text(text.replace("1+1=?", "1+1=!"))  # same size
    os.utime(sft, ns=(st.st_atime_ns, st.st_mtime_ns))  # same modification time
    assert sft.stat().st_size == st.st_size and sft.stat().st_mtime_ns == st.st_mtime_ns
    again = prepared_store(tokenizer, [str(sft)], tmp_path / "data", is_main=True, progress=False, **KW)
    assert again.meta["key"] != before and again.meta["data_sha256"] == sk.data_digest([sft])
    ids = again.input_ids[list(range(len(again)))]
    assert (ids == tokenizer.get_vocab()["!"]).any()  # the new character is in the tokens


def test_the_whole_tokenizer_is_in_the_key():
    from tokenizers import normalizers, pre_tokenizers

    from fastdllm_core.tiny import bpe_tokenizer, char_tokenizer

    base = sk.tokenizer_digest(char_tokenizer())
    assert sk.tokenizer_digest(char_tokenizer()) == base  # another instance of the same tokenizer
    changed = []
    tok = char_tokenizer()
    tok.backend_tokenizer.normalizer = normalizers.Lowercase()
    changed.append(tok)
    tok = char_tokenizer()
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    changed.append(tok)
    tok = char_tokenizer()
    tok.chat_template = tok.chat_template.replace("<|im_end|>", "<|endoftext|>")
    changed.append(tok)
    for tok in changed:
        assert sk.tokenizer_digest(tok) != base
    texts = ["user\nwhat is two plus two", "assistant\nfour"] * 10
    a, b = bpe_tokenizer(texts, 300), bpe_tokenizer(texts[::-1] + ["zzzz qqqq"] * 5, 300)
    assert sk.tokenizer_digest(a) != sk.tokenizer_digest(b)
    assert sk.tokenizer_digest(bpe_tokenizer(texts, 300)) == sk.tokenizer_digest(a)


def test_changes_name_each_difference():
    old = {"data_sha256": "a" * 64, "tokenizer_sha256": "b" * 64, **KW}
    new = dict(old, data_sha256="c" * 64, seq_len=128)
    assert sk.changes(old, new) == ["the content of data.train_files (sha256 aaaaaaaaaaaa... -> cccccccccccc...)",
                                    "data.seq_len (64 -> 128)"]
    assert sk.changes({"seq_len": 64}, new) == ["data.seq_len (64 -> 128)"]  # what the old record lacks is not compared
    with pytest.raises(ValueError, match="unknown token store settings"):
        sk.identity([], None, {"seq_length": 3})


RANK_SCRIPT = textwrap.dedent("""
    import json, os, sys
    import torch.distributed as dist
    from fastdllm_core.tiny import char_tokenizer
    from fastdllm_core.training import store_key, token_store
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=rank, world_size=2)
    if rank == 1:  # the other processes never read the data
        def no(*a, **k):
            raise AssertionError("process 1 read the training data")
        store_key.data_digest = no
    kw = json.loads(sys.argv[3])
    if rank == 0 and len(sys.argv) > 5:  # the main process' build fails on a row
        def refuse(*a, **k):
            raise RuntimeError("no")
        token_store.encode_example = refuse
    try:
        store = token_store.run_store(char_tokenizer(), [sys.argv[2]], token_store.Path(sys.argv[4]),
                                      is_main=rank == 0, distributed=True, progress=False, **kw)
    except Exception as exc:
        print("FAILED", type(exc).__name__, exc, flush=True)
        sys.exit(3)
    print("KEY", store.meta["key"], len(store), flush=True)
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_the_main_process_computes_the_key_once_and_the_others_receive_it(tmp_path, sft):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    args = [str(tmp_path / "rdzv"), str(sft), json.dumps(KW), str(tmp_path / "run")]
    procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, *args], env=dict(env, RANK=str(r)), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    keys = [next(line for line in out.splitlines() if line.startswith("KEY")) for out, _ in outs]
    assert keys[0] == keys[1] and keys[0].split()[1] == sk.store_key([sft], __import__(
        "fastdllm_core.tiny", fromlist=["char_tokenizer"]).char_tokenizer(), **KW)


@pytest.mark.slow
def test_when_the_main_process_cannot_build_the_others_stop_naming_its_error(tmp_path, sft):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    args = [str(tmp_path / "rdzv"), str(sft), json.dumps(KW), str(tmp_path / "run"), "fail"]
    procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, *args], env=dict(env, RANK=str(r)), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in (0, 1)]
    outs = [p.communicate(timeout=240)[0] for p in procs]
    assert [p.returncode for p in procs] == [3, 3], outs
    assert f"FAILED DataError {sft}:1: cannot be encoded (RuntimeError: no)" in outs[0]
    assert "FAILED MainProcessFailed the main process did not build the token store" in outs[1]
    assert f"DataError: {sft}:1: cannot be encoded" in outs[1]
    assert [p.name for p in (tmp_path / "run").iterdir()] == [".data.failed"]  # no store, no temporary


def _cfg(data_file, seq_len=64, steps=3):
    return {"recipe": "bd_pad", "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2,
                                                                   "kv_heads": 1}},
            "data": {"train_files": [str(data_file)], "seq_len": seq_len}, "objective": {"block_size": 16},
            "optim": {"lr": 1e-3, "warmup_steps": 0, "max_steps": steps, "batch_size": 2, "micro_batch_size": 2},
            "train": {"save_every": 100, "log_every": 1, "seed": 0, "device": "cpu"}}


def test_a_resume_on_changed_data_or_seq_len_is_refused_unless_asked(tmp_path, sft, capsys):
    from fastdllm_core.cli import train as train_cli

    run = tmp_path / "run"
    loop.train(_cfg(sft), run, progress=False, stop_after=1)
    state = json.loads((run / "checkpoints" / "step-1" / "state.json").read_text())
    assert state["data"]["key"] == json.loads((run / "data" / "meta.json").read_text())["key"]
    with pytest.raises(sk.DataChanged, match=r"checkpoint step-1 was trained on other data: data\.seq_len \(64 -> "
                                             r"128\)\. Refusing .*--allow-data-change"):
        loop.train(_cfg(sft, seq_len=128), run, progress=False)
    sft.write_text(sft.read_text().replace("=?", "=/"))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_cfg(sft)))
    argv = ["--config", str(tmp_path / "c.yaml"), "--output-dir", str(run), "--no-progress"]
    assert train_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "fastdllm train: error:" in err and "the content of data.train_files (sha256" in err
    assert "Traceback" not in err
    assert json.loads((run / "data" / "meta.json").read_text())["key"] == state["data"]["key"]  # the old store kept
    assert train_cli.main([*argv, "--allow-data-change"]) == 0  # asked: continues the old run's steps on new data
    new = json.loads((run / "checkpoints" / "step-3" / "state.json").read_text())["data"]["key"]
    assert new != state["data"]["key"]


def test_a_checkpoint_that_records_no_data_is_checked_against_its_store(tmp_path, sft):
    run = tmp_path / "run"
    loop.train(_cfg(sft), run, progress=False, stop_after=1)
    state_file = run / "checkpoints" / "step-1" / "state.json"
    state = json.loads(state_file.read_text())
    del state["data"]
    state_file.write_text(json.dumps(state))
    with pytest.raises(sk.DataChanged, match=r"data\.seq_len \(64 -> 128\)"):
        loop.train(_cfg(sft, seq_len=128), run, progress=False)
    loop.train(_cfg(sft), run, progress=False)  # nothing changed: resumes
    assert (run / "final" / "model.safetensors").is_file()


def test_a_main_process_that_cannot_write_its_failure_note_still_stops_the_others(tmp_path, tokenizer, sft,
                                                                                   monkeypatch):
    """A full disk: the store's build fails and so does the JSON note; an empty note (no data block) still tells
    the waiting processes, which stop naming the cause, not after prepared_store's six-hour timeout."""
    from fastdllm_core.training import token_store as ts

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ts, "build_store", full)
    monkeypatch.setattr(ts, "write_json_atomic", full)
    (tmp_path / "run").mkdir()
    with pytest.raises(OSError, match="No space left"):  # the main process' own error stands
        ts.run_store(tokenizer, [str(sft)], tmp_path / "run", is_main=True, distributed=True, progress=False, **KW)
    note = tmp_path / "run" / ".data.failed"
    assert note.exists() and note.read_text() == ""
    with pytest.raises(sk.MainProcessFailed, match="its note is empty: the disk was full"):
        ts.prepared_store(tokenizer, [str(sft)], tmp_path / "run" / "data", is_main=False, progress=False,
                          timeout_s=5, **KW)
