"""A model of a multi-model sweep that cannot be loaded (a gated Hub id without an accepted licence or HF_TOKEN,
a missing checkpoint): its runs become ``n/a`` rows naming why, and the sweep goes on with the other models."""
from __future__ import annotations

from ..hub_access import HubAccessError

BD_DECODE_COLUMNS = ("threshold", "sub_block_size", "use_sub_block_cache")


def load_or_reason(load, source: str):
    """``(model, "")`` from ``load()``, or ``(None, reason)`` when the model cannot be loaded: a Hub refusal
    (:class:`~fastdllm_core.hub_access.HubAccessError`: the repository and the fix) or an ``OSError`` (no such
    checkpoint / files).  Any other error is a bug and propagates."""
    try:
        return load(), ""
    except HubAccessError as exc:
        return None, exc.reason
    except OSError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return None, f"model {source} could not be loaded: {first}"


def na_rows(runs: list[dict], reason: str) -> list[dict]:
    """One row per planned run (mode, batch size, the diffusion decode columns) with ``status=n/a``, ``note``
    = ``reason`` and no measurement."""
    out = []
    for run in runs:
        row = {"mode": run["mode"], "batch_size": run["batch_size"], "tokens_per_s": "", "status": "n/a",
               "note": reason}
        if run["mode"] == "bd":
            d = run.get("decode") or {}
            row.update({k: d.get(k, "") for k in BD_DECODE_COLUMNS})
        out.append(row)
    return out
