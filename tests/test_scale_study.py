"""The scale study (workflow/lib/scale_study.py, rule scale_study): its sizes and parameter counts, the bases' build
settings, its chains and snapshots from the config, the named errors before any training, the committed rows that a
run keeps, and the summary's gaps (each against its own size's base) and the fit against log parameters.  The
rules run end to end in tests/test_workflow_e2e.py::test_end_to_end_ci_config."""
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "lib"))
import plan  # noqa: E402
import plan_scale  # noqa: E402
from analysis import scale_study as analysis  # noqa: E402
from analysis.results_io import load_csvs  # noqa: E402


def default_config(results_dir="/nonexistent", **study):
    """The default config (its study changed by ``study``), its rows under ``results_dir`` (none by default: what
    a fresh run would make, whatever this checkout holds)."""
    c = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    c["scale_study"].update(study)
    c["results_dir"] = str(results_dir)
    c["models"] = plan.expand_seeds(c)["models"]
    return plan_scale.resolve(c)


@pytest.mark.parametrize("shape", [
    {"hidden_size": 32, "layers": 2, "heads": 2, "kv_heads": 1, "intermediate_size": 64},
    {"hidden_size": 96, "layers": 1, "heads": 3, "kv_heads": 3, "intermediate_size": 40},
])
def test_parameter_count_is_the_models(shape):
    from fastdllm_core.tiny import tiny_model, tiny_qwen2_config

    model = tiny_model(tiny_qwen2_config(vocab_size=320, **shape))
    assert plan_scale.n_params(shape, 320) == sum(p.numel() for p in model.parameters())


def test_default_study_sizes_bases_and_chains():
    c = default_config()
    p = plan_scale.params_of(c)
    assert list(p) == ["w128", "w192", "w256", "w384"]
    assert p["w128"] == 886912  # the released default base's count (tests/test_released_base.py: its files)
    assert p["w384"] / p["w128"] >= 12  # the span
    # the same adaptation tokens per parameter at every size (to the rounding of one step)
    per_param = {s: plan_scale.budget_tokens(c, s) / n for s, n in p.items()}
    assert max(per_param.values()) == pytest.approx(min(per_param.values()))
    assert per_param["w128"] == pytest.approx(200 * 4 * 256 / 886912)
    chains = plan_scale.chains(c)
    seeds = {size: sorted({ch["seed"] for ch in chains.values() if ch["size"] == size}) for size in p}
    assert seeds == {"w128": [0, 1, 2], "w192": [0], "w256": [0], "w384": [0, 1, 2]}
    assert all(ch["budgets"] == [1, 4] and ch["model"] in ("bd_pad_cm", "ntp") for ch in chains.values())
    snaps = plan_scale.snapshots(c)
    assert snaps["w384.bd_pad_cm.s0.x4"]["previous"] == "w384.bd_pad_cm.s0.x1"
    assert abs(snaps["w384.bd_pad_cm.s0.x4"]["tokens"] - 4 * snaps["w384.bd_pad_cm.s0.x1"]["tokens"]) <= 4 * 1024
    assert plan_scale.steps(c, chains["w192.ntp.s0"], 1) == round(204800 * p["w192"] / p["w128"] / 1024)
    # the first runs: budget 1 before 4, seed 0 of every size before more seeds, the largest size first
    prio = {k: plan_scale.priority(c, v) for k, v in snaps.items()}
    assert prio["w384.bd_pad_cm.s0.x1"] > prio["w128.bd_pad_cm.s0.x1"] > prio["w384.bd_pad_cm.s1.x1"]
    assert prio["w128.ntp.s2.x1"] > prio["w384.bd_pad_cm.s0.x4"]


def test_base_and_snapshot_rows_carry_the_same_fields():
    """A base's accuracy rows and a snapshot's carry one set of study fields (the report groups on them); the
    committed base rows carry the values plan_scale gives."""
    c = default_config()
    snaps, chains = plan_scale.snapshots(c), plan_scale.chains(c)
    snap = plan_scale.row_fields(c, "w192.ntp.s0.x1", snaps["w192.ntp.s0.x1"], chains["w192.ntp.s0"])
    base = plan_scale.base_row_fields(c, "w192")
    assert list(base) == list(snap) and base["size_params"] == snap["size_params"] and base["budget"] == 0
    committed = pd.read_csv(ROOT / "results" / "scale_study" / "points" / "base.w192.accuracy.csv", dtype=str)
    assert {k: str(v) for k, v in base.items()} == committed.fillna("")[list(base)].iloc[0].to_dict()


def test_a_base_is_the_default_base_build_with_its_shape_and_a_scaled_rate():
    c = default_config()
    pre = plan_scale.base_train_config(c, "w256", "pretrain", ["p.jsonl"], "tiny")
    sft = plan_scale.base_train_config(c, "w256", "sft", ["s.jsonl"], "run/final")
    default_pre = c["scale_study"]["stages"]["pretrain"]
    assert pre["recipe"] == default_pre["recipe"] == "ar_pretrain" and sft["recipe"] == "sft"
    assert pre["model"]["tiny"] == plan_scale.sizes(c)["w256"] and pre["model"]["init"] == "tiny"
    assert pre["optim"]["lr"] == pytest.approx(default_pre["optim"]["lr"] * 128 / 256)
    assert pre["optim"]["max_steps"] == default_pre["optim"]["max_steps"]
    assert sft["optim"]["lr"] == pytest.approx(c["scale_study"]["stages"]["sft"]["optim"]["lr"] / 2)
    assert sft["model"]["init"] == "run/final" and sft["data"]["train_files"] == ["s.jsonl"]
    assert plan_scale.base_processes(c, "pretrain") == 2
    # the reference size is the default's released base, never rebuilt by the study
    assert plan_scale.base_source(c, "w128", "S") == "results/released/tiny_ar_base"
    assert "w128" not in plan_scale.built_sizes(c)


def test_committed_rows_are_kept_and_released_bases_loaded(tmp_path):
    c = default_config(tmp_path, released_dir=str(tmp_path / "released"))
    snap = "w192.ntp.s0.x1"
    assert snap in plan_scale.todo(c) and "w192" in plan_scale.built_sizes(c)
    for f in plan_scale.point_files(c, snap).values():
        Path(f).parent.mkdir(parents=True, exist_ok=True)
        Path(f).write_text("x\n")
    assert snap not in plan_scale.todo(c) and "w192.ntp.s0.x4" in plan_scale.todo(c)
    (tmp_path / "released" / "scale_w192").mkdir(parents=True)
    (tmp_path / "released" / "scale_w192" / "manifest.json").write_text("{}")
    assert "w192" not in plan_scale.built_sizes(c)
    assert plan_scale.base_source(c, "w192", "S") == str(tmp_path / "released" / "scale_w192")
    assert "w192" in plan_scale.built_sizes(dict(c, build_released=True))
    # a run of some sizes: the others' chains are not made here, and their bases are not built
    mine = default_config(tmp_path / "other", run_sizes=["w128", "w192"], released_dir=str(tmp_path / "elsewhere"))
    assert {plan_scale.chains(mine)[s["chain"]]["size"] for s in plan_scale.todo(mine).values()} == {"w128", "w192"}
    assert plan_scale.built_sizes(mine) == ["w192"]
    # run_sizes [] makes nothing: the report of the committed rows only
    none = default_config(tmp_path / "none", run_sizes=[], released_dir=str(tmp_path / "elsewhere"))
    assert plan_scale.todo(none) == {} and plan_scale.todo_bases(none) == [] and plan_scale.built_sizes(none) == []
    assert plan_scale.snapshots(none) == plan_scale.snapshots(c)


def _bad(edit):
    c = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    edit(c["scale_study"])
    return c


@pytest.mark.parametrize("edit, words", [
    (lambda s: s["sizes"][1].update(heads=5), "heads=5 does not divide hidden_size=192"),
    (lambda s: s["sizes"][1].update(kv_heads=4), "kv_heads=4 does not divide heads=6"),
    (lambda s: s["sizes"][1].pop("layers"), "w192: missing ['layers']"),
    (lambda s: s["sizes"].pop(0), "must be the default base's shape"),
    (lambda s: s["sizes"].reverse(), "must be the default base's shape"),
    (lambda s: s.update(sizes=[s["sizes"][0], s["sizes"][2], s["sizes"][1]]), "must grow in parameters"),
    (lambda s: s["sizes"][2].update(name="w192"), "names must be unique"),
    (lambda s: s.update(run_sizes=["w128", "w999"]), "unknown size 'w999'"),
    (lambda s: s.update(run_budgets=[1, 2]), "run_budgets: unknown value 2; the study's: [1, 4]"),
    (lambda s: s.update(run_seeds=["0", "x"]), "run_seeds: unknown value 'x'; the study's: [0, 1, 2]"),
    (lambda s: s.update(models=["bd_pad_cm", "ar_base"]), "'ar_base' is not a model adapted here"),
    (lambda s: s["train_rate"].pop("ntp"), "no rate for 'ntp'"),
    (lambda s: s["train_rate"].pop("base"), "no rate for 'base'"),
])
def test_bad_study_is_refused_naming_the_value(edit, words):
    with pytest.raises(ValueError, match="scale_study") as err:
        plan_scale.check(_bad(edit))
    assert words in str(err.value)


def test_a_study_over_its_ceiling_is_refused_before_training():
    c = default_config()  # the whole study on 2 CPU cores: far over a working day
    est = plan_scale.estimate_hours(c)
    assert est["wall"] > c["scale_study"]["ceiling_hours"]
    with pytest.raises(ValueError, match=r"estimated at \d+\.\d h on 2 cores .* over scale_study.ceiling_hours=8"):
        plan_scale.check_ceiling(c)
    small = default_config(run_sizes=["w128", "w192"], budgets=[1])
    assert plan_scale.check_ceiling(small)["wall"] < 1
    # the largest size, seed 0 at 1x (--config's strings read as numbers): within the ceiling
    one = default_config(run_sizes=["w384"], run_budgets=["1"], run_seeds=["0"])
    assert set(plan_scale.todo(one)) == {"w384.bd_pad_cm.s0.x1", "w384.ntp.s0.x1"}
    assert plan_scale.check_ceiling(one)["wall"] < c["scale_study"]["ceiling_hours"] < est["wall"]
    assert plan_scale.snapshots(one) == plan_scale.snapshots(c)  # the chains' runs stay those of the whole study


# ------------------------------------------------------------------------------------------------- analysis
def test_fit_recovers_a_line_and_where_it_reaches_zero():
    x = [6.0, 6.5, 7.0, 7.5]
    y = [-20 + 4 * (v - 6) for v in x]  # reaches zero at 10^11
    f = analysis.fit_line(x, y, [1.0] * 4)
    assert f["slope"] == pytest.approx(4) and f["x0"] == pytest.approx(11)
    assert f["x0_low"] < 11 < f["x0_high"] and f["slope_low"] < 4 < f["slope_high"]
    # a slope not resolved from zero: no bounded crossing
    g = analysis.fit_line([6.0, 7.0], [-10.0, -9.0], [3.0, 3.0])
    assert math.isnan(g["x0_low"]) and g["slope_low"] < 0 < g["slope_high"]


COLUMNS = {"gsm8k": {"task": "synth_arith", "metric": "exact_match_strict"},
           "humaneval_base": {"task": "synth_code", "metric": "pass@1_base"}}
POINTS = {"accuracy": "bd_t1", "speed": "bd_t09"}


def _rows(size, params, model, mode, seed, values, point, base=False):
    name = f"base.{size}" if base else f"{size}.{model}.s{seed}.x1"
    return [dict(model=name, model_group="base" if base else model, mode=mode, size=size, size_params=params,
                 budget=0 if base else 1, budget_tokens=0 if base else params // 4, train_seed=seed, snapshot=name,
                 task=COLUMNS[c]["task"], metric=COLUMNS[c]["metric"], value=v, n=256, status="ok", point=point,
                 total_tokens=100, tokens_per_forward=1.0)
            for c, v in values.items()]


def _bases(**sizes) -> pd.DataFrame:
    """Base rows of each size ``name=(params, {column: value})``."""
    return pd.DataFrame([r for size, (params, values) in sizes.items()
                         for r in _rows(size, params, "", "ar", "", values, "ar", True)])


def test_summary_gaps_are_to_each_sizes_own_base_and_the_fit_follows():
    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}),
                   b=(10**7, {"gsm8k": 70.0, "humaneval_base": 90.0}))
    acc = pd.DataFrame(
        _rows("a", 10**6, "bd", "bd", 0, {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1")
        + _rows("a", 10**6, "bd", "bd", 0, {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t09")
        + _rows("b", 10**7, "bd", "bd", 0, {"gsm8k": 62.0, "humaneval_base": 90.0}, "bd_t1")
        + _rows("b", 10**7, "bd", "bd", 0, {"gsm8k": 61.0, "humaneval_base": 90.0}, "bd_t09"))
    empty = pd.DataFrame(columns=["side", "snapshot", "speedup_vs_main_ar", "budget"])
    metrics = pd.DataFrame(columns=["snapshot", "step", "passes", "loss", "budget"])
    s = analysis.summarize(acc, empty, metrics, bases, COLUMNS, POINTS)
    gap = s[(s["quantity"] == "accuracy")].set_index(["size", "column"])
    assert gap.loc[("a", "gsm8k"), "difference"] == pytest.approx(-30.0)  # against base a (60), not b
    assert gap.loc[("b", "gsm8k"), "difference"] == pytest.approx(-8.0)
    assert (gap.loc[("a", "gsm8k"), "verdict"] == "below"
            and gap.loc[("b", "humaneval_base"), "verdict"] == "within noise")
    base = s[s["quantity"] == "base"].set_index(["size", "column"])
    assert base.loc[("b", "avg"), "value"] == pytest.approx(80.0)
    fits = analysis.fit(s).set_index("column")
    assert fits.loc["gsm8k", "slope"] == pytest.approx(22.0) and fits.loc["gsm8k", "points"] == 2
    text = analysis.markdown(s, analysis.fit(s), ["c.bd.s0.x1"], 0.9, "provenance")
    assert "| a | 1.00M |" in text and "Planned but not yet run (1): c.bd.s0.x1" in text
    assert "paper" in text and "recipe 1.5B avg +0.7" in text  # the paper's Table 1 gap, labelled as the paper's


def test_block_diffusion_is_also_set_against_ntp_of_its_size_and_budget(tmp_path):
    """Each size's recipe minus that size's NTP arm at the same budget (not the base, not another size's NTP);
    its fit has its own rows, and the page and the figure show it."""
    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}),
                   b=(10**7, {"gsm8k": 40.0, "humaneval_base": 60.0}))
    acc = pd.DataFrame(
        _rows("a", 10**6, "bd", "bd", 0, {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1")
        + _rows("a", 10**6, "ntp", "ar", 0, {"gsm8k": 62.0, "humaneval_base": 80.0}, "ar")
        + _rows("b", 10**7, "bd", "bd", 0, {"gsm8k": 50.0, "humaneval_base": 60.0}, "bd_t1")
        + _rows("b", 10**7, "ntp", "ar", 0, {"gsm8k": 70.0, "humaneval_base": 61.0}, "ar"))
    speed, metrics = load_csvs([], analysis.SPEED_COLUMNS), load_csvs([], analysis.METRICS_COLUMNS)
    s = analysis.summarize(acc, speed, metrics, bases, COLUMNS, POINTS)
    vs = s[s["quantity"] == "accuracy_vs_ntp"].set_index(["size", "column"])
    assert set(vs["model"]) == {"bd"}  # NTP is the reference, never a row of its own
    assert vs.loc[("a", "gsm8k"), "difference"] == pytest.approx(-32.0)
    assert vs.loc[("b", "gsm8k"), "difference"] == pytest.approx(-20.0)  # not +10 (its base) nor -12 (a's NTP)
    assert vs.loc[("b", "avg"), "difference"] == pytest.approx((-20.0 - 1.0) / 2)
    assert vs.loc[("b", "gsm8k"), "verdict"] == "below"
    fits = analysis.fit(s).set_index(["quantity", "model", "column"])
    assert fits.loc[("accuracy_vs_ntp", "bd", "gsm8k"), "slope"] == pytest.approx(12.0)
    assert fits.loc[("accuracy", "bd", "gsm8k"), "slope"] == pytest.approx(40.0)
    text = analysis.markdown(s, analysis.fit(s), [], 0.9, "provenance")
    assert "| bd | b | 10.00M | 1x (0.25) | -10.5 ± " in text  # Avg., then GSM8K -20.0
    assert "1.5B avg +0.7" in text and "7B humaneval_base +11.0" in text  # Fast-dLLM v2 minus Nemo-FT, the paper's
    analysis.figure(s, analysis.fit(s), tmp_path / "f.png", tmp_path / "f.pdf", 0.9, "footer")
    assert (tmp_path / "f.png").stat().st_size > 0


def test_models_are_named_by_their_labels_and_the_csvs_keep_the_keys(tmp_path, monkeypatch):
    """The page's tables and the figure's legends name a model by its label; the page says which key is which."""
    from analysis import plotting

    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}),
                   b=(10**7, {"gsm8k": 40.0, "humaneval_base": 60.0}))
    acc = pd.DataFrame(
        _rows("a", 10**6, "bd", "bd", 0, {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1")
        + _rows("a", 10**6, "ntp", "ar", 0, {"gsm8k": 62.0, "humaneval_base": 80.0}, "ar")
        + _rows("b", 10**7, "bd", "bd", 0, {"gsm8k": 50.0, "humaneval_base": 60.0}, "bd_t1"))
    speed, metrics = load_csvs([], analysis.SPEED_COLUMNS), load_csvs([], analysis.METRICS_COLUMNS)
    s = analysis.summarize(acc, speed, metrics, bases, COLUMNS, POINTS)
    labels = {"bd": "The recipe", "ntp": "NTP"}
    text = analysis.markdown(s, analysis.fit(s), [], 0.9, "provenance", labels)
    assert "| The recipe | b | 10.00M |" in text and "| bd |" not in text
    assert "config key: `bd` = The recipe" in text  # `ntp` is its own label: not listed
    figures = []
    monkeypatch.setattr(plotting, "save", lambda fig, png, pdf: figures.append(fig))
    analysis.figure(s, analysis.fit(s), tmp_path / "f.png", tmp_path / "f.pdf", 0.9, "footer", labels)
    legends = {t.get_text() for legend in figures[0].legends for t in legend.get_texts()}
    assert {"The recipe 1x", "NTP 1x"} <= legends and not any(t.startswith("bd ") for t in legends)
    assert "paper: Fast-dLLM v2 minus Qwen2.5-Nemo-FT (Table 1, real benchmarks)" in legends


def test_one_size_has_no_fit_and_still_draws(tmp_path):
    """A study with rows of one size so far (the others not run yet) and no speed or training rows (load_csvs of no
    files): no fit, the page and the figure all the same."""
    bases = _bases(a=(10**6, {"gsm8k": 60.0, "humaneval_base": 80.0}))
    acc = pd.DataFrame(_rows("a", 10**6, "bd", "bd", 0, {"gsm8k": 30.0, "humaneval_base": 78.0}, "bd_t1"))
    speed, metrics = load_csvs([], analysis.SPEED_COLUMNS), load_csvs([], analysis.METRICS_COLUMNS)
    s = analysis.summarize(acc, speed, metrics, bases, COLUMNS, POINTS)  # no speed, training rows
    fits = analysis.fit(s)
    assert fits.empty and list(fits.columns) == analysis.FIT_COLUMNS
    assert "| bd | a |" in analysis.markdown(s, fits, [], 0.9, "provenance")
    analysis.figure(s, fits, tmp_path / "f.png", tmp_path / "f.pdf", 0.9, "footer")
    assert (tmp_path / "f.png").stat().st_size > 0


def test_a_series_keeps_its_colour_in_every_panel():
    """A panel that lacks a series (tokens per forward has no NTP rows) must not hand its colour to the next one."""
    rows = [dict(quantity=q, model=m, budget=b) for q, m, b in
            [("base", "base", 0), ("accuracy", "bd", 1), ("accuracy", "ntp", 1), ("accuracy", "bd", 4),
             ("accuracy", "ntp", 4), ("tokens_per_forward", "bd", 1), ("tokens_per_forward", "bd", 4)]]
    colour = analysis.series_colours(pd.DataFrame(rows))
    assert colour == {("bd", 1): "C0", ("bd", 4): "C1", ("ntp", 1): "C2", ("ntp", 4): "C3"}


def test_paper_gaps_are_table_1s():
    gaps = {(p["size"], p["column"]): p["gap"] for p in analysis.paper_gaps("recipe")}
    assert gaps[("1.5B", "avg")] == pytest.approx(45.0 - 44.3)
    assert gaps[("7B", "gsm8k")] == pytest.approx(83.7 - 71.4)
    assert {p["size"] for p in analysis.paper_gaps("ntp")} == {"1.5B", "7B"}
    vs_ntp = {(p["size"], p["column"]): p["gap"] for p in analysis.paper_gaps("recipe_vs_ntp")}
    assert vs_ntp[("7B", "humaneval_base")] == pytest.approx(63.4 - 52.4)  # Fast-dLLM v2 minus Nemo-FT
