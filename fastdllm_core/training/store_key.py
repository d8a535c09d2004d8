"""What a run's token store is made of, and whether a resumed run still trains on it.

* :func:`data_digest`: sha256 of the training files' bytes, in order: a file changed in place is another digest,
  whatever its size and time.  Read once per launch, by the main process (:func:`shared` sends the result to the
  others: 64 ranks do not each read 1B tokens).
* :func:`tokenizer_digest`: sha256 of the whole tokenizer: its serialized form (a fast tokenizer's
  ``tokenizer.json``: normalizer, pre-tokenizer, model with vocabulary and merges, added tokens, post-processor,
  decoder; any other tokenizer's saved files), its class, chat template and special tokens.
* :func:`identity`: both digests and the packing settings; its ``key`` names a store (``meta.json``) and every
  checkpoint records it (``state.json``).
* :func:`check_resume`: a run that resumes from a checkpoint trained on other data, another tokenizer or other
  packing settings (``data.seq_len`` ...) is refused (:class:`DataChanged`, naming each change) unless asked.
"""
from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from pathlib import Path

from .row_reader import DataError

log = logging.getLogger(__name__)
VERSION = 2
SETTINGS = {"seq_len": "data.seq_len", "block_size": "objective.block_size", "packing": "the recipe's packing",
            "pad_id": "the [MASK] token id (padding)", "seed": "train.seed", "max_examples": "data.max_examples",
            "drop_after_answer": "data.drop_after_answer"}
DIGESTS = {"data_sha256": "the content of data.train_files", "tokenizer_sha256": "the tokenizer"}
ALLOW_HINT = "fastdllm train --allow-data-change, train(..., allow_data_change=True)"


class DataChanged(ValueError):
    """A resume whose data, tokenizer or packing settings are not those its checkpoint was trained on."""


class MainProcessFailed(RuntimeError):
    """In a process that is not the main one: the main process failed to prepare the data (its error named)."""


def data_digest(files, chunk: int = 2**20) -> str:
    """sha256 over the sha256 of each file's bytes, in order."""
    h = hashlib.sha256()
    for f in files:
        one = hashlib.sha256()
        try:
            with open(f, "rb") as fh:
                while block := fh.read(chunk):
                    one.update(block)
        except FileNotFoundError:
            raise FileNotFoundError(f"training data file not found: {f}") from None
        except OSError as exc:
            raise DataError(f"{f}: cannot be read ({type(exc).__name__}: {exc})") from None
        h.update(f"{one.hexdigest()}\n".encode())
    return h.hexdigest()


def tokenizer_digest(tokenizer) -> str:
    """sha256 of the tokenizer's serialized form, class, chat template and special tokens."""
    h = hashlib.sha256()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        h.update(backend.to_str().encode())
    else:
        h.update(_saved_files(tokenizer))
    specials = getattr(tokenizer, "special_tokens_map", {}) or {}
    for part in (type(tokenizer).__name__, getattr(tokenizer, "chat_template", None), tokenizer.eos_token_id,
                 sorted((k, str(v)) for k, v in specials.items())):
        h.update(json.dumps(part, default=str).encode() + b"\n")
    return h.hexdigest()


def _saved_files(tokenizer) -> bytes:
    """The files ``save_pretrained`` writes (a tokenizer without a ``tokenizers`` backend), the path it was loaded
    from left out."""
    with tempfile.TemporaryDirectory() as d:
        tokenizer.save_pretrained(d)
        parts = []
        for f in sorted(Path(d).rglob("*")):
            if not f.is_file():
                continue
            data = f.read_bytes()
            if f.name == "tokenizer_config.json":
                cfg = json.loads(data)
                cfg.pop("name_or_path", None)
                data = json.dumps(cfg, sort_keys=True, default=str).encode()
            parts.append(f.name.encode() + b"\0" + hashlib.sha256(data).digest())
        return b"".join(parts)


def identity(files, tokenizer, settings: dict, data_sha256: str | None = None) -> dict:
    """The digests, the settings and their ``key`` (the store's name in ``meta.json``)."""
    unknown = set(settings) - set(SETTINGS)
    if unknown:
        raise ValueError(f"unknown token store settings {sorted(unknown)}")
    body = {"version": VERSION, "data_sha256": data_sha256 or data_digest(files),
            "tokenizer_sha256": tokenizer_digest(tokenizer), **settings}
    return {**body, "key": hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()}


def store_key(files, tokenizer, **settings) -> str:
    """What a store is made of (:func:`identity`'s key)."""
    return identity(files, tokenizer, settings)["key"]


def recorded(meta: dict) -> dict:
    """The identity fields of a store's ``meta.json`` (what a checkpoint records)."""
    return {k: meta[k] for k in ("version", "key", *DIGESTS, *SETTINGS) if k in meta}


def changes(old: dict, new: dict) -> list[str]:
    """What differs between two identities, one phrase each (fields the old one lacks are not compared)."""
    out = []
    for k, name in DIGESTS.items():
        if k in old and old[k] != new.get(k):
            out.append(f"{name} (sha256 {str(old[k])[:12]}... -> {str(new.get(k))[:12]}...)")
    for k, name in SETTINGS.items():
        if k in old and old[k] != new.get(k):
            out.append(f"{name} ({old[k]!r} -> {new.get(k)!r})")
    return out


def check_resume(run_dir, new: dict, allow: bool = False) -> None:
    """Refuse (:class:`DataChanged`) a resume of the run in ``run_dir`` when its newest checkpoint was trained on
    another identity than ``new``; with ``allow``, a warning.  A checkpoint that records none is compared with
    the settings of the store beside it, as far as it records them."""
    from .checkpoints import checkpoints

    cks = checkpoints(Path(run_dir))
    if not cks:
        return
    state = json.loads((cks[-1] / "state.json").read_text())
    old = state.get("data")
    if old is None:
        meta = Path(run_dir) / "data" / "meta.json"
        old = recorded(json.loads(meta.read_text())) if meta.is_file() else {}
        if not old:
            log.warning("%s records no training data: its resume cannot be checked", cks[-1])
    diff = changes(old, new)
    if not diff:
        return
    what = "; ".join(diff)
    if allow:
        log.warning("resuming %s on changed data (%s), as asked", cks[-1], what)
        return
    raise DataChanged(f"{run_dir}: checkpoint {cks[-1].name} was trained on other data: {what}. Refusing to continue "
                      f"its steps on this data: train in a new output directory, remove {Path(run_dir) / 'checkpoints'}"
                      f" to start over, or continue anyway ({ALLOW_HINT})")


def shared(compute, is_main: bool):
    """``compute()`` in the main process, its value sent to every process (one broadcast when a process group is
    up); an exception of the main process is raised in every process (a stop as :class:`~.stopping.StopRequested`,
    anything else as :class:`MainProcessFailed` naming it)."""
    import torch.distributed as dist

    from .stopping import StopRequested

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return compute()
    box = [None]
    if is_main:
        try:
            box[0] = ("ok", compute())
        except BaseException as exc:
            box[0] = ("stop" if isinstance(exc, StopRequested) else "error", f"{type(exc).__name__}: {exc}")
            dist.broadcast_object_list(box, src=0)
            raise
    dist.broadcast_object_list(box, src=0)
    kind, value = box[0]
    if kind == "stop":
        raise StopRequested("a stop of the main process")
    if kind == "error":
        raise MainProcessFailed(f"the main process failed before training ({value})")
    return value
