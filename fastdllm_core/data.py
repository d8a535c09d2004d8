"""SFT data for block-diffusion adaptation: chat-formatted examples -> ids/labels -> packed sequences.

* ``encode_example``: the tokenizer's chat template; every assistant turn (up to and including its end-of-turn
  token) is a label, prompt tokens are -100 (never in the loss).
* ``pack(..., packing="pad")`` (the paper's "+ pad"): every sample is padded with the mask token to a multiple of
  the block size D (padding never in the loss), then whole samples are packed greedily into sequences of length L
  (a multiple of D), so no block spans two samples.  A sample longer than L is cut into L-long pieces (cut points
  are multiples of D, so blocks still never span samples).  The tail of a sequence is filled with the mask token.
* ``pack(..., packing="naive")``: samples are concatenated and cut every L tokens (blocks may span samples); the
  final partial sequence is filled with the mask token.

Packed samples attend to each other inside a sequence (as in the reference implementation); only blocks are kept
apart by padding.  Everything is deterministic for a seed.
"""
from __future__ import annotations

import gzip
import json
import random
from dataclasses import dataclass
from pathlib import Path

import torch

IGNORE = -100
PACKINGS = ("pad", "naive")


def read_jsonl(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"training data file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return rows


def to_messages(row: dict) -> list[dict]:
    if "messages" in row:
        msgs = row["messages"]
    elif "prompt" in row and "response" in row:
        msgs = [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": row["response"]}]
    else:
        raise ValueError(f"an SFT row needs 'messages' or 'prompt'+'response'; got keys {sorted(row)}")
    if not msgs or msgs[-1].get("role") != "assistant":
        raise ValueError("an SFT conversation must end with an assistant turn")
    return msgs


def _template(tokenizer, messages, add_generation_prompt: bool) -> list[int]:
    out = tokenizer.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tokenize=True)
    if isinstance(out, dict) or hasattr(out, "keys"):
        out = out["input_ids"]
    return list(out)


def encode_example(tokenizer, row: dict, eos_token_id: int | None = None) -> tuple[list[int], list[int]]:
    """Token ids and labels (-100 outside assistant turns) of one chat example."""
    msgs = to_messages(row)
    eos = tokenizer.eos_token_id if eos_token_id is None else eos_token_id
    ids = _template(tokenizer, msgs, False)
    labels = [IGNORE] * len(ids)
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        start = len(_template(tokenizer, msgs[:i], True))
        end = len(_template(tokenizer, msgs[: i + 1], False))
        if ids[:end] != _template(tokenizer, msgs[: i + 1], False):
            raise ValueError("the chat template is not prefix-stable; cannot locate assistant tokens")
        seg = ids[start:end]
        if eos in seg:  # label up to and including the end-of-turn token, not the whitespace after it
            end = start + len(seg) - seg[::-1].index(eos)
        labels[start:end] = ids[start:end]
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
    check_lengths(seq_len, block_size)
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {PACKINGS}, got {packing!r}")
    L, D = seq_len, block_size
    seqs: list[list[int]] = []
    labs: list[list[int]] = []
    if packing == "naive":
        ids = [t for e in examples for t in e[0]]
        lab = [t for e in examples for t in e[1]]
        for s in range(0, len(ids), L):
            seqs.append(_pad_to(ids[s:s + L], L, pad_id))
            labs.append(_pad_to(lab[s:s + L], L, IGNORE))
        return seqs, labs
    cur_ids: list[int] = []
    cur_lab: list[int] = []
    for ids, lab in examples:
        n = -(-len(ids) // D) * D
        ids, lab = _pad_to(list(ids), n, pad_id), _pad_to(list(lab), n, IGNORE)
        for s in range(0, n, L):  # pieces of at most L tokens, cut at multiples of D
            pid, plab = ids[s:s + L], lab[s:s + L]
            if len(cur_ids) + len(pid) > L:
                seqs.append(_pad_to(cur_ids, L, pad_id))
                labs.append(_pad_to(cur_lab, L, IGNORE))
                cur_ids, cur_lab = [], []
            cur_ids += pid
            cur_lab += plab
    if cur_ids:
        seqs.append(_pad_to(cur_ids, L, pad_id))
        labs.append(_pad_to(cur_lab, L, IGNORE))
    return seqs, labs


def check_lengths(seq_len: int, block_size: int) -> None:
    for name, v in (("seq_len (L)", seq_len), ("block_size (D)", block_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if seq_len < block_size:
        raise ValueError(f"seq_len L={seq_len} is smaller than block_size D={block_size}")
    if seq_len % block_size:
        raise ValueError(f"block_size D={block_size} must divide seq_len L={seq_len}")


def build_dataset(tokenizer, rows: list[dict], *, seq_len: int, block_size: int, packing: str, pad_id: int,
                  seed: int = 0, max_examples: int | None = None) -> PackedData:
    """Shuffle (seeded), encode, and pack SFT rows."""
    check_lengths(seq_len, block_size)
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {PACKINGS}, got {packing!r}")
    if not rows:
        raise ValueError("the training dataset is empty")
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    if max_examples:
        rows = rows[:max_examples]
    examples = [encode_example(tokenizer, r) for r in rows]
    examples = [e for e in examples if any(t != IGNORE for t in e[1])] or examples
    seqs, labs = pack(examples, seq_len, block_size, packing, pad_id)
    return PackedData(torch.tensor(seqs, dtype=torch.long), torch.tensor(labs, dtype=torch.long), len(examples),
                      packing, seq_len, block_size)
