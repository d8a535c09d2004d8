"""Numbers that match the commit: the committed results page was made by the committed code, the README quotes it
verbatim, and the page is a pure function of the results CSVs."""
import importlib.util
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.summary import build_summary, comparable_text, fingerprint_of, section
from fastdllm_core.provenance import source_fingerprint

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "embedded_default_results.md"
sys.path.insert(0, str(ROOT / "workflow" / "lib"))


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


def test_the_readme_quotes_the_page_verbatim():
    mod = _update_script()
    readme = (ROOT / "README.md").read_text()
    block = readme.split(mod.BEGIN, 1)[1].split(mod.END, 1)[0]
    assert block.strip() == mod.readme_block(DOC.read_text()).strip()


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

    import plan
    import report_specs

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
    # provenance and timing are not part of what two runs must agree on
    other = page.replace("- commit: abc", "- commit: def").replace("tokens/s", "tok/s")
    assert comparable_text(other) == comparable_text(page)
    assert comparable_text(page.replace("62.5 ± ", "62.6 ± ")) != comparable_text(page)


@pytest.mark.parametrize("heading", ["## Accuracy (Tables 1 and 2)", "## Comparisons"])
def test_readme_block_has_the_page_sections(heading):
    mod = _update_script()
    page = f"# t\n\n{heading}\n\nbody\n\n## Provenance\n\n- commit: x\n"
    other = "## Comparisons" if heading.startswith("## Acc") else "## Accuracy (Tables 1 and 2)"
    page += f"\n{other}\n\nmore\n"
    block = mod.readme_block(page)
    assert "### " + heading[3:] in block and "body" in block and "commit" not in block
