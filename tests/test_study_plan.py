"""The studies' plan (workflow/fastdllm_dag/plan/study.py, study_checks.py, study_rows.py, study_specs.py; rules
workflow/rules/studies.smk): the three studies of config/config.yaml (budget, scale, pretrain) planned from the
config, the jobs of the first two equal to what the two plans they replace gave, a study that is only a config
entry planned by the real Snakefile, the named errors before any work, the committed rows a run keeps, and the
snapshot of a longer run equal to the shorter run.  The analysis of the rows: tests/test_study_analysis.py; the
rules run end to end in tests/test_workflow_e2e.py::test_end_to_end_ci_config."""
import copy
import csv
import math
import os
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file

from conftest import smk
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import study as sp
from fastdllm_dag.plan import study_checks, study_rows, study_specs

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_PARAMS = 886912  # the released default base's parameters (tests/test_released_base.py: its files)
BASE_TOKENS = 200 * 4 * 256  # the default's adaptation tokens: training.optim max_steps x batch_size x seq_len


def raw_config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def prepare(c, results_dir="/nonexistent"):
    """A config as the DAG reads it (seeds expanded, the default base's stages in every study), its rows under
    ``results_dir`` (none by default: what a fresh run would make, whatever this checkout holds)."""
    c["results_dir"] = str(results_dir)
    c["models"] = plan.expand_seeds(c)["models"]
    return sp.resolve(c)


def default_config(results_dir="/nonexistent", **edits):
    """The default config, each study of ``edits`` (``name={key: value}``) changed."""
    c = raw_config()
    for name, change in edits.items():
        c["studies"][name].update(change)
    return prepare(c, results_dir)


@pytest.fixture
def at_root(monkeypatch):
    """Relative paths (``released_dir: results/released``) read from the repository, as the DAG reads them."""
    monkeypatch.chdir(ROOT)


def job_counts(out: str, name: str) -> dict[str, int]:
    """``snakemake -n``'s job table: ``{rule: count}`` of the rules of study ``name`` (and the synthetic data)."""
    return {k: int(v) for k, v in re.findall(rf"^({name}_\w+|synthetic_data)\s+(\d+)$", out, re.M)}


def dry_run(target, tmp_path, *overlays):
    r = smk(target, "-n", "--nolock", "--cores", "1", "--configfile", "config/config.yaml", *map(str, overlays),
            "--config", f"results_dir={tmp_path / 'results'}")
    return r, r.stdout + r.stderr


# ------------------------------------------------------------------------------------------- the budget study
def test_default_study_plan():
    c = default_config()
    study_checks.check(c)
    assert sp.names(c) == ["budget", "scale", "pretrain"]
    assert list(sp.bases(c, "budget")) == ["default"] and sp.reference_base(c, "budget") == "default"
    chains = sp.chains(c, "budget")
    # every budget at seed 0, the lever, then the endpoints' other seeds (the order they run in); one base: no
    # base in the names (the rows committed under results/budget_study/points keep theirs)
    assert list(chains) == ["bd_pad_cm.s0", "ntp.s0", "bd_pad_cm.lr-2e-05.s0", "bd_pad_cm.s1", "ntp.s1",
                            "bd_pad_cm.s2", "ntp.s2"]
    snaps = sp.snapshots(c, "budget")
    assert len(snaps) == 17
    assert [(s["budget"], s["steps"], s["tokens"]) for k, s in snaps.items() if s["chain"] == "bd_pad_cm.s0"] == [
        (1, 200, 204_800), (4, 800, 819_200), (16, 3200, 3_276_800)]
    assert snaps["bd_pad_cm.s0.x16"]["previous"] == "bd_pad_cm.s0.x4" and snaps["ntp.s1.x1"]["previous"] is None
    assert [s["budget"] for s in snaps.values() if s["chain"] == "ntp.s2"] == [1, 16]
    cfg = sp.train_config(c, "budget", chains["bd_pad_cm.lr-2e-05.s0"], ["adapt.jsonl"], "the/base")
    assert cfg["optim"]["lr"] == 2e-5 and cfg["optim"]["max_steps"] == 3200 and cfg["train"]["seed"] == 0
    assert cfg["data"]["train_files"] == ["adapt.jsonl"] and cfg["recipe"] == "bd_pad_cm"
    assert cfg["model"]["init"] == "the/base"
    assert sp.train_config(c, "budget", chains["ntp.s2"], [], "b")["train"]["seed"] == 2
    assert sp.snapshots(c, "budget", chains) == snaps
    # the smallest budget first, seed 0 before further seeds
    prio = {k: sp.priority(c, "budget", chains[s["chain"]], s["budget"]) for k, s in snaps.items()}
    assert (prio["bd_pad_cm.s0.x1"], prio["ntp.s2.x1"], prio["bd_pad_cm.s0.x4"], prio["ntp.s2.x16"],
            prio["bd_pad_cm.s0.x16"]) == (50, 42, 30, 22, 10)
    # a chain's estimate at its largest budget's tokens, its job's runtime twice that (+ 10 min), per attempt
    est = 3_276_800 / c["studies"]["budget"]["train_rate"]["bd_pad_cm"] / 60
    assert sp.runtime_minutes(c, "budget", chains["bd_pad_cm.s0"], 2) == 2 * math.ceil(2 * est + 10) == 220
    text = sp.describe(c, "budget")
    assert "levers: lr = 2e-05" in text and "budgets 1x, 4x, 16x" in text and "at the ends of budgets" in text
    # the largest budget passes the paper 1.5B's tokens per parameter (3.15B tokens over 1.54B: 2.05)
    assert 3_276_800 / DEFAULT_PARAMS > 3.15e9 / 1.54e9
    # the whole study on 2 cores: within its ceiling (8 h), nothing built
    st = study_rows.load(c, "budget")
    assert st.built == [] and len(st.todo) == 17 and st.todo_bases == ["default"]
    est = study_rows.check_ceiling(c, st)
    hours = (4 * 3_276_800 / 1100 + 3 * 3_276_800 / 3800) / 3600
    assert est["bases"] == 0 and est["total"] == pytest.approx(hours) and est["wall"] == pytest.approx(hours / 2)


def test_a_batch_lever_keeps_the_tokens_and_changes_the_steps():
    c = default_config(budget={"levers": [{"name": "batch_size", "value": 16}]})
    snaps = sp.snapshots(c, "budget")
    lever = {k: s for k, s in snaps.items() if "batch_size" in k}
    assert list(lever) == ["bd_pad_cm.batch_size-16.s0.x1", "bd_pad_cm.batch_size-16.s0.x4",
                           "bd_pad_cm.batch_size-16.s0.x16"]
    assert [(s["steps"], s["tokens"]) for s in lever.values()] == [(50, 204_800), (200, 819_200), (800, 3_276_800)]
    chain = sp.chains(c, "budget")["bd_pad_cm.batch_size-16.s0"]
    o = sp.train_config(c, "budget", chain, [], "b")["optim"]
    assert (o["batch_size"], o["max_steps"], o["micro_batch_size"]) == (16, 800, 4)


@pytest.mark.parametrize("change, words", [
    (dict(levers=[{"name": "warmup", "value": 3}]), ["studies.budget.levers: unknown lever 'warmup'", "lr"]),
    (dict(levers=[{"name": "lr", "value": "fast"}]), ["chain bd_pad_cm.lr-fast.s0", "optim.lr must be a number"]),
    (dict(levers=[{"name": "mask_init", "value": "noise"}]), ["model.mask_init must be one of"]),
    (dict(models=["ar_base"]), ["studies.budget.models: 'ar_base' is not a model adapted here"]),
    (dict(train_rate={"bd_pad_cm": 1.0}), ["studies.budget.train_rate: no rate for 'ntp'"]),
])
def test_bad_budget_study_is_refused_naming_the_value(change, words):
    c = default_config(budget=change)
    with pytest.raises(ValueError) as e:
        study_checks.check(c)
    for w in words:
        assert w in str(e.value)


def test_a_budget_study_over_its_ceiling_is_refused_before_training():
    """A 64x budget: 4.3 h of one recipe job per chain, 8.1 h on 2 cores, over the study's 8 h."""
    c = default_config(budget={"budgets": [1, 64]})
    study_checks.check(c)  # the config itself is fine: the estimate is the plan job's
    st = study_rows.load(c, "budget")
    hours = (4 * 64 * BASE_TOKENS / 1100 + 3 * 64 * BASE_TOKENS / 3800) / 3600
    assert sp.estimate_hours(c, "budget", st.built, st.todo)["wall"] == pytest.approx(hours / 2)
    with pytest.raises(ValueError, match=r"estimated at 8\.1 h on 2 cores .* over studies\.budget\.ceiling_hours=8"):
        study_rows.check_ceiling(c, st)
    # the same study run for its smallest budget only: within the ceiling
    one = default_config(budget={"budgets": [1, 64], "run_budgets": ["1"]})
    assert study_rows.check_ceiling(one, study_rows.load(one, "budget"))["wall"] < 1


def test_a_decaying_schedule_is_refused():
    c = default_config()
    c["training"]["optim"]["schedule"] = "cosine"
    with pytest.raises(ValueError, match="studies.budget: 'bd_pad_cm' trains with schedule 'cosine'.*constant "
                                         "learning rate"):
        study_checks.check(c)


# -------------------------------------------------------------------------------------------- the scale study
@pytest.mark.parametrize("shape", [
    {"hidden_size": 32, "layers": 2, "heads": 2, "kv_heads": 1, "intermediate_size": 64},
    {"hidden_size": 96, "layers": 1, "heads": 3, "kv_heads": 3, "intermediate_size": 40},
])
def test_parameter_count_is_the_models(shape):
    from fastdllm_core.tiny import tiny_model, tiny_qwen2_config

    model = tiny_model(tiny_qwen2_config(vocab_size=320, **shape))
    assert sp.n_params(shape, 320) == sum(p.numel() for p in model.parameters())


def test_default_study_sizes_bases_and_chains():
    c = default_config()
    bases = sp.bases(c, "scale")
    p = {k: b["params"] for k, b in bases.items()}
    assert p == {"w128": DEFAULT_PARAMS, "w192": 1920192, "w256": 4921600, "w384": 10921344}
    assert p["w384"] / p["w128"] >= 12  # the span
    assert [b["reference"] for b in bases.values()] == [True, False, False, False]
    assert {b["pretrain"] for b in bases.values()} == {1} and {b["size"] for b in bases.values()} == set(p)
    # the same adaptation tokens per parameter at every size (to the rounding of one step)
    per_param = {s: sp.budget_tokens(c, "scale", s) / n for s, n in p.items()}
    assert max(per_param.values()) == pytest.approx(min(per_param.values()))
    assert per_param["w128"] == pytest.approx(BASE_TOKENS / DEFAULT_PARAMS)
    chains = sp.chains(c, "scale")
    seeds = {b: sorted({ch["seed"] for ch in chains.values() if ch["base"] == b}) for b in p}
    assert seeds == {"w128": [0, 1, 2], "w192": [0], "w256": [0], "w384": [0, 1, 2]}
    assert all(ch["budgets"] == [1, 4] and ch["model"] in ("bd_pad_cm", "ntp") for ch in chains.values())
    snaps = sp.snapshots(c, "scale")
    assert len(chains) == 16 and len(snaps) == 32
    assert snaps["w384.bd_pad_cm.s0.x4"]["previous"] == "w384.bd_pad_cm.s0.x1"
    assert abs(snaps["w384.bd_pad_cm.s0.x4"]["tokens"] - 4 * snaps["w384.bd_pad_cm.s0.x1"]["tokens"]) <= 4 * 1024
    assert sp.steps(c, "scale", chains["w192.ntp.s0"], 1) == round(BASE_TOKENS * p["w192"] / p["w128"] / 1024) == 433
    # steps and tokens per size at 1x and 4x
    assert {b: [(s["steps"], s["tokens"]) for s in snaps.values() if s["chain"] == f"{b}.ntp.s0"] for b in p} == {
        "w128": [(200, 204_800), (800, 819_200)], "w192": [(433, 443_392), (1732, 1_773_568)],
        "w256": [(1110, 1_136_640), (4439, 4_545_536)], "w384": [(2463, 2_522_112), (9851, 10_087_424)]}
    # the first runs: budget 1 before 4, seed 0 of every size before more seeds, the largest size first
    prio = {k: sp.priority(c, "scale", chains[v["chain"]], v["budget"]) for k, v in snaps.items()}
    assert prio["w384.bd_pad_cm.s0.x1"] > prio["w128.bd_pad_cm.s0.x1"] > prio["w384.bd_pad_cm.s1.x1"]
    assert prio["w128.ntp.s2.x1"] > prio["w384.bd_pad_cm.s0.x4"]
    assert (prio["w384.bd_pad_cm.s0.x1"], prio["w128.bd_pad_cm.s0.x1"], prio["w384.bd_pad_cm.s1.x1"],
            prio["w128.ntp.s2.x1"], prio["w384.bd_pad_cm.s0.x4"]) == (53, 50, 45, 42, 33)


def test_base_and_snapshot_rows_carry_the_same_fields():
    """A base's rows and a snapshot's carry one set of study fields (the report groups on them); the committed rows
    carry the values the plan gives, in every field they have (the budget study's were migrated with all of them;
    the scale study's keep the fields its old plan gave)."""
    c = default_config()
    snaps, chains = sp.snapshots(c, "scale"), sp.chains(c, "scale")
    snap = sp.row_fields(c, "scale", "w192.ntp.s0.x1", snaps["w192.ntp.s0.x1"], chains["w192.ntp.s0"])
    base = sp.base_row_fields(c, "scale", "w192")
    assert list(base) == list(snap) == ["snapshot", "chain", "base", "size", "size_params", "pretrain",
                                        "pretrain_tokens", "lever", "lever_value", "budget", "budget_tokens",
                                        "train_seed", "model_group"]
    assert base["size_params"] == snap["size_params"] == 1920192 and base["budget"] == 0 and base["chain"] == ""
    assert (snap["base"], snap["pretrain"], snap["pretrain_tokens"], snap["budget_tokens"]) == ("w192", 1, 1228800,
                                                                                                 443392)

    def committed(study, point):
        return pd.read_csv(ROOT / "results" / f"{study}_study" / "points" / f"{point}.accuracy.csv",
                           dtype=str).fillna("").iloc[0].to_dict()

    old_fields = ["snapshot", "chain", "size", "size_params", "budget", "budget_tokens", "train_seed", "model_group"]
    for name, fields in (("base.w192", base), ("w192.ntp.s0.x1", snap)):
        row = committed("scale", name)
        assert {k: str(fields[k]) for k in old_fields} == {k: row[k] for k in old_fields}
    bc = sp.chains(c, "budget")
    snap = sp.row_fields(c, "budget", "bd_pad_cm.s1.x16", sp.snapshots(c, "budget")["bd_pad_cm.s1.x16"],
                         bc["bd_pad_cm.s1"])
    row = committed("budget", "bd_pad_cm.s1.x16")
    assert {k: str(v) for k, v in snap.items()} == {k: row[k] for k in snap}
    base = sp.base_row_fields(c, "budget", "default")
    row = committed("budget", "base.default")
    assert {k: str(v) for k, v in base.items() if k in row} == {k: row[k] for k in base if k in row}
    assert {"base", "size", "size_params", "pretrain", "pretrain_tokens", "budget"} <= set(row)


def test_a_base_is_the_default_base_build_with_its_shape_and_a_scaled_rate(at_root):
    c = default_config()
    pre = sp.base_train_config(c, "scale", "w256", "pretrain", ["p.jsonl"], "tiny")
    sft = sp.base_train_config(c, "scale", "w256", "sft", ["s.jsonl"], "run/final")
    default_pre = c["studies"]["scale"]["stages"]["pretrain"]
    assert pre["recipe"] == default_pre["recipe"] == "ar_pretrain" and sft["recipe"] == "sft"
    assert pre["model"]["tiny"] == sp.sizes(c, "scale")["w256"] and pre["model"]["init"] == "tiny"
    assert pre["optim"]["lr"] == pytest.approx(default_pre["optim"]["lr"] * 128 / 256) == pytest.approx(0.0015)
    assert pre["optim"]["max_steps"] == default_pre["optim"]["max_steps"] == 300
    assert sft["optim"]["lr"] == pytest.approx(c["studies"]["scale"]["stages"]["sft"]["optim"]["lr"] / 2)
    assert sft["model"]["init"] == "run/final" and sft["data"]["train_files"] == ["s.jsonl"]
    assert sp.base_processes(c, "scale", "pretrain") == 2
    # the reference size is the default's released base, never rebuilt by the study
    st = study_rows.load(c, "scale")
    assert study_rows.base_source(c, st, "w128") == "results/released/tiny_ar_base"
    assert study_rows.release_dir(c, "scale", "w384") == "results/released/scale_w384"
    assert "w128" not in st.built


def test_committed_rows_are_kept_and_released_bases_loaded(tmp_path):
    released = str(tmp_path / "released")
    c = default_config(tmp_path, scale={"released_dir": released})
    snap = "w192.ntp.s0.x1"
    st = study_rows.load(c, "scale")
    assert snap in st.todo and "w192" in st.built and st.points == f"{tmp_path}/scale_study/points"
    for f in study_rows.point_files(c, "scale", snap).values():
        Path(f).parent.mkdir(parents=True, exist_ok=True)
        Path(f).write_text("x\n")
    st = study_rows.load(c, "scale")
    assert snap not in st.todo and "w192.ntp.s0.x4" in st.todo
    (tmp_path / "released" / "scale_w192").mkdir(parents=True)
    (tmp_path / "released" / "scale_w192" / "manifest.json").write_text("{}")
    st = study_rows.load(c, "scale")
    assert "w192" not in st.built
    assert study_rows.base_source(c, st, "w192") == f"{released}/scale_w192"
    assert study_rows.base_source(c, st, "w256") == f"{st.work}/bases/w256/bf16"
    # the release rule's output pattern and the jobs' release directory are one spelling
    assert study_rows.released_pattern(c, "scale").format(base="w192") == study_rows.release_dir(c, "scale", "w192")
    # the build rows of the bases this run builds (its releases write them); a released base without them has none
    assert study_rows.existing_builds(c, st) == [f"{st.points}/base.{b}.build.csv" for b in ("w256", "w384")]
    Path(f"{st.points}/base.w192.build.csv").write_text("x\n")
    assert study_rows.existing_builds(c, st)[0] == f"{st.points}/base.w192.build.csv"
    assert "w192" in study_rows.load(dict(c, build_released=True), "scale").built
    # the report reads every planned row that exists or that this run makes
    made = study_rows.existing_points(c, st, "speed")
    assert f"{st.points}/{snap}.speed.csv" in made and len(made) == 32
    # a run of some bases: the others' chains are not made here, and their bases are not built
    mine = default_config(tmp_path / "other", scale={"run_bases": ["w128", "w192"],
                                                     "released_dir": str(tmp_path / "elsewhere")})
    st = study_rows.load(mine, "scale")
    assert {st.chain_of(s)["base"] for s in st.todo} == {"w128", "w192"} and len(st.todo) == 16
    assert st.built == ["w192"] and st.todo_bases == ["w128", "w192"]
    # run_bases [] makes nothing: the report of the committed rows only
    none = default_config(tmp_path / "none", scale={"run_bases": [], "released_dir": str(tmp_path / "elsewhere")})
    st = study_rows.load(none, "scale")
    assert st.todo == {} and st.todo_bases == [] and st.built == []
    assert st.snapshots == sp.snapshots(c, "scale") and study_rows.existing_points(none, st, "accuracy") == []
    assert study_rows.existing_bases(none, st) == []
    # a plan file named by what the run makes: the same run, the same file; another run, another
    assert study_rows.load(none, "scale").plan_file == st.plan_file != study_rows.load(mine, "scale").plan_file


def test_the_committed_rows_of_this_checkout_are_read(at_root):
    """The rows committed under results/<name>_study/points: the budget study's 17 snapshots and its base were
    migrated there (nothing left to make), the scale study's points that are done are not remade, and the
    pretraining study is complete."""
    c = default_config("results")
    st = study_rows.load(c, "budget")
    assert st.points == "results/budget_study/points"
    assert st.todo == {} and st.todo_bases == [] and st.built == []
    assert len(study_rows.existing_points(c, st, "accuracy")) == 17
    assert study_rows.existing_bases(c, st) == ["results/budget_study/points/base.default.accuracy.csv"]
    st = study_rows.load(c, "scale")
    assert not any(s.startswith(("w128.", "w192.")) for s in st.todo)
    # the pretraining study: all four bases run, p4, p16 and p32 released with their build rows; nothing to make
    st = study_rows.load(c, "pretrain")
    assert st.todo == {} and st.todo_bases == [] and st.built == [] and len(st.snapshots) == 20
    assert len(study_rows.existing_points(c, st, "accuracy")) == 20
    assert study_rows.existing_builds(c, st) == [f"{st.points}/base.{b}.build.csv" for b in ("p4", "p16", "p32")]
    for b in ("p4", "p16", "p32"):
        assert os.path.isfile(f"{study_rows.release_dir(c, 'pretrain', b)}/manifest.json")


@pytest.mark.parametrize("edit, words", [
    (lambda s: s["sizes"][1].update(heads=5), "heads=5 does not divide hidden_size=192"),
    (lambda s: s["sizes"][1].update(kv_heads=4), "kv_heads=4 does not divide heads=6"),
    (lambda s: s["sizes"][1].pop("layers"), "w192: missing ['layers']"),
    (lambda s: s["sizes"].pop(0), "must be the default base's shape"),
    (lambda s: s["sizes"].reverse(), "must be the default base's shape"),
    (lambda s: s.update(sizes=[s["sizes"][0], s["sizes"][2], s["sizes"][1]]), "must grow in parameters"),
    (lambda s: s["sizes"][2].update(name="w192"), "names must be unique"),
    (lambda s: s.update(run_bases=["w128", "w999"]),
     "run_bases: unknown base 'w999'; known: ['w128', 'w192', 'w256', 'w384']"),
    (lambda s: s.update(run_budgets=[1, 2]), "run_budgets: unknown value 2; the study's: [1, 4]"),
    (lambda s: s.update(run_seeds=["0", "x"]), "run_seeds: unknown value 'x'; the study's: [0, 1, 2]"),
    (lambda s: s.update(models=["bd_pad_cm", "ar_base"]), "'ar_base' is not a model adapted here"),
    (lambda s: s["train_rate"].pop("ntp"), "no rate for 'ntp'"),
    (lambda s: s["train_rate"].pop("base"), "no rate for 'base'"),
    (lambda s: s.pop("released_dir"), "released_dir: this study builds bases"),
])
def test_bad_scale_study_is_refused_naming_the_value(edit, words):
    c = default_config()
    edit(c["studies"]["scale"])
    with pytest.raises(ValueError, match=r"^studies\.scale") as err:
        study_checks.check(c)
    assert words in str(err.value)


def test_a_study_over_its_ceiling_is_refused_before_training(at_root):
    c = default_config()  # the whole study on 2 CPU cores: far over a working day
    st = study_rows.load(c, "scale")
    assert st.built == ["w384"]  # w192 and w256 are released in results/released
    est = sp.estimate_hours(c, "scale", st.built, st.todo)
    assert est["wall"] == pytest.approx(67.46, abs=0.01) and est["bases"] == pytest.approx(3.32, abs=0.01)
    assert est["wall"] > c["studies"]["scale"]["ceiling_hours"]
    with pytest.raises(ValueError, match=r"estimated at 67\.5 h on 2 cores .* over studies\.scale\.ceiling_hours=8"):
        study_rows.check_ceiling(c, st)
    small = default_config(scale={"run_bases": ["w128", "w192"], "budgets": [1]})
    assert study_rows.check_ceiling(small, study_rows.load(small, "scale"))["wall"] < 1
    # the largest size, seed 0 at 1x (--config's strings read as numbers): within the ceiling
    one = default_config(scale={"run_bases": ["w384"], "run_budgets": ["1"], "run_seeds": ["0"]})
    st1 = study_rows.load(one, "scale")
    assert set(st1.todo) == {"w384.bd_pad_cm.s0.x1", "w384.ntp.s0.x1"} and st1.built == ["w384"]
    assert study_rows.check_ceiling(one, st1)["wall"] < c["studies"]["scale"]["ceiling_hours"] < est["wall"]
    assert st1.snapshots == st.snapshots  # the chains' runs stay those of the whole study


# ------------------------------------------------------------------------------------ the pretraining study
def test_default_pretrain_study_plan(tmp_path):
    """The default base pretrained 1x (the released base), 4x, 16x and 32x: one size, bases named by their
    multiple, each adapted at 1x, the longest also at 4x and 16x, seeds 1-2 at the shortest and longest."""
    released = str(tmp_path / "released")
    c = default_config(tmp_path, pretrain={"released_dir": released})
    study_checks.check(c)
    s = c["studies"]["pretrain"]
    assert s["x"] == "pretrain" and s["endpoints_of"] == "bases"
    bases = sp.bases(c, "pretrain")
    assert list(bases) == ["p1", "p4", "p16", "p32"] and sp.reference_base(c, "pretrain") == "p1"
    assert [b["pretrain"] for b in bases.values()] == [1, 4, 16, 32]
    assert [b["pretrain_tokens"] for b in bases.values()] == [m * 300 * 16 * 256 for m in (1, 4, 16, 32)]
    assert {b["params"] for b in bases.values()} == {DEFAULT_PARAMS} and {b["size"] for b in bases.values()} == {
        "default"}
    chains = sp.chains(c, "pretrain")
    assert list(chains) == [f"p{m}.{model}.s0" for m in (1, 4, 16, 32) for model in ("bd_pad_cm", "ntp")] + [
        f"p{m}.{model}.s{seed}" for seed in (1, 2) for m in (1, 32) for model in ("bd_pad_cm", "ntp")]
    snaps = sp.snapshots(c, "pretrain")
    assert len(snaps) == 20
    assert {k for k, v in snaps.items() if v["budget"] > 1} == {
        "p32.bd_pad_cm.s0.x4", "p32.bd_pad_cm.s0.x16", "p32.ntp.s0.x4", "p32.ntp.s0.x16"}
    # one size: budget b is b times the default's adaptation tokens at every base
    assert [(s["steps"], s["tokens"]) for s in snaps.values() if s["chain"] == "p32.ntp.s0"] == [
        (200, 204_800), (800, 819_200), (3200, 3_276_800)]
    assert {s["steps"] for k, s in snaps.items() if s["budget"] == 1} == {200}
    # p1 is the released default base; the others are built (the default's two stages) and released
    st = study_rows.load(c, "pretrain")
    assert st.built == ["p4", "p16", "p32"] and st.todo_bases == ["p1", "p4", "p16", "p32"] and len(st.todo) == 20
    assert study_rows.release_dir(c, "pretrain", "p1") == "results/released/tiny_ar_base"
    assert study_rows.release_dir(c, "pretrain", "p16") == f"{released}/pretrain_p16"
    assert study_rows.base_source(c, st, "p32") == f"{st.work}/bases/p32/bf16"
    for m in (4, 16, 32):
        pre = sp.base_train_config(c, "pretrain", f"p{m}", "pretrain", ["text"], "tiny")
        sft = sp.base_train_config(c, "pretrain", f"p{m}", "sft", ["sft"], "pre/final")
        assert (pre["recipe"], pre["optim"]["max_steps"], pre["optim"]["lr"]) == ("ar_pretrain", 300 * m, 0.003)
        assert pre["model"]["tiny"] == sp.default_shape(c, "pretrain") and pre["optim"]["batch_size"] == 16
        assert (sft["recipe"], sft["optim"]["max_steps"], sft["optim"]["lr"]) == ("sft", 600, 0.001)
        assert sft["model"]["init"] == "pre/final"
    # the row fields carry the base's pretraining; the data: the adaptation set and each longer base's text
    f = sp.row_fields(c, "pretrain", "p32.ntp.s0.x16", snaps["p32.ntp.s0.x16"], chains["p32.ntp.s0"])
    assert (f["base"], f["pretrain"], f["pretrain_tokens"], f["budget_tokens"]) == ("p32", 32, 39_321_600, 3_276_800)
    assert sp.base_row_fields(c, "pretrain", "p4")["snapshot"] == "base.p4"
    assert sorted({b["pretrain"] for b in st.bases.values() if b["pretrain"] > 1}) == [4, 16, 32]
    # priorities: budget 1 first, the longest-pretrained base first among equals
    prio = {k: sp.priority(c, "pretrain", chains[v["chain"]], v["budget"]) for k, v in snaps.items()}
    assert (prio["p32.ntp.s0.x1"], prio["p1.ntp.s0.x1"], prio["p32.ntp.s1.x1"], prio["p32.ntp.s0.x16"]) == (
        53, 50, 45, 13)
    # the whole study: 3 bases (2.8 h) and 16 chains (1.5 h) of one job, 2.1 h on 2 cores: within 8 h
    est = study_rows.check_ceiling(c, st)
    assert (round(est["bases"], 2), round(est["chains"], 2), round(est["wall"], 2)) == (2.75, 1.53, 2.14)
    # what the jobs receive
    job = study_specs.snapshot_job(c, st, "p16.bd_pad_cm.s0.x1", "R")
    assert job["train"]["model"]["init"] == f"{st.work}/bases/p16/bf16" == job["ar_source"]
    assert job["ar_key"] == "base.p16" and job["steps"] == 200 and job["fields"]["pretrain"] == 16
    base = study_specs.base_job(c, st, "p1", "R")
    assert base["source"] == "results/released/tiny_ar_base" and base["point"] == "base.p1"
    stage = study_specs.stage_job(c, st, "p4", "pretrain", SimpleNamespace(init=[], data="x4.jsonl"), "R")
    assert stage["train"]["optim"]["max_steps"] == 1200 and stage["train"]["data"]["train_files"] == ["x4.jsonl"]
    assert "pretraining 32x" in sp.describe(c, "pretrain")


@pytest.mark.parametrize("change, words", [
    (dict(x="tokens"), "studies.pretrain.x: unknown axis 'tokens'; known: ['adapt', 'params', 'pretrain']"),
    (dict(pretrain=[2, 4]), "studies.pretrain.pretrain: multiples of the default base's pretraining must start at 1"),
    (dict(pretrain=[1, 16, 4]), "must start at 1 (the released base) and grow, got [1, 16, 4]"),
    (dict(pretrain=[1, 4, 4]), "and grow, got [1, 4, 4]"),
    (dict(base_budgets={"p64": [1, 4]}), "studies.pretrain.base_budgets: unknown base 'p64'; known: ['p1', 'p4', "
                                         "'p16', 'p32']"),
    (dict(run_bases=["p1", "p2"]), "studies.pretrain.run_bases: unknown base 'p2'"),
    (dict(run_budgets=[32]), "studies.pretrain.run_budgets: unknown value 32; the study's: [1, 4, 16]"),
    (dict(released_dir=None), "studies.pretrain.released_dir: this study builds bases and must say where"),
    (dict(train_rate={"bd_pad_cm": 1100, "ntp": 3800}), "studies.pretrain.train_rate: no rate for 'base'"),
])
def test_bad_pretrain_study_is_refused_naming_the_value(change, words):
    c = default_config(pretrain=change)
    with pytest.raises(ValueError) as err:
        study_checks.check(c)
    assert words in str(err.value)


def test_a_study_of_one_released_base_needs_no_released_dir():
    c = default_config()
    c["studies"]["budget"].pop("released_dir", None)
    study_checks.check(c)  # the budget study builds nothing
    c["studies"]["budget"].update(pretrain=[1, 2], train_rate=dict(c["studies"]["budget"]["train_rate"], base=3800))
    with pytest.raises(ValueError, match="studies.budget.released_dir: this study builds bases"):
        study_checks.check(c)


def test_the_ci_config_plans_its_studies():
    """config/ci.yaml over config/config.yaml, merged as Snakemake merges config files (a nested mapping merged key
    by key, a list replaced), with the budget study's CI overlay: every study is valid and small."""
    from snakemake.utils import update_config

    c = raw_config()
    for overlay in ("config/ci.yaml", "tests/data/budget_study_ci.yaml"):
        update_config(c, yaml.safe_load((ROOT / overlay).read_text()))
    c = prepare(c)
    study_checks.check(c)
    assert list(sp.bases(c, "scale")) == ["w32", "w48"] and len(sp.snapshots(c, "scale")) == 4
    assert len(sp.snapshots(c, "budget")) == 6  # 2 models and the lever at 1x and 2x


# --------------------------------------------------- the planned jobs of the two studies equal the old plans'
# chain: (init of its training: the base, lr, seed, {budget: steps}, runtime minutes of one attempt), as
# the two plan modules before this one gave them at 322764e (git show 322764e:workflow/lib/plan_budget.py, and
# plan_scale.py beside it): the default config, no rows made, w192 and w256 released in results/released; batch 4
# everywhere
OLD_CHAINS = {
    "budget": {
        "bd_pad_cm.s0": ("results/released/tiny_ar_base", 1e-4, 0, {1: 200, 4: 800, 16: 3200}, 110),
        "ntp.s0": ("results/released/tiny_ar_base", 1e-4, 0, {1: 200, 4: 800, 16: 3200}, 39),
        "bd_pad_cm.lr-2e-05.s0": ("results/released/tiny_ar_base", 2e-5, 0, {1: 200, 4: 800, 16: 3200}, 110),
        "bd_pad_cm.s1": ("results/released/tiny_ar_base", 1e-4, 1, {1: 200, 16: 3200}, 110),
        "ntp.s1": ("results/released/tiny_ar_base", 1e-4, 1, {1: 200, 16: 3200}, 39),
        "bd_pad_cm.s2": ("results/released/tiny_ar_base", 1e-4, 2, {1: 200, 16: 3200}, 110),
        "ntp.s2": ("results/released/tiny_ar_base", 1e-4, 2, {1: 200, 16: 3200}, 39),
    },
    "scale": {  # in the order they run: seed 0 at every size, then seeds 1 and 2 at the smallest and largest
        **{f"{size}.{m}.s0": (init, 1e-4, 0, steps, rt[m]) for size, init, steps, rt in (
            ("w128", "results/released/tiny_ar_base", {1: 200, 4: 800}, {"bd_pad_cm": 35, "ntp": 18}),
            ("w192", "results/released/scale_w192", {1: 433, 4: 1732}, {"bd_pad_cm": 127, "ntp": 44}),
            ("w256", "results/released/scale_w256", {1: 1110, 4: 4439}, {"bd_pad_cm": 775, "ntp": 232}),
            ("w384", "{work}/bases/w384/bf16", {1: 2463, 4: 9851}, {"bd_pad_cm": 3775, "ntp": 1100}))
           for m in ("bd_pad_cm", "ntp")},
        **{f"{size}.{m}.s{seed}": (init, 1e-4, seed, steps, rt) for seed in (1, 2) for size, init, steps in (
            ("w128", "results/released/tiny_ar_base", {1: 200, 4: 800}),
            ("w384", "{work}/bases/w384/bf16", {1: 2463, 4: 9851}))
           for m, rt in (("bd_pad_cm", 35 if size == "w128" else 3775), ("ntp", 18 if size == "w128" else 1100))},
    },
}
# two whole training configs of the old plans (their data file the study's set)
OLD_TRAIN = {
    ("budget", "bd_pad_cm.lr-2e-05.s0.x16"): {
        "data": {"drop_after_answer": True, "max_examples": None, "seq_len": 256,
                 "train_files": ["{work}/data/adapt.jsonl"]},
        "model": {"init": "results/released/tiny_ar_base", "mask_init": "zero", "tokenizer": "bpe", "vocab_size": 768},
        "objective": {"block_size": 32, "eps": 0.001},
        "optim": {"batch_size": 4, "grad_clip": 1.0, "lr": 2e-05, "max_steps": 3200, "micro_batch_size": 4,
                  "schedule": "constant", "warmup_steps": 10, "weight_decay": 0.0},
        "recipe": "bd_pad_cm",
        "train": {"device": "cpu", "dtype": "auto", "gradient_checkpointing": False, "log_every": 20, "save_every": 60,
                  "seed": 0}},
    ("scale", "w384.ntp.s2.x4"): {
        "data": {"drop_after_answer": True, "max_examples": None, "seq_len": 256,
                 "train_files": ["{work}/data/adapt.jsonl"]},
        "model": {"init": "{work}/bases/w384/bf16", "mask_init": "zero", "tokenizer": "bpe", "vocab_size": 768},
        "objective": {"block_size": 32, "eps": 0.001},
        "optim": {"batch_size": 4, "grad_clip": 1.0, "lr": 0.0001, "max_steps": 9851, "micro_batch_size": 4,
                  "schedule": "constant", "warmup_steps": 10, "weight_decay": 0.0},
        "recipe": "ntp",
        "train": {"device": "cpu", "dtype": "auto", "gradient_checkpointing": False, "log_every": 20, "save_every": 60,
                  "seed": 2}},
}


def _filled(value, work):
    if isinstance(value, dict):
        return {k: _filled(v, work) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_filled(v, work) for v in value)
    return value.replace("{work}", work) if isinstance(value, str) else value


def test_the_49_snapshots_train_as_the_old_plans_did(at_root):
    """Every snapshot of the budget study (17) and the scale study (32): its job's training config (base, rate,
    seed, batch, steps of its chain's largest budget), its steps and its runtime equal the old plans'."""
    c = default_config()
    seen = 0
    for name, old in OLD_CHAINS.items():
        st = study_rows.load(c, name)
        assert st.work == f"/nonexistent/tiny/{name}_study"
        assert list(st.chains) == list(old)
        assert {k: v["budgets"] for k, v in st.chains.items()} == {k: list(v[3]) for k, v in old.items()}
        for snapshot, snap in st.snapshots.items():
            init, lr, seed, steps, runtime = _filled(old[snap["chain"]], st.work)
            job = study_specs.snapshot_job(c, st, snapshot, "R")
            o = job["train"]["optim"]
            assert (job["train"]["model"]["init"], o["lr"], job["train"]["train"]["seed"]) == (init, lr, seed), snapshot
            assert (o["batch_size"], o["micro_batch_size"], o["max_steps"]) == (4, 4, max(steps.values())), snapshot
            assert (job["steps"], snap["steps"]) == (steps[snap["budget"]],) * 2, snapshot
            assert job["train"]["data"]["train_files"] == [f"{st.work}/data/adapt.jsonl"]
            assert sp.runtime_minutes(c, name, st.chain_of(snapshot), 1) == runtime, snapshot
            if (name, snapshot) in OLD_TRAIN:
                assert job["train"] == _filled(OLD_TRAIN[name, snapshot], st.work)
            seen += 1
    assert seen == 49


# ------------------------------------------------------------------------------ the studies through the DAG
def test_the_default_studies_plan_todays_jobs(tmp_path):
    """``snakemake -n <name>_study`` of each default study, nothing made yet: the budget and scale studies' jobs
    those of the old rules (budget: 17 snapshots trained, scored and timed, and now the plan's estimate and its
    base's own scores; scale: 32, four bases scored, w384 built and released); the pretraining study's."""
    released = tmp_path / "released"
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump({"studies": {"pretrain": {"released_dir": str(released)}}}))
    expected = {
        "budget": dict(budget_data=1, budget_plan=1, synthetic_data=1, budget_base_point=1, budget_train=17,
                       budget_point=17, budget_speed=17, budget_report=1, budget_study=1),
        "scale": dict(scale_data=1, scale_plan=1, synthetic_data=1, scale_base=2, scale_base_point=4,
                      scale_train=32, scale_point=32, scale_speed=32, scale_round=1, scale_release=1,
                      scale_report=1, scale_study=1),
        "pretrain": dict(pretrain_data=4, pretrain_plan=1, synthetic_data=1, pretrain_base=6, pretrain_base_point=4,
                         pretrain_train=20, pretrain_point=20, pretrain_speed=20, pretrain_round=3,
                         pretrain_release=3, pretrain_report=1, pretrain_study=1),
    }
    for name, jobs in expected.items():
        r, out = dry_run(f"{name}_study", tmp_path, overlay)
        assert r.returncode == 0, out[-3000:]
        assert job_counts(out, name) == jobs, out[-3000:]
    work = tmp_path / "results" / "tiny" / "pretrain_study"
    for m in (4, 16, 32):  # each longer base's pretraining text, and its release
        assert f"{work}/data/pretrain.x{m}.jsonl" in out and f"{released}/pretrain_p{m}/manifest.json" in out
    assert f"{work}/data/pretrain.x1.jsonl" not in out


def test_a_study_that_is_only_a_config_entry_is_planned(tmp_path):
    """Two studies no code names: learning rates at the default size (a lever study: no base built), and budgets
    x two pretraining multiples (a base built, its own data); each its own target and rules."""
    released = tmp_path / "released"
    overlay = tmp_path / "studies.yaml"
    common = dict(models=["bd_pad_cm"], seeds=[0], endpoint_seeds=[], n_adapt=500, cores=2, ceiling_hours=8)
    overlay.write_text(yaml.safe_dump({"studies": {
        "rates": dict(common, x="adapt", budgets=[1, 4], levers=[{"name": "lr", "value": 3e-4},
                                                                 {"name": "lr", "value": 3e-5}],
                      train_rate={"bd_pad_cm": 1100}),
        "longer": dict(common, x="pretrain", pretrain=[1, 2], models=["bd_pad_cm", "ntp"], budgets=[1, 4],
                       released_dir=str(released), train_rate={"bd_pad_cm": 1100, "ntp": 3800, "base": 3800}),
    }}))
    r, out = dry_run("rates_study", tmp_path, overlay)
    assert r.returncode == 0, out[-3000:]
    # 3 chains (the recipe and its two rates) x 2 budgets; the one base, released, scored
    assert job_counts(out, "rates") == dict(rates_data=1, rates_plan=1, synthetic_data=1, rates_base_point=1,
                                            rates_train=6, rates_point=6, rates_speed=6, rates_report=1,
                                            rates_study=1), out[-3000:]
    assert "models/bd_pad_cm.lr-3e-05.s0.x4" in out and "rates_study/points/base.default.accuracy.csv" in out
    r, out = dry_run("longer_study", tmp_path, overlay)
    assert r.returncode == 0, out[-3000:]
    # p2 built (2 stages, bf16, release) on its own text; 2 bases x 2 models x 2 budgets
    assert job_counts(out, "longer") == dict(longer_data=2, longer_plan=1, synthetic_data=1, longer_base=2,
                                             longer_base_point=2, longer_train=8, longer_point=8, longer_speed=8,
                                             longer_round=1, longer_release=1, longer_report=1,
                                             longer_study=1), out[-3000:]
    assert "longer_study/data/pretrain.x2.jsonl" in out and f"{released}/longer_p2/manifest.json" in out
    assert "models/p2.ntp.s0.x4" in out and "budget_train" not in out


@pytest.mark.parametrize("study, words", [
    ({"budget": {"levers": [{"name": "dropout", "value": 0.1}]}}, "unknown lever 'dropout'"),
    ({"longer": dict(pretrain=[1, 2], models=["ntp"], budgets=[1], seeds=[0], n_adapt=10, ceiling_hours=1,
                     train_rate={"ntp": 3800, "base": 3800})},
     "studies.longer.released_dir: this study builds bases and must say where they are released"),
    ({"scale": {"run_bases": ["w999"]}}, "studies.scale.run_bases: unknown base 'w999'"),
], ids=["unknown-lever", "bases-without-released-dir", "unknown-run-base"])
def test_a_bad_study_stops_the_dag_at_parse_time(tmp_path, study, words):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"studies": study}))
    r, out = dry_run("budget_study", tmp_path, bad)
    assert r.returncode != 0 and words in out, out[-3000:]
    assert not (tmp_path / "results").exists()


# ------------------------------------------------------------------------------------- the snapshot is the run
def _cfg(data_file, steps):
    return {"recipe": "bd_pad_cm", "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 2, "heads": 2,
                                                                      "kv_heads": 1}},
            "data": {"train_files": [data_file], "seq_len": 64}, "objective": {"block_size": 16},
            "optim": {"lr": 1e-3, "warmup_steps": 2, "max_steps": steps, "batch_size": 4, "micro_batch_size": 4,
                      "schedule": "constant"},
            "train": {"save_every": 100, "log_every": 1, "seed": 0, "device": "cpu"}}


def test_a_snapshot_of_the_longer_run_equals_the_shorter_run(tmp_path, data_file):
    """What rule <study>_train relies on: the run to 6 steps stopped at 3 (max_steps=3, then resumed to 6) gives at
    step 3 the weights of a 3-step run, and at step 6 the losses and weights of an uninterrupted 6-step run."""
    from fastdllm_core.training.loop import train

    def weights(d):
        return load_file(str(Path(d) / "model.safetensors"))

    chained, short, whole = tmp_path / "chain", tmp_path / "short", tmp_path / "whole"
    snap3 = weights(train(_cfg(data_file, 6), chained, max_steps=3, progress=False))
    w3 = weights(train(_cfg(data_file, 3), short, progress=False))
    assert all(torch.equal(snap3[k], w3[k]) for k in w3)
    snap6 = weights(train(_cfg(data_file, 6), chained, max_steps=6, progress=False))
    w6 = weights(train(_cfg(data_file, 6), whole, progress=False))
    assert all(torch.equal(snap6[k], w6[k]) for k in w6)
    loss = [[r["loss"] for r in csv.DictReader(open(d / "metrics.csv"))] for d in (chained, whole)]
    assert loss[0] == loss[1] and len(loss[0]) == 6


def test_a_plan_reads_nothing_but_the_config():
    """study_plan is a pure function of the config: the same config, the same plan; the config is not changed."""
    c = default_config()
    before = copy.deepcopy(c)
    plans = [{n: (sp.bases(c, n), sp.chains(c, n), sp.snapshots(c, n)) for n in sp.names(c)} for _ in range(2)]
    assert plans[0] == plans[1] and c == before
