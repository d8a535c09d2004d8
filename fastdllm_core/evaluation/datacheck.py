"""Evaluation data checked before any model is loaded: every line JSON, every item an object with the fields the
task reads, of the right types, and at least one item.  An error names the file, the line and the field."""
from __future__ import annotations

from pathlib import Path

from ..jsonl import iter_jsonl

_STR, _LIST, _NUM, _INT = (str,), (list,), (int, float), (int,)
_EVALPLUS = {"task_id": _STR, "prompt": _STR, "canonical_solution": _STR, "entry_point": _STR, "base_input": _LIST,
             "plus_input": _LIST, "atol": _NUM}
_HUMANEVAL_ORIGINAL = {"task_id": _STR, "prompt": _STR, "canonical_solution": _STR, "entry_point": _STR,
                       "test": _STR}
# fields each task's prompt and scoring read (lm-eval's task definitions; EvalPlus' problem format)
FIELDS = {
    "gsm8k": {"question": _STR, "answer": _STR},
    "synth_arith": {"question": _STR, "answer": _STR},
    "synth_code": _EVALPLUS,
    "synth_mbpp": _EVALPLUS,
    "synth_math": {"problem": _STR, "answer": _STR},
    "synth_mc": {"question": _STR, "choices": _LIST, "answer": _INT},
    "synth_ifeval": {"prompt": _STR, "constraints": _LIST},
    "mbpp": _EVALPLUS,
    "humaneval": None,  # EvalPlus form, or the original HumanEval (converted for base-only scoring)
    "mmlu": {"question": _STR, "choices": _LIST, "answer": _INT},
    "gpqa": {"Question": _STR, "Correct Answer": _STR, "Incorrect Answer 1": _STR, "Incorrect Answer 2": _STR,
             "Incorrect Answer 3": _STR},
    "ifeval": {"prompt": _STR, "instruction_id_list": _LIST, "kwargs": _LIST},
    "minerva_math": {"problem": _STR, "solution": _STR},
}


class DataError(ValueError):
    """Evaluation data that cannot be used; the message names the file, line and field."""


def _type_name(types) -> str:
    return " or ".join({"str": "string", "list": "list", "int": "integer", "float": "number"}[t.__name__]
                       for t in types)


def _bad_type(v, types) -> bool:
    if isinstance(v, bool):  # JSON true/false is no number here
        return bool not in types
    return not isinstance(v, types)


def iter_rows(path: Path):
    """(line number, parsed JSON) for every non-blank line; DataError naming the file and line otherwise."""
    yield from iter_jsonl(path, DataError)


def check_file(task: str, path) -> int:
    """Check ``path`` as ``task``'s data; returns the number of items.  Raises :class:`DataError`."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".jsonl" or p.name.endswith(".jsonl.gz"))
        if not files:
            raise DataError(f"{path}: the directory holds no .jsonl files for {task}")
        return sum(check_file(task, f) for f in files)
    fields = FIELDS.get(task)
    n_items = 0
    for n, row in iter_rows(path):
        if not isinstance(row, dict):
            raise DataError(f"{path}:{n}: an item must be a JSON object, got {type(row).__name__}")
        want = fields
        if task == "humaneval":
            want = _EVALPLUS if "base_input" in row else _HUMANEVAL_ORIGINAL
            if "base_input" in row and "plus_input" not in row:
                want = {k: v for k, v in _EVALPLUS.items() if k != "plus_input"}
        for key, types in (want or {}).items():
            if key not in row:
                raise DataError(f"{path}:{n}: field {key!r} is missing ({task} items need "
                                f"{', '.join(want)}; this one has {', '.join(sorted(row)) or 'none'})")
            if _bad_type(row[key], types):
                raise DataError(f"{path}:{n}: field {key!r} must be a {_type_name(types)}, got "
                                f"{type(row[key]).__name__} {str(row[key])[:40]!r}")
        n_items += 1
    if n_items == 0:
        raise DataError(f"{path}: the {task} data file is empty (no items)")
    return n_items
