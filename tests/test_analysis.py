"""analysis/: paper values, tables and figures on small hand-made CSV fixtures (fixtures only in tests)."""
import pandas as pd
import pytest

from analysis import figures as F
from analysis import paper_values as pv
from analysis import tables as T
from analysis.results_io import lookup

META = {"git_commit": "abc", "config_hash": "h", "device_type": "cpu", "device_name": "cpu", "seed": 0}


def test_paper_values_have_sources_and_known_numbers():
    for v in pv.VALUES:
        assert v.source in pv.SOURCES and v.source_text
    assert pv.paper_value("table1", "Fast-dLLM v2 (7B)", "gsm8k").value == 83.7
    assert pv.paper_value("table1", "Fast-dLLM v2 (1.5B)", "avg").value == 45.0
    assert pv.paper_value("fig_threshold", "Fast-dLLM v2 (7B)", "tokens_per_s@0.9").value == 101.7
    assert pv.paper_value("fig_gpu_batch", "A100", "speedup@bs64").value == 1.5
    assert pv.paper_value("fig_gpu_batch", "H100", "speedup_up_to").value == 1.8  # no batch size stated
    assert pv.paper_value("table1", "Fast-dLLM v2 (7B)", "no_such_column") is None
    assert pv.paper_value("table3", "2", "gsm8k").value == 62.8
    assert pv.paper_value("table1", "LLaDA-1.5", "humaneval_plus") is None  # the paper prints "-"
    assert pv.is_not_given("table1", "LLaDA-1.5", "humaneval_plus")


def _acc():
    rows = [
        dict(model="m_bd", task="t_a", metric="acc", value=40.0, status="ok", mode="bd", block_size=32,
             sub_block_size=8, threshold=1.0, use_sub_block_cache=False),
        dict(model="m_bd", task="t_a", metric="acc", value=10.0, status="ok", mode="bd", block_size=32,
             sub_block_size=4, threshold=1.0, use_sub_block_cache=False),
        dict(model="m_ar", task="t_a", metric="acc", value=55.0, status="ok", mode="ar"),
        dict(model="m_bd", task="t_b", metric="", value="", status="n/a", note="dataset offline", mode="bd",
             block_size=32, sub_block_size=8, threshold=1.0, use_sub_block_cache=False),
    ]
    return pd.DataFrame([{**r, **META} for r in rows])


def test_lookup_filters_by_decode_and_reports_unavailable_tasks():
    acc = _acc()
    dec = dict(block_size=32, sub_block_size=4, threshold=1.0, use_sub_block_cache=False)
    assert lookup(acc, "value", dec, model="m_bd", task="t_a", metric="acc") == (10.0, "")
    assert lookup(acc, "value", dec, model="m_ar", task="t_a", metric="acc")[0] == 55.0  # AR ignores decode
    v, why = lookup(acc, "value", dict(dec, sub_block_size=8), model="m_bd", task="t_b", metric="acc")
    assert v is None and why == "dataset offline"
    assert lookup(acc, "value", None, model="zzz", task="t_a", metric="acc")[0] is None


def test_comparison_table_reproduced_paper_difference():
    dec = dict(block_size=32, sub_block_size=8, threshold=1.0, use_sub_block_cache=False)
    cols = [{"id": "gsm8k", "title": "GSM8K", "task": "t_a", "metric": "acc", "comparable": True},
            {"id": "humaneval_base", "title": "HE", "task": "t_a", "metric": "acc", "comparable": False},
            {"id": "mmlu", "title": "MMLU", "na": "MMLU offline"},
            {"id": "math", "title": "MATH", "task": "t_b", "metric": "acc"},
            {"id": "avg", "title": "Avg.", "average_of": ["gsm8k", "humaneval_base", "mmlu", "math"]}]
    t = T.comparison_table(name="t1", title="T", scale="tiny", paper_table="table1",
                           groups=[{"label": "ours", "model": "m_bd", "paper_row": "Fast-dLLM v2 (7B)", "decode": dec}],
                           columns=cols, acc=_acc())
    rep, pap, dif = t.rows
    assert rep[:4] == ["ours", "reproduced (tiny)", "40.0", "40.0"]
    assert pap[2].startswith("83.7") and pap[3].startswith("63.4")
    assert dif[2] == "-43.7"  # comparable column: reproduced - paper
    assert dif[3].startswith("n/a")  # stand-in task: no difference
    assert rep[4].startswith("n/a") and "MMLU offline" in t.footnotes[t.footnote("MMLU offline") - 1]
    assert rep[5].startswith("n/a") and any("dataset offline" in f for f in t.footnotes)
    assert rep[6].startswith("40.0 (")  # mean of the 2 filled columns, flagged
    md, tex = T.render_markdown(t), T.render_latex(t)
    assert "Scale: **tiny**" in md and "| ours | reproduced (tiny) | 40.0 |" in md
    assert r"\begin{tabular}" in tex and "n/a" in tex and "%" not in tex.split("\n", 1)[1].replace(r"\%", "")


def test_missing_paper_value_is_rendered_as_missing():
    t = T.comparison_table(name="t3", title="T3", scale="tiny", paper_table="table3",
                           groups=[{"label": "sub-block 64", "model": "m_bd", "paper_row": "64", "decode": None}],
                           columns=[{"id": "gsm8k", "title": "GSM8K", "task": "t_a", "metric": "acc"}], acc=_acc())
    assert t.rows[1][2].startswith("n/a")
    assert pv.MISSING_TEXT in t.footnotes


def test_not_given_paper_value_is_rendered_as_not_given():
    t = T.comparison_table(name="t1", title="T1", scale="tiny", paper_table="table1",
                           groups=[{"label": "moe", "model": "m_bd", "paper_row": "LLaDA-MoE", "decode": None}],
                           columns=[{"id": "gpqa", "title": "GPQA", "task": "t_a", "metric": "acc"}], acc=_acc())
    assert t.rows[1][2] == pv.NOT_GIVEN_TEXT
    assert t.rows[2][2] == "n/a" and pv.MISSING_TEXT not in t.footnotes


def test_latex_escaping():
    assert T.tex_escape("a_b & 50% #1") == r"a\_b \& 50\% \#1"


def _thr(device_type):
    rows = []
    for b, ar, bd in ((1, 10.0, 25.0), (64, 100.0, 150.0)):
        rows.append(dict(model="ar", mode="ar", batch_size=b, tokens_per_s=ar, device_type=device_type,
                         device_name="NVIDIA H100 80GB HBM3" if device_type == "cuda" else "Intel CPU"))
        rows.append(dict(model="bd", mode="bd", batch_size=b, tokens_per_s=bd, block_size=32, sub_block_size=8,
                         threshold=0.9, use_sub_block_cache=False, device_type=device_type,
                         device_name="NVIDIA H100 80GB HBM3" if device_type == "cuda" else "Intel CPU"))
    return pd.DataFrame(rows)


@pytest.mark.parametrize("device_type,expected", [("cpu", []), ("cuda", ["NVIDIA H100 80GB HBM3"])])
def test_gpu_figure_never_draws_cpu_rows(tmp_path, device_type, expected):
    spec = {"ar_model": "ar", "bd_model": "bd", "decode": None}
    names = F.fig_gpu_batch_throughput(_thr(device_type), spec, tmp_path / "f.png", tmp_path / "f.pdf")
    assert names == expected
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.pdf").stat().st_size > 0


def test_threshold_and_mask_figures_write_files(tmp_path):
    acc = pd.DataFrame([dict(model="bd", task="t", metric="acc", value=v, status="ok", mode="bd", block_size=32,
                             sub_block_size=8, threshold=th, use_sub_block_cache=False) for th, v in ((0.9, 30), (1.0, 35))])
    thr = _thr("cpu")
    thr = pd.concat([thr, pd.DataFrame([dict(model="bd", mode="bd", batch_size=1, tokens_per_s=12.0, block_size=32,
                                             sub_block_size=8, threshold=1.0, use_sub_block_cache=False)])])
    F.fig_threshold_gsm8k(acc, thr, {"model": "bd", "task": "t", "metric": "acc", "thresholds": [0.9, 1.0],
                                     "decode": dict(block_size=32, sub_block_size=8, threshold=1.0,
                                                    use_sub_block_cache=False), "batch": 1},
                          "tiny", tmp_path / "t.png", tmp_path / "t.pdf")
    F.fig_attention_masks(tmp_path / "m.png", tmp_path / "m.pdf", 8, 2)
    for n in ("t.png", "t.pdf", "m.png", "m.pdf"):
        assert (tmp_path / n).stat().st_size > 1000
