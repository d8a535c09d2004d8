"""The bases' cost table (analysis/study_cost.py): training time from the build rows a release writes."""
import pandas as pd
import pytest

from analysis import study_cost


def _rows(base, stage, steps, tokens, rates, world=2, threads=1, cpu="AMD EPYC"):
    return [{"base": base, "stage": stage, "step": s, "tokens_seen": t, "tokens_per_s": r, "world_size": world,
             "torch_threads": threads, "cpu": cpu} for s, t, r in zip(steps, tokens, rates)]


def test_a_stage_takes_each_intervals_tokens_over_its_rate():
    rows = pd.DataFrame(_rows("p4", "pretrain", [40, 20, 60], [300, 100, 600], [20.0, 10.0, 30.0]))
    # sorted by step: 100 tokens at 10/s, 200 at 20/s, 300 at 30/s
    assert study_cost.stage_seconds(rows) == pytest.approx(10 + 10 + 10)


def test_a_row_without_a_rate_is_refused_by_step():
    rows = pd.DataFrame(_rows("p4", "pretrain", [20, 40], [100, 300], [10.0, 0.0]))
    with pytest.raises(ValueError, match="steps 40"):
        study_cost.stage_seconds(rows)


def test_the_cost_rows_per_base_and_stage():
    builds = pd.DataFrame(_rows("p4", "pretrain", [20, 40], [3600, 7200], [1.0, 2.0])
                          + _rows("p4", "sft", [20], [7200], [2.0]))
    table = study_cost.cost(builds)
    assert list(table["stage"]) == ["pretrain", "sft"]
    pre = table.iloc[0]
    assert pre["steps"] == 40 and pre["tokens"] == 7200 and pre["processes"] == "2 x 1 thread"
    assert pre["hours"] == pytest.approx((3600 / 1.0 + 3600 / 2.0) / 3600)
    assert pre["tokens_per_s"] == pytest.approx(1.5)
    assert table.iloc[1]["hours"] == pytest.approx(1.0)


def test_the_page_section_names_each_built_base_and_its_total():
    builds = pd.DataFrame(_rows("p4", "pretrain", [20], [3600], [1.0]) + _rows("p4", "sft", [20], [7200], [2.0])
                          + _rows("p16", "pretrain", [20], [7200], [1.0]))
    summary = pd.DataFrame([{"base": "p4", "quantity": "base", "pretrain_tokens_per_param": 5.54},
                            {"base": "p16", "quantity": "base", "pretrain_tokens_per_param": 22.17}])
    lines = study_cost.markdown(builds, summary)
    assert lines[0] == "## Cost of the bases it built"
    p4 = next(line for line in lines if line.startswith("| p4 "))
    assert "| 5.54 | 20, 0.00M, 1.00 | 20, 0.01M, 1.00 | 2.00 |" in p4
    p16 = next(line for line in lines if line.startswith("| p16 "))
    assert "| 22.17 | 20, 0.01M, 2.00 | n/a | 2.00 |" in p16  # a stage without rows is n/a, not zero


def test_a_study_that_built_no_base_has_no_cost_section():
    assert study_cost.markdown(pd.DataFrame(), pd.DataFrame(columns=["base", "quantity"])) == []
