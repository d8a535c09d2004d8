"""The verdict on a solution's outputs, written by the scorer, never by the solution (issue 22, section 3).

The sandboxed child that runs a solution (:func:`.check._execute`) compares nothing, and before the solution
runs it clears its copy (it is a fork of the scorer) of the problems and expected outputs (:func:`forget_secrets`;
their freed bytes may remain in memory).  It sends back each output in a restricted serialisation (:func:`encode`,
a tagged JSON of built-in values only, each checked with ``type(x) is ...``, so that a subclass of ``int`` or
``str`` or any object with its own ``__eq__`` is no output at all), and the scoring process decodes it
(:func:`decode`, which builds nothing but built-in values, the real ``collections`` Counter / OrderedDict /
defaultdict / deque and a few numpy scalars) and applies EvalPlus 0.3.1's comparison to it
(:func:`check_output`: the float tolerance of ``unsafe_execute``, HumanEval/32's ``_poly`` oracle, MBPP's
special oracles).  No pickle and no object of the solution's ever reaches the scorer.

Record format in the shared page after the header (see :mod:`.kernel`): per input, one byte kind
(:data:`REC_OUTPUT` or :data:`REC_ERROR`), a little-endian uint32 length and that many bytes of payload.  The
solution can write into that page too: whatever it writes is parsed as data, bounds-checked, and anything
malformed is a failed input.
"""
from __future__ import annotations

import json
import struct

REC_OUTPUT, REC_ERROR = 1, 2
_REC = struct.Struct("<BI")
MAX_DEPTH = 100  # nesting of an output (deeper is a failed input)
# numpy scalars an honest solution may return (EvalPlus compares them with ``==`` / ``np.allclose`` as numbers)
NUMPY_SCALARS = ("bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                 "float32", "float64")


class Unencodable(Exception):
    """An output that is not made of the allowed built-in types only."""


class Opaque:
    """An output of another type (sent as a marker only): scored ``fail`` except by MBPP's "not None" oracle."""


# ------------------------------------------------------------------------------------------------ child side
_SECRETS: list = []  # (container, depth): what the scorer holds that a solution must not find in its memory


def keep_secret(container, depth: int = 0) -> None:
    """Register a dict or list of the scorer's (the dataset's problems, EvalPlus' ground truth) that every
    sandboxed child clears in its own copy of memory before the solution runs (:func:`forget_secrets`):
    ``depth`` levels of nested dicts and lists are cleared too (never deeper: the inputs stay)."""
    _SECRETS.append((container, depth))


class secrets_of_one_check:
    """``with secrets_of_one_check((container, depth), ...):`` registers them (:func:`keep_secret`) for the checks
    run inside, and unregisters them afterwards (a process-pool worker scores many problems)."""

    def __init__(self, *pairs):
        self.pairs = pairs

    def __enter__(self):
        self.n = len(_SECRETS)
        for obj, depth in self.pairs:
            keep_secret(obj, depth)

    def __exit__(self, *exc):
        del _SECRETS[self.n:]


def _clear(obj, depth: int) -> None:
    if depth > 0:
        for v in list(obj.values() if type(obj) is dict else obj):
            if type(v) in (dict, list):
                _clear(v, depth - 1)
    obj.clear()


def forget_secrets(*extra) -> None:
    """Child side, before the solution runs: clear the registered containers and ``extra`` (lists or dicts) in
    this process's copy of memory, so that ``gc.get_objects()`` or the stack's frames (this process is a fork of
    the scorer) no longer lead to the expected outputs or the reference solutions."""
    for obj, depth in _SECRETS:
        _clear(obj, depth)
    for obj in extra:
        _clear(obj, 0)
    _SECRETS.clear()


def _numpy_tag(x):
    import sys

    np = sys.modules.get("numpy")  # only when the solution itself imported numpy
    if np is None:
        return None
    for name in NUMPY_SCALARS:
        if type(x) is getattr(np, name, None):
            return name
    return None


# collections types an honest solution (or a reference solution: MBPP's freq_count returns a Counter) may return;
# EvalPlus compares them by their contents (OrderedDict with OrderedDict: also by order)
COLLECTIONS = ("Counter", "OrderedDict", "defaultdict", "deque")


def _collections_tag(x):
    import collections

    for name in COLLECTIONS:
        if type(x) is getattr(collections, name):
            return name
    return None


def _enc(x, depth: int):
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    t = type(x)
    if x is None:
        return ["N"]
    if t is bool:
        return ["B", x]
    if t is int:
        return ["I", format(x, "x")]
    if t is float:
        return ["F", float.hex(x)]
    if t is complex:
        return ["C", float.hex(x.real), float.hex(x.imag)]
    if t is str:
        return ["S", x]
    if t is bytes:
        return ["Y", bytes.hex(x)]
    if t is list or t is tuple or t is set or t is frozenset:
        tag = {list: "L", tuple: "T", set: "E", frozenset: "Z"}[t]
        return [tag, [_enc(v, depth + 1) for v in x]]
    if t is dict:
        return ["D", [[_enc(k, depth + 1), _enc(v, depth + 1)] for k, v in dict.items(x)]]
    name = _collections_tag(x)
    if name is not None:  # the real class only (a subclass is no Counter): its data, rebuilt by the scorer
        items = list(x) if name == "deque" else [[_enc(k, depth + 1), _enc(v, depth + 1)] for k, v in dict.items(x)]
        return ["K", name, [_enc(v, depth + 1) for v in items] if name == "deque" else items]
    name = _numpy_tag(x)
    if name is not None:
        return ["P", name, _enc(x.item(), depth + 1)]
    raise Unencodable(f"type {t.__name__} is not allowed in an output")


def encode(x) -> bytes:
    """``x`` as tagged JSON (exact built-in types only); any other output becomes the :class:`Opaque` marker."""
    try:
        tree = _enc(x, 0)
    except (Unencodable, RecursionError):
        tree = ["?"]
    return json.dumps(tree, separators=(",", ":")).encode()


# ------------------------------------------------------------------------------------------------ scorer side
def _seq(node, depth):
    if type(node) is not list:
        raise ValueError("malformed output")
    return [_build(v, depth + 1) for v in node]


def _build(node, depth: int):
    """The value of one decoded JSON node; raises ValueError/TypeError on anything not made by :func:`_enc`."""
    if depth > MAX_DEPTH + 2 or type(node) is not list or not node or type(node[0]) is not str:
        raise ValueError("malformed output")
    tag, args = node[0], node[1:]
    if tag == "N" and not args:
        return None
    if tag == "B" and len(args) == 1 and type(args[0]) is bool:
        return args[0]
    if tag in "IFSY" and len(tag) == 1 and len(args) == 1 and type(args[0]) is str:
        return {"I": lambda s: int(s, 16), "F": float.fromhex, "S": str, "Y": bytes.fromhex}[tag](args[0])
    if tag == "C" and len(args) == 2 and all(type(a) is str for a in args):
        return complex(float.fromhex(args[0]), float.fromhex(args[1]))
    if tag in ("L", "T", "E", "Z") and len(args) == 1:
        return {"L": list, "T": tuple, "E": set, "Z": frozenset}[tag](_seq(args[0], depth))
    if tag == "D" and len(args) == 1 and type(args[0]) is list:
        pairs = [_seq(p, depth) for p in args[0]]
        if any(len(p) != 2 for p in pairs):
            raise ValueError("malformed dict")
        return dict(pairs)
    if tag == "K" and len(args) == 2 and args[0] in COLLECTIONS:
        import collections

        if args[0] == "deque":
            return collections.deque(_seq(args[1], depth))
        pairs = [_seq(p, depth) for p in args[1]] if type(args[1]) is list else None
        if pairs is None or any(len(p) != 2 for p in pairs):
            raise ValueError("malformed mapping")
        if args[0] == "defaultdict":
            return collections.defaultdict(None, pairs)
        return getattr(collections, args[0])(dict(pairs) if args[0] == "Counter" else pairs)
    if tag == "P" and len(args) == 2 and args[0] in NUMPY_SCALARS:
        import numpy as np

        value = _build(args[1], depth + 1)
        if type(value) not in (bool, int, float):
            raise ValueError("malformed numpy scalar")
        return getattr(np, args[0])(value)
    if tag == "?" and not args:
        return Opaque()
    raise ValueError(f"malformed output (tag {tag!r})")


def decode(payload: bytes):
    """The output that :func:`encode` wrote (built-in values, numpy scalars or an :class:`Opaque` marker)."""
    return _build(json.loads(payload.decode("utf-8")), 0)


def parse_records(buf, start: int, end: int, count: int):
    """Yield ``(kind, payload)`` for up to ``count`` records in ``buf[start:end]``; stops at a malformed one
    (yielding ``(None, b"")``)."""
    pos = start
    for _ in range(count):
        if pos + _REC.size > end:
            yield None, b""
            return
        kind, n = _REC.unpack_from(buf, pos)
        if kind not in (REC_OUTPUT, REC_ERROR) or pos + _REC.size + n > end:
            yield None, b""
            return
        yield kind, bytes(buf[pos + _REC.size:pos + _REC.size + n])
        pos += _REC.size + n


def write_record(buf, pos: int, kind: int, payload: bytes) -> int:
    """Write one record at ``pos`` (child side); returns the next position; OverflowError when it does not fit."""
    end = pos + _REC.size + len(payload)
    if end > len(buf):
        raise OverflowError("output too large for the shared page")
    buf[pos + _REC.size:end] = payload
    _REC.pack_into(buf, pos, kind, len(payload))
    return end


# ------------------------------------------------------------------------------------------------ comparison
class _FindZeroPassed(Exception):
    """HumanEval/32's oracle accepted the output (EvalPlus' ``continue`` past the generic comparison)."""


def _oracles():
    """numpy and EvalPlus' comparison helpers and special oracles, imported once."""
    from types import SimpleNamespace

    import numpy as np
    from evalplus.eval import is_floats
    from evalplus.eval._special_oracle import (
        MBPP_OUTPUT_NOT_NONE_TASKS,
        MBPP_OUTPUT_SET_EQ_TASKS,
        _digit_distance_nums,
        _poly,
        _surface_Area,
    )

    return SimpleNamespace(np=np, is_floats=is_floats, set_eq=MBPP_OUTPUT_SET_EQ_TASKS,
                           not_none=MBPP_OUTPUT_NOT_NONE_TASKS, digit_distance_nums=_digit_distance_nums, poly=_poly,
                           surface_area=_surface_Area)


def check_output(o, dataset: str, entry_point: str, inp, out, exp, atol):
    """EvalPlus 0.3.1's comparison of one (decoded) output, its special oracles ``o`` included: raises on a
    mismatch (an ``AssertionError``, as EvalPlus), :class:`_FindZeroPassed` when HumanEval/32's oracle accepts it;
    returns the tolerance for the next inputs (EvalPlus sets 1e-6 for good once a float output is expected with
    ``atol`` 0).  An :class:`Opaque` output passes nothing but MBPP's "not None" oracle."""
    if type(out) is Opaque and not (dataset == "mbpp" and entry_point in o.not_none):
        raise AssertionError("output of a type that is not allowed")
    exact_match = out == exp
    if dataset == "mbpp":
        exact_match = _mbpp_match(o, entry_point, inp, out, exp, atol, exact_match)
    if dataset == "humaneval" and "find_zero" == entry_point:
        assert abs(o.poly(*inp, out)) <= atol
        raise _FindZeroPassed
    if atol == 0 and o.is_floats(exp):
        atol = 1e-6
    if not exact_match and atol != 0:
        assert type(out) == type(exp)  # noqa: E721 - EvalPlus' check
        if isinstance(exp, (list, tuple)):
            assert len(out) == len(exp)
        assert o.np.allclose(out, exp, rtol=1e-07, atol=atol)
    else:
        assert exact_match
    return atol


def _mbpp_match(o, entry_point: str, inp, out, exp, atol, exact_match):
    """EvalPlus' special oracles of MBPP tasks whose reference output is not the only right one."""
    if "are_equivalent" == entry_point:
        return exact_match or True
    if "sum_div" == entry_point:
        return exact_match or out == 0
    if "surface_Area" == entry_point:
        return exact_match or abs(out - o.surface_area(*inp)) <= atol
    if "digit_distance_nums" == entry_point:
        return exact_match or out == o.digit_distance_nums(*inp)
    if entry_point in o.set_eq:
        return set(out) == set(exp)
    if entry_point in o.not_none:
        return out == exp if isinstance(out, bool) else exp == (out is not None)
    return exact_match


class Judge:
    """Per-input verdicts of one check, from the records the child wrote (fed as they arrive, or all at once)."""

    def __init__(self, dataset: str, entry_point: str, inputs, expected, atol, fast_check: bool):
        self.dataset, self.entry_point, self.inputs, self.expected = dataset, entry_point, inputs, expected
        self.atol, self.fast_check = atol, fast_check
        self.details: list[bool] = []
        self.pos = None
        self.o = _oracles()

    def done(self) -> bool:
        """True once the verdict cannot change: a failed input under ``fast_check``, or every input judged."""
        return (self.fast_check and not all(self.details)) or len(self.details) >= len(self.inputs)

    def feed(self, buf, start: int, end: int, count: int, live: bool = False) -> None:
        """Judge records ``len(details)`` .. ``count - 1`` of ``buf[start:end]`` (record 0 begins at ``start``).
        ``live``: the child is still writing, so a record that is not complete yet is waited for, not failed."""
        if self.pos is None:
            self.pos = start
        count = min(count, len(self.inputs))
        while len(self.details) < count and not self.done():
            kind, payload = next(parse_records(buf, self.pos, end, 1))
            if kind is None and live:
                return
            if kind is None:  # malformed: this input and everything after it failed
                self.details += [False] * (count - len(self.details))
                return
            self.pos += _REC.size + len(payload)
            self.details.append(kind == REC_OUTPUT and self._judge(len(self.details), payload))

    def _judge(self, i: int, payload: bytes) -> bool:
        try:
            out = decode(payload)
            self.atol = check_output(self.o, self.dataset, self.entry_point, self.inputs[i], out,
                                     self.expected[i], self.atol)
        except _FindZeroPassed:
            # HumanEval/32: in EvalPlus 0.3.1's unsafe_execute the find_zero oracle is `assert abs(_poly(*inp,
            # out)) <= atol; continue`, and the `continue` jumps over `details[i] = True; progress.value += 1`, so
            # no program can pass it (163/164 for the canonical solutions).  The oracle itself is right: only the
            # bookkeeping was skipped; here the pass is recorded (tests/test_humaneval_canonical.py: 164/164).
            return True
        except Exception:  # noqa: BLE001 - any error while comparing is a mismatch, as in EvalPlus
            return False
        return True
