"""The findings of a results page as data: for each comparison line of its ``## Comparisons`` section (``b - a``
per column, see :func:`analysis.summary.verdict`) the column's difference, verdict and direction.

Two runs of the same code on CPUs whose kernels differ give different numbers; what a reader relies on is the
verdicts.  These pure functions extract them from a page (the committed page has no CSVs beside it, a run's page
is the same text), compare two pages' findings, and mark on a page the findings that a run on another CPU did not
reproduce (rows of ``docs/findings_by_cpu.csv``, written by ``scripts/update_results_doc.py --add-findings``).
"""
from __future__ import annotations

import re

from .summary import section, sectioned

COMPARISONS = "## Comparisons"
FIELDS = ("cpu", "commit", "source_fingerprint", "comparison", "column", "difference", "verdict", "direction")
_LINE = re.compile(r"^- \*\*(?P<cmp>.+?)\*\* \((?P<why>.*?)\): (?P<body>.*)\. "
                   r"Beyond noise: (?P<k>\d+) of (?P<n>\d+) columns\.$")
_PART = re.compile(r"(?P<col>.+?) (?:(?P<d>[+-]\d+\.\d) "
                   r"\((?:(?P<dir>higher|lower), )?(?P<v>beyond noise|within noise)\)|(?P<na>n/a))")
_MARK = re.compile(r" \[[^\[\]]* on [^\[\]]*, run of [^\[\]]*\]")


def _provenance(page: str, key: str) -> str:
    for line in page.splitlines():
        if line.startswith(f"- {key}: "):
            return line.split(": ", 1)[1].strip()
    raise ValueError(f"the page has no '- {key}:' line in its provenance section")


def cpu_of(page: str) -> tuple[str, str]:
    """(CPU, kernel path) of the page's ``- CPU: <name>; kernel path: <path>`` line (path "" when not recorded)."""
    cpu, _, path = _provenance(page, "CPU").partition("; kernel path:")
    return cpu.strip(), path.strip()


def run_of(page: str) -> dict:
    """``{cpu, commit, source_fingerprint}`` the page records of the run that made it."""
    fp = _provenance(page, "source fingerprint").split()[0]
    return {"cpu": cpu_of(page)[0], "commit": _provenance(page, "commit"), "source_fingerprint": fp}


def unmarked(page: str) -> str:
    """The page without the marks :func:`marked` adds."""
    return _MARK.sub("", page)


def findings(page: str) -> list[dict]:
    """One dict per (comparison, column) of the page's comparisons section, in page order: ``comparison``
    ("B - A"), ``column``, ``difference`` (B - A, points; None when n/a), ``verdict`` ("beyond noise", "within
    noise" or "n/a") and ``direction`` ("higher"/"lower" for a finding, "" otherwise)."""
    body = section(unmarked(page), COMPARISONS)
    if not body.strip():
        raise ValueError(f"the page has no '{COMPARISONS}' section")
    out = []
    for line in body.splitlines():
        if not line.startswith("- **"):
            continue
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"unreadable comparison line: {line!r}")
        rows = [_part(m["cmp"], p, line) for p in m["body"].split("; ")]
        if len(rows) != int(m["n"]) or sum(r["verdict"] == "beyond noise" for r in rows) != int(m["k"]):
            raise ValueError(f"comparison line disagrees with its own count: {line!r}")
        out += rows
    return out


def _part(comparison: str, part: str, line: str) -> dict:
    m = _PART.fullmatch(part)
    if m is None:
        raise ValueError(f"unreadable column {part!r} in comparison line {line!r}")
    if m["na"]:
        return {"comparison": comparison, "column": m["col"], "difference": None, "verdict": "n/a", "direction": ""}
    return {"comparison": comparison, "column": m["col"], "difference": float(m["d"]), "verdict": m["v"],
            "direction": m["dir"] or ""}


def claim(f: dict | None) -> str:
    """What a finding says, the part two runs must agree on: "beyond noise, lower", "within noise", "n/a"."""
    if f is None:
        return "absent"
    return f"{f['verdict']}, {f['direction']}" if f["verdict"] == "beyond noise" else f["verdict"]


def _keyed(fs: list[dict]) -> dict:
    return {(f["comparison"], f["column"]): f for f in fs}


def differences(page: list[dict], run: list[dict]) -> list[str]:
    """One line per (comparison, column) whose claim differs between the page's findings and a run's."""
    old, new = _keyed(page), _keyed(run)
    keys = list(old) + [k for k in new if k not in old]
    return [f"{c}, {col}: page: {claim(old.get((c, col)))}; this run: {claim(new.get((c, col)))}"
            for c, col in keys if claim(old.get((c, col))) != claim(new.get((c, col)))]


def rows(page: str) -> list[dict]:
    """The page's findings as rows of ``docs/findings_by_cpu.csv`` (:data:`FIELDS`), with the run they came from."""
    run = run_of(page)
    return [{**run, **f, "difference": "" if f["difference"] is None else f"{f['difference']:+.1f}"}
            for f in findings(page)]


def marked(page: str, other: list[dict]) -> str:
    """The page with each comparison column that a run on another CPU (``other``: rows as :func:`rows` gives,
    parsed back from CSV) judged differently marked, e.g. ``MATH -16.3 (lower, beyond noise) [fragile: not
    beyond noise on <CPU>, run of <commit>]``.  Rows from the page's own CPU are ignored; old marks are replaced."""
    page = unmarked(page)
    cpu = run_of(page)["cpu"]
    theirs: dict = {}
    for r in other:
        if r["cpu"] != cpu:
            theirs.setdefault((r["comparison"], r["column"]), []).append(r)
    mine = _keyed(findings(page))
    out = []
    for heading, line in sectioned(page):
        m = _LINE.match(line) if heading == COMPARISONS else None
        if m is not None:
            parts = []
            for p in m["body"].split("; "):
                key = (m["cmp"], _PART.fullmatch(p)["col"])
                parts.append(p + "".join(_mark(mine[key], r) for r in theirs.get(key, [])))
            line = line.replace(m["body"], "; ".join(parts), 1)
        out.append(line)
    return "\n".join(out) + ("\n" if page.endswith("\n") else "")


def _mark(mine: dict, theirs: dict) -> str:
    """`` [fragile: not beyond noise on <CPU>, run of <commit>]`` where the other run disagrees, else ""."""
    if claim(theirs) == claim(mine):
        return ""
    what = "not beyond noise" if theirs["verdict"] != "beyond noise" else claim(theirs)
    what = f"fragile: {what}" if mine["verdict"] == "beyond noise" else what
    return f" [{what} on {theirs['cpu']}, run of {theirs['commit'][:7]}]"


def marks(page: str) -> list[dict]:
    """The marks :func:`marked` put on a page, in page order: ``{comparison, column, mark, fragile}`` (``fragile``:
    the page calls the column beyond noise and the other run did not agree)."""
    lines = [m for heading, line in sectioned(page) if heading == COMPARISONS and (m := _LINE.match(line))]
    return [{"comparison": m["cmp"], "column": _PART.fullmatch(_MARK.sub("", p))["col"], "mark": mark.strip(),
             "fragile": mark.startswith(" [fragile:")}
            for m in lines for p in m["body"].split("; ") for mark in _MARK.findall(p)]
