"""Stored numerics (``tests/data/numerics/*.json``): fingerprints, comparison with stated tolerances, and the
``--update-numerics --reason "..."`` regeneration (options in ``tests/conftest.py``).

A store file holds one entry per *case* (a training recipe, a decoder setting, an evaluated task), each with the
values it pins and who wrote them (``written``: commit, whether the tree was dirty, date, reason).  Cases are
independent: adding one (a new recipe, another seed) adds an entry and leaves the others as they are; an update
rewrites only the entries whose values moved beyond the tolerances, so float noise never churns the file.

Comparison rules (by the last key of a value's path):

* integers, strings, booleans, None, sha256 fingerprints, token ids: exact;
* ``loss``, ``grad_norm``: relative :data:`REL_TOL` ``["loss"]``; ``lr``: relative 1e-9; ``loglik``: relative 1e-6;
* a weights summary (``{tensor: [norm, projection]}``, :func:`weights_summary`): both numbers within
  :data:`WEIGHT_RTOL` x the stored norm of the tensor;
* any other float: exact.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import math
import subprocess
import zlib
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
STORE_DIR = Path(__file__).resolve().parent / "data" / "numerics"

# Relative tolerances by key.  Measured on the 2-core CPU host (tests/test_numerics_training.py): the same run
# twice in one process gives identical numbers; one process vs two (torchrun, gloo) differs by <= 1.7e-7 in the
# loss (the 6 decimals metrics.csv keeps) and in the gradient norm.  Between CPUs (the values stored on an AMD EPYC,
# checked on an Intel Xeon with AVX-512, both under the AVX2 pin of fastdllm_core.cpu_numerics) the losses and
# log-likelihoods agree within these tolerances but the gradient norms, long float32 reductions whose summation
# order follows the kernels' blocking, differ by up to 8e-5: their tolerance is 5e-4 (a changed batch, mask or
# objective moves the loss, which keeps 1e-5, and the fingerprints, which are exact).
REL_TOL = {"loss": 1e-5, "grad_norm": 5e-4, "lr": 1e-9, "loglik": 1e-6}
# Weights after a few steps: one vs two processes differ by <= 2.5e-5 x ||w|| (the k_proj biases, whose gradient is
# numerically zero, so AdamW turns rounding noise into steps of the learning rate's size; every other tensor
# <= 1e-6).  Rounded-weight hashes are therefore not stable between 1 and 2 processes and are not used.
WEIGHT_RTOL = 5e-4
MAX_LINES = 25  # mismatches listed in a failure message

_pending: dict[Path, dict] = {}  # store path -> {case: new entry or None (remove)}
_report: list[str] = []  # lines for the terminal summary of an update run
_loaded: dict[Path, dict] = {}


# ------------------------------------------------------------------------------------------------ fingerprints
def sha256_tensors(*tensors) -> str:
    """sha256 of exact tensors (dtype, shape and little-endian bytes of each, in order); None counts as a
    tensor named ``None``."""
    h = hashlib.sha256()
    for t in tensors:
        if t is None:
            h.update(b"None;")
            continue
        t = t.detach().cpu().contiguous()
        if t.dtype == torch.bool:
            t = t.to(torch.uint8)
        arr = t.numpy()
        h.update(f"{t.dtype}{tuple(t.shape)};".encode())
        h.update(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_json(obj) -> str:
    return sha256_bytes(json.dumps(obj, sort_keys=True, ensure_ascii=True, separators=(",", ":")).encode())


def tokenizer_fingerprint(tok) -> dict:
    """Size and sha256 of a fast tokenizer's vocabulary, merges and added tokens (id, content, special)."""
    model = json.loads(tok.backend_tokenizer.to_str())
    added = sorted((a["id"], a["content"], a.get("special", False)) for a in model.get("added_tokens", []))
    return {"size": len(tok), "vocab_merges_added": sha256_json(
        {"vocab": model["model"].get("vocab"), "merges": model["model"].get("merges"), "added": added})}


def named_weights(model) -> dict[str, torch.Tensor]:
    """A model's parameters by name (tied tensors once), as a state dict file would hold them."""
    return {n: p.detach() for n, p in model.named_parameters()}


def weights_sha256(weights: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for name in sorted(weights):
        h.update(name.encode() + b":" + sha256_tensors(weights[name]).encode())
    return h.hexdigest()


def weights_summary(weights: dict[str, torch.Tensor]) -> dict[str, list[float]]:
    """Per tensor ``[norm, projection]``: the L2 norm and the projection on a fixed unit direction (standard normal,
    seeded by the tensor's name), both in float64.  A change d of the tensor moves each by at most ``||d||``."""
    out = {}
    for name in sorted(weights):
        w = weights[name].detach().cpu().double().reshape(-1)
        g = torch.Generator().manual_seed(zlib.crc32(name.encode()))
        r = torch.randn(w.numel(), generator=g, dtype=torch.float64)
        r = r / r.norm()
        out[name] = [float(w.norm()), float(w @ r)]
    return out


# ------------------------------------------------------------------------------------------------ comparison
def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300)


def _fmt(v) -> str:
    if isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v):
        return f"sha256 {v[:12]}..."
    s = json.dumps(v) if not isinstance(v, float) else repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def compare(stored, actual, path: str = "", ref: str = "stored") -> list[str]:
    """Mismatches of ``actual`` against ``stored`` (empty when every value is within its tolerance), each line
    naming the path (case / step / field) and both values (the reference called ``ref``)."""
    key = path.rsplit(" / ", 1)[-1]
    if key.endswith("weights") and isinstance(stored, dict) and isinstance(actual, dict) and \
            all(isinstance(v, list) for v in stored.values()):
        return _compare_weights(stored, actual, path, ref)
    if isinstance(stored, dict) and isinstance(actual, dict):
        out = []
        for k in list(stored) + [k for k in actual if k not in stored]:
            p = f"{path} / {k}" if path else str(k)
            if k not in actual:
                out.append(f"{p}: missing ({ref} {_fmt(stored[k])})")
            elif k not in stored:
                out.append(f"{p}: new value {_fmt(actual[k])} (not in {ref})")
            else:
                out += compare(stored[k], actual[k], p, ref)
        return out
    if isinstance(stored, list) and isinstance(actual, list) and not _is_scalar_list(stored):
        if len(stored) != len(actual):
            return [f"{path}: {len(actual)} items != {ref} {len(stored)}"]
        return [line for i, (s, a) in enumerate(zip(stored, actual)) for line in compare(s, a, f"{path} / [{i}]", ref)]
    if isinstance(stored, float) and isinstance(actual, (float, int)) and not isinstance(actual, bool):
        tol = REL_TOL.get(key)
        if tol is None:
            return [] if actual == stored else [f"{path}: {actual!r} != {ref} {stored!r} (exact)"]
        if math.isnan(stored) or math.isnan(actual) or _rel(actual, stored) > tol:
            return [f"{path}: {actual!r} != {ref} {stored!r} (relative difference {_rel(actual, stored):.1e} > "
                    f"{tol:g})"]
        return []
    if isinstance(stored, list) and isinstance(actual, list) and key == "loglik":
        if len(stored) != len(actual) or any(_rel(a, s) > REL_TOL["loglik"] for a, s in zip(actual, stored)):
            return [f"{path}: {_fmt(actual)} != {ref} {_fmt(stored)} (relative {REL_TOL['loglik']:g})"]
        return []
    if stored != actual or type(stored) is not type(actual):
        return [f"{path}: {_fmt(actual)} != {ref} {_fmt(stored)}" + _first_diff(stored, actual)]
    return []


def _is_scalar_list(x: list) -> bool:
    return all(not isinstance(v, (dict, list)) for v in x)


def _first_diff(stored, actual) -> str:
    if isinstance(stored, list) and isinstance(actual, list):
        for i, (s, a) in enumerate(zip(stored, actual)):
            if s != a:
                return f" (first difference at index {i}: {a!r} vs {s!r})"
        return f" (lengths {len(actual)} vs {len(stored)})"
    return ""


def _compare_weights(stored: dict, actual: dict, path: str, ref: str) -> list[str]:
    out = []
    if sorted(stored) != sorted(actual):
        return [f"{path}: tensors {sorted(set(actual) ^ set(stored))} are not in both (this run, {ref})"]
    for name, (norm, proj) in stored.items():
        a_norm, a_proj = actual[name]
        tol = WEIGHT_RTOL * norm + 1e-12
        if abs(a_norm - norm) > tol or abs(a_proj - proj) > tol:
            out.append(f"{path} / {name}: [norm, projection] {[a_norm, a_proj]} != {ref} {[norm, proj]} "
                       f"(tolerance {WEIGHT_RTOL:g} x norm = {tol:.2e})")
    return out


# ------------------------------------------------------------------------------------------------ store
def store_path(name: str) -> Path:
    return STORE_DIR / f"{name}.json"


def load(name: str) -> dict:
    p = store_path(name)
    if p not in _loaded:
        _loaded[p] = json.loads(p.read_text()) if p.is_file() else {"cases": {}}
    return _loaded[p]


def _git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def written_by(reason: str) -> dict:
    return {"commit": _git("rev-parse", "HEAD") or "unknown",
            "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
            "date": datetime.date.today().isoformat(), "reason": reason}


def check(config, store: str, case: str, actual: dict) -> None:
    """Compare ``actual`` with the stored values of ``case`` (fail naming every moved field), or, with
    ``--update-numerics``, record it for writing when they moved or are new."""
    import pytest

    stored = load(store)["cases"].get(case)
    diff = compare(stored["values"], actual) if stored is not None else None
    if config.getoption("--update-numerics"):
        p = store_path(store)
        if diff is None or diff:
            _pending.setdefault(p, {})[case] = {"written": written_by(config.getoption("--reason")),
                                                "values": _plain(actual)}
            _report.append(f"{p.relative_to(ROOT)}: {case}: " + ("new entry" if diff is None else
                                                                 f"{len(diff)} value(s) moved"))
            _report.extend(f"    {line}" for line in (diff or []))
        else:
            _report.append(f"{p.relative_to(ROOT)}: {case}: unchanged (within tolerances), entry kept")
        return
    hint = (f"If the change is meant, rewrite the stored values with the reason:\n  python -m pytest "
            f"{_test_file(store)} --update-numerics --reason \"...\"")
    if stored is None:
        pytest.fail(f"{store_path(store).relative_to(ROOT)} has no stored values for case {case!r}.\n{hint}",
                    pytrace=False)
    if diff:
        lines = [f"{case} / {line}" for line in diff]
        more = f"\n  ... and {len(lines) - MAX_LINES} more" if len(lines) > MAX_LINES else ""
        pytest.fail(f"numerics moved against {store_path(store).relative_to(ROOT)} (stored at commit "
                    f"{stored['written']['commit'][:10]}: {stored['written']['reason']}):\n  "
                    + "\n  ".join(lines[:MAX_LINES]) + more + "\n" + hint, pytrace=False)


def check_cases(config, store: str, cases: list[str]) -> None:
    """The stored file holds exactly ``cases`` (a stored case the test no longer computes is stale); with
    ``--update-numerics`` stale entries are removed."""
    import pytest

    stale = sorted(set(load(store)["cases"]) - set(cases))
    if config.getoption("--update-numerics"):
        p = store_path(store)
        for c in stale:
            _pending.setdefault(p, {})[c] = None
            _report.append(f"{p.relative_to(ROOT)}: {c}: removed (no longer a case of the test)")
        return
    if stale:
        pytest.fail(f"{store_path(store).relative_to(ROOT)} holds cases the test no longer computes: {stale}; "
                    f"remove them with: python -m pytest {_test_file(store)} --update-numerics --reason \"...\"",
                    pytrace=False)


def _test_file(store: str) -> str:
    return f"tests/test_numerics_{store}.py"


def _plain(x):
    """JSON-ready copy (tuples to lists, numpy/torch scalars to Python)."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "item") and not isinstance(x, (int, float, str, bool)):
        return x.item()
    return x


def write_pending() -> list[Path]:
    """Write every store with pending updates (entries sorted by case name); returns the files written."""
    written = []
    for p, changes in _pending.items():
        data = json.loads(p.read_text()) if p.is_file() else {}
        cases = data.get("cases", {})
        for case, entry in changes.items():
            if entry is None:
                cases.pop(case, None)
            else:
                cases[case] = entry
        out = {"about": ABOUT, "tolerances": {"relative": REL_TOL, "weights_x_norm": WEIGHT_RTOL,
                                              "everything_else": "exact"},
               "cases": dict(sorted(cases.items()))}
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(dumps(out) + "\n")
        written.append(p)
    _pending.clear()
    _loaded.clear()
    return written


def report_lines() -> list[str]:
    return list(_report)


ABOUT = ("Stored numerics pinned by tests/test_numerics_*.py (helpers: tests/numerics_check.py). One entry per "
         "case, with the commit it was computed at ('dirty': uncommitted changes present, as when values are "
         "updated in the commit that changes them) and the reason. Regenerate after a meant change: python -m "
         "pytest tests/test_numerics_*.py --update-numerics --reason \"...\" (only entries that moved are "
         "rewritten; the old vs new values are printed).")


def dumps(obj, indent: int = 0) -> str:
    """JSON with one level of indentation per depth, lists of scalars (token ids, [norm, projection]) on one
    line."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f"{inner}{json.dumps(k)}: {dumps(v, indent + 1)}" for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(obj, list) and not _is_scalar_list(obj):
        return "[\n" + ",\n".join(inner + dumps(v, indent + 1) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj)
