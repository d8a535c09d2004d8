"""Findings as data: the verdicts of a results page's comparisons, compared between runs and marked where a run on
another CPU disagreed (analysis/findings.py, scripts/update_results_doc.py --check / --add-findings / --mark)."""
import csv
import importlib.util
import json
from pathlib import Path

import pytest

from analysis.fig_findings import sha256_of
from analysis.findings import FIELDS, claim, cpu_of, differences, findings, marked, marks, rows, run_of, unmarked
from analysis.summary import comparable_text, section

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "embedded_default_results.md"
# a copy of the page committed in d126ebd (the run of fd91a64 on an Intel Xeon), kept fixed while the page is
# regenerated: the reviewer's AMD report is about this page
PAGE = ROOT / "tests" / "data" / "results_page_fd91a64.md"
RECIPE_AR = "Fast-dLLM v2 recipe (tiny) - AR instruct (tiny; stand-in for Qwen2.5-Instruct)"
DREAM_AR = "Dream-style (tiny) - AR instruct (tiny; stand-in for Qwen2.5-Instruct)"
DREAM_RECIPE = "Dream-style (tiny) - Fast-dLLM v2 recipe (tiny)"
# the reviewer's report: beyond noise on the committed (Intel) page, not on an AMD EPYC
NOT_ON_AMD = [(RECIPE_AR, "MATH"), (DREAM_AR, "MBPP-Base"), (DREAM_AR, "MBPP-Plus"), (DREAM_RECIPE, "MBPP-Base"),
              (DREAM_RECIPE, "MBPP-Plus")]


def _script():
    spec = importlib.util.spec_from_file_location("update_results_doc", ROOT / "scripts" / "update_results_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _page() -> str:
    return PAGE.read_text()


def _edit(page: str, comparison: str, old: str, new: str, count: tuple[int, int] | None = None) -> str:
    """The page with one comparison line's text ``old`` replaced (and its "Beyond noise: k" count moved)."""
    out = []
    for line in page.splitlines(True):
        if line.startswith(f"- **{comparison}**"):
            assert old in line
            line = line.replace(old, new)
            if count:
                line = line.replace(f"Beyond noise: {count[0]} of", f"Beyond noise: {count[1]} of")
        out.append(line)
    return "".join(out)


def test_the_committed_page_has_14_findings_beyond_noise():
    fs = findings(_page())
    assert len(fs) == 6 * 8
    beyond = [(f["comparison"], f["column"]) for f in fs if f["verdict"] == "beyond noise"]
    assert len(beyond) == 14
    assert {f["direction"] for f in fs if f["verdict"] == "beyond noise"} == {"lower"}
    assert {f["direction"] for f in fs if f["verdict"] != "beyond noise"} == {""}
    assert [c for c, _ in beyond].count(DREAM_AR) == 8 and set(NOT_ON_AMD) <= set(beyond)
    assert {(RECIPE_AR, "GSM8K"), (RECIPE_AR, "IFEval"), (DREAM_RECIPE, "MMLU")} <= set(beyond)
    gsm = next(f for f in fs if (f["comparison"], f["column"]) == (RECIPE_AR, "GSM8K"))
    assert gsm["difference"] == -41.0 and claim(gsm) == "beyond noise, lower"


def test_the_committed_page_and_file_are_readable_and_the_file_holds_a_page_export():
    page = DOC.read_text()
    run = run_of(page)
    assert f"- CPU: {run['cpu']}; kernel path:" in page and f"- commit: {run['commit']}" in page
    assert findings(page)  # the parser also checks each line's "Beyond noise: k of n" against its columns
    rs = rows(page)
    assert all(r["cpu"] == run["cpu"] and r["commit"] == run["commit"] for r in rs)
    assert list(rs[0]) == list(FIELDS)
    with (ROOT / "docs" / "findings_by_cpu.csv").open(newline="") as f:
        committed = list(csv.DictReader(f))
    assert committed and list(committed[0]) == list(FIELDS)
    assert {r["verdict"] for r in committed} <= {"beyond noise", "within noise", "n/a"}
    same_run = [r for r in committed if r["commit"] == run["commit"] and r["cpu"] == run["cpu"]]
    if same_run:  # the page's own run in the file: the file is that page's export
        assert same_run == rs


def test_kept_runs_on_other_cpus_are_their_own_pages_and_in_the_findings_file():
    """results/cross_cpu/<run>/: a run kept from another CPU (its page, CSVs and timing record). The page names the
    commit and CPU its timing record names, its numbers are a results page's, and when docs/findings_by_cpu.csv holds
    rows of that run they are this page's export (the file may since hold a newer run of that CPU)."""
    kept = sorted((ROOT / "results" / "cross_cpu").glob("*/summary.md"))
    assert kept, "results/cross_cpu holds no kept run"
    with (ROOT / "docs" / "findings_by_cpu.csv").open(newline="") as f:
        committed = list(csv.DictReader(f))
    for page_file in kept:
        page, timing = page_file.read_text(), json.loads((page_file.parent / "embedded_default_time.json").read_text())
        run = run_of(page)
        assert run["commit"] == timing["git_commit"] and run["cpu"] == timing["cpu"], page_file
        assert f"{timing['idle_wall_s']:.0f} s wall" in page and len(findings(page)) == 54
        same_run = [r for r in committed if r["commit"] == run["commit"] and r["cpu"] == run["cpu"]]
        if same_run:
            assert same_run == rows(page), page_file


def test_rows_carry_the_run_they_came_from():
    rs = rows(_page())
    assert len(rs) == 48 and list(rs[0]) == list(FIELDS)
    assert {(r["cpu"], r["commit"], r["source_fingerprint"]) for r in rs} == {
        ("Intel(R) Xeon(R) Processor", "fd91a645e589de4c474377f8a5e8f79710fcf613", "218588a5aeda61a0")}
    assert rs[0]["difference"] == "-0.4" and rs[0]["direction"] == ""


def test_differences_equal_flipped_lost_new_and_absent():
    page = _page()
    base = findings(page)
    assert differences(base, findings(page)) == []
    flipped = _edit(page, DREAM_RECIPE, "MMLU -34.4 (lower, beyond noise)", "MMLU +34.4 (higher, beyond noise)")
    assert differences(base, findings(flipped)) == [
        f"{DREAM_RECIPE}, MMLU: page: beyond noise, lower; this run: beyond noise, higher"]
    lost = _edit(page, RECIPE_AR, "MATH -16.3 (lower, beyond noise)", "MATH -16.3 (within noise)", (3, 2))
    assert differences(base, findings(lost)) == [
        f"{RECIPE_AR}, MATH: page: beyond noise, lower; this run: within noise"]
    new = _edit(page, RECIPE_AR, "MMLU -5.3 (within noise)", "MMLU -5.3 (lower, beyond noise)", (3, 4))
    assert differences(base, findings(new)) == [f"{RECIPE_AR}, MMLU: page: within noise; this run: beyond noise, lower"]
    # a number that moves inside its verdict is not a finding that differs
    moved = _edit(page, RECIPE_AR, "GSM8K -41.0 (lower", "GSM8K -38.2 (lower")
    assert differences(base, findings(moved)) == []
    gone = "".join(ln for ln in page.splitlines(True) if not ln.startswith(f"- **{DREAM_RECIPE}**"))
    diffs = differences(base, findings(gone))
    assert len(diffs) == 8 and f"{DREAM_RECIPE}, MMLU: page: beyond noise, lower; this run: absent" in diffs


def test_bad_pages_are_named():
    page = _page()
    with pytest.raises(ValueError, match="no '## Comparisons' section"):
        findings(page.replace("## Comparisons", "## Something else"))
    with pytest.raises(ValueError, match="disagrees with its own count"):
        findings(_edit(page, RECIPE_AR, "Beyond noise: 3 of", "Beyond noise: 4 of"))
    with pytest.raises(ValueError, match="unreadable column 'MATH -16.3 \\(maybe\\)'"):
        findings(_edit(page, RECIPE_AR, "MATH -16.3 (lower, beyond noise)", "MATH -16.3 (maybe)", (3, 2)))
    with pytest.raises(ValueError, match="no '- CPU:' line"):
        run_of(page.replace("- CPU: ", "- processor: "))


def _amd_rows(page: str) -> list[dict]:
    """The page's rows as if a run on an AMD EPYC had found the reviewer's report: the 5 columns within noise."""
    out = []
    for r in rows(page):
        r = {**r, "cpu": "AMD EPYC 7B13", "commit": "0123456789abcdef"}
        if (r["comparison"], r["column"]) in NOT_ON_AMD:
            r.update(verdict="within noise", direction="")
        out.append(r)
    return out


def test_fragile_marks_where_another_cpu_disagrees(tmp_path):
    page = _page()
    amd = _amd_rows(page)
    m = marked(page, amd)
    mark = " [fragile: not beyond noise on AMD EPYC 7B13, run of 0123456]"
    assert m.count(mark) == 5
    assert "MATH -16.3 (lower, beyond noise)" + mark in m and "GSM8K -41.0 (lower, beyond noise);" in m
    comps = section(m, "## Comparisons")
    acc = "## Accuracy (Tables 1 and 2)"
    assert comps.count("[") == 5 and section(m, acc) == section(page, acc)
    # the marks change nothing else: findings, the page without them, and marking again
    assert unmarked(m) == page and findings(m) == findings(page) and marked(m, amd) == m
    assert comparable_text(unmarked(m)) == comparable_text(page)
    # the README block (findings, not the comparison lines) says how many columns are marked, and where
    with_findings = marked(_with_findings(page, tmp_path / "p.png"), amd)
    assert "- **Across CPUs:** a run of the same code on AMD EPYC 7B13 judged 5 comparison column(s) differently (5 " \
           "fragile: beyond noise here, judged otherwise there)" in _script().readme_block(with_findings)
    assert "Across CPUs" not in _script().readme_block(unmarked(with_findings))
    assert [(k["column"], k["fragile"]) for k in marks(m)][:1] == [("MATH", True)] and marks(page) == []
    # rows of the page's own CPU never mark it; a run that agrees leaves the page as it is
    assert marked(page, [{**r, "cpu": run_of(page)["cpu"]} for r in amd]) == page
    assert marked(page, [{**r, "cpu": "AMD EPYC 7B13"} for r in rows(page)]) == page
    # a column beyond noise elsewhere only, or the other way round there
    other = [dict(r, verdict="beyond noise", direction="higher") if (r["comparison"], r["column"]) in
             [(RECIPE_AR, "MMLU"), (DREAM_RECIPE, "MMLU")] else r for r in amd]
    m2 = marked(page, other)
    assert "MMLU -5.3 (within noise) [beyond noise, higher on AMD EPYC 7B13, run of 0123456]" in m2
    assert "MMLU -34.4 (lower, beyond noise) [fragile: beyond noise, higher on AMD EPYC 7B13, run of 0123456]" in m2


def test_check_exit_codes(tmp_path, capsys):
    mod = _script()
    page = _page()
    doc = tmp_path / "doc.md"
    doc.write_text(marked(page, _amd_rows(page)))  # a committed page with marks: they are not part of a run
    fresh = tmp_path / "run" / "tiny" / "summary.md"
    fresh.parent.mkdir(parents=True)
    fresh.write_text(page.replace("- commit: ", "- commit: 1"))
    assert mod.check(tmp_path / "run", doc) == 0
    assert "findings: all 48 comparison columns agree (14 beyond noise)" in capsys.readouterr().out
    fresh.write_text(page.replace("| 86.7 ± 4.2 | 86.3 ± 4.2 |", "| 86.9 ± 4.2 | 86.3 ± 4.2 |"))
    assert mod.check(fresh, doc) == 3
    out = capsys.readouterr().out
    assert "numbers: " in out and "differs" in out and "all 48 comparison columns agree" in out
    lost = _edit(page, RECIPE_AR, "MATH -16.3 (lower, beyond noise)", "MATH -16.3 (within noise)", (3, 2))
    fresh.write_text(lost)
    assert mod.check(fresh, doc) == 1
    out = capsys.readouterr().out
    assert "findings: 1 of 48 comparison columns differ (14 beyond noise on the page):" in out
    assert f"{RECIPE_AR}, MATH: page: beyond noise, lower; this run: within noise" in out
    with pytest.raises(SystemExit, match="no such summary page"):
        mod.check(tmp_path / "nowhere", doc)


def test_add_findings_replaces_the_rows_of_the_pages_cpu(tmp_path, capsys):
    mod = _script()
    page = _page()
    path = tmp_path / "findings.csv"
    with path.open("w", newline="") as f:
        mod.write_findings(_amd_rows(page), f)
    src = tmp_path / "summary.md"
    src.write_text(page)
    mod.add_findings(src, path)
    mod.add_findings(src, path)  # again: the page's CPU has one run in the file
    got = mod.read_findings(path)
    assert len(got) == 2 * 48
    assert got == sorted(_amd_rows(page) + rows(page), key=lambda r: r["cpu"])
    assert marked(page, got).count("[fragile: not beyond noise on AMD EPYC 7B13") == 5
    bad = tmp_path / "bad.csv"
    bad.write_text("cpu,commit\nx,y\n")
    with pytest.raises(SystemExit, match="missing columns"):
        mod.read_findings(bad)


def test_a_run_on_another_kernel_path_of_the_same_cpu_is_a_run_of_its_own(tmp_path, capsys):
    """A run with another kernel path (e.g. ``ATEN_CPU_CAPABILITY=default``) on the page's CPU is labelled with its
    path, kept beside the pinned run of that CPU, and marks the page; the pinned path keeps the plain CPU name."""
    mod = _script()
    page = _page()
    cpu_line = "- CPU: Intel(R) Xeon(R) Processor; kernel path: AVX2 (MKL_CBWR=AVX2)"
    assert cpu_line in page and mod.run_label(page) == "Intel(R) Xeon(R) Processor"
    assert cpu_of(page) == ("Intel(R) Xeon(R) Processor", mod.PINNED_PATH)
    assert mod.PINNED_PATH == "AVX2 (MKL_CBWR=AVX2)"
    assert cpu_of(page.replace("; kernel path: AVX2 (MKL_CBWR=AVX2)", "")) == ("Intel(R) Xeon(R) Processor", "")
    other = page.replace(cpu_line, cpu_line.replace("kernel path: AVX2", "kernel path: DEFAULT"))
    # two of the page's findings lost on that path
    other = _edit(other, RECIPE_AR, "MATH -16.3 (lower, beyond noise)", "MATH -16.3 (within noise)", (3, 2))
    other = _edit(other, DREAM_AR, "MBPP-Base -22.0 (lower, beyond noise)", "MBPP-Base -22.0 (within noise)", (8, 7))
    label = "Intel(R) Xeon(R) Processor with kernel path DEFAULT (MKL_CBWR=AVX2)"
    assert mod.run_label(other) == label
    path, src, pinned = tmp_path / "findings.csv", tmp_path / "other.md", tmp_path / "pinned.md"
    src.write_text(other)
    pinned.write_text(page)
    mod.add_findings(pinned, path)
    mod.add_findings(src, path)
    mod.add_findings(src, path)  # again: replaces that path's rows only
    got = mod.read_findings(path)
    assert len(got) == 2 * 48 and {r["cpu"] for r in got} == {"Intel(R) Xeon(R) Processor", label}
    m = marked(page, got)
    assert m.count(f"[fragile: not beyond noise on {label}, run of ") == 2
    assert "run on " + label in capsys.readouterr().out


def test_a_column_without_a_value_and_the_export_command(tmp_path, capsys):
    page = _page()
    na = _edit(page, RECIPE_AR, "MMLU -5.3 (within noise)", "MMLU n/a")
    f = next(f for f in findings(na) if (f["comparison"], f["column"]) == (RECIPE_AR, "MMLU"))
    assert f["verdict"] == "n/a" and f["difference"] is None
    assert differences(findings(page), findings(na)) == [f"{RECIPE_AR}, MMLU: page: within noise; this run: n/a"]
    src = tmp_path / "summary.md"
    src.write_text(page)
    assert _script().main(["--export-findings", str(src)]) == 0
    got = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert got == rows(page)


def _with_findings(page: str, png: Path) -> str:
    """The page as the DAG writes it now: a findings section first, and the picture ``png`` (written here) recorded
    in its provenance."""
    png.write_bytes(b"a picture")
    acc = "## Accuracy (Tables 1 and 2)"
    page = page.replace(acc, "## Findings\n\n- **b vs a:** within noise on every column (Avg. 1.0 ± 1.0 against "
                             f"1.0 ± 1.0, +0.0).\n\n{acc}", 1)
    devices = next(ln for ln in page.splitlines() if ln.startswith("- devices: "))
    return page.replace(devices, f"{devices}\n- picture: {png.name}, sha256 {sha256_of(png)}", 1)


def test_mark_rewrites_the_page_and_the_readme_block_and_notes_other_code(tmp_path, monkeypatch, capsys):
    """Only a run of the same code (source fingerprint) on another CPU marks the page; a run of other code is
    named in a note and marks nothing (its differences could come from the code)."""
    mod = _script()
    page = _with_findings(_page(), tmp_path / "results.png")
    monkeypatch.setattr(mod, "DOC_PNG", tmp_path / "results.png")
    doc, readme, found = tmp_path / "results.md", tmp_path / "README.md", tmp_path / "findings.csv"
    doc.write_text(page)
    readme.write_text(f"intro\n{mod.BEGIN}\nold\n{mod.END}\ntail\n")
    other_code = [dict(r, cpu="AMD EPYC 9004", source_fingerprint="feedfeedfeedfeed") for r in _amd_rows(page)]
    with found.open("w", newline="") as f:
        mod.write_findings(_amd_rows(page) + other_code, f)
    monkeypatch.setattr(mod, "DOC", doc)
    monkeypatch.setattr(mod, "README", readme)
    monkeypatch.setattr(mod, "FINDINGS", found)
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    assert mod.main(["--mark"]) == 0
    assert "note: findings.csv holds findings of AMD EPYC 9004 (commit 0123456789ab) made by code with source " \
           "fingerprint feedfeedfeedfeed, not the page's 218588a5aeda61a0: not used" in capsys.readouterr().out
    assert doc.read_text() == marked(page, _amd_rows(page)) != page
    assert "AMD EPYC 9004" not in doc.read_text()
    assert readme.read_text() == f"intro\n{mod.BEGIN}\n{mod.readme_block(doc.read_text())}{mod.END}\ntail\n"
    assert "- **Across CPUs:** a run of the same code on AMD EPYC 7B13 judged 5 comparison column(s)" in \
        readme.read_text()
    # a page made before the findings existed cannot be re-marked: refused before anything is written
    doc.write_text(_page())
    with pytest.raises(SystemExit, match="no '## Findings' section"):
        mod.main(["--mark"])
    assert doc.read_text() == _page()
