"""Prompt sets: prompt texts from a file, their token ids (chat template when the tokenizer has one), random
token prompts, and the batches a throughput row decodes."""
from __future__ import annotations

from pathlib import Path

import torch

from .jsonl import iter_jsonl


def _prompt_text(row, path: Path, n: int, field_name: str | None) -> str:
    """The prompt of one JSONL row: the row itself when it is a string, else its prompt field."""
    if isinstance(row, str):
        return row
    keys = [field_name] if field_name else ["prompt", "question", "text"]
    text = next((row[k] for k in keys if k in row), None)
    if text is None and not field_name and row.get("messages"):
        text = next((m["content"] for m in row["messages"] if m.get("role") == "user"), None)
    if not isinstance(text, str):
        raise ValueError(f"{path}:{n}: no prompt text under {keys} (keys: {sorted(row)})")
    return text


def read_prompt_texts(path: str | Path, field_name: str | None = None) -> list[str]:
    """Prompts from a JSONL file (``prompt`` / ``question`` / ``text`` / ``messages[0].content``, or the field
    named) or from a text file with one prompt per line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"prompts file not found: {path}")
    if path.suffix not in (".jsonl", ".json"):
        out = [line for line in path.read_text().splitlines() if line.strip()]
    else:
        out = [_prompt_text(row, path, n, field_name) for n, row in iter_jsonl(path)]
    if not out:
        raise ValueError(f"prompts file {path} holds no prompts")
    return out


def encode_prompts(tokenizer, texts: list[str], chat: bool | None = None) -> list[list[int]]:
    """Token ids; chat-templated (a user turn plus the generation prompt) when the tokenizer has a template."""
    if tokenizer is None:
        raise ValueError("this model has no tokenizer: use synthetic prompts (--synthetic-prompts N)")
    if chat is None:
        chat = bool(getattr(tokenizer, "chat_template", None))
    if chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError("--chat was asked for but the tokenizer has no chat template")
    out = []
    for t in texts:
        if chat:
            ids = tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                                tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        else:
            ids = tokenizer.encode(t, add_special_tokens=False)
        out.append([int(i) for i in ids])
    return out


def synthetic_prompts(n: int, length: int, vocab_size: int, *, avoid: list[int] = (), seed: int = 0,
                      low: int = 0) -> list[list[int]]:
    """``n`` random token sequences of ``length`` (ids in ``[low, vocab_size)``, specials in ``avoid`` excluded)."""
    if n <= 0 or length <= 0:
        raise ValueError(f"synthetic prompts need n > 0 and length > 0, got n={n}, length={length}")
    g = torch.Generator().manual_seed(seed)
    avoid_t = torch.tensor(sorted(set(avoid)) or [-1])
    out = []
    for _ in range(n):
        ids = torch.randint(low, vocab_size, (length,), generator=g)
        bad = torch.isin(ids, avoid_t)
        ids[bad] = low + (ids[bad] + 1 - low) % (vocab_size - low)
        bad = torch.isin(ids, avoid_t)
        ids[bad] = low + (ids[bad] + 1 - low) % (vocab_size - low)
        out.append(ids.tolist())
    return out


def batch_of(prompts: list[list[int]], batch_size: int) -> list[list[int]]:
    """The prompts a row decodes: every prompt, cycling through the list up to a whole number of batches (at
    least one) of ``batch_size``; the row decodes them in consecutive batches, so that every batch size is
    measured on the same prompts."""
    n = max(len(prompts), batch_size)
    n = -(-n // batch_size) * batch_size
    return [prompts[i % len(prompts)] for i in range(n)]
