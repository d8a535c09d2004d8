"""Regenerate the embedded default's committed results page from a clean run of the committed code.

    python scripts/update_results_doc.py [--cores 2]       # ~20 min: time_embedded_default.sh on a clean clone of
                                                           # HEAD, then write the page and the README's copy
    python scripts/update_results_doc.py --from DIR        # a kept run (DIR/tiny/summary.md; the last run
                                                           # is kept in results/embedded_default_run/results)
    python scripts/update_results_doc.py --check SUMMARY   # compare a fresh run's results/tiny/summary.md with
                                                           # the committed page (timing and provenance excluded)

Writes ``docs/embedded_default_results.md`` (the DAG's ``results/tiny/summary.md`` of that run, with the run's wall
time added to its timing section) and the block of README.md between the ``results:begin`` / ``results:end``
markers (the page's accuracy, comparisons and speed sections, verbatim).  The run must be of the committed tree: the page
records the source fingerprint of the code that ran, and ``tests/test_results_doc.py`` fails when it differs from
the fingerprint of the code committed beside it.  Commit the two files afterwards; after any change that can
move a result (the fingerprint says which), run this again.
"""
from __future__ import annotations

import argparse
import difflib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from analysis.summary import TIMING, comparable_text, fingerprint_of, section  # noqa: E402
from fastdllm_core.provenance import source_fingerprint, write_text_atomic  # noqa: E402

DOC = ROOT / "docs" / "embedded_default_results.md"
README = ROOT / "README.md"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
README_SECTIONS = ("## Accuracy (Tables 1 and 2)", "## Comparisons", TIMING)


def readme_block(page: str) -> str:
    """What the README shows of a page: its accuracy, comparisons and speed sections, headings one level down."""
    parts = [section(page, h).replace("## ", "### ", 1) for h in README_SECTIONS]
    return "\n".join(p.rstrip() for p in parts) + "\n"


def with_readme_block(readme: str, page: str) -> str:
    if BEGIN not in readme or END not in readme:
        raise SystemExit(f"README.md has no {BEGIN} ... {END} block")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{readme_block(page)}{END}{tail}"


def add_wall_time(page: str, timing: dict) -> str:
    line = (f"The whole embedded default (`bash scripts/time_embedded_default.sh {timing['cores']}`, a clean clone of commit "
            f"{timing['git_commit'][:12]}, idle machine): {timing['idle_wall_s']:.0f} s wall on {timing['cores']} "
            f"cores ({timing['cpu']}); a second invocation had nothing to do: "
            f"{'yes' if timing['second_invocation_nothing_to_do'] else 'NO'}.")
    head, sep, tail = page.partition(TIMING)
    return head + sep + "\n\n" + line + tail if sep else page + f"\n{TIMING}\n\n{line}\n"


def check(fresh: Path) -> int:
    new, old = comparable_text(fresh.read_text()), comparable_text(DOC.read_text())
    if new == old:
        print(f"{fresh} equals {DOC.relative_to(ROOT)} (timing and provenance excluded)")
        return 0
    sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(DOC), str(fresh)))
    return 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cores", type=int, default=2)
    p.add_argument("--from", dest="src", type=Path, help="results directory of a kept run (has tiny/summary.md)")
    p.add_argument("--check", type=Path, help="a fresh summary.md to compare with the committed page")
    args = p.parse_args(argv)
    if args.check:
        return check(args.check)
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
    page = (src / "tiny" / "summary.md").read_text()
    here = source_fingerprint(ROOT)
    if fingerprint_of(page) != here:
        raise SystemExit(f"the run's source fingerprint {fingerprint_of(page)} is not this tree's {here}: it was "
                         "made by other code")
    if timing is not None:
        page = add_wall_time(page, timing)
    write_text_atomic(DOC, page)
    write_text_atomic(README, with_readme_block(README.read_text(), page))
    print(f"wrote {DOC.relative_to(ROOT)} and README.md's results block (source fingerprint {here}); commit them")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
