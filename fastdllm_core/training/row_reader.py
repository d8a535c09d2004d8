"""Training rows as read from JSONL files: every line, whatever it holds, is either a row or a named reason
(:class:`RowError`, whose ``kind`` is what the adaptation build counts).  One reader for training's data check,
the token store's encoding (:mod:`.data`, :mod:`.token_store`) and the adaptation build (:mod:`.adaptation_data`).

* Lines: the file's bytes split at ``\\n`` (``.gz`` files decompressed), numbered from 1; a line of whitespace
  only is skipped; a ``\\r`` before the ``\\n`` is JSON whitespace; a UTF-8 byte order mark at the start of a line
  is dropped.  A line longer than :data:`MAX_LINE_BYTES` is a reason (it is never held in memory whole).
* JSON: strict UTF-8 and one JSON value, read by Python's ``json`` (``NaN`` and ``Infinity`` as it reads them,
  integers of any length: beyond 4000 digits as floats); nesting deeper than the interpreter's recursion limit is
  a reason, not a crash.
* A training row: ``{"text": str}`` (non-empty), or a conversation: ``messages`` (a non-empty list of at most
  :data:`MAX_TURNS` objects with a ``role`` among :data:`ROLES` and a string ``content``; other keys are dropped),
  or ``prompt`` + ``response``
  strings.  A user turn comes before the first assistant turn, an assistant turn is last, and every string is
  valid Unicode (a lone surrogate, which JSON's ``\\ud800`` escapes can make, is refused: no tokenizer takes it).
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

ROLES = ("system", "user", "assistant")
MAX_LINE_BYTES = 64 * 2**20  # 64 MiB: about 16M tokens in one row
MAX_TURNS = 1000  # messages in one conversation
BOM = "\ufeff"
_CHUNK = 2**20

# the reasons (RowError.kind)
NOT_UTF8 = "not UTF-8"
NOT_JSON = "not JSON"
TOO_DEEP = "JSON nested too deeply"
TOO_LONG = "line too long"
NOT_OBJECT = "not a JSON object"
BAD_FIELD = "missing or mistyped field"
BAD_TEXT = "not valid Unicode text"
NOT_ENCODABLE = "cannot be encoded"


class RowError(ValueError):
    """A line that is not a training row; the message says why, ``kind`` is the reason's name."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class DataError(ValueError):
    """A training file that cannot be used as it is; the message names the file, the line and the reason."""


def lines(path):
    """(line number, byte offset, the line's bytes) of every line of ``path`` that is not blank; the bytes are a
    :class:`RowError` instead when the line is longer than :data:`MAX_LINE_BYTES` (the rest is skipped unread)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"training data file not found: {path}")
    if not path.is_file():
        raise DataError(f"{path}: not a regular file")
    n = off = 0
    try:
        with (gzip.open if path.name.endswith(".gz") else open)(path, "rb") as fh:
            while raw := fh.readline(MAX_LINE_BYTES + 1):
                n += 1
                size = len(raw)
                if size > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                    while (part := fh.readline(_CHUNK)) and not part.endswith(b"\n"):
                        size += len(part)
                    size += len(part)
                    raw = RowError(TOO_LONG, f"a line of more than {MAX_LINE_BYTES} bytes")
                    yield n, off, raw
                elif (raw[3:] if raw.startswith(b"\xef\xbb\xbf") else raw).strip():
                    yield n, off, raw
                off += size
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot be read after line {n} ({type(exc).__name__}: {exc})") from None


def parse_json(raw):
    """The JSON value of one line (bytes), or :class:`RowError` naming why there is none."""
    if isinstance(raw, RowError):
        raise raw
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RowError(NOT_UTF8, f"not valid UTF-8 (at byte {exc.start} of the line: "
                                 f"{raw[exc.start:exc.start + 1]!r})") from None
    if text.startswith(BOM):
        text = text[1:]
    try:
        try:
            return json.loads(text)
        except ValueError as exc:
            if isinstance(exc, json.JSONDecodeError) or "integer string conversion" not in str(exc):
                raise
            return json.loads(text, parse_int=_int)  # an integer of more than 4300 digits
    except json.JSONDecodeError as exc:
        raise RowError(NOT_JSON, f"not valid JSON ({exc.msg}, column {exc.colno})") from None
    except RecursionError:
        raise RowError(TOO_DEEP, "not valid JSON for this reader: nested too deeply") from None
    except (ValueError, OverflowError) as exc:
        raise RowError(NOT_JSON, f"not readable JSON ({type(exc).__name__}: {str(exc)[:80]})") from None


def _int(s: str):
    return int(s) if len(s) <= 4000 else float(s)


# ------------------------------------------------------------------------------------------------ the row schema
def check_row(row) -> None:
    """A plain-text row (``{"text": str}``) or a chat row (see :func:`to_messages`); raises naming the field."""
    if row_text(row) is None:
        to_messages(row)


def row_text(row) -> str | None:
    """The text of a plain-text row (``{"text": ...}``, checked), None for any other row."""
    if not (isinstance(row, dict) and "text" in row):
        return None
    text = row["text"]
    if not isinstance(text, str) or not text:
        raise RowError(BAD_FIELD, f"field 'text' must be a non-empty string, got {type_name(text)}")
    _unicode(text, "text")
    return text


def to_messages(row) -> list[dict]:
    """The conversation of a chat row (``messages``, or ``prompt`` + ``response``) as ``{"role", "content"}``
    objects, checked (the module docstring); a bad row raises :class:`RowError` naming the field."""
    if not isinstance(row, dict):
        raise RowError(NOT_OBJECT, f"an SFT row must be a JSON object, got {type_name(row)}")
    if "messages" in row:
        msgs = row["messages"]
        if not isinstance(msgs, list) or not msgs:
            raise RowError(BAD_FIELD, "field 'messages' must be a non-empty list of {role, content} objects, got "
                                      f"{brief(msgs)}")
        if len(msgs) > MAX_TURNS:
            raise RowError(BAD_FIELD, f"field 'messages' has {len(msgs)} turns, more than {MAX_TURNS} (encoding a "
                                      "conversation takes time quadratic in its turns)")
        msgs = [_message(m, i) for i, m in enumerate(msgs)]
    elif "prompt" in row and "response" in row:
        for k in ("prompt", "response"):
            if not isinstance(row[k], str):
                raise RowError(BAD_FIELD, f"field '{k}' must be a string, got {type_name(row[k])}")
            _unicode(row[k], k)
        msgs = [{"role": "user", "content": row["prompt"]}, {"role": "assistant", "content": row["response"]}]
    else:
        raise RowError(BAD_FIELD, f"an SFT row needs 'messages' or 'prompt'+'response'; got keys {_keys(row)}")
    if msgs[-1]["role"] != "assistant":
        raise RowError(BAD_FIELD, "field 'messages': an SFT conversation must end with an assistant turn (the last "
                                  f"role is {msgs[-1]['role']!r})")
    first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    if not any(m["role"] == "user" for m in msgs[:first]):
        raise RowError(BAD_FIELD, f"field 'messages': the assistant turn messages[{first}] has no user turn before it")
    return msgs


def _message(m, i: int) -> dict:
    if not isinstance(m, dict):
        raise RowError(BAD_FIELD, f"field 'messages[{i}]' must be an object with 'role' and 'content', got "
                                  f"{type_name(m)}")
    for k in ("role", "content"):
        if not isinstance(m.get(k), str):
            raise RowError(BAD_FIELD, f"field 'messages[{i}].{k}' must be a string, got "
                                      f"{'nothing' if k not in m else type_name(m[k])}")
    if m["role"] not in ROLES:
        raise RowError(BAD_FIELD, f"field 'messages[{i}].role' must be one of {', '.join(map(repr, ROLES))}, got "
                                  f"{brief(m['role'])}")
    _unicode(m["content"], f"messages[{i}].content")
    return {"role": m["role"], "content": m["content"]}


def _unicode(s: str, field: str) -> None:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RowError(BAD_TEXT, f"field '{field}' is not valid Unicode text (a lone surrogate "
                                 f"{s[exc.start]!r} at character {exc.start})") from None


def type_name(v) -> str:
    return type(v).__name__


def brief(v) -> str:
    """A short description of a JSON value for a message: never its whole text, never recursive."""
    if isinstance(v, str):
        return repr(v[:40]) + ("..." if len(v) > 40 else "")
    if isinstance(v, bool) or v is None or isinstance(v, float):
        return repr(v)
    if isinstance(v, int):
        return repr(v) if v.bit_length() <= 64 else f"an integer of {v.bit_length()} bits"
    if isinstance(v, list):
        return f"a list of {len(v)}"
    if isinstance(v, dict):
        return f"an object with keys {_keys(v)}"
    return type_name(v)


def _keys(d: dict) -> str:
    keys = sorted(str(k)[:30] for k in d)
    return str(keys[:8])[:-1] + (f", ... {len(keys) - 8} more]" if len(keys) > 8 else "]")
