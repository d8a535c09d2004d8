"""A study's analysis (analysis/study*.py): its rows read with their defaults, the summary's gaps (each to its own
base, block diffusion to NTP), the fit against the study's x axis, the page and the figure; and both committed
studies remade from their committed rows, every number and every cell of their pages as committed."""
import glob
import math
from pathlib import Path

import pandas as pd
import pytest
import yaml

from analysis import study, study_figure, study_fit, study_tables
from analysis.results_io import load_csv, load_csvs
from analysis.study_frame import levers_as_text
from analysis.study_paper import PAPER_RATIOS, paper_gaps
from fastdllm_core.provenance import write_csv_atomic
from fastdllm_dag.plan import points as plan_points

ROOT = Path(__file__).resolve().parents[1]
# the studies' outputs as the two analyses before this one wrote them (main 322764e): the numbers a remade report
# must keep
BEFORE = ROOT / "tests" / "data" / "studies_before"

COLUMNS = {"gsm8k": {"task": "synth_arith", "metric": "exact_match_strict"},
           "humaneval_base": {"task": "synth_code", "metric": "pass@1_base"}}
POINTS = {"accuracy": "bd_t1", "speed": "bd_t09"}


def _rows(base, model, mode, values, point, seed=0, budget=1, params=10**6, tpf=None, **more):
    """Accuracy rows of one snapshot (``model`` "base": the base's own), one per column of ``values``."""
    lever = f".{more['lever']}-{more['lever_value']}" if more.get("lever") else ""
    name = f"base.{base}" if model == "base" else f"{base}.{model}{lever}.s{seed}.x{budget}"
    fields = dict(dict(snapshot=name, model=name, model_group=model, mode=mode, base=base, size=base, lever="",
                       lever_value="", size_params=params, budget=0 if model == "base" else budget,
                       budget_tokens=0 if model == "base" else params // 4 * budget, n_params=params,
                       train_seed="" if model == "base" else seed, n=256, status="ok", point=point, nfe=7), **more)
    return [dict(fields, task=COLUMNS[c]["task"], metric=COLUMNS[c]["metric"], value=v, total_tokens=tokens,
                 tokens_per_forward=(tpf or {}).get(c, 1.0)) for (c, v), tokens in zip(values.items(), (300, 100))]


def _bases(**bases) -> pd.DataFrame:
    """Base rows ``name=(params, {column: value})``."""
    return pd.DataFrame([r for b, (params, values) in bases.items()
                         for r in _rows(b, "base", "ar", values, "ar", params=params)])


NO_SPEED, NO_METRICS = load_csvs([], study.SPEED_COLUMNS), load_csvs([], study.METRICS_COLUMNS)


def test_rows_written_before_the_base_fields_are_read_with_their_defaults(tmp_path):
    old = pd.DataFrame([dict(snapshot="w128.ntp.s0.x1", size="w128", size_params=10, budget=1, task="t")])
    new = pd.DataFrame([dict(snapshot="p4.ntp.s0.x1", base="p4", size="w128", size_params=10, pretrain=4,
                             pretrain_tokens=400, lever="lr", lever_value=0.001, budget=1, task="t")])
    paths = [tmp_path / "old.csv", tmp_path / "new.csv"]
    for df, p in zip((old, new), paths):
        df.to_csv(p, index=False)
    rows = study.read_rows(paths, pretrain_tokens=100).set_index("snapshot")
    assert rows.loc["w128.ntp.s0.x1", ["base", "pretrain", "pretrain_tokens", "lever"]].tolist() == ["w128", 1, 100, ""]
    assert rows.loc["p4.ntp.s0.x1", ["base", "pretrain", "pretrain_tokens", "lever_value"]].tolist() == [
        "p4", 4, 400, "0.001"]
    with pytest.raises(ValueError, match="without base or size"):
        study.with_defaults(pd.DataFrame([dict(snapshot="x.s0.x1", budget=1)]), 100)


def test_fit_recovers_a_line_and_where_it_reaches_zero():
    x = [6.0, 6.5, 7.0, 7.5]
    y = [-20 + 4 * (v - 6) for v in x]  # reaches zero at 10^11
    f = study_fit.fit_line(x, y, [1.0] * 4)
    assert f["slope"] == pytest.approx(4) and f["x0"] == pytest.approx(11)
    assert f["x0_low"] < 11 < f["x0_high"] and f["slope_low"] < 4 < f["slope_high"]
    # a slope not resolved from zero: no bounded crossing
    g = study_fit.fit_line([6.0, 7.0], [-10.0, -9.0], [3.0, 3.0])
    assert math.isnan(g["x0_low"]) and g["slope_low"] < 0 < g["slope_high"]


def test_summary_gaps_verdicts_and_speed_against_one_base(tmp_path):
    """The budget study's shape: one base, budgets along the x axis (adaptation tokens per parameter)."""
    acc = pd.DataFrame(
        _rows("d", "bd", "bd", {"gsm8k": 30.0, "humaneval_base": 60.0}, "bd_t1", params=500)
        + _rows("d", "bd", "bd", {"gsm8k": 34.0, "humaneval_base": 62.0}, "bd_t1", seed=1, params=500)
        + _rows("d", "bd", "bd", {"gsm8k": 29.0, "humaneval_base": 60.0}, "bd_t09", params=500,
                tpf={"gsm8k": 1.5, "humaneval_base": 3.0})
        + _rows("d", "bd", "bd", {"gsm8k": 33.0, "humaneval_base": 61.0}, "bd_t09", seed=1, params=500,
                tpf={"gsm8k": 2.5, "humaneval_base": 1.0})
        + _rows("d", "ntp", "ar", {"gsm8k": 60.0, "humaneval_base": 61.0}, "ar", params=500))
    bases = _bases(d=(500, {"gsm8k": 62.0, "humaneval_base": 61.0}))
    speed = pd.DataFrame([dict(side=side, snapshot=s, speedup_vs_main_ar=x)
                          for s, x in (("d.bd.s0.x1", 1.5), ("d.bd.s1.x1", 1.7), ("d.ntp.s0.x1", 1.0))
                          for side in ("snapshot", "ar_base")])
    metrics = pd.DataFrame([dict(snapshot=f"d.{g}.s0.x1", step=10, passes=0.5, loss=1.0) for g in ("bd", "ntp")])
    s = study.summarize(acc, speed, metrics, bases, COLUMNS, POINTS)
    bd = s[(s["model"] == "bd") & (s["quantity"] == "accuracy")].set_index("column")
    assert bd.loc["gsm8k", "value"] == pytest.approx(32.0) and bd.loc["gsm8k", "seeds"] == 2
    assert bd.loc["gsm8k", "difference"] == pytest.approx(-30.0) and bd.loc["gsm8k", "verdict"] == "below"
    assert bd.loc["humaneval_base", "verdict"] == "within noise"
    assert bd.loc["avg", "value"] == pytest.approx(46.5) and bd.loc["avg", "ref_value"] == pytest.approx(61.5)
    assert bd.loc["avg", "tokens_per_param"] == pytest.approx(125 / 500)
    # tokens over each sequence's forwards: the rows' tokens / tokens_per_forward, never over nfe (batched)
    tpf = s[(s["model"] == "bd") & (s["quantity"] == "tokens_per_forward")]["value"].iloc[0]
    assert tpf == pytest.approx((300 + 100) * 2 / ((300 / 1.5 + 100 / 3.0) + (300 / 2.5 + 100 / 1.0)))
    fast = s[(s["model"] == "bd") & (s["quantity"] == "speedup_b1")].iloc[0]
    assert (fast["value"], fast["ci_low"], fast["ci_high"]) == pytest.approx((1.6, 1.5, 1.7))
    assert set(s[s["model"] == "ntp"]["quantity"]) == {"accuracy", "speedup_b1"}
    text = study_tables.markdown(s, study_fit.fit(s, "adapt"), [], 0.9, "provenance", x="adapt")
    assert "| bd | 1x | 0.25 | 0.50 | 1.000 | -15.0 ± " in text and "1.60x" in text and "paper 1.5B 2.05" in text
    assert "| base |" not in text.split("## Gaps")[1]  # one base: no base column in the gap tables
    # the page from the summary's CSV read back (text columns, empty levers as NaN) is the same page
    write_csv_atomic(tmp_path / "summary.csv", s.to_dict("records"))
    back = load_csv(tmp_path / "summary.csv")
    assert study_tables.markdown(back, study_fit.fit(back, "adapt"), [], 0.9, "provenance", x="adapt") == text
    # one colour per series, the same in every panel
    assert study_figure.series_colours(s, "adapt") == {("d", "bd", "", ""): "C0", ("d", "ntp", "", ""): "C1"}


def test_summary_gaps_are_to_each_bases_own_and_the_fit_follows():
    """The scale study's shape: a base per size, sizes along the x axis (parameters)."""
    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}),
                   b=(10**7, {"gsm8k": 70.0, "humaneval_base": 90.0}))
    acc = pd.DataFrame(
        _rows("a", "bd", "bd", {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1")
        + _rows("a", "bd", "bd", {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t09")
        + _rows("b", "bd", "bd", {"gsm8k": 62.0, "humaneval_base": 90.0}, "bd_t1", params=10**7)
        + _rows("b", "bd", "bd", {"gsm8k": 61.0, "humaneval_base": 90.0}, "bd_t09", params=10**7))
    s = study.summarize(acc, NO_SPEED, NO_METRICS, bases, COLUMNS, POINTS)
    gap = s[(s["quantity"] == "accuracy")].set_index(["base", "column"])
    assert gap.loc[("a", "gsm8k"), "difference"] == pytest.approx(-30.0)  # against base a (60), not b
    assert gap.loc[("b", "gsm8k"), "difference"] == pytest.approx(-8.0)
    assert gap.loc[("a", "gsm8k"), "verdict"] == "below"
    assert gap.loc[("b", "humaneval_base"), "verdict"] == "within noise"
    assert s[s["quantity"] == "base"].set_index(["base", "column"]).loc[("b", "avg"), "value"] == pytest.approx(80.0)
    fits = study_fit.fit(s, "params").set_index("column")
    assert fits.loc["gsm8k", "slope"] == pytest.approx(22.0) and fits.loc["gsm8k", "points"] == 2
    assert fits.loc["gsm8k", "along"] == "a b" and study_fit.fit(s, "adapt").empty  # one budget: nothing along it
    text = study_tables.markdown(s, study_fit.fit(s, "params"), ["c.bd.s0.x1"], 0.9, "provenance")
    assert "| bd | a | 1.00M | 1x | 0.25 |" in text and "Planned but not yet run (1): c.bd.s0.x1" in text
    assert "recipe 1.5B avg +0.7" in text  # the paper's Table 1 gap, labelled as the paper's


def test_a_gap_that_narrows_beyond_noise_is_given_where_it_reaches_zero():
    sizes = {"a": (10**6, -20.0), "b": (10**7, -10.0), "c": (10**8, -5.0)}
    bases = _bases(**{k: (p, {"gsm8k": 50.0, "humaneval_base": 50.0}) for k, (p, _) in sizes.items()})
    acc = pd.DataFrame([r for k, (p, gap) in sizes.items()
                        for r in _rows(k, "bd", "bd", {"gsm8k": 50.0 + gap, "humaneval_base": 50.0}, "bd_t1",
                                       params=p)])
    f = study_fit.fit(study.summarize(acc, NO_SPEED, NO_METRICS, bases, COLUMNS, POINTS), "params")
    f = f[(f["quantity"] == "accuracy") & (f["column"] == "gsm8k")].iloc[0]
    assert f["slope"] == pytest.approx(7.5, rel=0.2) and f["slope_low"] > 0
    assert f["verdict"].startswith("narrows with size beyond noise; the line reaches zero at ")
    assert f["x_at_zero"] == pytest.approx(10 ** f["x0"]) and 1e8 < f["x_at_zero"] < 1e11
    no = study_fit.fit(study.summarize(acc, NO_SPEED, NO_METRICS, bases, COLUMNS, POINTS), "params")
    assert no[no["column"] == "humaneval_base"]["verdict"].str.startswith("no gap to close").all()


def test_block_diffusion_is_also_set_against_ntp_of_its_base_and_budget(tmp_path):
    """Each base's recipe minus that base's NTP arm at the same budget (not the base, not another base's NTP); its
    fit has its own rows, and the page and the figure show it."""
    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}),
                   b=(10**7, {"gsm8k": 40.0, "humaneval_base": 60.0}))
    acc = pd.DataFrame(
        _rows("a", "bd", "bd", {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1")
        + _rows("a", "ntp", "ar", {"gsm8k": 62.0, "humaneval_base": 80.0}, "ar")
        + _rows("b", "bd", "bd", {"gsm8k": 50.0, "humaneval_base": 60.0}, "bd_t1", params=10**7)
        + _rows("b", "ntp", "ar", {"gsm8k": 70.0, "humaneval_base": 61.0}, "ar", params=10**7)
        + _rows("b", "bd", "bd", {"gsm8k": 10.0, "humaneval_base": 10.0}, "bd_t1", params=10**7, lever="lr",
                lever_value="0.1"))
    s = study.summarize(acc, NO_SPEED, NO_METRICS, bases, COLUMNS, POINTS)
    vs = s[s["quantity"] == "accuracy_vs_ntp"].set_index(["base", "column"])
    assert set(vs["model"]) == {"bd"} and set(vs["lever"]) == {""}  # no NTP arm with that lever: none for it
    assert vs.loc[("a", "gsm8k"), "difference"] == pytest.approx(-32.0)
    assert vs.loc[("b", "gsm8k"), "difference"] == pytest.approx(-20.0)  # not +10 (its base) nor -12 (a's NTP)
    assert vs.loc[("b", "avg"), "difference"] == pytest.approx((-20.0 - 1.0) / 2)
    assert vs.loc[("b", "gsm8k"), "verdict"] == "below"
    fits = study_fit.fit(s, "params").set_index(["quantity", "model", "column"])
    assert fits.loc[("accuracy_vs_ntp", "bd", "gsm8k"), "slope"] == pytest.approx(12.0)
    assert fits.loc[("accuracy", "bd", "gsm8k"), "slope"] == pytest.approx(40.0)
    text = study_tables.markdown(s, study_fit.fit(s, "params"), [], 0.9, "provenance")
    assert "| bd | b | 10.00M | 1x | 0.25 | -10.5 ± " in text  # Avg., then GSM8K -20.0
    assert "| bd [lr = 0.1] | b | 10.00M | 1x | 0.25 | n/a | n/a | -40.0 ± " in text
    assert "1.5B avg +0.7" in text and "7B humaneval_base +11.0" in text  # Fast-dLLM v2 minus Nemo-FT, the paper's
    study_figure.figure(s, study_fit.fit(s, "params"), tmp_path / "f.png", tmp_path / "f.pdf", "params", 0.9, "footer")
    assert (tmp_path / "f.png").stat().st_size > 0


def test_models_are_named_by_their_labels_and_the_csvs_keep_the_keys(tmp_path, monkeypatch):
    """The page's tables and the figure's legends name a model by its label; the page says which key is which."""
    from analysis import plotting

    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}),
                   b=(10**7, {"gsm8k": 40.0, "humaneval_base": 60.0}))
    acc = pd.DataFrame(
        _rows("a", "bd", "bd", {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1")
        + _rows("a", "ntp", "ar", {"gsm8k": 62.0, "humaneval_base": 80.0}, "ar")
        + _rows("b", "bd", "bd", {"gsm8k": 50.0, "humaneval_base": 60.0}, "bd_t1", params=10**7))
    s = study.summarize(acc, NO_SPEED, NO_METRICS, bases, COLUMNS, POINTS)
    labels = {"bd": "The recipe", "ntp": "NTP"}
    text = study_tables.markdown(s, study_fit.fit(s, "params"), [], 0.9, "provenance", labels)
    assert "| The recipe | b | 10.00M |" in text and "| bd |" not in text
    assert "config key: `bd` = The recipe" in text  # `ntp` is its own label: not listed
    figures = []
    monkeypatch.setattr(plotting, "save", lambda fig, png, pdf: figures.append(fig))
    study_figure.figure(s, study_fit.fit(s, "params"), tmp_path / "f.png", tmp_path / "f.pdf", "params", 0.9,
                        "footer", labels)
    legends = {t.get_text() for legend in figures[0].legends for t in legend.get_texts()}
    assert {"The recipe 1x", "NTP 1x"} <= legends and not any(t.startswith("bd ") for t in legends)
    assert "paper: Fast-dLLM v2 minus Qwen2.5-Nemo-FT (Table 1, real benchmarks)" in legends


def test_one_base_has_no_fit_and_still_draws(tmp_path):
    """Rows of one size so far and no speed or training rows (load_csvs of no files): no fit, a page and a figure."""
    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}))
    acc = pd.DataFrame(_rows("a", "bd", "bd", {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1"))
    s = study.summarize(acc, NO_SPEED, NO_METRICS, bases, COLUMNS, POINTS)
    fits = study_fit.fit(s, "params")
    assert fits.empty and list(fits.columns) == study_fit.FIT_COLUMNS
    assert "| bd | 1x | 0.25 |" in study_tables.markdown(s, fits, [], 0.9, "provenance")
    study_figure.figure(s, fits, tmp_path / "f.png", tmp_path / "f.pdf", "params", 0.9, "footer")
    assert (tmp_path / "f.png").stat().st_size > 0


def test_a_series_keeps_its_colour_in_every_panel():
    """A panel that lacks a series (tokens per forward has no NTP rows) must not hand its colour to the next one."""
    rows = [dict(quantity=q, base="a", model=m, lever="", lever_value="", budget=b) for q, m, b in
            [("base", "base", 0), ("accuracy", "bd", 1), ("accuracy", "ntp", 1), ("accuracy", "bd", 4),
             ("accuracy", "ntp", 4), ("tokens_per_forward", "bd", 1), ("tokens_per_forward", "bd", 4)]]
    colour = study_figure.series_colours(pd.DataFrame(rows), "params")
    assert colour == {("bd", "", "", 1): "C0", ("bd", "", "", 4): "C1", ("ntp", "", "", 1): "C2",
                      ("ntp", "", "", 4): "C3"}


def test_paper_gaps_are_table_1s():
    gaps = {(p["size"], p["column"]): p["gap"] for p in paper_gaps("recipe")}
    assert gaps[("1.5B", "avg")] == pytest.approx(45.0 - 44.3)
    assert gaps[("7B", "gsm8k")] == pytest.approx(83.7 - 71.4)
    assert {p["size"] for p in paper_gaps("ntp")} == {"1.5B", "7B"}
    vs_ntp = {(p["size"], p["column"]): p["gap"] for p in paper_gaps("recipe_vs_ntp")}
    assert vs_ntp[("7B", "humaneval_base")] == pytest.approx(63.4 - 52.4)  # Fast-dLLM v2 minus Nemo-FT
    assert PAPER_RATIOS["1.5B"] == pytest.approx(2.045, abs=1e-3) and PAPER_RATIOS["7B"] == pytest.approx(0.172, 1e-2)


def test_a_pretraining_study_is_reported_against_pretraining_tokens(tmp_path):
    """The third study's shape, through the rule's entry point: bases of one size pretrained 1x and 4x (p1, p4),
    the gap fitted along the bases against pretraining tokens per parameter; every output written."""
    points = tmp_path / "points"
    points.mkdir()
    for b, pretrain, bd_gsm8k in (("p1", 1, 30.0), ("p4", 4, 45.0)):
        extra = dict(pretrain=pretrain, pretrain_tokens=1000 * pretrain)
        pd.DataFrame(_rows(b, "base", "ar", {"gsm8k": 60.0, "humaneval_base": 80.0}, "ar", params=100, **extra)
                     ).to_csv(points / f"base.{b}.accuracy.csv", index=False)
        pd.DataFrame(_rows(b, "bd", "bd", {"gsm8k": bd_gsm8k, "humaneval_base": 80.0}, "bd_t1", params=100,
                           **extra)).to_csv(points / f"{b}.bd.s0.x1.accuracy.csv", index=False)
    out = {k: tmp_path / f"out.{k}" for k in study.OUTPUTS}
    text = study.report([points / "p1.bd.s0.x1.accuracy.csv", points / "p4.bd.s0.x1.accuracy.csv"], [], [],
                        sorted(points.glob("base.*")), name="pretrain_study", x="pretrain", title="Pretraining",
                        describe="bases p1, p4", missing=["p16.bd.s0.x1"], columns=COLUMNS, points=POINTS,
                        labels={}, pretrain_tokens=1000, threshold=0.9, **out)
    assert all(p.stat().st_size > 0 for p in out.values())
    fit = pd.read_csv(out["fit"]).set_index(["quantity", "column"]).loc[("accuracy", "gsm8k")]
    assert fit["slope"] == pytest.approx(15.0 / math.log10(4)) and fit["along"] == "p1 p4"
    assert "| bd | p4 | 40.00 | 1x | 0.25 | n/a | n/a |" in text  # base and pretraining shown, parameters not
    assert "| model | budget | gap to | column | bases | points per decade of pretraining tokens per parameter" in text
    assert "Qwen2.5 1.5B 11,688" in text and "not from the paper" in text
    assert out["md"].read_text().startswith("# Pretraining\n\n") and "rows under " + str(points) in text


# --------------------------------------------------------------------------- the committed studies, remade
def _committed(name: str, default_tokens=1_228_800) -> pd.DataFrame:
    """The study's summary from its committed rows (the old rows' pretraining: the default base's tokens)."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    points = ROOT / "results" / name / "points"
    snaps = sorted(p.name[:-len(".accuracy.csv")] for p in points.glob("*.accuracy.csv")
                   if not p.name.startswith("base."))
    read = {kind: study.read_rows([points / f"{s}.{kind}.csv" for s in snaps], default_tokens)
            for kind in ("accuracy", "speed", "metrics")}
    bases = study.read_rows(sorted(glob.glob(str(points / "base.*.accuracy.csv"))), default_tokens)
    columns = {c: config["columns"][c] for c in config["tables"]["table2"]["columns"] if "task" in config["columns"][c]}
    return study.summarize(read["accuracy"], read["speed"], read["metrics"], bases, columns,
                           {"accuracy": plan_points.point_name("bd", plan_points.base_decode(config)),
                            "speed": plan_points.point_name("bd", plan_points.speed_decode(config))})


def _equal_cells(old: pd.DataFrame, new: pd.DataFrame, keys: list[str]) -> None:
    """Every cell of ``old`` equal in ``new`` (matched on ``keys``; numbers to 1e-9 relative)."""
    old, new = (levers_as_text(df).set_index(keys) for df in (old, new))
    assert old.index.isin(new.index).all()
    new = new.loc[old.index, list(old.columns)]
    for c in old.columns:
        a, b = pd.to_numeric(old[c], errors="coerce"), pd.to_numeric(new[c], errors="coerce")
        if a.notna().any():
            assert ((a - b).abs() <= 1e-9 * a.abs() + 1e-12).where(a.notna(), b.isna()).all(), c
        else:
            assert (old[c].fillna("").astype(str) == new[c].fillna("").astype(str)).all(), c


def _tables(md: str) -> list[list[dict]]:
    """The page's tables, each as its rows ``{header: cell}``."""
    blocks, cur = [], []
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            cur.append([c.strip() for c in line.strip("|").split("|")])
        elif cur:
            blocks.append([dict(zip(cur[0], r)) for r in cur[2:]])
            cur = []
    return blocks


def _cells_as_before(new: dict, head: str) -> str:
    """A new page's cell under an old page's heading (the headings unified, the scale page's budget split)."""
    if head == "budget (tokens / param)":
        return f"{new['budget']} ({new['tokens / param']})"
    return new[{"size": "base", "Avg. gap to AR base": "Avg. gap to its base",
                "batch-1 speed / AR": "batch-1 speed / its base"}.get(head, head)]


@pytest.mark.parametrize("name, x, labels, tables", [("scale_study", "params", True, [0, 1, 2, 3]),
                                                     ("budget_study", "adapt", False, [1])])
def test_committed_study_is_remade_from_its_rows(name, x, labels, tables):
    """The summary (and the scale study's fit) from the committed rows: every number as before (studies_before);
    the page's tables: every committed cell in its place (:func:`_cells_as_before`)."""
    s = _committed(name)
    summary = pd.read_csv(BEFORE / f"{name}.csv")
    keys = ["size", "model", "budget", "quantity", "column"] if name == "scale_study" else [
        "model", "lever", "lever_value", "budget", "quantity", "column"]
    _equal_cells(summary, s, keys)
    fits = study_fit.fit(s, x)
    if name == "scale_study":
        committed = pd.read_csv(BEFORE / "scale_fit.csv")
        _equal_cells(committed, fits.rename(columns={"along": "sizes", "x_at_zero": "params_at_zero"}),
                     ["quantity", "model", "budget", "column"])
    names = {"bd_pad_cm": "Fast-dLLM v2 recipe (tiny)", "ntp": "NTP fine-tuned (tiny)"} if labels else {}
    page = _tables(study_tables.markdown(s, fits, [], 0.9, "", names, x))
    for old, new in zip(_tables((BEFORE / f"{name}.md").read_text()), [page[i] for i in tables]):
        assert len(old) == len(new)
        assert [{h: _cells_as_before(n, h) for h in o} for o, n in zip(old, new)] == old


def test_a_line_that_barely_rises_reaches_zero_at_infinity():
    """Two points of a nearly flat gap put the zero crossing beyond a float's range: named inf, not an overflow
    (the CI end-to-end run's two budgets met it)."""
    line = dict(slope=1e-6, slope_low=1e-7, slope_high=2e-6, x0=5e5, x0_low=4e5, x0_high=float("nan"))
    assert study_fit._pow10(line["x0"]) == float("inf") and study_fit._pow10(2.0) == 100.0
    text = study_fit._fit_verdict(line, -1.0, study_fit.axis("adapt"))
    assert "reaches zero at inf" in text and "between inf and nan" in text
