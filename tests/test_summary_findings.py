"""The summary page's findings (analysis/summary_findings.py) and picture (analysis/fig_findings.py): one sentence per
comparison by the page's own rule, the speed sentence against the timing noise of the batch sweep's rounds, and a
picture that is a pure function of the page's cells."""
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis.fig_findings import draw_findings, picture_note, picture_rows, sha256_of
from analysis.findings import findings
from analysis.results_io import load_csv, load_throughput
from analysis.summary import build_summary, section, summary_cells
from analysis.summary_findings import FASTER, SLOWER, WITHIN_TIMING, pair_sentence, speed_finding, speed_verdict

ROOT = Path(__file__).resolve().parents[1]
KEPT = ROOT / "results" / "cross_cpu" / "intel_xeon_11322d2"  # the CSVs of a full run of the embedded default
sys.path.insert(0, str(ROOT / "workflow" / "scripts"))


def c(mean, half):
    return {"mean": mean, "lo": mean - half, "hi": mean + half}


def default_spec():
    import yaml

    from fastdllm_dag.job import report_specs
    from fastdllm_dag.plan import models as plan

    return report_specs.summary_spec(plan.expand_seeds(yaml.safe_load((ROOT / "config" / "config.yaml").read_text())))


def test_a_pair_within_noise_on_every_column_says_so_with_both_avgs():
    parts = [("GSM8K", c(62.5, 5.9), c(53.8, 8.1)), ("MATH", c(14.8, 4.4), c(15.1, 4.4))]
    got = pair_sentence("the AR base", "NTP", parts, (c(75.3, 1.5), c(73.0, 1.9)))
    assert got == "- **NTP vs the AR base:** within noise on every column (Avg. 73.0 ± 1.9 against 75.3 ± 1.5, -2.3)."


def test_a_pair_beyond_noise_names_its_columns_and_directions():
    parts = [("GSM8K", c(62.5, 5.9), c(34.1, 7.0)), ("IFEval", c(77.0, 5.1), c(59.6, 9.6)),
             ("MATH", c(14.8, 4.4), c(6.0, 6.0)), ("MMLU", c(50.0, 2.0), c(60.0, 2.0))]
    got = pair_sentence("the AR base", "recipe", parts, (c(75.3, 1.5), c(60.0, 3.8)))
    assert got == ("- **recipe vs the AR base:** lower beyond noise on Avg. (60.0 ± 3.8 against 75.3 ± 1.5, -15.3) "
                   "and on GSM8K and IFEval; higher beyond noise on MMLU; within noise on the other 1 column.")
    # Avg. within noise, one column beyond: the sentence still names it
    got = pair_sentence("a", "b", parts[2:], (c(60.0, 3.8), c(55.5, 2.9)))
    assert got == ("- **b vs a:** within noise on Avg. (55.5 ± 2.9 against 60.0 ± 3.8, -4.5); higher beyond noise "
                   "on MMLU; within noise on the other 1 column.")
    # touching intervals overlap: within noise (the comparisons' rule)
    assert "within noise on every column" in pair_sentence("a", "b", [("X", c(10, 1), c(12, 1))], (c(10, 1), c(12, 1)))


def _kept_page(**kw):
    spec = default_spec()
    return build_summary(spec, load_csv(KEPT / "accuracy.csv"), load_throughput(KEPT / "throughput.csv"),
                         load_csv(KEPT / "training_metrics.csv"), **kw)


def _beyond_columns(sentence: str) -> set[str]:
    """The column titles a findings sentence calls beyond noise."""
    out = set()
    for clause in sentence.split(":** ", 1)[1].rstrip(".").split("; "):
        if "beyond noise on " in clause:
            names = re.sub(r"\(.*?\)", "", clause.split("beyond noise on ", 1)[1]).replace(" and on ", ", ")
            out |= {n.strip() for n in re.split(r", | and ", names) if n.strip()}
    return out


def test_each_findings_sentence_agrees_with_its_comparison_line_on_a_full_run():
    page = _kept_page()
    assert page.split("\n## ")[1].startswith("Findings")  # the first section
    sentences = [ln for ln in section(page, "## Findings").splitlines() if ln.startswith("- **")]
    by_comparison: dict = {}
    for f in findings(page):
        by_comparison.setdefault(f["comparison"], set())
        if f["verdict"] == "beyond noise":
            by_comparison[f["comparison"]].add(f["column"])
    assert len(sentences) == len(by_comparison) + 1  # and the speed sentence
    base = "AR instruct (tiny; stand-in for Qwen2.5-Instruct)"
    for s, (comp, beyond) in zip(sentences, by_comparison.items()):
        b, a = comp.split(" - ")
        assert s.startswith(f"- **{b} vs {'the AR base' if a == base else a}:** ")
        assert _beyond_columns(s) == beyond, s
    assert sentences[1] == ("- **Fast-dLLM v2 recipe (tiny) vs the AR base:** lower beyond noise on Avg. (60.0 ± 3.8 "
                            "against 75.3 ± 1.5, -15.3) and on GSM8K and IFEval; within noise on the other 6 columns.")
    assert "n = 256 test items per task; rows of adaptations are means of 3 seeds (0, 1, 2)" in page


def test_speed_verdict_is_slower_only_when_every_round_is_below_the_noise_band():
    ar, ntp = [689.0, 1076.6, 729.9], [667.9, 694.8, 815.6]  # NTP / AR: 0.97, 0.65, 1.12: band 1 ± 0.355
    v = speed_verdict([335.4, 436.1, 312.4], ar, ntp)
    assert v["verdict"] == SLOWER and v["lo"] == pytest.approx(1 - (1 - 694.8 / 1076.6))
    v = speed_verdict([335.4, 436.1, 600.0], ar, ntp)  # one round inside the band
    assert v["verdict"] == WITHIN_TIMING
    assert speed_verdict([1000.0, 1500.0, 1000.0], ar, ntp)["verdict"] == FASTER
    with pytest.raises(ValueError, match="rounds differ"):
        speed_verdict([1.0, 2.0], ar, ntp)


def _rows(model, mode, batch, rounds):
    return {"model": model, "mode": mode, "sweep": "batch", "batch_size": batch, "status": "ok",
            "tokens_per_s_rounds": ";".join(f"{x:.3f}" for x in rounds)}


def test_the_speed_sentence_judges_each_batch_from_the_rounds():
    thr = pd.DataFrame([_rows("bd", "bd", 1, [241.3, 269.7, 215.4]), _rows("bd", "bd", 4, [335.4, 436.1, 312.4]),
                        _rows("ar", "ar", 1, [260.3, 447.5, 369.6]), _rows("ar", "ar", 4, [689.0, 1076.6, 729.9]),
                        _rows("ntp", "ar", 1, [256.6, 362.0, 370.6]), _rows("ntp", "ar", 4, [667.9, 694.8, 815.6])])
    spec = {"groups": [{"model": "bd", "label": "recipe"}, {"model": "ntp", "label": "NTP"}],
            "speed": {"sweep": "batch", "batches": [1, 4], "pair": {"bd": "bd", "ar": "ar", "noise": "ntp"}}}
    got = speed_finding(spec, thr)
    assert got.startswith("- **Speed (batch sweep):** recipe tokens/s over the AR base's, per round: ")
    assert f"batch 1 0.93x, 0.60x, 0.58x against a noise band of 0.81x-1.19x, {WITHIN_TIMING}; " in got
    assert f"batch 4 0.49x, 0.41x, 0.43x against 0.65x-1.35x, {SLOWER} (band: 1 ± " in got
    assert "of NTP over the AR base in the same 3 rounds" in got
    no_rounds = thr.assign(tokens_per_s_rounds="")
    assert "batch 1 no verdict" in speed_finding(spec, no_rounds) and SLOWER not in speed_finding(spec, no_rounds)
    spec["speed"]["pair"]["noise"] = None
    assert "no verdict" in speed_finding(spec, thr)


def test_the_picture_rows_carry_the_verdict_and_the_paper_gap_of_the_same_pair():
    spec, cells = summary_cells(default_spec(), load_csv(KEPT / "accuracy.csv"))
    rows = {r["label"]: r for r in picture_rows(spec, cells)}
    assert list(rows) == ["NTP fine-tuned (tiny)", "Fast-dLLM v2 recipe (tiny)", "Dream-style (tiny)",
                          "BD naive token shift (tiny)", "BD + pad (tiny)"]
    recipe = rows["Fast-dLLM v2 recipe (tiny)"]
    assert recipe["gap"] == pytest.approx(-15.3, abs=0.05) and recipe["verdict"] == "beyond noise"
    assert recipe["noise"] == pytest.approx(3.8 + 1.5, abs=0.1)
    assert rows["NTP fine-tuned (tiny)"]["verdict"] == "within noise"
    # the paper's gap over the same 8 columns: Fast-dLLM v2 (1.5B) - Qwen2.5-1.5B; Dream (7B) - Qwen2.5-7B
    assert recipe["paper_gap"] == pytest.approx((377.6 - 368.3) / 8)
    assert recipe["paper_label"] == "Fast-dLLM v2 (1.5B) - Qwen2.5-1.5B"
    assert rows["Dream-style (tiny)"]["paper_gap"] == pytest.approx((485.7 - 490.2) / 8)
    assert rows["BD + pad (tiny)"]["paper_label"] == "+ pad (Table 2) - Qwen2.5-1.5B"
    assert "stand-in tasks, not comparable" in picture_note(spec)
    comparable = dict(spec, columns=[dict(c, comparable=True) for c in spec["columns"]])
    assert "the paper's benchmarks" in picture_note(comparable)


def test_the_picture_is_a_pure_function_of_its_rows(tmp_path):
    rows = [{"label": "recipe", "baseline": "AR", "gap": -15.3, "noise": 5.3, "verdict": "beyond noise",
             "paper_label": "Fast-dLLM v2 (1.5B) - Qwen2.5-1.5B", "paper_gap": 1.2, "columns": 8},
            {"label": "NTP", "baseline": "AR", "gap": -2.4, "noise": 3.4, "verdict": "within noise",
             "paper_label": "no paper pair", "paper_gap": None, "columns": 8}]
    sha = draw_findings(rows, tmp_path / "a.png", note="n")
    assert sha == sha256_of(tmp_path / "a.png") == draw_findings(rows, tmp_path / "b.png", note="n")
    from PIL import Image

    assert 700 <= Image.open(tmp_path / "a.png").size[0] <= 850  # README width
    changed = [dict(rows[0], gap=-15.2), rows[1]]
    assert draw_findings(changed, tmp_path / "c.png", note="n") != sha
    assert draw_findings(rows, tmp_path / "d.png", banner="REHEARSAL", note="n") != sha
    with pytest.raises(ValueError, match="no rows"):
        draw_findings([], tmp_path / "e.png")


def test_a_paper_baseline_must_be_a_row_of_the_papers_table1():
    import copy

    import yaml

    from fastdllm_dag.plan import checks as plan_checks

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    plan_checks.check(cfg)
    bad = copy.deepcopy(cfg)
    bad["tables"]["table1"]["rows"][3]["paper_baseline"] = "Qwen2.5-7B-Instruc"
    with pytest.raises(plan_checks.ConfigError, match=r"tables.table1.rows\[3\].paper_baseline.*'Qwen2.5-7B-Instruc'"):
        plan_checks.check(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["table1"]["rows"][0]["paper_baseline"] = "Qwen2.5-7B-Instruct"  # a row without a baseline
    with pytest.raises(plan_checks.ConfigError, match=r"tables.table1.rows\[0\].paper_baseline"):
        plan_checks.check(bad)
