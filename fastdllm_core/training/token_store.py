"""The packed training set on disk: tokenized and packed once per run, read by every process a batch at a time,
so that a process' resident memory does not grow with the data (1B tokens at paper scale).

Layout of ``<run>/data`` (written into a temporary directory and renamed, so it is complete or absent):

* ``ids.u32``: the packed sequences, ``[N, L]`` uint32 token ids;
* ``sup.u8``: ``[N, L]`` 1 where the token is a label (in the loss), 0 where the label is -100 (prompt, padding);
* ``meta.json``: N, L, D, the packing, the pad id, the number of examples, and what made it
  (:func:`~.store_key.identity`: the data's and the tokenizer's digests, the settings, their ``key``).

The build (:func:`build_store`) streams: the rows of ``data.train_files`` are read (:mod:`.row_reader`) and encoded one
by one into a temporary example file (``examples.u32`` / ``examples.u8``; in memory only 17 bytes a row: offset,
order, whether it has a label), then packed in the seeded order of :func:`~.data.build_dataset` by the same
packer (:func:`~.data.pack_stream`) and written sequence by sequence.  A row the tokenizer cannot encode is a
:class:`~.row_reader.DataError` naming the file and line.  The sequences are those of :func:`~.data.build_dataset`,
token for token (tests/test_token_store.py): the losses of a run do not depend on where its data lives.  Reads,
in the build and in training, are ``pread`` calls, not memory maps: the pages go to the page cache, not to the
process' resident set.  The temporary disk of a build peaks at 5 bytes a token of the examples plus 5 bytes a
token of the store (and the previous store until the new one replaces it).

One build at a time: the builder holds ``.data.lock`` beside the store (another waits, then reuses its store);
its temporary directory is ``.data.tmp.<host>.<pid>.<random>``, the replaced store is moved aside as
``.data.old.<host>.<pid>.<random>`` and removed; those of a dead process are removed by the next build.
:func:`run_store` is the run's: the main process computes the identity (reading the data once), checks a resume
against it (:func:`~.store_key.check_resume`) and sends it to the other processes, which wait for ``meta.json``
(polling the file system, no collective: a build of hours meets no process-group timeout) or for the main
process' failure note ``.data.failed``.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import time
from array import array
from pathlib import Path

import numpy as np
import torch

from ..provenance import write_json_atomic
from . import footprint
from .data import IGNORE, encode_example, iter_rows, pack_stream
from .failures import writing
from .row_reader import NOT_ENCODABLE, DataError
from .run_lock import file_lock, remove_stale, unique_dir
from .stopping import StopRequested, deferred
from .store_key import (  # noqa: F401 (store_key: API)
    VERSION,
    MainProcessFailed,
    identity,
    recorded,
    store_key,
)

log = logging.getLogger(__name__)
FILES = (("ids.u32", np.uint32), ("sup.u8", np.uint8))


class TokenStore:
    """The packed sequences of a store: ``input_ids[idx]`` and ``labels[idx]`` (``idx`` a list of sequence
    indices) are ``[len(idx), L]`` long tensors, read from the files (a damaged store is a ValueError)."""

    def __init__(self, path: str | Path):
        self._fds, path = [], Path(path)
        self.meta = json.loads((path / "meta.json").read_text())
        n, L = self.meta["sequences"], self.meta["seq_len"]
        for name, dtype in FILES:
            self._fds.append(os.open(path / name, os.O_RDONLY | os.O_CLOEXEC))
            size = os.fstat(self._fds[-1]).st_size
            if size != n * L * np.dtype(dtype).itemsize:
                self.close()
                raise ValueError(f"the token store {path} is damaged: {name} has {size} bytes, not {n} x {L} x "
                                 f"{np.dtype(dtype).itemsize}")
        self.n_examples, self.packing = self.meta["examples"], self.meta["packing"]
        self.seq_len, self.block_size, self.path = L, self.meta["block_size"], path
        self.input_ids, self.labels = _Rows(self, False), _Rows(self, True)

    def __len__(self) -> int:
        return self.meta["sequences"]

    def _read(self, k: int, idx: np.ndarray) -> np.ndarray:
        n, L, dtype = len(self), self.seq_len, FILES[k][1]
        width = L * np.dtype(dtype).itemsize
        out = np.empty((len(idx), L), dtype=dtype)
        for r, i in enumerate(idx):
            i = int(i) + (n if i < 0 else 0)
            if not 0 <= i < n:
                raise IndexError(f"sequence {int(idx[r])} of a store of {n}")
            out[r] = np.frombuffer(os.pread(self._fds[k], width, i * width), dtype=dtype)
        return out

    def rows(self, idx, labels: bool) -> torch.Tensor:
        one = np.ndim(idx) == 0
        idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        ids = torch.from_numpy(self._read(0, idx).astype(np.int64))
        if labels:
            sup = torch.from_numpy(self._read(1, idx).astype(np.bool_))
            ids = torch.where(sup, ids, torch.full_like(ids, IGNORE))
        return ids[0] if one else ids

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds = []

    def __del__(self):
        self.close()


class _Rows:
    def __init__(self, store: TokenStore, labels: bool):
        self.store, self.is_labels = store, labels

    def __getitem__(self, idx) -> torch.Tensor:
        return self.store.rows(idx, self.is_labels)


def _encode_all(tokenizer, files, tmp: Path, drop_after_answer: bool, progress: bool):
    """Every row of ``files`` encoded, in file order, appended to ``tmp/examples.*``; returns the offsets
    ``[R + 1]`` of the examples and whether each has a label.  A bad row is named by file and line."""
    from tqdm.auto import tqdm

    offsets, has, total = array("q", [0]), bytearray(), 0  # 9 bytes a row
    with open(tmp / "examples.u32", "wb") as fi, open(tmp / "examples.u8", "wb") as fs:
        bar = tqdm(desc="tokenize", unit=" rows", disable=not progress)
        for f in files:
            for n, row in iter_rows(f):
                try:
                    ids, labels = encode_example(tokenizer, row, drop_after_answer=drop_after_answer)
                except Exception as exc:  # the tokenizer or its chat template: named, never a bare traceback
                    raise DataError(f"{f}:{n}: {NOT_ENCODABLE} ({type(exc).__name__}: {str(exc)[:200]})") from exc
                a, lab = np.asarray(ids, dtype=np.int64), np.asarray(labels, dtype=np.int64)
                sup = lab != IGNORE
                if (sup & (lab != a)).any():
                    raise DataError(f"{f}:{n}: a label differs from its token (the store keeps labels as a mask)")
                fi.write(a.astype(np.uint32).tobytes())
                fs.write(sup.astype(np.uint8).tobytes())
                has.append(bool(sup.any()))
                total += len(a)
                offsets.append(total)
                bar.update()
        bar.close()
    if len(offsets) == 1:
        raise DataError(f"the training dataset is empty: no rows in data.train_files {list(map(str, files))}")
    return np.frombuffer(offsets, dtype=np.int64).copy(), np.frombuffer(bytes(has), dtype=np.bool_)


def _examples(tmp: Path, offsets: np.ndarray, order: np.ndarray):
    """The encoded examples in ``order`` as (ids, labels) lists, read from the example files."""
    with open(tmp / "examples.u32", "rb") as fi, open(tmp / "examples.u8", "rb") as fs:
        for i in order:
            a0, a1 = int(offsets[i]), int(offsets[i + 1])
            a = np.frombuffer(os.pread(fi.fileno(), 4 * (a1 - a0), 4 * a0), dtype=np.uint32).astype(np.int64)
            s = np.frombuffer(os.pread(fs.fileno(), a1 - a0, a0), dtype=np.uint8).astype(bool)
            yield a.tolist(), np.where(s, a, IGNORE).tolist()


def _pack(tmp: Path, offsets, has, settings: dict) -> tuple[int, int]:
    """Pack the examples into ``tmp/ids.u32`` / ``sup.u8``; returns (sequences, examples)."""
    order = np.arange(len(offsets) - 1, dtype=np.int64)  # 8 bytes a row
    random.Random(settings["seed"]).shuffle(order)  # the permutation build_dataset applies to its list of rows
    if settings["max_examples"]:
        order = order[:settings["max_examples"]]
    kept = order[has[order]]  # without the examples that have no label, as build_dataset (all when none has one)
    order = kept if len(kept) else order
    n = 0
    with open(tmp / "ids.u32", "wb") as fi, open(tmp / "sup.u8", "wb") as fs:
        for ids, labels in pack_stream(_examples(tmp, offsets, order), settings["seq_len"], settings["block_size"],
                                       settings["packing"], settings["pad_id"]):
            fi.write(np.asarray(ids, dtype=np.int64).astype(np.uint32).tobytes())
            fs.write((np.asarray(labels, dtype=np.int64) != IGNORE).astype(np.uint8).tobytes())
            n += 1
    return n, len(order)


def build_store(tokenizer, files, out_dir: str | Path, *, seq_len: int, block_size: int, packing: str, pad_id: int,
                seed: int = 0, max_examples: int | None = None, drop_after_answer: bool = True,
                progress: bool = True, ident: dict | None = None) -> TokenStore:
    """Tokenize and pack ``files`` into the store ``out_dir`` (see the module docstring); returns it opened.
    ``ident``: the :func:`~.store_key.identity` of these arguments when the caller has it."""
    out_dir = Path(out_dir)
    settings = dict(seq_len=seq_len, block_size=block_size, packing=packing, pad_id=pad_id, seed=seed,
                    max_examples=max_examples, drop_after_answer=drop_after_answer)
    ident = ident or identity(files, tokenizer, settings)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(out_dir.parent / f".{out_dir.name}.lock"):
        store = current_store(out_dir, ident["key"])
        if store is not None:  # another process built it while this one waited for the lock
            return store
        for kind in ("tmp", "old"):
            remove_stale(out_dir.parent, f".{out_dir.name}.{kind}.")
        tmp, t0, peak = unique_dir(out_dir.parent, f".{out_dir.name}.tmp."), time.perf_counter(), footprint.PeakRss()
        try:
            with writing(out_dir, "the token store"):  # a full disk: one named line (.failures)
                offsets, has = _encode_all(tokenizer, files, tmp, drop_after_answer, progress)
                n, n_examples = _pack(tmp, offsets, has, settings)
                disk = sum(f.stat().st_size for f in tmp.iterdir())
                for f in ("examples.u32", "examples.u8"):
                    (tmp / f).unlink()
                write_json_atomic(tmp / "meta.json", {**ident, "sequences": n, "examples": n_examples,
                                                      "tokens": n * seq_len, "build_disk_bytes": disk})
                with deferred():  # a stop signal waits for the rename
                    _replace(tmp, out_dir)
            log.info("token store %s built: %d rows, %d tokens -> %d sequences of %d in %.0f s; temporary disk %.0f "
                     "MiB; peak resident memory %s", out_dir, len(offsets) - 1, int(offsets[-1]), n, seq_len,
                     time.perf_counter() - t0, disk / 2**20, peak.stop().text())
        finally:
            peak.stop()
            shutil.rmtree(tmp, ignore_errors=True)
    return TokenStore(out_dir)


def _replace(tmp: Path, out_dir: Path) -> None:
    """``tmp`` renamed to ``out_dir``; a store already there is moved aside first, then removed."""
    if not (out_dir.exists() or out_dir.is_symlink()):
        os.replace(tmp, out_dir)
        return
    old = unique_dir(out_dir.parent, f".{out_dir.name}.old.")
    os.replace(out_dir, old / "store")
    os.replace(tmp, out_dir)
    shutil.rmtree(old, ignore_errors=True)


def current_store(out_dir: str | Path, key: str) -> TokenStore | None:
    """The store at ``out_dir`` when it is complete, undamaged and was made with ``key``, else None."""
    try:
        if json.loads((Path(out_dir) / "meta.json").read_text()).get("key") != key:
            return None
        store = TokenStore(out_dir)
    except (OSError, ValueError, KeyError, AttributeError):
        return None
    return store if store.meta.get("key") == key else None


def _failure_note(out_dir: Path) -> Path:
    return out_dir.parent / f".{out_dir.name}.failed"


def prepared_store(tokenizer, files, out_dir: str | Path, *, is_main: bool, timeout_s: float = 6 * 3600.0,
                   progress: bool = True, ident: dict | None = None, **settings) -> TokenStore:
    """The run's store: reused when its key matches, else built by the main process while the others wait for it
    (or for the main process' failure note)."""
    out_dir = Path(out_dir)
    ident = ident or identity(files, tokenizer, settings)
    store = current_store(out_dir, ident["key"])
    if store is not None:
        log.info("token store %s reused (%d sequences)", out_dir, len(store))
        return store
    if is_main:
        return build_store(tokenizer, files, out_dir, progress=progress, ident=ident, **settings)
    start = time.monotonic()
    while (store := current_store(out_dir, ident["key"])) is None:
        _raise_failure(out_dir, ident["key"])
        if time.monotonic() - start > timeout_s:
            raise TimeoutError(f"the training data store {out_dir} was not built within {timeout_s:.0f} s by the "
                               "main process (see its log)")
        time.sleep(2.0)
    return store


def _raise_failure(out_dir: Path, key: str) -> None:
    try:
        text = _failure_note(out_dir).read_text()
    except OSError:
        return
    if not text:  # the main process could only create the note (a full disk): its error is in its log
        raise MainProcessFailed(f"the main process did not build the token store {out_dir} (its note is empty: "
                                "the disk was full; its log has the error)")
    try:
        note = json.loads(text)
    except ValueError:
        return
    if isinstance(note, dict) and note.get("key") == key:
        if str(note.get("error")).startswith("StopRequested"):
            raise StopRequested("a stop of the main process")
        raise MainProcessFailed(f"the main process did not build the token store {out_dir}: {note.get('error')}")


def run_store(tokenizer, files, run_dir: Path, *, is_main: bool, distributed: bool, progress: bool = True,
              allow_change: bool = False, **settings) -> TokenStore:
    """The store of the run in ``run_dir`` (``run_dir/data``), see the module docstring."""
    from .store_key import check_resume, shared, tokenizer_digest

    out_dir = Path(run_dir) / "data"

    def main_identity() -> dict:
        ident = identity(files, tokenizer, settings)
        check_resume(run_dir, ident, allow_change)
        _failure_note(out_dir).unlink(missing_ok=True)  # before the others look for one
        return ident

    ident = shared(main_identity, is_main)
    if not is_main and tokenizer_digest(tokenizer) != ident["tokenizer_sha256"]:
        raise RuntimeError("this process' tokenizer is not the main process' (another model.init or cache?)")
    try:
        return prepared_store(tokenizer, files, out_dir, is_main=is_main, progress=progress, ident=ident,
                              **settings)
    except BaseException as exc:
        if is_main and distributed:  # the others wait for the store: tell them it will not come
            note = {"key": ident["key"], "error": f"{type(exc).__name__}: {str(exc)[:500]}"}
            try:
                write_json_atomic(_failure_note(out_dir), note)
            except OSError as note_exc:  # a full disk: an empty note still takes no data block
                log.error("%s: the failure note could not be written (%s)", out_dir, note_exc)
                with contextlib.suppress(OSError):
                    _failure_note(out_dir).touch()
        raise


def store_identity(store: TokenStore) -> dict:
    """What a checkpoint records of the store it was trained on."""
    return recorded(store.meta)
