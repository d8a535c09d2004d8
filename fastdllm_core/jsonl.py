"""Reading JSONL(.gz) files line by line, naming the file and line of anything that is not JSON."""
from __future__ import annotations

import gzip
import json


def iter_jsonl(path, error: type[Exception] = ValueError):
    """(line number, parsed JSON) for every non-blank line of ``path`` (gzip when it ends in ``.gz``); ``error``
    naming the file and line for a line that is not JSON, naming the file when it cannot be read as UTF-8."""
    op = gzip.open if str(path).endswith(".gz") else open
    try:
        with op(path, "rt", encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise error(f"{path}:{n}: not valid JSON ({exc.msg}, column {exc.colno})") from None
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise error(f"{path}: cannot be read as UTF-8 JSONL ({type(exc).__name__}: {exc})") from None
