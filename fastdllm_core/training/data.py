"""Training data: chat-formatted (SFT) or plain-text examples -> ids/labels -> packed sequences.

* ``encode_example``: a row is read and checked by :mod:`.row_reader` (the data check's own reading: a row the check
  accepts is one this function encodes); a chat row (``messages`` or ``prompt`` + ``response``) goes through the
  tokenizer's chat template; every assistant turn (up to and including its end-of-turn token) is a label, prompt
  tokens are -100 (never in the loss).  With ``drop_after_answer`` (default) the template tokens after the last
  assistant turn (Qwen's ``\n`` after the final ``<|im_end|>``) are dropped: they are never labels, so a
  block-diffusion x_t would show them unmasked right after the masked answer -- a hint of where the answer ends
  that decoding never has.  A plain-text row (``{"text": ...}``, pretraining) is labelled everywhere and ends with
  ``<|endoftext|>`` (the document separator).
* ``pack(..., packing="pad")`` (the paper's "+ pad", Sec. 3 "Block-wise organization"): every sample is padded
  with the mask token to a multiple of the block size D (padding never in the loss); the padded samples are
  concatenated into one stream, which is cut into sequences of length L (a multiple of D).  Blocks are aligned
  by construction and never span two samples; a sample may continue in the next sequence.
* ``pack(..., packing="naive")``: samples are concatenated and cut every L tokens (blocks may span samples).
* ``pack(..., packing="whole")``: whole samples are packed first-fit, in order, into sequences of length L whose
  tail is padded; a sample is cut only when it is longer than L.  No question is separated from its answer:
  used to train the AR base and its instruct SFT.

The final partial sequence is filled with the mask token.  Packed samples attend to each other inside a sequence
(as in the reference implementation).  Everything is deterministic for a seed.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch

from .config import check_lengths
from .row_reader import DataError, RowError, check_row, lines, parse_json, row_text, to_messages  # noqa: F401

IGNORE = -100
PACKINGS = ("pad", "naive", "whole")


def iter_rows(path: str | Path):
    """(line number, row) of every training row of a JSONL file, each read and checked as :mod:`.row_reader` says; a bad
    line is a :class:`~.row_reader.DataError` naming the file, the line and the reason."""
    for n, _, raw in lines(path):
        try:
            row = parse_json(raw)
            check_row(row)
        except RowError as exc:
            raise DataError(f"{path}:{n}: {exc}") from None
        yield n, row


def read_jsonl(path: str | Path) -> list[dict]:
    """The training rows of a JSONL file (:func:`iter_rows`)."""
    return [row for _, row in iter_rows(path)]


def read_train_files(files: list) -> list[dict]:
    """Every row of the training files (:func:`read_jsonl`); no rows at all is an error naming the files."""
    rows = [r for f in files for r in read_jsonl(f)]
    if not rows:
        raise DataError(f"the training dataset is empty: no rows in data.train_files {list(map(str, files))}")
    return rows


def check_train_files(files: list) -> int:
    """The number of rows of the training files, each checked as :func:`read_train_files` does, none kept (the
    data check of ``fastdllm train``, the DAG's training job and :func:`~fastdllm_core.training.loop.train`:
    bounded memory whatever the size of the set).  The check is :func:`encode_example`'s own reading of a row;
    what only the tokenizer can refuse is named by the token store's build, before the model loads."""
    n = sum(1 for f in files for _ in iter_rows(f))
    if not n:
        raise DataError(f"the training dataset is empty: no rows in data.train_files {list(map(str, files))}")
    return n


def _template(tokenizer, messages, add_generation_prompt: bool) -> list[int]:
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True)
    if isinstance(out, dict) or hasattr(out, "keys"):
        out = out["input_ids"]
    return list(out)


def document_end_id(tokenizer) -> int:
    """``<|endoftext|>`` when the tokenizer has it (Qwen's document separator), else its EOS."""
    vocab = tokenizer.get_vocab()
    return vocab["<|endoftext|>"] if "<|endoftext|>" in vocab else tokenizer.eos_token_id


def encode_example(tokenizer, row: dict, eos_token_id: int | None = None,
                   drop_after_answer: bool = True) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 outside assistant turns) of one chat example, or of a plain-text row."""
    text = row_text(row)  # the row read and checked as the data check reads it (.rows)
    if text is not None:
        ids = list(tokenizer.encode(text, add_special_tokens=False)) + [document_end_id(tokenizer)]
        return ids, list(ids)
    msgs = to_messages(row)
    eos = tokenizer.eos_token_id if eos_token_id is None else eos_token_id
    ids = _template(tokenizer, msgs, False)
    labels = [IGNORE] * len(ids)
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        start = len(_template(tokenizer, msgs[:i], True))
        upto = ids if i == len(msgs) - 1 else _template(tokenizer, msgs[: i + 1], False)  # the last turn: ids
        end = len(upto)
        if ids[:end] != upto:
            raise ValueError("the chat template is not prefix-stable; cannot locate assistant tokens")
        seg = ids[start:end]
        if eos in seg:  # label up to and including the end-of-turn token, not the whitespace after it
            end = start + len(seg) - seg[::-1].index(eos)
        labels[start:end] = ids[start:end]
    if drop_after_answer:
        last = max((i for i, t in enumerate(labels) if t != IGNORE), default=len(ids) - 1)
        ids, labels = ids[: last + 1], labels[: last + 1]
    return ids, labels


@dataclass
class PackedData:
    input_ids: torch.Tensor  # [N, L] long
    labels: torch.Tensor  # [N, L] long, -100 where not in the loss
    n_examples: int
    packing: str
    seq_len: int
    block_size: int

    def __len__(self) -> int:
        return self.input_ids.shape[0]


def _pad_to(x: list[int], n: int, value: int) -> list[int]:
    return x + [value] * (n - len(x))


def pack(examples: list[tuple[list[int], list[int]]], seq_len: int, block_size: int, packing: str,
         pad_id: int) -> tuple[list[list[int]], list[list[int]]]:
    """Pack (ids, labels) examples into sequences of length ``seq_len`` (see module docstring)."""
    seqs = list(pack_stream(examples, seq_len, block_size, packing, pad_id))
    return [s[0] for s in seqs], [s[1] for s in seqs]


def pack_stream(examples, seq_len: int, block_size: int, packing: str, pad_id: int):
    """The packed sequences of an iterable of (ids, labels) examples, one (ids, labels) pair at a time: only the
    sequence being filled is held (see module docstring for the packings)."""
    check_lengths(seq_len, block_size)
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {PACKINGS}, got {packing!r}")
    L, D = seq_len, block_size
    if packing in ("naive", "pad"):  # one stream (samples padded to a block multiple under "pad"), cut every L
        ids: list[int] = []
        lab: list[int] = []
        for e_ids, e_lab in examples:
            n = -(-len(e_ids) // D) * D if packing == "pad" else len(e_ids)
            ids += _pad_to(list(e_ids), n, pad_id)
            lab += _pad_to(list(e_lab), n, IGNORE)
            at = 0  # cut from a moving start, then drop what was cut: linear in an example's length
            while len(ids) - at >= L:
                yield ids[at:at + L], lab[at:at + L]
                at += L
            del ids[:at], lab[:at]
        if ids:
            yield _pad_to(ids, L, pad_id), _pad_to(lab, L, IGNORE)
        return
    cur_ids: list[int] = []
    cur_lab: list[int] = []
    for e_ids, e_lab in examples:  # "whole"
        for s in range(0, len(e_ids), L):  # a sample longer than L is cut into L-long pieces
            pid, plab = list(e_ids[s:s + L]), list(e_lab[s:s + L])
            if len(cur_ids) + len(pid) > L:
                yield _pad_to(cur_ids, L, pad_id), _pad_to(cur_lab, L, IGNORE)
                cur_ids, cur_lab = [], []
            cur_ids += pid
            cur_lab += plab
    if cur_ids:
        yield _pad_to(cur_ids, L, pad_id), _pad_to(cur_lab, L, IGNORE)


def build_dataset(tokenizer, rows: list[dict], *, seq_len: int, block_size: int, packing: str, pad_id: int,
                  seed: int = 0, max_examples: int | None = None, drop_after_answer: bool = True) -> PackedData:
    """Shuffle (seeded), encode, and pack training rows."""
    check_lengths(seq_len, block_size)
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {PACKINGS}, got {packing!r}")
    if not rows:
        raise ValueError("the training dataset is empty")
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    if max_examples:
        rows = rows[:max_examples]
    examples = [encode_example(tokenizer, r, drop_after_answer=drop_after_answer) for r in rows]
    examples = [e for e in examples if any(t != IGNORE for t in e[1])] or examples
    seqs, labs = pack(examples, seq_len, block_size, packing, pad_id)
    return PackedData(torch.tensor(seqs, dtype=torch.long), torch.tensor(labs, dtype=torch.long), len(examples),
                      packing, seq_len, block_size)
