"""Every reference to a page resolves (issue 52).

* Markdown links in README.md, docs/*.md and results/**/README.md: a relative target is an existing file or folder
  (relative to the page); an ``#anchor`` on a link into a .md file (or on the page itself) is one of that page's
  headings, slugged as GitHub does (lowercase, punctuation but ``-`` and ``_`` dropped, spaces to ``-``, a repeated
  heading gets ``-1``, ``-2`` ...).
* Plain-text references ``docs/<file>.md`` in README.md, docs/ and the code (docstrings, comments, configs,
  scripts): the file exists; ``docs/<file>.md#anchor`` names a heading; ``docs/<file>.md, "Section"`` (or
  ``("Section")``, or after a link: ``[page](page.md), "Section"``; also for ``README``) names a section: a heading
  or a bold lead-in (``**Section ...**`` opening a paragraph or list item) that starts with the quoted words.
"""
from __future__ import annotations

import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TRACKED = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
# the tracked results READMEs only: a kept run's copy (results/embedded_default_run/, ignored) has other neighbours
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                *(ROOT / f for f in TRACKED if f.startswith("results/") and Path(f).name == "README.md")])
CODE_SUFFIXES = {".py", ".smk", ".yaml", ".yml", ".sh", ".toml", ".rst", ".md", ".cfg", ".txt"}
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
PLAIN = re.compile(r"(?<![\w/.-])(docs/[\w.-]+\.md|README(?:\.md)?)(?:#([\w-]+)|,\s+\"([^\"]+)\"|\s+\(\"([^\"]+)\"\))?")
SECTION_AFTER_LINK = re.compile(r",\s+\"([^\"]+)\"")
FENCE = re.compile(r"^\s*(```|~~~)")


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of ``text`` outside fenced code blocks, inline code spans blanked."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, re.sub(r"`[^`]*`", lambda m: " " * len(m.group()), line)))
    return out


def _plain_text(markdown: str) -> str:
    """A heading's or lead-in's words as rendered: links become their text, code and emphasis marks go."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    return re.sub(r"[`*]", "", text).strip()


def slug(heading: str) -> str:
    """GitHub's anchor of a heading (before the -1, -2 ... of repeated headings)."""
    return re.sub(r"[^\w\- ]", "", _plain_text(heading).lower()).replace(" ", "-")


@lru_cache(maxsize=None)
def headings(page: Path) -> tuple[list[str], set[str]]:
    """(heading texts, anchors) of ``page``; a heading inside a fenced code block is none."""
    texts, anchors, seen = [], set(), {}
    fenced = False
    for line in page.read_text().splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            texts.append(_plain_text(m.group(1)))
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            anchors.add(base if n == 0 else f"{base}-{n}")
    return texts, anchors


@lru_cache(maxsize=None)
def lead_ins(page: Path) -> list[str]:
    """The bold lead-ins of ``page``: ``**words**`` opening a paragraph or a list item."""
    return [_plain_text(m.group(1)) for m in
            re.finditer(r"^\s*(?:[*+-]\s+|\d+\.\s+)?\*\*(.+?)\*\*", page.read_text(), re.MULTILINE)]


def _words(text: str) -> str:
    return " ".join(re.sub(r"^\d+\.\s+", "", text).casefold().split())


def section_problem(page: Path, name: str) -> str | None:
    """Why ``name`` names no section of ``page`` (None when a heading or bold lead-in starts with it)."""
    want = _words(name)
    if any(_words(t).startswith(want) for t in headings(page)[0] + lead_ins(page)):
        return None
    return f"no heading or bold lead-in of {page.relative_to(ROOT)} starts with {name!r}"


def link_problems(page: Path) -> list[str]:
    """Every Markdown link of ``page`` whose file, folder or anchor does not exist."""
    out = []
    for n, line in _prose(page.read_text()):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(ROOT)}:{n}: ({target})"
            if not dest.exists():
                out.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in headings(dest)[1]:
                out.append(f"{where}: no heading of {dest.relative_to(ROOT)} has the anchor #{anchor}")
            elif dest.suffix == ".md" and (s := SECTION_AFTER_LINK.match(line, m.end())) and (
                    why := section_problem(dest, s.group(1))):
                out.append(f"{where}: {why}")
    return out


def plain_problems(path: Path) -> list[str]:
    """Every ``docs/<file>.md`` reference of ``path`` (with its ``#anchor`` or ``, "Section"``) that does not
    resolve, relative to the repository root."""
    out = []
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        return out
    for n, line in enumerate(text.splitlines(), 1):
        for m in PLAIN.finditer(line):
            name = "README.md" if m.group(1) == "README" else m.group(1)
            doc, anchor, section = ROOT / name, m.group(2), m.group(3) or m.group(4)
            where = f"{path.relative_to(ROOT)}:{n}: {m.group(0)}"
            if not doc.is_file():
                out.append(f"{where}: no such file")
            elif anchor and anchor not in headings(doc)[1]:
                out.append(f"{where}: no heading has the anchor #{anchor}")
            elif section and (why := section_problem(doc, section)):
                out.append(f"{where}: {why}")
    return out


def _code_and_docs() -> list[Path]:
    """The tracked files that may name a page: the pages, the code, configs and scripts (not the stored results
    and test data, which keep what they were written with, nor this file's deliberate bad examples)."""
    keep = []
    for f in TRACKED:
        p = ROOT / f
        if f.startswith(("results/", "tests/data/")) or p == Path(__file__).resolve() or not p.is_file():
            continue
        if p.suffix in CODE_SUFFIXES or p.name in ("Snakefile", "run"):
            keep.append(p)
    return keep


def test_the_pages_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "docs/usage.md", "results/gpu/README.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_resolves(page):
    found = link_problems(page)
    assert not found, "broken links:\n" + "\n".join(found)


def test_every_plain_reference_to_a_page_resolves():
    files = _code_and_docs()
    assert len(files) > 100 and ROOT / "fastdllm_core" / "cpu_numerics.py" in files
    found = [p for f in files for p in plain_problems(f)]
    assert not found, "references to pages that do not resolve:\n" + "\n".join(found)


def test_slugs_follow_github():
    assert slug("Throughput: `fastdllm bench`, NVML telemetry, roofline") == (
        "throughput-fastdllm-bench-nvml-telemetry-roofline")
    assert slug("Why arithmetic stays below the AR base (and code does not)") == (
        "why-arithmetic-stays-below-the-ar-base-and-code-does-not")
    assert slug("The [MASK] row, in a [link](x.md)") == "the-mask-row-in-a-link"


def test_a_broken_link_anchor_or_section_is_named(tmp_path, monkeypatch):  # the checks above must be able to fail
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "README.md").write_text("# R\n\n## Quick start\n")
    (docs / "a.md").write_text("# A page\n\n## Two words\n\n```\n# not a heading\n```\n\n**Bold lead.** text\n\n"
                               "## Two words\n")
    page = docs / "b.md"
    page.write_text("[ok](a.md) [ok](a.md#two-words) [ok](a.md#two-words-1) [ok](#b) [web](https://x.org/y)\n"
                    "# B\n[gone](nope.md) [bad anchor](a.md#not-a-heading) `[in code](nope.md)`\n"
                    '[ok](a.md), "Bold lead" and [bad section](a.md), "No such"\n'
                    "```\n[fenced](nope.md)\n```\n")
    code = tmp_path / "m.py"
    code.write_text('# docs/a.md, "Two words"; docs/a.md, "Bold lead"; docs/a.md#a-page; README ("Quick start")\n'
                    '# docs/nope.md; docs/a.md, "Three words"; docs/a.md#three-words; README, "Slow start"\n')
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert [p.split(": ", 1)[1] for p in link_problems(page)] == [
        "(nope.md): no such file", "(a.md#not-a-heading): no heading of docs/a.md has the anchor #not-a-heading",
        "(a.md): no heading or bold lead-in of docs/a.md starts with 'No such'"]
    found = plain_problems(code)
    assert len(found) == 4 and "docs/nope.md: no such file" in found[0]
    assert "starts with 'Three words'" in found[1] and "#three-words" in found[2]
    assert "README.md starts with 'Slow start'" in found[3]


def layout_block(readme: str) -> str:
    """The README's "Layout" section (its code block)."""
    return readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]


def test_the_readme_layout_names_every_scripts_folder():
    layout = layout_block((ROOT / "README.md").read_text())
    folders = sorted(p.name for p in (ROOT / "scripts").iterdir() if p.is_dir() and p.name != "__pycache__")
    missing = [f for f in folders if f"{f}/" not in layout]
    assert folders and not missing, f"README.md's Layout does not name the folders {missing} of scripts/"
