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

Sampling: every eligible row of a subset gets the key ``sha256(seed:subset:file:line)`` (its first 8 bytes); rows
are taken in key order until the subset's share of ``token_budget`` is reached (equal shares, the last row may
pass it).  A subset that runs out of rows (at 1B tokens: chat and safety) leaves a shortfall that is split
equally over the subsets that still have rows, until the budget is met or every subset is spent (the manifest
gives each subset's redistributed tokens and the total shortfall).  A malformed row, whatever its line holds
(bytes that are not UTF-8, not JSON, nested too deeply, a JSON value that is not an object, a missing or mistyped
field, a role that is not system/user/assistant, a lone surrogate, a row the tokenizer or its chat template
refuses: :mod:`.row_reader`), is skipped and counted in the manifest by reason (``malformed_reasons``), the first few
named.  The subsets are indexed and tokenized in parallel processes; the same rows for the same files and seed,
whatever the machine or the number of processes.  The build's temporary directory is
``.adaptation.<host>.<pid>.<random>`` beside the output; one left by a killed build is removed by the next.

Loading: ``local_dir`` (a copy in the dataset's own layout: ``<local_dir>/SFT/<subset>/*.jsonl``), else the
files of ``dataset`` at ``revision`` from the Hub (``huggingface_hub.snapshot_download``, the same files
``datasets.load_dataset(dataset, "SFT", revision=...)`` reads).  Offline without a local copy:
:class:`AdaptationDataUnavailable`, naming ``data.adaptation.local_dir``.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from array import array
from pathlib import Path

import numpy as np

from ..provenance import atomic_path, write_json_atomic
from .row_reader import (
    BAD_FIELD,
    MAX_LINE_BYTES,
    NOT_ENCODABLE,
    NOT_OBJECT,
    RowError,
    brief,
    lines,
    parse_json,
    to_messages,
    type_name,
)

DATASET = "nvidia/Llama-Nemotron-Post-Training-Dataset"
SUBSETS = ("code", "math", "science", "chat", "safety")
REASONING = ("off", "on", "all")
LOCAL_DIR_KEY = "data.adaptation.local_dir"
MALFORMED_EXAMPLES = 5  # malformed rows named in the manifest (all are counted)
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


def to_training_row(row, reasoning: str = "off", keep_system_prompt: bool = False) -> dict | None:
    """One dataset row as ``{"messages": [...]}``, checked as training checks its rows (:mod:`.row_reader`), or None
    when its reasoning mode is not wanted; a row that is not the dataset's schema raises :class:`~.rows.RowError`."""
    if not isinstance(row, dict):
        raise RowError(NOT_OBJECT, f"not a Llama-Nemotron SFT row: a JSON {type_name(row)}, not an object")
    mode, msgs, output = row.get("reasoning"), row.get("input"), row.get("output")
    if not isinstance(msgs, list) or not msgs or not isinstance(output, str):
        raise RowError(BAD_FIELD, "not a Llama-Nemotron SFT row: needs 'input' (messages) and 'output' (text), got "
                                  f"'input' {brief(msgs)}, 'output' {brief(output)}")
    if mode not in ("on", "off"):
        raise RowError(BAD_FIELD, f"field 'reasoning' must be 'on' or 'off', got {brief(mode)}")
    out = [m if not isinstance(m, dict) else {"role": m.get("role"), "content": m.get("content")} for m in msgs]
    out.append({"role": "assistant", "content": output})
    try:
        out = to_messages({"messages": out})
    except RowError as exc:  # named after the dataset's fields: input[i], the output last
        raise RowError(exc.kind, str(exc).replace(f"'messages[{len(msgs)}]", "'output'").replace(
            "'messages", "'input")) from None
    system = row.get("system_prompt")
    if keep_system_prompt and system and out[0]["role"] != "system":
        if not isinstance(system, str):
            raise RowError(BAD_FIELD, f"field 'system_prompt' must be a string, got {type_name(system)}")
        out = to_messages({"messages": [{"role": "system", "content": system}, *out]})
    return {"messages": out} if reasoning == "all" or mode == reasoning else None


def _order_key(seed: int, subset: str, name: str, line: int) -> int:
    """The row's place in the seeded order: the first 8 bytes of ``sha256(seed:subset:file:line)``."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{subset}:{name}:{line}".encode()).digest()[:8], "big")


def _lines(f: Path):
    """(line number, byte offset, parsed row or its :class:`~.rows.RowError`) of every non-blank line of ``f``."""
    for n, off, raw in lines(f):
        try:
            yield n, off, parse_json(raw)
        except RowError as exc:
            yield n, off, exc


def _eligible(row, c: dict) -> bool:
    """Whether a parsed row is kept (its reasoning mode); a malformed row raises :class:`~.rows.RowError`."""
    if isinstance(row, Exception):
        raise row
    return to_training_row(row, c["reasoning"], c["keep_system_prompt"]) is not None


class _Malformed:
    """The malformed rows of a subset: counted by reason, the first few named."""

    def __init__(self):
        self.count, self.reasons, self.examples = 0, {}, []

    def add(self, where: str, exc: Exception) -> None:
        kind = exc.kind if isinstance(exc, RowError) else f"unexpected {type(exc).__name__}"
        self.count += 1
        self.reasons[kind] = self.reasons.get(kind, 0) + 1
        if len(self.examples) < MALFORMED_EXAMPLES:
            self.examples.append(f"{where}: {exc}"[:500])

    def merge(self, other: dict) -> None:
        self.count += other["malformed_rows"]
        for k, v in other["malformed_reasons"].items():
            self.reasons[k] = self.reasons.get(k, 0) + v
        self.examples = (self.examples + other["malformed_examples"])[:MALFORMED_EXAMPLES]

    def fields(self) -> dict:
        return {"malformed_rows": self.count, "malformed_reasons": dict(sorted(self.reasons.items())),
                "malformed_examples": list(self.examples)}


def subset_index(root: Path, subset: str, c: dict, out: Path | None = None) -> dict:
    """The eligible rows of ``subset`` in seeded key order, as arrays of (file number, byte offset): the rows
    themselves are read back one by one (:func:`read_row`), never all held in memory (12 bytes a row).  A
    malformed row (whatever the line holds: :mod:`.row_reader`) is skipped and counted by reason, the first few named.
    With ``out`` the arrays are saved there (``<subset>.npz``) and left out of the result."""
    files = sorted((root / "SFT" / subset).glob("*.jsonl"))
    keys, fno, offs, bad = array("Q"), array("i"), array("q"), _Malformed()
    for i, f in enumerate(files):
        for n, off, row in _lines(f):
            try:
                keep = _eligible(row, c)
            except Exception as exc:  # noqa: BLE001 - every malformed row is skipped and counted, never fatal
                bad.add(f"{f}:{n}", exc)
                continue
            if keep:
                keys.append(_order_key(int(c["seed"]), subset, f.name, n))
                fno.append(i)
                offs.append(off)
    k, fa, oa = (np.frombuffer(a, dtype=t) if len(a) else np.zeros(0, t)
                 for a, t in ((keys, np.uint64), (fno, np.int32), (offs, np.int64)))
    order = np.lexsort((oa, fa, k))
    res = {"subset": subset, "files": [str(f) for f in files], "file": fa[order], "offset": oa[order],
           "eligible_rows": int(len(order)), **bad.fields()}
    if out is not None:
        np.savez(out / f"{subset}.npz", file_no=res.pop("file"), offset=res.pop("offset"))
    return res


def read_row(f: Path, off: int, c: dict) -> dict:
    """The training row of the line at byte ``off`` of ``f`` (an index entry of :func:`subset_index`)."""
    with open(f, "rb") as fh:
        fh.seek(off)
        row = to_training_row(parse_json(fh.readline(MAX_LINE_BYTES + 1)), c["reasoning"], c["keep_system_prompt"])
    if row is None:
        raise RowError(BAD_FIELD, "the row changed since the files were indexed")
    return row


def count_tokens(tokenizer, row: dict) -> int:
    """Tokens the training sees for ``row`` (the init model's chat template, as ``encode_example``)."""
    from .data import encode_example

    return len(encode_example(tokenizer, row)[0])


def _take(job: tuple) -> dict:
    """Append the rows of one subset, from index position ``start``, to its part file until ``quota`` tokens are
    taken (the last row may pass it) or the subset runs out."""
    tmp, idx, c, tokenizer, start, quota = job
    arrays = np.load(tmp / f"{idx['subset']}.npz")
    files, fno, offs = idx["files"], arrays["file_no"], arrays["offset"]
    pos, tokens, written, bad = start, 0, 0, _Malformed()
    with open(tmp / f"{idx['subset']}.part", "a", encoding="utf-8") as fh:
        while tokens < quota and pos < len(fno):
            f, off = Path(files[fno[pos]]), int(offs[pos])
            pos += 1
            try:
                row = read_row(f, off, c)
                n = count_tokens(tokenizer, row)
            except OSError:
                raise
            except Exception as exc:  # noqa: BLE001 - the tokenizer or its template refused it: skipped, counted
                bad.add(f"{f}:byte {off}", exc if isinstance(exc, RowError) else RowError(
                    NOT_ENCODABLE, f"{NOT_ENCODABLE} ({type(exc).__name__}: {str(exc)[:200]})"))
                continue
            tokens += n
            written += 1
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return {"subset": idx["subset"], "pos": pos, "tokens": tokens, "rows": written, "exhausted": pos >= len(fno),
            **bad.fields()}


@contextlib.contextmanager
def _mapper(processes: int, jobs: int):
    """A ``map(fn, jobs)``: in this process, or over one pool of ``processes`` forked processes kept for every
    round of the build.  Forked, not spawned: a spawned child re-runs the parent's ``__main__`` (under Snakemake
    the job's script, which fails outside its job); the tokenizers' own threads are off in the children
    (``TOKENIZERS_PARALLELISM=false``, set before the fork)."""
    if processes <= 1 or jobs <= 1:
        yield lambda fn, js: [fn(j) for j in js]
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    with ProcessPoolExecutor(min(processes, jobs), mp_context=multiprocessing.get_context("fork")) as ex:
        yield lambda fn, js: list(ex.map(fn, js))


def _fill(tmp: Path, indexes: dict, c: dict, tokenizer, pmap) -> dict:
    """Take each subset's equal share of the token budget; the share a subset cannot fill (it ran out of rows) is
    split equally over the subsets that still have rows, until the budget is met or every subset is spent."""
    subsets = list(indexes)
    share = float(c["token_budget"]) / len(subsets)
    st = {s: {"pos": 0, "tokens": 0, "rows": 0, "extra": 0.0, "exhausted": indexes[s]["eligible_rows"] == 0}
          for s in subsets}
    bad = {s: _Malformed() for s in subsets}
    for s in subsets:
        bad[s].merge(indexes[s])
    need = {s: share for s in subsets}
    while jobs := [s for s in subsets if not st[s]["exhausted"] and need[s] > 0]:
        done = pmap(_take, [(tmp, indexes[s], c, tokenizer, st[s]["pos"], need[s]) for s in jobs])
        for r in done:
            s = r["subset"]
            st[s].update(pos=r["pos"], tokens=st[s]["tokens"] + r["tokens"], rows=st[s]["rows"] + r["rows"],
                         exhausted=r["exhausted"])
            bad[s].merge(r)
        short = sum(max(0.0, need[r["subset"]] - r["tokens"]) for r in done)
        need = dict.fromkeys(subsets, 0.0)
        open_ = [s for s in subsets if not st[s]["exhausted"]]
        for s in open_ if short > 0 else ():
            need[s] = short / len(open_)
            st[s]["extra"] += need[s]
    return {s: {"rows": st[s]["rows"], "tokens": st[s]["tokens"], "eligible_rows": indexes[s]["eligible_rows"],
                "budget_tokens": int(share), "redistributed_tokens": int(st[s]["extra"]),
                "exhausted": bool(st[s]["exhausted"]), **bad[s].fields()} for s in subsets}


def build(cfg: dict, tokenizer, out_path, progress: bool = True, processes: int | None = None) -> dict:
    """Write the adaptation set to ``out_path`` (JSONL, atomically) and its manifest beside it
    (``<out_path>.manifest.json``); returns the manifest.  The subsets are indexed and tokenized in ``processes``
    processes (default: one per subset, at most the CPUs); the output is the same for any number."""
    import shutil

    from .run_lock import remove_stale, unique_dir

    c = resolve(cfg)
    root = source_dir(c)
    processes = processes or min(len(c["subsets"]), os.cpu_count() or 1)
    remove_stale(Path(out_path).parent, ".adaptation.")  # the temporaries of a build that was killed
    tmp = unique_dir(Path(out_path).parent, ".adaptation.")
    try:
        if progress:
            print(f"indexing {c['subsets']} in {processes} process(es)", flush=True)
        with _mapper(processes, len(c["subsets"])) as pmap:
            found = pmap(_index_job, [(root, s, c, tmp) for s in c["subsets"]])
            stats = _fill(tmp, {r["subset"]: r for r in found}, c, tokenizer, pmap)
        if not sum(s["rows"] for s in stats.values()):
            raise ValueError(f"data.adaptation: no rows selected from {root} (subsets {c['subsets']}, reasoning "
                             f"{c['reasoning']!r}; malformed rows: "
                             f"{sum(s['malformed_rows'] for s in stats.values())})")
        h = hashlib.sha256()
        with atomic_path(out_path) as out, open(out, "wb") as fh:
            for s in c["subsets"]:
                part = tmp / f"{s}.part"
                for line in open(part, "rb") if part.exists() else ():
                    fh.write(line)
                    h.update(line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tokens = sum(s["tokens"] for s in stats.values())
    manifest = {"dataset": c["dataset"], "revision": c["revision"], "revision_commit": snapshot_commit(root),
                "source": str(root), "output": str(out_path), "sha256": h.hexdigest(),
                "rows": sum(s["rows"] for s in stats.values()), "tokens": tokens,
                "shortfall_tokens": max(0, int(float(c["token_budget"])) - tokens),
                "malformed_rows": sum(s["malformed_rows"] for s in stats.values()),
                "malformed_reasons": _merged_reasons(stats.values()),
                "subsets": stats, "tokenizer": getattr(tokenizer, "name_or_path", ""), "config": c}
    write_json_atomic(manifest_path(out_path), manifest)
    return manifest


def _index_job(job: tuple) -> dict:
    root, subset, c, tmp = job
    return subset_index(root, subset, c, out=tmp)


def manifest_path(out_path) -> Path:
    return Path(f"{out_path}.manifest.json")


def _merged_reasons(stats) -> dict:
    out: dict = {}
    for st in stats:
        for k, v in st["malformed_reasons"].items():
            out[k] = out.get(k, 0) + v
    return dict(sorted(out.items()))
