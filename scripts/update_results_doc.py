"""Regenerate the embedded default's committed results page from a clean run of the committed code.

    python scripts/update_results_doc.py [--cores 2]       # ~20 min: time_embedded_default.sh on a clean clone of
                                                           # HEAD, then write the page, its picture and the
                                                           # README's block
    python scripts/update_results_doc.py --from DIR        # a kept run (DIR/tiny/summary.md and summary.png; the
                                                           # last run is kept in results/embedded_default_run/results)
    python scripts/update_results_doc.py --check SUMMARY   # compare a fresh run's results/tiny/summary.md with
                                                           # the committed page (findings, timing and provenance
                                                           # excluded; old pages without findings compare too):
                                                           # its numbers, then its findings (verdicts, directions)
    python scripts/update_results_doc.py --export-findings SUMMARY   # a page's findings as CSV, on stdout
    python scripts/update_results_doc.py --add-findings SUMMARY      # ... into docs/findings_by_cpu.csv (replaces
                                                           # that CPU's rows), then re-mark the committed page
    python scripts/update_results_doc.py --mark            # re-mark the committed page from that file

``--check`` exits 0 when numbers and findings are equal, 1 when a finding differs (a verdict "beyond noise" or its
direction), 3 when only numbers differ.  SUMMARY may also be a results directory (DIR/tiny/summary.md).

Writes ``docs/embedded_default_results.md`` (the DAG's ``results/tiny/summary.md`` of that run, with the run's wall
time added to its timing section), ``docs/embedded_default_results.png`` (the run's ``summary.png``, whose sha256 the
page records) and the block of README.md between the ``results:begin`` / ``results:end`` markers: the page's
findings, the picture, its accuracy table of means and one line of the run's wall time, linking the full page.  The
run must be of the committed tree: the page records the source fingerprint of the code that ran, and
``tests/test_results_doc.py`` fails when it differs from the fingerprint of the code committed beside it, or when the
committed picture is not the one the page records.  Commit the three files afterwards; after any change that can
move a result (the fingerprint says which), run this again.  The page's comparisons are marked where a run on
another CPU (``docs/findings_by_cpu.csv``, rows with the CPU and commit of their run) judged a column differently
(``analysis.findings.marked``); see docs/reproducibility.md.
"""
from __future__ import annotations

import argparse
import csv
import difflib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from analysis.fig_findings import sha256_of  # noqa: E402
from analysis.findings import (  # noqa: E402
    FIELDS,
    cpu_of,
    differences,
    findings,
    marked,
    marks,
    rows,
    run_of,
    unmarked,
)
from analysis.summary import FINDINGS as FINDINGS_SECTION  # noqa: E402
from analysis.summary import PICTURE_LINE, TIMING, comparable_text, fingerprint_of, picture_of, section  # noqa: E402
from fastdllm_core.cpu_numerics import PINNED  # noqa: E402
from fastdllm_core.provenance import atomic_path, source_fingerprint, write_text_atomic  # noqa: E402

DOC = ROOT / "docs" / "embedded_default_results.md"
DOC_PNG = DOC.with_suffix(".png")
DOC_LINK = "docs/embedded_default_results.md"  # from README.md
README = ROOT / "README.md"
FINDINGS = ROOT / "docs" / "findings_by_cpu.csv"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
ACCURACY = "## Accuracy (Tables 1 and 2)"
WALL_TIME = "The whole embedded default"  # how add_wall_time's line starts
# the kernel path every DAG job pins (fastdllm_core.cpu_numerics), as the page's "- CPU:" line writes it
PINNED_PATH = f"{PINNED['ATEN_CPU_CAPABILITY'].upper()} (MKL_CBWR={PINNED['MKL_CBWR']})"


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


def means_table(page: str) -> list[str]:
    """The page's accuracy table of means (the first Markdown table of its accuracy section; not the per-seed one)."""
    rows = []
    for line in section(page, ACCURACY).splitlines():
        if line.startswith("|"):
            rows.append(line)
        elif rows:
            break
    if not rows:
        raise SystemExit(f"the page has no table in its '{ACCURACY}' section")
    return rows


def readme_block(page: str) -> str:
    """What the README shows of a page: its findings (headings one level down), its accuracy table of means and the
    run's wall time, linking the full page.  Its picture (committed as :data:`DOC_PNG`) stands above the block, at
    the top of the README, where a reader meets it first.  A page made before the findings existed has no README
    block: regenerate it."""
    findings = section(page, FINDINGS_SECTION)
    if not findings.strip() or picture_of(page) is None:
        raise SystemExit(f"the page has no '{FINDINGS_SECTION}' section or no '{PICTURE_LINE.strip()}' record: it was "
                         "made by older code; regenerate it (python scripts/update_results_doc.py)")
    wall = next((ln for ln in section(page, TIMING).splitlines() if ln.startswith(WALL_TIME)),
                "The run's whole wall time is not on this page (it was not made by a timed run).")
    return "\n".join([findings.replace("## ", "### ", 1).rstrip(), *across_cpus(page), "",
                      "### " + ACCURACY[3:], "", *means_table(page), "",
                      f"{wall} Per-seed rows, every comparison line, the decoding sweeps, training losses, speeds and "
                      f"provenance: [{DOC_LINK}]({DOC_LINK})."]) + "\n"


def across_cpus(page: str) -> list[str]:
    """A line on the columns of the page's comparisons that runs on other CPUs judged differently (marked on the
    page from docs/findings_by_cpu.csv); none when there is no mark."""
    got = marks(page)
    if not got:
        return []
    runs = sorted({re.search(r" on (.*), run of (\w+)\]$", m["mark"]).group(1) for m in got})
    fragile = sum(m["fragile"] for m in got)
    return ["", f"- **Across CPUs:** a run of the same code on {', '.join(runs)} judged {len(got)} comparison "
                f"column(s) differently ({fragile} fragile: beyond noise here, judged otherwise there); each is "
                "marked on the full page."]


def with_picture_name(page: str, name: str) -> str:
    """The page with its picture record naming ``name`` (the copy's file name; the sha256 stays)."""
    rec = picture_of(page)
    if rec is None:
        return page
    return page.replace(f"{PICTURE_LINE}{rec[0]}, sha256 {rec[1]}", f"{PICTURE_LINE}{name}, sha256 {rec[1]}", 1)


def with_readme_block(readme: str, page: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{readme_block(page)}{END}{tail}"


def add_wall_time(page: str, timing: dict) -> str:
    line = (f"The whole embedded default (`bash scripts/time_embedded_default.sh {timing['cores']}`, "
            "a clean clone of commit "
            f"{timing['git_commit'][:12]}, idle machine): {timing['idle_wall_s']:.0f} s wall on {timing['cores']} "
            f"cores ({timing['cpu']}); a second invocation had nothing to do: "
            f"{'yes' if timing['second_invocation_nothing_to_do'] else 'NO'}.")
    head, sep, tail = page.partition(TIMING)
    return head + sep + "\n\n" + line + tail if sep else page + f"\n{TIMING}\n\n{line}\n"


def page_path(p: Path) -> Path:
    """A summary page, or the page of a results directory (DIR/tiny/summary.md)."""
    page = p / "tiny" / "summary.md" if p.is_dir() else p
    if not page.is_file():
        raise SystemExit(f"{p}: no such summary page (a summary.md, or a results directory with tiny/summary.md)")
    return page


def check(fresh: Path, doc: Path | None = None) -> int:
    """0: numbers and findings equal; 1: a finding differs (verdict or direction); 3: only numbers differ."""
    doc = doc or DOC
    new_page, old_page = page_path(fresh).read_text(), doc.read_text()
    new, old = comparable_text(unmarked(new_page)), comparable_text(unmarked(old_page))
    if new == old:
        print(f"numbers: {fresh} equals {doc.name} (findings, timing and provenance excluded)")
    else:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(doc), str(fresh)))
        print(f"numbers: {fresh} differs from {doc.name} (diff above)")
    mine, theirs = findings(old_page), findings(new_page)
    diffs = differences(mine, theirs)
    found = sum(f["verdict"] == "beyond noise" for f in mine)
    if diffs:
        print(f"findings: {len(diffs)} of {len(mine)} comparison columns differ ({found} beyond noise on the page):")
        print("\n".join(f"  {d}" for d in diffs))
        return 1
    print(f"findings: all {len(mine)} comparison columns agree ({found} beyond noise)")
    return 0 if new == old else 3


def read_findings(path: Path | None = None) -> list[dict]:
    path = path or FINDINGS
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        got = list(csv.DictReader(f))
    if got and set(FIELDS) - set(got[0]):
        raise SystemExit(f"{path}: missing columns {sorted(set(FIELDS) - set(got[0]))} (expected {FIELDS})")
    return got


def write_findings(found: list[dict], out) -> None:
    w = csv.DictWriter(out, fieldnames=FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(found)


def run_label(page: str) -> str:
    """The ``cpu`` of a run's rows in the findings file: the CPU, and the kernel path where it is not the pinned
    one (a run with, e.g., ``ATEN_CPU_CAPABILITY=default`` is another float path on the same CPU: its findings
    mark the page as another CPU's would)."""
    cpu, path = cpu_of(page)
    return cpu if path in ("", PINNED_PATH) else f"{cpu} with kernel path {path}"


def run_rows(page: str) -> list[dict]:
    """:func:`analysis.findings.rows` with ``cpu`` = :func:`run_label`."""
    label = run_label(page)
    return [{**r, "cpu": label} for r in rows(page)]


def add_findings(src: Path, path: Path | None = None) -> None:
    """The page's findings into ``path``, replacing the rows of its CPU and kernel path (:func:`run_label`: one run
    each), sorted by CPU."""
    path = path or FINDINGS
    page = page_path(src).read_text()
    label, new_rows = run_label(page), run_rows(page)
    kept = [r for r in read_findings(path) if r["cpu"] != label]
    new = sorted(kept + new_rows, key=lambda r: r["cpu"])  # stable: page order within a CPU
    with path.open("w", newline="") as f:
        write_findings(new, f)
    print(f"{_shown(path)}: {len(new_rows)} findings of the "
          f"run on {label} (commit {run_of(page)['commit'][:12]}); {len(kept)} rows of other runs kept")


def write_page(page: str, picture: Path | None = None) -> None:
    """Write the page, its picture (``picture``: the run's PNG; None: keep the committed one) and the README block,
    the page marked with the findings of runs of the same code (source fingerprint) on other CPUs: a run of other
    code could differ because of the code, so it marks nothing.  Nothing is written unless all three can be: the
    picture must be the one the page records."""
    other, here = read_findings(), run_of(page)
    for cpu, commit, fp in sorted({(r["cpu"], r["commit"], r["source_fingerprint"]) for r in other}):
        if cpu != here["cpu"] and fp != here["source_fingerprint"]:
            print(f"note: {FINDINGS.name} holds findings of {cpu} (commit {commit[:12]}) made by code with source "
                  f"fingerprint {fp}, not the page's {here['source_fingerprint']}: not used to mark the page (a "
                  "difference could come from the code, not the CPU)")
    page = with_picture_name(marked(page, [r for r in other if r["source_fingerprint"] == here["source_fingerprint"]]),
                             DOC_PNG.name)
    readme = with_readme_block(README.read_text(), page)  # refuses a page without findings before any write
    png = picture or DOC_PNG
    want = picture_of(page)[1]
    if not png.is_file() or sha256_of(png) != want:
        raise SystemExit(f"{png}: {'no such file' if not png.is_file() else 'sha256 ' + sha256_of(png)}, but the page "
                         f"records the picture {want}: the picture of another run")
    if picture is not None:
        with atomic_path(DOC_PNG) as tmp:
            shutil.copyfile(picture, tmp)
    write_text_atomic(DOC, page)
    write_text_atomic(README, readme)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--from", dest="src", type=Path, help="results directory of a kept run (has tiny/summary.md)")
    p.add_argument("--check", type=Path, help="a fresh summary.md to compare with the committed page")
    p.add_argument("--export-findings", type=Path, help="print a summary page's findings as CSV")
    p.add_argument("--add-findings", type=Path, help="a summary page whose findings go into " + FINDINGS.name)
    p.add_argument("--mark", action="store_true", help="re-mark the committed page from " + FINDINGS.name)
    args = p.parse_args(argv)
    if args.check:
        return check(args.check)
    if args.export_findings:
        write_findings(run_rows(page_path(args.export_findings).read_text()), sys.stdout)
        return 0
    if args.add_findings or args.mark:
        readme_block(DOC.read_text())  # a page without findings cannot be re-marked: refuse before any write
        if args.add_findings:
            add_findings(args.add_findings)
        write_page(DOC.read_text())
        print(f"re-marked {_shown(DOC)} and README.md's results block from {FINDINGS.name}; commit them")
        return 0
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    if dirty and not args.src:
        raise SystemExit("commit first: the run is made from a clean clone of HEAD, so uncommitted changes would "
                         f"not be in it:\n{dirty}")
    timing = None
    src = args.src
    if src is None:  # the run's results are kept (git-ignored) so that a failure after the run loses nothing
        keep = ROOT / "results" / "embedded_default_run"
        shutil.rmtree(keep, ignore_errors=True)
        subprocess.run(["bash", "scripts/time_embedded_default.sh", str(args.cores), "--keep", str(keep)], cwd=ROOT,
                       check=True)
        src = keep / "results"
        timing = json.loads((ROOT / "results/benchmarks/embedded_default_time.json").read_text())
    page, picture = (src / "tiny" / "summary.md").read_text(), src / "tiny" / "summary.png"
    here = source_fingerprint(ROOT)
    if fingerprint_of(page) != here:
        raise SystemExit(f"the run's source fingerprint {fingerprint_of(page)} is not this tree's {here}: it was "
                         "made by other code")
    if timing is not None:
        page = add_wall_time(page, timing)
    write_page(page, picture)
    print(f"wrote {_shown(DOC)}, {DOC_PNG.name} and README.md's results block (source fingerprint {here}); "
          "commit them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
