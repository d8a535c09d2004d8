"""analysis.paper_values against the paper (arXiv 2509.26328): spot checks against a second, independent hand
transcription of Tables 1-4 and of the quoted figure values, Avg. consistency, cell counts, and sources."""
import pytest

from analysis import paper_values as pv
from analysis import tables as T

# ---- Second transcription, read off the paper independently of analysis/paper_values.py.
# (table, row id, column) -> value as printed; "-" where the paper prints a dash.
SPOT_CHECKS = {
    # Table 1 (rows: the configs' ids; printed labels differ for Qwen2.5-*, Fast-dLLM v2, LlaMA-3.2, SmolLM 2)
    ("table1", "LLaMA-3.2", "mbpp_plus"): 29.4,
    ("table1", "SmolLM2", "avg"): 40.7,
    ("table1", "Qwen2.5-1.5B-Instruct", "math"): 46.8,
    ("table1", "Qwen2.5-1.5B-Nemo-FT", "mbpp_base"): 53.4,
    ("table1", "Fast-dLLM v2 (1.5B)", "gpqa"): 27.7,
    ("table1", "LLaDA", "gsm8k"): 78.6,
    ("table1", "LLaDA-1.5", "humaneval_plus"): "-",
    ("table1", "LLaDA-1.5", "gpqa"): 36.9,
    ("table1", "LLaDA-1.5", "avg"): "-",
    ("table1", "LLaDA-MoE", "gpqa"): "-",
    ("table1", "LLaDA-MoE", "mmlu"): 67.2,
    ("table1", "Dream", "mbpp_base"): 68.3,
    ("table1", "Qwen2.5-7B-Instruct", "ifeval"): 70.8,
    ("table1", "Qwen2.5-7B-Nemo-FT", "gsm8k"): 84.1,
    ("table1", "Fast-dLLM v2 (7B)", "humaneval_base"): 63.4,
    ("table1", "Fast-dLLM v2 (7B)", "avg"): 60.3,
    # Table 2
    ("table2", "naive token shift", "mbpp_plus"): 38.6,
    ("table2", "naive token shift", "gpqa"): 27.9,
    ("table2", "+ pad", "ifeval"): 45.8,
    ("table2", "+ pad", "avg"): 42.2,
    ("table2", "+ pad + CM", "math"): 38.1,
    ("table2", "+ pad + CM", "humaneval_plus"): 40.2,
    # Table 3 (sub-block size)
    ("table3", "2", "gsm8k"): 62.8,
    ("table3", "4", "humaneval_base"): 43.3,
    ("table3", "8", "humaneval_plus"): 40.2,
    ("table3", "16", "humaneval_plus"): 36.0,
    ("table3", "32", "gsm8k"): 60.2,
    # Table 4 (inference block size)
    ("table4", "2", "gsm8k"): 53.2,
    ("table4", "4", "humaneval_plus"): 39.0,
    ("table4", "8", "humaneval_base"): 43.3,
    ("table4", "16", "gsm8k"): 59.7,
    ("table4", "32", "humaneval_base"): 38.4,
}

# Figure / text values, read off the paper's captions and text.
FIGURE_CHECKS = {
    ("fig1a", "Fast-dLLM v2 (7B) vs Qwen2.5-7B-Instruct", "speedup"): 2.54,
    ("fig1a", "Fast-dLLM v2 (7B) vs Fast-dLLM-LLaDA", "gsm8k_gain"): 5.2,
    ("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@1.0"): 39.1,
    ("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9"): 101.7,
    ("fig_threshold", "Fast-dLLM v2 (7B)", "speedup@0.9"): 2.6,
    ("fig_gpu_batch", "A100", "speedup@bs64"): 1.5,
    ("fig_gpu_batch", "H100", "speedup_up_to"): 1.8,
    ("abstract", "Fast-dLLM v2 vs standard AR decoding", "speedup_up_to"): 2.5,
}

# Rows whose printed Avg. is not the mean of their nine printed cells (to 0.05), as found in the paper: SmolLM 2
# prints 40.7 while its nine cells average 40.18.  Recorded as printed; not corrected.
AVG_KNOWN_EXCEPTIONS = {("table1", "SmolLM2")}

NINE = ["humaneval_base", "humaneval_plus", "mbpp_base", "mbpp_plus", "gsm8k", "math", "ifeval", "mmlu", "gpqa"]


@pytest.mark.parametrize("key,expected", sorted(SPOT_CHECKS.items(), key=str))
def test_table_cells_match_second_transcription(key, expected):
    table, row, col = key
    if expected == "-":
        assert pv.paper_value(table, row, col) is None
        assert pv.is_not_given(table, row, col)
        assert pv.absent_text(table, row, col) == pv.NOT_GIVEN_TEXT
    else:
        v = pv.paper_value(table, row, col)
        assert v is not None and v.value == expected and v.unit == "%"
        assert not pv.is_not_given(table, row, col)


def test_spot_checks_cover_every_table():
    for table in pv.PAPER_TABLES:
        keys = [k for k in SPOT_CHECKS if k[0] == table]
        assert len(keys) >= 4 and len({k[1] for k in keys}) >= 3 and len({k[2] for k in keys}) >= 3, table
    assert any(v == "-" for k, v in SPOT_CHECKS.items() if k[0] == "table1")


@pytest.mark.parametrize("key,expected", sorted(FIGURE_CHECKS.items(), key=str))
def test_figure_values_match_second_transcription(key, expected):
    v = pv.paper_value(*key)
    assert v is not None and v.value == expected and v.source == "paper"


def test_printed_labels_and_params():
    assert pv.row_info("table1", "Qwen2.5-1.5B-Instruct").label == "Qwen2.5-1.5B"
    assert pv.row_info("table1", "Qwen2.5-7B-Instruct").label == "Qwen2.5-7B"
    assert pv.row_info("table1", "LLaDA").params == "8B"
    assert pv.row_info("table1", "SmolLM2").params == "1.7B"
    assert pv.label_of("table1", "Fast-dLLM v2 (1.5B)") == "Fast-dLLM v2 (1.5B)"
    assert pv.label_of("table1", "Qwen2.5-1.5B-Instruct") == "Qwen2.5-1.5B"
    assert pv.paper_value("table1", "Dream (7B)", "avg").value == 57.6  # old id still accepted
    assert pv.rows_of("table1")[0] == "LLaMA-3.2" and len(pv.rows_of("table1")) == 12


def _avg_rows():
    for table in ("table1", "table2"):
        for row in pv.rows_of(table):
            yield table, row


@pytest.mark.parametrize("table,row", list(_avg_rows()))
def test_avg_is_mean_of_nine_cells(table, row):
    avg = pv.paper_value(table, row, "avg")
    cells = [pv.paper_value(table, row, c) for c in NINE]
    if avg is None or any(c is None for c in cells):
        assert pv.is_not_given(table, row, "avg")  # LLaDA-1.5, LLaDA-MoE: the paper prints no Avg.
        return
    mean = sum(c.value for c in cells) / len(cells)
    consistent = abs(avg.value - mean) <= 0.05 + 1e-9
    if (table, row) in AVG_KNOWN_EXCEPTIONS:
        assert not consistent, f"{table}/{row} now matches: drop it from AVG_KNOWN_EXCEPTIONS"
    else:
        assert consistent, (table, row, avg.value, round(mean, 3))


def test_counts():
    cells = [v for v in pv.VALUES if v.table in pv.PAPER_TABLES]
    assert len(cells) == 173
    assert len(pv.NOT_GIVEN) == 7 and all(v.table == "table1" for v in pv.NOT_GIVEN)
    per_table = {t: sum(v.table == t for v in cells) for t in pv.PAPER_TABLES}
    assert per_table == {"table1": 113, "table2": 30, "table3": 15, "table4": 15}
    # every table is a full grid: each row x column is either a value or a "-"
    grids = {"table1": (12, 10), "table2": (3, 10), "table3": (5, 3), "table4": (5, 3)}
    for t, (n_rows, n_cols) in grids.items():
        rows = pv.rows_of(t)
        cols = list(pv.TABLE1_COLUMNS) if t in ("table1", "table2") else list(pv.TABLE34_COLUMNS)
        assert (len(rows), len(cols)) == (n_rows, n_cols)
        for r in rows:
            for c in cols:
                assert pv.paper_cell(t, r, c) is not None, (t, r, c)


def test_every_value_is_sourced_to_the_paper_unless_documented():
    for v in pv.VALUES + pv.NOT_GIVEN:
        key = (v.table, v.row, v.column)
        if key in pv.NON_PAPER_EXCEPTIONS:
            assert v.source == "project_page" and "project page" in v.source_text
        else:
            assert v.source == "paper", key
            assert v.source_text.startswith("the paper (arXiv 2509.26328), "), key
    for v in pv.VALUES + pv.NOT_GIVEN:
        if v.table in pv.PAPER_TABLES:
            assert v.source_text == f"the paper (arXiv 2509.26328), Table {v.table[-1]}"
    assert set(pv.SOURCES) == {"paper", "project_page"}
    assert set(pv.NON_PAPER_EXCEPTIONS) == {("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs1"),
                                            ("fig1b", "Fast-dLLM v2 (7B)", "tokens_per_s@bs4")}
    for f in pv.FINDINGS:
        assert f.source_text.startswith("the paper (arXiv 2509.26328), ")


def test_as_records_include_not_given_cells():
    recs = pv.as_records()
    assert len(recs) == len(pv.VALUES) + len(pv.NOT_GIVEN)
    dash = [r for r in recs if not r["given"]]
    assert len(dash) == 7 and all(r["value"] == "" for r in dash)
    qwen = next(r for r in recs if r["row"] == "Qwen2.5-1.5B-Instruct" and r["column"] == "gsm8k")
    assert qwen["paper_label"] == "Qwen2.5-1.5B" and qwen["params"] == "1.5B" and qwen["value"] == 57.0


def test_table_renders_not_given_distinct_from_missing():
    import pandas as pd

    cols = [{"id": "humaneval_plus", "title": "HE+", "na": "offline"},
            {"id": "gsm8k", "title": "GSM8K", "na": "offline"},
            {"id": "nonexistent", "title": "X", "na": "offline"}]
    t = T.comparison_table(name="t1", title="T", scale="tiny", paper_table="table1",
                           groups=[{"label": "llada", "model": "m", "paper_row": "LLaDA-1.5", "decode": None}],
                           columns=cols, acc=pd.DataFrame())
    pap = t.rows[1]
    assert pap[1] == "paper: LLaDA-1.5 (8B)"
    assert pap[2] == "- (not given in the paper)" == pv.NOT_GIVEN_TEXT
    assert pap[3].startswith("83.3 (")
    assert pap[4].startswith("n/a (") and pv.MISSING_TEXT in t.footnotes
    assert any("the paper (arXiv 2509.26328), Table 1" in f for f in t.footnotes)
