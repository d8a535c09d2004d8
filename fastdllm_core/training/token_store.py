"""The packed training set on disk: tokenized and packed once per run, read by every process through numpy
memory maps, so that a process' resident memory does not grow with the data (1B tokens at paper scale).

Layout of ``<run>/data`` (written into a temporary directory and renamed, so it is complete or absent):

* ``ids.u32``: the packed sequences, ``[N, L]`` uint32 token ids;
* ``sup.u8``: ``[N, L]`` 1 where the token is a label (in the loss), 0 where the label is -100 (prompt, padding);
* ``meta.json``: N, L, D, the packing, the pad id, the number of examples, and the ``key`` of what made it.

The build (:func:`build_store`) streams: the rows of ``data.train_files`` are read and encoded one by one into a
temporary example file (``examples.u32`` / ``examples.u8`` and their offsets), then packed in the seeded order of
:func:`~.data.build_dataset` by the same packer (:func:`~.data.pack_stream`) and written sequence by sequence.
The sequences are those of :func:`~.data.build_dataset`, token for token (tests/test_token_store.py): the
losses of a run do not depend on where its data lives.  The ``key`` is a hash of the files (path, size and
modification time), the tokenizer (vocabulary and chat template) and every packing setting; a run (or its resume) whose key matches reuses the
store, anything else rebuilds it.  One process builds (the main one); the others wait for ``meta.json``.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
from array import array
from pathlib import Path

import numpy as np
import torch

from ..provenance import write_json_atomic
from .data import IGNORE, encode_example, iter_rows, pack_stream

VERSION = 1
CHUNK = 1024  # sequences written per write call


class TokenStore:
    """The packed sequences of a store, read lazily: ``input_ids[idx]`` and ``labels[idx]`` (``idx`` a list of
    sequence indices) are ``[len(idx), L]`` long tensors, read from the memory maps."""

    def __init__(self, path: str | Path):
        path = Path(path)
        self.meta = json.loads((path / "meta.json").read_text())
        n, L = self.meta["sequences"], self.meta["seq_len"]
        self._ids = np.memmap(path / "ids.u32", dtype=np.uint32, mode="r", shape=(n, L)) if n else None
        self._sup = np.memmap(path / "sup.u8", dtype=np.uint8, mode="r", shape=(n, L)) if n else None
        self.n_examples, self.packing = self.meta["examples"], self.meta["packing"]
        self.seq_len, self.block_size, self.path = L, self.meta["block_size"], path
        self.input_ids, self.labels = _Rows(self, False), _Rows(self, True)

    def __len__(self) -> int:
        return self.meta["sequences"]

    def rows(self, idx, labels: bool) -> torch.Tensor:
        ids = torch.from_numpy(np.asarray(self._ids[np.asarray(idx)], dtype=np.int64))
        if not labels:
            return ids
        sup = torch.from_numpy(np.asarray(self._sup[np.asarray(idx)], dtype=np.bool_))
        return torch.where(sup, ids, torch.full_like(ids, IGNORE))


class _Rows:
    def __init__(self, store: TokenStore, labels: bool):
        self.store, self.is_labels = store, labels

    def __getitem__(self, idx) -> torch.Tensor:
        return self.store.rows(idx, self.is_labels)


def file_digest(files) -> str:
    """sha256 over every file's resolved path, size and modification time, in order: what changes when a file is
    rewritten, read by every rank without reading the data (gigabytes at paper scale, on a shared file system)."""
    h = hashlib.sha256()
    for f in files:
        st = Path(f).stat()
        h.update(f"{Path(f).resolve()}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def tokenizer_digest(tokenizer) -> str:
    vocab = sorted(tokenizer.get_vocab().items())
    h = hashlib.sha256(json.dumps(vocab).encode())
    h.update(str(getattr(tokenizer, "chat_template", None)).encode())
    h.update(str(tokenizer.eos_token_id).encode())
    return h.hexdigest()


def store_key(files, tokenizer, **settings) -> str:
    """What a store is made of: the files (path, size, modification time), the tokenizer and the packing settings."""
    body = {"version": VERSION, "files": file_digest(files), "tokenizer": tokenizer_digest(tokenizer), **settings}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _encode_all(tokenizer, files, tmp: Path, drop_after_answer: bool, progress: bool) -> np.ndarray:
    """Every row of ``files`` encoded, in file order, appended to ``tmp/examples.*``; returns the offsets
    ``[R + 1]`` of the examples.  A bad row is named by file and line."""
    from tqdm.auto import tqdm

    offsets, total = array("q", [0]), 0  # 8 bytes a row
    with open(tmp / "examples.u32", "wb") as fi, open(tmp / "examples.u8", "wb") as fs:
        bar = tqdm(desc="tokenize", unit=" rows", disable=not progress)
        for f in files:
            for n, row in iter_rows(f):
                ids, labels = encode_example(tokenizer, row, drop_after_answer=drop_after_answer)
                a, lab = np.asarray(ids, dtype=np.int64), np.asarray(labels, dtype=np.int64)
                if ((lab != IGNORE) & (lab != a)).any():
                    raise ValueError(f"{f}:{n}: a label differs from its token (the store keeps labels as a mask)")
                _write_arrays(fi, fs, a, lab)
                total += len(a)
                offsets.append(total)
                bar.update()
        bar.close()
    if len(offsets) == 1:
        raise ValueError(f"the training dataset is empty: no rows in data.train_files {list(map(str, files))}")
    return np.frombuffer(offsets, dtype=np.int64).copy()


def _example_maps(tmp: Path, offsets: np.ndarray):
    n_tok = int(offsets[-1])
    if not n_tok:
        return np.zeros(0, np.uint32), np.zeros(0, np.uint8)
    return (np.memmap(tmp / "examples.u32", dtype=np.uint32, mode="r", shape=(n_tok,)),
            np.memmap(tmp / "examples.u8", dtype=np.uint8, mode="r", shape=(n_tok,)))


def _kept(tmp: Path, offsets: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``order`` without the examples that have no label (as :func:`~.data.build_dataset`; all of them when none
    has one)."""
    sup = _example_maps(tmp, offsets)[1]
    lengths = np.diff(offsets)
    has = np.zeros(len(lengths), dtype=bool)
    nonempty = lengths > 0
    if sup.size:
        has[nonempty] = np.maximum.reduceat(sup, offsets[:-1][nonempty]) > 0
    kept = order[has[order]]
    return kept if len(kept) else order


def _examples(tmp: Path, offsets: np.ndarray, order: list[int]):
    """The encoded examples in ``order`` as (ids, labels) lists."""
    ids, sup = _example_maps(tmp, offsets)
    for i in order:
        a, s = ids[offsets[i]:offsets[i + 1]].astype(np.int64), sup[offsets[i]:offsets[i + 1]].astype(bool)
        yield a.tolist(), np.where(s, a, IGNORE).tolist()


def build_store(tokenizer, files, out_dir: str | Path, *, seq_len: int, block_size: int, packing: str, pad_id: int,
                seed: int = 0, max_examples: int | None = None, drop_after_answer: bool = True,
                progress: bool = True, key: str | None = None) -> TokenStore:
    """Tokenize and pack ``files`` into the store ``out_dir`` (see the module docstring); returns it opened.
    ``key``: the :func:`store_key` of these arguments when the caller has it."""
    out_dir = Path(out_dir)
    settings = dict(seq_len=seq_len, block_size=block_size, packing=packing, pad_id=pad_id, seed=seed,
                    max_examples=max_examples, drop_after_answer=drop_after_answer)
    key = key or store_key(files, tokenizer, **settings)
    tmp = out_dir.parent / f".{out_dir.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        offsets = _encode_all(tokenizer, files, tmp, drop_after_answer, progress)
        order = np.arange(len(offsets) - 1, dtype=np.int64)  # 8 bytes a row
        random.Random(seed).shuffle(order)  # the permutation build_dataset applies to its list of rows
        order = _kept(tmp, offsets, order[:max_examples] if max_examples else order)
        n = 0
        with open(tmp / "ids.u32", "wb") as fi, open(tmp / "sup.u8", "wb") as fs:
            buf = []
            for ids, labels in pack_stream(_examples(tmp, offsets, order), seq_len, block_size, packing, pad_id):
                buf.append((ids, labels))
                if len(buf) == CHUNK:
                    n += _write(fi, fs, buf)
                    buf = []
            n += _write(fi, fs, buf)
        for f in ("examples.u32", "examples.u8"):
            (tmp / f).unlink()
        write_json_atomic(tmp / "meta.json", {"version": VERSION, "key": key, "sequences": n,
                                              "examples": len(order), "tokens": n * seq_len, **settings})
        if out_dir.exists():
            shutil.rmtree(out_dir)
        os.replace(tmp, out_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return TokenStore(out_dir)


def _write(fi, fs, buf) -> int:
    if not buf:
        return 0
    _write_arrays(fi, fs, np.asarray([b[0] for b in buf], dtype=np.int64),
                  np.asarray([b[1] for b in buf], dtype=np.int64))
    return len(buf)


def _write_arrays(fi, fs, ids: np.ndarray, labels: np.ndarray) -> None:
    """Token ids as uint32 to ``fi``, the label mask (1 where the label is not ``IGNORE``) as uint8 to ``fs``."""
    fi.write(ids.astype(np.uint32).tobytes())
    fs.write((labels != IGNORE).astype(np.uint8).tobytes())


def current_store(out_dir: str | Path, key: str) -> TokenStore | None:
    """The store at ``out_dir`` when it is complete and was made with ``key``, else None."""
    meta = Path(out_dir) / "meta.json"
    if not meta.is_file() or json.loads(meta.read_text()).get("key") != key:
        return None
    return TokenStore(out_dir)


def prepared_store(tokenizer, files, out_dir: str | Path, *, is_main: bool, timeout_s: float = 6 * 3600.0,
                   progress: bool = True, **settings) -> TokenStore:
    """The run's store: reused when its key matches, else built by the main process while the others wait for it
    (polling the file system, no collective: a build of hours meets no process-group timeout)."""
    key = store_key(files, tokenizer, **settings)
    store = current_store(out_dir, key)
    if store is not None:
        return store
    if is_main:
        return build_store(tokenizer, files, out_dir, progress=progress, key=key, **settings)
    start = time.monotonic()
    while (store := current_store(out_dir, key)) is None:
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"the training data store {out_dir} was not built within {timeout_s:.0f} s by the "
                               "main process (see its log)")
        time.sleep(2.0)
    return store
