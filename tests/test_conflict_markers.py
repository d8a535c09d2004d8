"""No tracked file holds a merge conflict left unresolved (docs/results_schema.md once held one, committed): a line
opening a conflict (seven ``<`` and a space, or alone) or its middle (seven ``=`` alone on the line), followed later
by the closing line (seven ``>`` and a space, or alone).  A line of ``=`` alone (a markdown setext heading) or a
lone marker without its partner is no conflict."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the marker lines as git writes them (a label after a space, or none); written as counts, so that this file holds
# no marker line of its own
OPEN = re.compile(r"<{7}(?: .*)?$")
MIDDLE = re.compile(r"={7}\s*$")
CLOSE = re.compile(r">{7}(?: .*)?$")


def conflicts(text: str) -> list[tuple[int, int]]:
    """(first line, closing line), 1-based, of each conflict in ``text``: an opening or middle marker line with a
    closing marker line after it."""
    found, start = [], None
    for n, line in enumerate(text.splitlines(), 1):
        if start is None and (OPEN.match(line) or MIDDLE.match(line)):
            start = n
        elif start is not None and CLOSE.match(line):
            found.append((start, n))
            start = None
    return found


def _tracked_text() -> list[tuple[str, str]]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\0")
    out = []
    for name in filter(None, names):
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree, or a submodule
            continue
        data = path.read_bytes()
        if b"\0" not in data[:8192]:  # text, not a binary file
            out.append((name, data.decode("utf-8", errors="replace")))
    return out


def test_no_tracked_file_holds_a_merge_conflict():
    bad = [f"{name}: lines {a}-{b}" for name, text in _tracked_text() for a, b in conflicts(text)]
    assert not bad, "unresolved merge conflicts (keep one text that says what the code does now):\n" + "\n".join(bad)


L, M, R = "<" * 7, "=" * 7, ">" * 7  # built from parts, as above


@pytest.mark.parametrize("text,expect", [
    (f"a\n{L} HEAD\nours\n{M}\ntheirs\n{R} branch\nb\n", [(2, 6)]),
    (f"{L}\nours\n{M}\ntheirs\n{R}\n", [(1, 5)]),  # markers without names
    (f"ours\n{M}\ntheirs\n{R} branch\n", [(2, 4)]),  # its opening line deleted, the rest left
    (f"{L} HEAD\nours\n{R} branch\n", [(1, 3)]),  # no middle (diff3 style without base)
    (f"Title\n{M}\n\ntext\n", []),  # a setext heading
    (f"Title\n{M}==\n{L}< not a marker\n", []),
    (f"{L} HEAD\nnever closed\n", []),
    (f"{R} quoted alone\n", []),
    (f"x = 1  # {L} in a comment\n{R}x\n", []),
])
def test_what_counts_as_a_conflict(text, expect):
    assert conflicts(text) == expect
