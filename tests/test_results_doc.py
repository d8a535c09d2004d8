"""Numbers that match the commit: the committed results page was made by the committed code, its picture is the one
the page records, the README block is made from them, and the page is a pure function of the results CSVs."""
import importlib.util
from pathlib import Path

import pandas as pd
import pytest

from analysis.fig_findings import draw_findings, sha256_of
from analysis.findings import findings
from analysis.summary import build_summary, comparable_text, fingerprint_of, picture_of, section
from fastdllm_core.provenance import source_fingerprint

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "embedded_default_results.md"
DOC_PNG = ROOT / "docs" / "embedded_default_results.png"
KEPT = ROOT / "results" / "cross_cpu" / "intel_xeon_11322d2"  # a full run's CSVs and its (older-format) page


def _update_script():
    spec = importlib.util.spec_from_file_location("update_results_doc", ROOT / "scripts" / "update_results_doc.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_committed_results_page_was_made_by_the_committed_code():
    page = DOC.read_text()
    here = source_fingerprint(ROOT)
    assert fingerprint_of(page) == here, (
        f"{DOC.relative_to(ROOT)} was made by code with source fingerprint {fingerprint_of(page)}, but the code "
        f"committed beside it has {here}: something that can move a result changed since. Commit, then run "
        "`python scripts/update_results_doc.py` (a clean run of the embedded default, about 20 minutes on 2 cores) "
        "and commit what it writes.")


def test_the_readme_block_is_made_from_the_page():
    mod = _update_script()
    readme = (ROOT / "README.md").read_text()
    block = readme.split(mod.BEGIN, 1)[1].split(mod.END, 1)[0]
    assert block.strip() == mod.readme_block(DOC.read_text()).strip()


def test_the_committed_picture_is_the_one_the_page_records():
    recorded = picture_of(DOC.read_text())
    assert recorded is not None, f"{DOC.relative_to(ROOT)} records no picture: regenerate it"
    assert DOC_PNG.is_file() and sha256_of(DOC_PNG) == recorded[1], (
        f"{DOC_PNG.relative_to(ROOT)} is not the picture {DOC.relative_to(ROOT)} records ({recorded[1]}): a picture "
        "of another run. Run `python scripts/update_results_doc.py` and commit what it writes.")


def test_source_fingerprint_ignores_comments_and_docstrings_not_code(tmp_path):
    pkg = tmp_path / "fastdllm_core"
    pkg.mkdir()
    f = pkg / "m.py"
    f.write_text('"""Doc."""\nX = 1  # a comment\n\n\ndef g():\n    """Doc."""\n    return X\n')
    base = source_fingerprint(tmp_path)
    f.write_text('"""Other words."""\n# a new comment\nX = 1\n\n\ndef g():\n    return X\n')
    assert source_fingerprint(tmp_path) == base
    f.write_text('"""Doc."""\nX = 2\n\n\ndef g():\n    return X\n')
    assert source_fingerprint(tmp_path) != base
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "config.yaml").write_text("a: 1  # comment\n")
    with_cfg = source_fingerprint(tmp_path)
    (tmp_path / "config" / "config.yaml").write_text("# header\na: 1\n")
    assert source_fingerprint(tmp_path) == with_cfg
    (tmp_path / "config" / "config.yaml").write_text("a: 2\n")
    assert source_fingerprint(tmp_path) != with_cfg


def _acc_rows():
    rows = []

    def add(model, task, metric, value, **decode):
        d = {"mode": "bd", "block_size": 32, "sub_block_size": 8, "threshold": 1.0, "use_sub_block_cache": False}
        d.update(decode)
        rows.append({"model": model, "task": task, "metric": metric, "value": value, "n": 256, "status": "ok",
                     "tokens_per_forward": 1.0, "git_commit": "abc", "cpu_isa": "AVX2", **d})

    for m, vals in {"ar_base": [62.5], "ntp": [58, 64, 60], "bd_naive": [30, 25, 28], "bd_pad": [26, 27, 25],
                    "bd_pad_cm": [43.0, 26.6, 34.4]}.items():
        for i, v in enumerate(vals):
            key = m if i == 0 else f"{m}.seed{i}"
            for task, metric in (("synth_arith", "exact_match_strict"), ("synth_code", "pass@1_base"),
                                 ("synth_code", "pass@1_plus"), ("synth_mbpp", "pass@1_base"),
                                 ("synth_mbpp", "pass@1_plus"), ("synth_math", "exact_match"),
                                 ("synth_ifeval", "prompt_level_strict_acc"), ("synth_mc", "acc")):
                add(key, task, metric, v, mode="ar" if m in ("ar_base", "ntp") else "bd")
    for s in (2, 4, 16, 32):  # sub-block 8 is Table 1's own measurement (the DAG measures a point once)
        for task, metric in (("synth_arith", "exact_match_strict"), ("synth_code", "pass@1_base"),
                             ("synth_code", "pass@1_plus")):
            add("bd_pad_cm", task, metric, 30 + s / 8, sub_block_size=s)
    return pd.DataFrame(rows)


def test_summary_page_is_a_pure_function_of_the_csvs_and_says_what_is_a_finding():
    import yaml

    from fastdllm_dag.job import report_specs
    from fastdllm_dag.plan import models as plan

    cfg = plan.expand_seeds(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    spec = report_specs.summary_spec(cfg)
    acc = _acc_rows()
    train = pd.DataFrame([{"model": "ar_base", "recipe": "sft", "step": 600, "loss": 0.0675, "tokens_per_s": 3000}])
    page = build_summary(spec, acc, pd.DataFrame(), train, fingerprint="f00")
    assert build_summary(spec, acc.sample(frac=1, random_state=0), pd.DataFrame(), train, fingerprint="f00") == page
    acc_part = section(page, "## Accuracy (Tables 1 and 2)")
    assert "| AR instruct (tiny; stand-in for Qwen2.5-Instruct) | 1 | 62.5 ± " in acc_part
    assert "43.0 / 26.6 / 34.4" in page  # per-seed values
    comps = section(page, "## Comparisons")
    assert "**Fast-dLLM v2 recipe (tiny) - AR instruct (tiny; stand-in for Qwen2.5-Instruct)**" in comps
    assert "GSM8K -27.8 (lower, beyond noise)" in comps or "GSM8K -27.8 (within noise)" in comps
    assert "Table 2: the recipe against the row above" in comps
    assert "### Table 3: sub-block size" in page and "reference" in page
    assert fingerprint_of(page) == "f00" and "- commit: abc" in page
    assert page.split("\n## ")[1].startswith("Findings\n")  # the first section
    assert "- **Fast-dLLM v2 recipe (tiny) vs the AR base:** " in section(page, "## Findings")
    assert picture_of(page) is None and "- picture:" not in page
    assert picture_of(build_summary(spec, acc, pd.DataFrame(), train, picture=("s.png", "cd" * 32))) == \
        ("s.png", "cd" * 32)
    # findings (restating the sections below), provenance and timing are not what two runs must agree on
    other = page.replace("- commit: abc", "- commit: def").replace("tokens/s", "tok/s")
    assert comparable_text(other) == comparable_text(page) and "## Findings" not in comparable_text(page)
    assert comparable_text(page.replace("62.5 ± ", "62.6 ± ")) != comparable_text(page)


def _spec():
    import yaml

    from fastdllm_dag.job import report_specs
    from fastdllm_dag.plan import models as plan

    return report_specs.summary_spec(plan.expand_seeds(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())))


TIMING = {"cores": 2, "git_commit": "0123456789abcdef", "idle_wall_s": 1976.4, "cpu": "Some CPU",
          "second_invocation_nothing_to_do": True}


def test_the_readme_opens_with_the_picture():
    """The page's picture within the README's first screen (about 300 words), with the plain sentence before it."""
    readme = (ROOT / "README.md").read_text()
    head = readme[:readme.index("](docs/embedded_default_results.png)")]
    assert len(head.split()) < 300 and "**What the miniature found.**" in head


def test_readme_block_is_the_findings_means_and_wall_time():
    mod = _update_script()
    page = build_summary(_spec(), _acc_rows(), pd.DataFrame(), pd.DataFrame(), fingerprint="f00",
                         picture=("summary.png", "ab" * 32))
    page = mod.add_wall_time(page, TIMING)
    block = mod.readme_block(page)
    assert block.startswith("### Findings\n") and section(page, "## Findings")[len("## Findings"):].strip() in block
    assert "![" not in block  # the picture stands at the top of the README (test_the_readme_opens_with_the_picture)
    means = [ln for ln in section(page, "## Accuracy (Tables 1 and 2)").splitlines() if ln.startswith("|")]
    per_seed = means[10:]  # the rows of the page's second table: per seed (5 rows of 3 seeds)
    assert len(means) == 2 + 6 + 2 + 5 and "| Avg. |" in means[0]
    assert "\n".join(means[:8]) in block and not any(ln in block for ln in per_seed)
    assert "Beyond noise:" not in block and "source fingerprint" not in block and "Table 3" not in block
    assert block.rstrip().endswith("provenance: [docs/embedded_default_results.md](docs/embedded_default_results.md).")
    assert "1976 s wall on 2 cores (Some CPU)" in block and "commit 0123456789ab" in block
    # without the run's wall time (a page of --from): said so, never a number from elsewhere
    assert "wall time is not on this page" in mod.readme_block(build_summary(
        _spec(), _acc_rows(), pd.DataFrame(), pd.DataFrame(), picture=("summary.png", "ab" * 32)))


def test_readme_block_refuses_a_page_made_before_the_findings():
    mod = _update_script()
    with pytest.raises(SystemExit, match="no '## Findings' section"):
        mod.readme_block((ROOT / "tests" / "data" / "results_page_fd91a64.md").read_text())
    page = build_summary(_spec(), _acc_rows(), pd.DataFrame(), pd.DataFrame())  # no picture recorded
    with pytest.raises(SystemExit, match="no '- picture:' record"):
        mod.readme_block(page)


def _kept_page(**kw) -> str:
    from analysis.results_io import load_csv, load_throughput

    return build_summary(_spec(), load_csv(KEPT / "accuracy.csv"), load_throughput(KEPT / "throughput.csv"),
                         load_csv(KEPT / "training_metrics.csv"), **kw)


def test_check_compares_a_page_with_findings_and_one_made_before(tmp_path, capsys):
    mod = _update_script()
    new = tmp_path / "summary.md"
    new.write_text(_kept_page(fingerprint="f00", picture=("summary.png", "ab" * 32)))
    old = KEPT / "summary.md"  # the same run's page, written before pages had findings
    assert "## Findings" in new.read_text() and "## Findings" not in old.read_text()
    assert mod.check(new, old) == 0 and mod.check(old, new) == 0
    assert findings(new.read_text()) == findings(old.read_text())
    moved = tmp_path / "moved.md"
    moved.write_text(new.read_text().replace("| 87.1 ± 4.1 | 87.1 ± 4.1 |", "| 87.2 ± 4.1 | 87.1 ± 4.1 |", 1))
    assert mod.check(moved, old) == 3


def _run_dir(tmp_path, mod) -> Path:
    run = tmp_path / "run" / "tiny"
    run.mkdir(parents=True)
    rows = [{"label": "recipe", "baseline": "AR", "gap": -15.3, "noise": 5.3, "verdict": "beyond noise",
             "paper_label": "p", "paper_gap": 1.2, "columns": 8}]
    sha = draw_findings(rows, run / "summary.png")
    page = build_summary(_spec(), _acc_rows(), pd.DataFrame(), pd.DataFrame(), fingerprint="f00",
                         picture=("summary.png", sha))
    (run / "summary.md").write_text(page)
    return run.parent


def test_from_writes_the_page_its_picture_and_the_readme_block(tmp_path, monkeypatch):
    mod = _update_script()
    docs = tmp_path / "docs"
    docs.mkdir()
    monkeypatch.setattr(mod, "DOC", docs / "embedded_default_results.md")
    monkeypatch.setattr(mod, "DOC_PNG", docs / "embedded_default_results.png")
    monkeypatch.setattr(mod, "README", tmp_path / "README.md")
    monkeypatch.setattr(mod, "FINDINGS", tmp_path / "findings_by_cpu.csv")
    monkeypatch.setattr(mod, "source_fingerprint", lambda root: "f00")
    (tmp_path / "README.md").write_text(f"# r\n\nprose\n\n{mod.BEGIN}\nold\n{mod.END}\n\nmore prose\n")
    run = _run_dir(tmp_path, mod)
    assert mod.main(["--from", str(run)]) == 0
    page = mod.DOC.read_text()
    assert mod.DOC_PNG.read_bytes() == (run / "tiny" / "summary.png").read_bytes()
    assert picture_of(page) == ("embedded_default_results.png", sha256_of(mod.DOC_PNG))
    readme = mod.README.read_text()
    assert readme.startswith("# r\n\nprose\n\n") and readme.endswith(f"{mod.END}\n\nmore prose\n")
    assert mod.readme_block(page) in readme and "\nold\n" not in readme
    assert mod.main(["--mark"]) == 0 and mod.DOC.read_text() == page  # re-marking keeps the committed picture
    # a picture of another run: refused, nothing written
    (run / "tiny" / "summary.png").write_bytes(b"another picture")
    with pytest.raises(SystemExit, match="the picture of another run"):
        mod.main(["--from", str(run)])
    assert mod.DOC.read_text() == page and mod.README.read_text() == readme
    mod.DOC_PNG.write_bytes(b"another picture")
    with pytest.raises(SystemExit, match="the picture of another run"):
        mod.main(["--mark"])
