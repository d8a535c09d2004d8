"""The paper's adaptation data: a seeded, token-budgeted subset of the LLaMA-Nemotron post-training dataset,
converted to the project's SFT rows (``{"messages": [...]}``, :func:`fastdllm_core.training.data.to_messages`).

The paper (Sec. 4.1; App. "a subset of the LLaMA-Nemotron post-training dataset", ~1B tokens) names neither the
subsets, the reasoning mode nor the sampling; this module makes each of them a config key
(``data.adaptation``) and records them in a manifest beside the output.

The source, as published (checked with the dataset card ``README.md`` of huggingface.co/datasets/nvidia/
Llama-Nemotron-Post-Training-Dataset, its ``refs/convert/parquet`` tree, and NVIDIA/NeMo-Curator's
``tutorials/llama-nemotron-data-curation/README.md``):

* config ``SFT`` (the default config) with the splits ``code``, ``math``, ``science``, ``chat``, ``safety``,
  stored as JSONL files ``SFT/<split>/*.jsonl`` (config ``RL`` has ``instruction_following``; not used here);
* each row: ``input`` (the prompt as chat messages: at least one ``user`` message, then zero or more turns),
  ``output`` (the expected assistant answer; with ``reasoning: "on"`` a ``<think>...</think>`` trace followed by
  the answer, with ``"off"`` a direct answer), ``reasoning`` (``"on"`` / ``"off"``), ``system_prompt``
  (``"detailed thinking on"`` / ``"detailed thinking off"``, tied to ``reasoning``), ``category``, ``license``,
  ``generator``, ``used_in_training`` (e.g. ``["Ultra", "Nano"]``), ``version``.

Conversion: ``input`` + ``{"role": "assistant", "content": output}``; the training code renders the messages
with the init model's chat template (``encode_example``, which also counts the tokens here: the budget is in the
tokens the training sees).  ``system_prompt`` is dropped by default (``keep_system_prompt: false``): it is a
Llama-Nemotron control phrase, and Qwen2.5-Instruct's template puts its own default system prompt where none is
given -- as at evaluation.  ``reasoning`` (default ``off``: the paper does not say; the evaluation prompts ask
for direct answers, and Fast-dLLM v2's released models answer without think traces) keeps the rows of that
mode (``all``: both).

Sampling: every eligible row of a subset gets the key ``sha256(seed:subset:file:line)``; rows are taken in key
order until the subset's share of ``token_budget`` is reached (equal shares, the last row may pass it; a subset
that runs out leaves the rest unused, the manifest says how much) -- the same rows for the same files and seed, whatever the machine.

Loading: ``local_dir`` (a copy in the dataset's own layout: ``<local_dir>/SFT/<subset>/*.jsonl``), else the
files of ``dataset`` at ``revision`` from the Hub (``huggingface_hub.snapshot_download``, the same files
``datasets.load_dataset(dataset, "SFT", revision=...)`` reads).  Offline without a local copy:
:class:`AdaptationDataUnavailable`, naming ``data.adaptation.local_dir``.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from ..provenance import atomic_path, write_json_atomic

DATASET = "nvidia/Llama-Nemotron-Post-Training-Dataset"
SUBSETS = ("code", "math", "science", "chat", "safety")
REASONING = ("off", "on", "all")
LOCAL_DIR_KEY = "data.adaptation.local_dir"
DEFAULTS = {"dataset": DATASET, "revision": "main", "subsets": list(SUBSETS), "reasoning": "off",
            "token_budget": 1.0e9, "seed": 0, "local_dir": None, "keep_system_prompt": False}


class AdaptationDataUnavailable(RuntimeError):
    """The source cannot be read here (offline, gated, missing files); the message names the key to set."""


def resolve(cfg: dict | None) -> dict:
    """``data.adaptation`` with its defaults, checked; a bad value raises naming its key."""
    c = dict(DEFAULTS, **{k: v for k, v in (cfg or {}).items() if v is not None or k == "local_dir"})
    bad = [s for s in c["subsets"] if s not in SUBSETS]
    if bad or not c["subsets"]:
        raise ValueError(f"data.adaptation.subsets: {bad or '[]'} not among the dataset's SFT splits "
                         f"{list(SUBSETS)}")
    if c["reasoning"] not in REASONING:
        raise ValueError(f"data.adaptation.reasoning: {c['reasoning']!r}; choose from {list(REASONING)}")
    if not float(c["token_budget"]) > 0:
        raise ValueError(f"data.adaptation.token_budget: {c['token_budget']!r} must be > 0")
    return c


def hub_offline() -> bool:
    return any(os.environ.get(v, "").lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def unavailable_reason(cfg: dict) -> str | None:
    """Why the source cannot be read here without trying (a cheap check for DAG parse), or None."""
    c = resolve(cfg)
    if c["local_dir"]:
        missing = [s for s in c["subsets"] if not list((Path(c["local_dir"]) / "SFT" / s).glob("*.jsonl"))]
        return (f"{LOCAL_DIR_KEY} = {c['local_dir']} has no SFT/<subset>/*.jsonl for {missing}" if missing
                else None)
    if hub_offline():
        return (f"HF_HUB_OFFLINE is set and {LOCAL_DIR_KEY} is not: set {LOCAL_DIR_KEY} to a local copy of "
                f"{c['dataset']} (its SFT/<subset>/*.jsonl files)")
    return None


def source_dir(c: dict) -> Path:
    """The directory holding ``SFT/<subset>/*.jsonl``: ``local_dir``, or the Hub snapshot at ``revision``."""
    reason = unavailable_reason(c)
    if reason:
        raise AdaptationDataUnavailable(reason)
    if c["local_dir"]:
        return Path(c["local_dir"])
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(c["dataset"], repo_type="dataset", revision=c["revision"],
                                      allow_patterns=[f"SFT/{s}/*.jsonl" for s in c["subsets"]]))
    except Exception as exc:  # gated, no network, unknown revision: one named error
        raise AdaptationDataUnavailable(
            f"cannot download {c['dataset']}@{c['revision']} ({type(exc).__name__}: {exc}); set "
            f"{LOCAL_DIR_KEY} to a local copy (SFT/<subset>/*.jsonl)") from exc


def snapshot_commit(root) -> str | None:
    """The dataset commit a Hub snapshot directory holds (``huggingface_hub`` keeps each revision it downloads as
    ``.../snapshots/<commit>``: ``main`` resolved to what it was on the day), else None (a local copy that is not
    a snapshot: its provenance is the ``local_dir`` the manifest records)."""
    root = Path(root).resolve()
    return root.name if root.parent.name == "snapshots" and re.fullmatch(r"[0-9a-f]{40}", root.name) else None


def to_training_row(row: dict, reasoning: str = "off", keep_system_prompt: bool = False) -> dict | None:
    """One dataset row as ``{"messages": [...]}``, or None when its reasoning mode is not wanted."""
    mode = row.get("reasoning")
    if reasoning != "all" and mode != reasoning:
        return None
    msgs = row.get("input")
    if not isinstance(msgs, list) or not msgs or not isinstance(row.get("output"), str):
        raise ValueError(f"not a Llama-Nemotron SFT row: needs 'input' (messages) and 'output' (text), got "
                         f"{sorted(row) if isinstance(row, dict) else type(row).__name__}")
    out = [{"role": m["role"], "content": m["content"]} for m in msgs]
    if keep_system_prompt and row.get("system_prompt") and out[0]["role"] != "system":
        out.insert(0, {"role": "system", "content": row["system_prompt"]})
    return {"messages": out + [{"role": "assistant", "content": row["output"]}]}


def _order_key(seed: int, subset: str, name: str, line: int) -> str:
    return hashlib.sha256(f"{seed}:{subset}:{name}:{line}".encode()).hexdigest()


def _lines(f: Path):
    """(line number, byte offset, parsed row) of every non-blank line of ``f``."""
    with open(f, "rb") as fh:
        n, off = 0, 0
        for raw in fh:
            n += 1
            if raw.strip():
                try:
                    yield n, off, json.loads(raw)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{f}:{n}: not JSON ({exc.msg})") from None
            off += len(raw)


def subset_index(root: Path, subset: str, c: dict) -> list[tuple[str, Path, int]]:
    """The eligible rows of ``subset`` in seeded key order, as (key, file, byte offset): the rows themselves are
    read back one by one (:func:`read_row`), so that a subset of millions of rows is never held in memory."""
    index = []
    for f in sorted((root / "SFT" / subset).glob("*.jsonl")):
        for n, off, row in _lines(f):
            try:
                keep = to_training_row(row, c["reasoning"], c["keep_system_prompt"]) is not None
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{f}:{n}: {exc}") from None
            if keep:
                index.append((_order_key(int(c["seed"]), subset, f.name, n), f, off))
    index.sort(key=lambda e: e[0])
    return index


def read_row(f: Path, off: int, c: dict) -> dict:
    with open(f, "rb") as fh:
        fh.seek(off)
        return to_training_row(json.loads(fh.readline()), c["reasoning"], c["keep_system_prompt"])


def count_tokens(tokenizer, row: dict) -> int:
    """Tokens the training sees for ``row`` (the init model's chat template, as ``encode_example``)."""
    from .data import encode_example

    return len(encode_example(tokenizer, row)[0])


def build(cfg: dict, tokenizer, out_path, progress: bool = True) -> dict:
    """Write the adaptation set to ``out_path`` (JSONL, atomically) and its manifest beside it
    (``<out_path>.manifest.json``); returns the manifest."""
    from tqdm import tqdm

    c = resolve(cfg)
    root = source_dir(c)
    share = float(c["token_budget"]) / len(c["subsets"])
    stats, h = {}, hashlib.sha256()
    with atomic_path(out_path) as tmp, open(tmp, "w") as fh:
        for subset in c["subsets"]:
            index, tokens, taken = subset_index(root, subset, c), 0, 0
            for _, f, off in tqdm(index, desc=f"adaptation {subset}", disable=not progress):
                if tokens >= share:
                    break
                row = read_row(f, off, c)
                tokens += count_tokens(tokenizer, row)
                line = json.dumps(row, ensure_ascii=False) + "\n"
                fh.write(line)
                h.update(line.encode())
                taken += 1
            stats[subset] = {"rows": taken, "tokens": tokens, "eligible_rows": len(index),
                             "budget_tokens": int(share)}
        if not sum(s["rows"] for s in stats.values()):
            raise ValueError(f"data.adaptation: no rows selected from {root} (subsets {c['subsets']}, reasoning "
                             f"{c['reasoning']!r})")
    manifest = {"dataset": c["dataset"], "revision": c["revision"], "revision_commit": snapshot_commit(root),
                "source": str(root),
                "output": str(out_path), "sha256": h.hexdigest(),
                "rows": sum(s["rows"] for s in stats.values()), "tokens": sum(s["tokens"] for s in stats.values()),
                "subsets": stats, "tokenizer": getattr(tokenizer, "name_or_path", ""), "config": c}
    write_json_atomic(manifest_path(out_path), manifest)
    return manifest


def manifest_path(out_path) -> Path:
    return Path(f"{out_path}.manifest.json")
