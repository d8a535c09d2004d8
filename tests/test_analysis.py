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
    assert rep[:4] == ["ours", "reproduced (tiny scale)", "40.0", "40.0"]
    assert pap[2].startswith("83.7") and pap[3].startswith("63.4")
    assert dif[2] == "-43.7"  # comparable column: reproduced - paper
    assert dif[3].startswith("n/a")  # stand-in task: no difference
    assert rep[4].startswith("n/a") and "MMLU offline" in t.footnotes[t.footnote("MMLU offline") - 1]
    assert rep[5].startswith("n/a") and any("dataset offline" in f for f in t.footnotes)
    assert rep[6].startswith("40.0 partial (2 of 4) (")  # mean of the 2 filled columns, flagged
    assert dif[6].startswith("n/a")  # never differenced against the paper's average
    md, tex = T.render_markdown(t), T.render_latex(t)
    assert "Scale: **tiny**" in md and "| ours | reproduced (tiny scale) | 40.0 |" in md
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
    if not expected:  # one line of text, no empty axes frame
        import matplotlib.image as mpimg

        h, w = mpimg.imread(tmp_path / "f.png").shape[:2]
        assert h < 150 and w > 4 * h


def test_threshold_and_mask_figures_write_files(tmp_path):
    acc = pd.DataFrame([dict(model="bd", task="t", metric="acc", value=v, status="ok", mode="bd", block_size=32,
                             sub_block_size=8, threshold=th, use_sub_block_cache=False)
                        for th, v in ((0.9, 30), (1.0, 35))])
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


NINE = ["humaneval_base", "humaneval_plus", "mbpp_base", "mbpp_plus", "gsm8k", "math", "ifeval", "mmlu", "gpqa"]


def _avg_table(ids, paper_table="table1", paper_row="Fast-dLLM v2 (1.5B)"):
    acc = pd.DataFrame([dict(model="m", task=f"t_{i}", metric="acc", value=50.0, status="ok", mode="ar")
                        for i in NINE])
    cols = [{"id": i, "title": i, "task": f"t_{i}", "metric": "acc", "comparable": True} for i in ids]
    cols.append({"id": "avg", "title": "Avg.", "average_of": list(ids), "paper_columns": NINE})
    return T.comparison_table(name="t", title="T", scale="paper", paper_table=paper_table,
                              groups=[{"label": "m", "model": "m", "paper_row": paper_row, "decode": None}],
                              columns=cols, acc=acc)


@pytest.mark.parametrize("paper_table,paper_row", [("table1", "Fast-dLLM v2 (1.5B)"), ("table2", "+ pad + CM")])
def test_partial_average_is_labelled_and_never_differenced(paper_table, paper_row):
    five = ["humaneval_base", "humaneval_plus", "mbpp_base", "mbpp_plus", "gsm8k"]  # paper.yaml's Table 2 columns
    t = _avg_table(five, paper_table, paper_row)  # every shown column filled, comparable, but 5 of the paper's 9
    rep, pap, dif = t.rows
    assert rep[-1].startswith("50.0 partial (5 of 9) (")
    assert pap[-1].startswith("45.0 (")  # the paper's 9-column Avg. is still shown
    assert dif[-1].startswith("n/a (") and all(d[0] in "+-" for d in dif[2:-1])  # the columns are differenced
    assert any("partial average" in f and "never differenced" in f for f in t.footnotes)
    full = _avg_table(NINE, paper_table, paper_row)
    rep, pap, dif = full.rows
    assert rep[-1] == "50.0" and dif[-1] == "+5.0"  # all nine columns: a real average, differenced


def test_case_study_table_shows_the_papers_answers():
    from analysis import paper_cases

    conv = paper_cases.conversations("multi_turn")
    rows = [dict(case=1, turn=i + 1, prompt=u, response=f"ours {i}", generated_tokens=5, nfe=3, model="m",
                 block_size=32, sub_block_size=8, threshold=1.0) for i, u in enumerate(conv[0])]
    rows += [dict(case=2, turn=1, prompt="Question: stand-in?\nAnswer:", response="7", generated_tokens=2, nfe=2,
                  model="m", block_size=32, sub_block_size=8, threshold=1.0)]
    t = T.case_study_table(name="table6_case_multi_turn", title="T6", scale="paper", cases=pd.DataFrame(rows))
    assert t.header[:5] == ["Case", "Turn", "Prompt", "Reproduced answer", "Paper's answer"]
    assert t.rows[0][0] == "1 (paper: Daily life)" and t.rows[0][3] == "ours 0"
    assert t.rows[1][4].startswith("NVIDIA has been in business for 32 years as of 2025. (")
    assert t.rows[2][4].startswith("NVIDIA's 40th anniversary will be in 2033")
    assert any("the paper's answer" in f and "Table 6" in f for f in t.footnotes)
    assert t.rows[3][4].startswith("n/a (")  # a stand-in prompt has no paper answer
    # the same user turn in another position of a conversation is not the paper's
    assert paper_cases.match("multi_turn", [conv[0][1]]) is None
    assert paper_cases.match("single_turn", paper_cases.conversations("single_turn")[1:]).title == "Code"
    assert "Paper's answer" in T.render_markdown(t)


def test_threshold_figure_draws_intervals_when_present(tmp_path, monkeypatch):
    dec = dict(block_size=32, sub_block_size=8, use_sub_block_cache=False)
    rows = [dict(model="bd", task="t", metric="acc", value=v, status="ok", mode="bd", threshold=th, **dec)
            for th, v in ((0.9, 30.0), (1.0, 35.0))]
    thr = pd.DataFrame([dict(model="bd", mode="bd", batch_size=1, tokens_per_s=tp, threshold=th, **dec)
                        for th, tp in ((0.9, 20.0), (1.0, 8.0))])
    spec = {"model": "bd", "label": "BD", "task": "t", "metric": "acc", "thresholds": [0.9, 1.0],
            "decode": dict(dec, threshold=1.0), "batch": 1}
    drawn = []
    real = F.plt.Axes.errorbar
    monkeypatch.setattr(F.plt.Axes, "errorbar", lambda self, *a, **k: drawn.append(a) or real(self, *a, **k))
    with_ci = pd.DataFrame([dict(r, ci_low=r["value"] - 5, ci_high=r["value"] + 6) for r in rows])
    F.fig_threshold_gsm8k(with_ci, thr, spec, "tiny", tmp_path / "a.png", tmp_path / "a.pdf")
    assert len(drawn) == 1 and list(drawn[0][1]) == [30.0, 35.0]
    F.fig_threshold_gsm8k(pd.DataFrame(rows), thr, spec, "tiny", tmp_path / "b.png", tmp_path / "b.pdf")
    F.fig_threshold_gsm8k(pd.DataFrame(), pd.DataFrame(), spec, "tiny", tmp_path / "c.png", tmp_path / "c.pdf")
    assert len(drawn) == 1  # no intervals in the CSV: none drawn, no error
    assert all((tmp_path / f"{n}.png").stat().st_size > 1000 for n in "abc")


def test_mask_figure_is_drawn_in_analysis_from_the_core_masks(tmp_path):
    import fastdllm_core.masks as masks

    assert not hasattr(masks, "draw_masks")  # the core keeps only the mask functions
    assert F.MASK_COLORS["bd"] == "#47B1E1" and F.MASK_COLORS["obc"] == "#46D45A" and F.MASK_COLORS["bc"] == "#F3AA84"
    F.fig_attention_masks(tmp_path / "m.png", tmp_path / "m.pdf", 8, 2)
    assert (tmp_path / "m.png").stat().st_size > 1000


def _two_sweeps():
    """The same BD setting at batch 1 measured by two sweeps: Figure 1's "batch" sweep (beside the AR model) and,
    later in the CSV, Figure 6's "subblock" sweep, with a different number (another moment on a loaded host)."""
    dec = dict(block_size=32, sub_block_size=8, threshold=0.9, use_sub_block_cache=True)
    rows = [dict(model="bd", mode="bd", sweep="batch", batch_size=1, tokens_per_s=100.0, total_tokens=100,
                 wall_time_s_min=0.9, wall_time_s_max=1.1, **dec),
            dict(model="bd", mode="bd", sweep="batch", batch_size=4, tokens_per_s=250.0, **dec),
            dict(model="ar", mode="ar", sweep="batch", batch_size=1, tokens_per_s=80.0, total_tokens=80,
                 wall_time_s_min=0.8, wall_time_s_max=1.25),
            dict(model="ar", mode="ar", sweep="batch", batch_size=4, tokens_per_s=160.0),
            dict(model="bd", mode="bd", sweep="threshold", batch_size=1, tokens_per_s=300.0, **dec),
            dict(model="bd", mode="bd", sweep="subblock", batch_size=1, tokens_per_s=500.0, **dec)]
    return pd.DataFrame(rows), dec


def test_speed_figures_take_their_numbers_from_their_own_sweep():
    thr, dec = _two_sweeps()
    ratio, rng = F.speedup_pair(thr, "bd", "ar", dec, batch=1, sweep="batch")
    assert ratio == pytest.approx(100.0 / 80.0)  # not 500 / 80 from the sub-block sweep's later row
    assert rng == pytest.approx((100 / 1.1 / (80 / 0.8), 100 / 0.9 / (80 / 1.25)))
    assert F._tps(thr, "bd", "bd", 1, dec, "subblock") == 500.0
    assert F._tps(thr, "bd", "bd", 1, dec, "threshold") == 300.0
    assert F._tps(thr, "bd", "bd", 1, dec, "gpu_batch") is None
    no_sweep = thr.drop(columns=["sweep"])  # a CSV written outside the DAG: every row counts
    assert F._tps(no_sweep, "bd", "bd", 1, dec, "batch") == 500.0
    spec = {"models": [{"model": "bd", "label": "BD", "mode": "bd"}, {"model": "ar", "label": "AR", "mode": "ar"}],
            "batches": [1, 4], "speed_decode": dec}
    items = F.batch_scaling(thr, spec)
    assert [(i["label"], i["ratio"]) for i in items[:2]] == [("BD", 2.5), ("AR", 2.0)]
    assert all(i["source"] == "reproduced" for i in items[:2])
    paper = items[2]  # the paper's Fast-dLLM v2 (7B) 102.5 -> 217.5 tokens/s, as a ratio, with its source
    assert paper["ratio"] == pytest.approx(217.5 / 102.5) and "project page" in paper["source"]


def test_threshold_figure_uses_the_threshold_sweep(tmp_path, monkeypatch):
    thr, dec = _two_sweeps()
    base = pd.DataFrame([dict(model="bd", mode="bd", sweep="threshold", batch_size=1, tokens_per_s=150.0,
                              **dict(dec, threshold=1.0))])
    thr = pd.concat([thr, base], ignore_index=True)
    drawn = []
    real = F.plt.Axes.plot
    monkeypatch.setattr(F.plt.Axes, "plot", lambda self, *a, **k: drawn.append(a) or real(self, *a, **k))
    spec = {"model": "bd", "label": "BD", "task": "t", "metric": "acc", "thresholds": [0.9, 1.0],
            "decode": dict(dec, threshold=1.0), "batch": 1}
    F.fig_threshold_gsm8k(pd.DataFrame(), thr, spec, "tiny", tmp_path / "t.png", tmp_path / "t.pdf")
    tokens = next(a for a in drawn if len(a) >= 2 and list(a[0]) == [0.9, 1.0])
    assert list(tokens[1]) == [300.0, 150.0]  # the threshold sweep's rows, not the sub-block sweep's 500
