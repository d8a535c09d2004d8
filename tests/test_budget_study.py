"""The budget study (workflow/lib/plan_budget.py, rule budget_study): its plan from the config, the named errors
before any training, the snapshot of a longer run equal to the shorter run, and the summary's gaps and verdicts.
The study's rules run end to end in tests/test_workflow_e2e.py::test_end_to_end_ci_config."""
import csv
import math
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml
from safetensors.torch import load_file

from conftest import smk

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow" / "lib"))
import plan  # noqa: E402
import plan_budget  # noqa: E402
from analysis import budget_study as analysis  # noqa: E402


def default_config():
    c = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    c["models"] = plan.expand_seeds(c)["models"]
    return c


def test_default_study_plan():
    c = default_config()
    plan_budget.check(c)
    chains = plan_budget.chains(c)
    # every budget at seed 0, the lever, then the endpoints' other seeds (the order they run in)
    assert list(chains) == ["bd_pad_cm.s0", "ntp.s0", "bd_pad_cm.lr-2e-05.s0", "bd_pad_cm.s1", "ntp.s1",
                            "bd_pad_cm.s2", "ntp.s2"]
    snaps = plan_budget.snapshots(c)
    assert [(s["budget"], s["steps"], s["tokens"]) for k, s in snaps.items() if s["chain"] == "bd_pad_cm.s0"] == [
        (1, 200, 204_800), (4, 800, 819_200), (16, 3200, 3_276_800)]
    assert snaps["bd_pad_cm.s0.x16"]["previous"] == "bd_pad_cm.s0.x4"
    assert [s["budget"] for s in snaps.values() if s["chain"] == "ntp.s2"] == [1, 16]
    cfg = plan_budget.train_config(c, chains["bd_pad_cm.lr-2e-05.s0"], ["adapt.jsonl"])
    assert cfg["optim"]["lr"] == 2e-5 and cfg["optim"]["max_steps"] == 3200 and cfg["train"]["seed"] == 0
    assert cfg["data"]["train_files"] == ["adapt.jsonl"] and cfg["recipe"] == "bd_pad_cm"
    assert plan_budget.train_config(c, chains["ntp.s2"], [])["train"]["seed"] == 2
    assert plan_budget.snapshots(c, chains) == snaps and plan_budget.priority(chains, snaps["ntp.s2.x1"]) == 1
    # a chain's estimate at its largest budget's tokens, its job's runtime twice that (+ 10 min), per attempt
    est = 3_276_800 / c["budget_study"]["train_rate"]["bd_pad_cm"] / 60
    assert plan_budget.estimate_minutes(c, chains["bd_pad_cm.s0"]) == pytest.approx(est)
    assert plan_budget.runtime_minutes(c, chains["bd_pad_cm.s0"], 2) == 2 * math.ceil(2 * est + 10)
    assert "levers: lr = 2e-05" in plan_budget.describe(c) and "budgets 1x, 4x, 16x" in plan_budget.describe(c)
    # the largest budget passes the paper 1.5B's tokens per parameter (0.89M parameters: 3.7 against 2.05)
    assert 3_276_800 / 0.89e6 > analysis.PAPER_RATIOS["paper 1.5B"]


def test_a_batch_lever_keeps_the_tokens_and_changes_the_steps():
    c = default_config()
    c["budget_study"]["levers"] = [{"name": "batch_size", "value": 16}]
    snaps = plan_budget.snapshots(c)
    lever = {k: s for k, s in snaps.items() if "batch_size" in k}
    assert [(s["steps"], s["tokens"]) for s in lever.values()] == [(50, 204_800), (200, 819_200), (800, 3_276_800)]


@pytest.mark.parametrize("change, words", [
    (lambda s: s.update(levers=[{"name": "warmup", "value": 3}]), ["unknown lever 'warmup'", "lr"]),
    (lambda s: s.update(levers=[{"name": "lr", "value": "fast"}]),
     ["chain bd_pad_cm.lr-fast.s0", "optim.lr must be a number"]),
    (lambda s: s.update(levers=[{"name": "mask_init", "value": "noise"}]), ["model.mask_init must be one of"]),
    (lambda s: s.update(budgets=[1, 64]), ["bd_pad_cm.s0", "64x", "ceiling_minutes=75"]),
    (lambda s: s.update(models=["ar_base"]), ["'ar_base' is not a model adapted here"]),
    (lambda s: s.update(train_rate={"bd_pad_cm": 1.0}), ["no rate for 'ntp'"]),
])
def test_bad_study_is_refused_naming_the_value(change, words):
    c = default_config()
    change(c["budget_study"])
    with pytest.raises(ValueError) as e:
        plan_budget.check(c)
    for w in words:
        assert w in str(e.value)


def test_a_decaying_schedule_is_refused():
    c = default_config()
    c["training"]["optim"]["schedule"] = "cosine"
    with pytest.raises(ValueError, match="constant learning rate"):
        plan_budget.check(c)


def test_an_unknown_lever_stops_the_dag_at_parse_time(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"budget_study": dict(default_config()["budget_study"],
                                                        levers=[{"name": "dropout", "value": 0.1}])}))
    r = smk("budget_study", "-n", "--nolock", "--cores", "1", "--configfile", str(bad), "--config",
            f"results_dir={tmp_path}")
    assert r.returncode != 0 and "unknown lever 'dropout'" in r.stdout + r.stderr


# ------------------------------------------------------------------------------------- the snapshot is the run
def _cfg(data_file, steps):
    return {"recipe": "bd_pad_cm", "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 2, "heads": 2,
                                                                      "kv_heads": 1}},
            "data": {"train_files": [data_file], "seq_len": 64}, "objective": {"block_size": 16},
            "optim": {"lr": 1e-3, "warmup_steps": 2, "max_steps": steps, "batch_size": 4, "micro_batch_size": 4,
                      "schedule": "constant"},
            "train": {"save_every": 100, "log_every": 1, "seed": 0, "device": "cpu"}}


def test_a_snapshot_of_the_longer_run_equals_the_shorter_run(tmp_path, data_file):
    """What rule budget_train relies on: the run to 6 steps stopped at 3 (max_steps=3, then resumed to 6) gives at
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


# ------------------------------------------------------------------------------------------------- summary
COLUMNS = {"gsm8k": {"task": "synth_arith", "metric": "exact_match_strict"},
           "humaneval_base": {"task": "synth_code", "metric": "pass@1_base"}}
POINTS = {"accuracy": "bd_t1", "speed": "bd_t09"}


def _acc_rows(model, mode, budget, seed, values, point, tpf=None):
    return [dict(model=f"{model}.s{seed}.x{budget}", model_group=model, mode=mode, lever="", lever_value="",
                 budget=budget, budget_tokens=1000 * budget, n_params=500, train_seed=seed,
                 snapshot=f"{model}.s{seed}.x{budget}", task=COLUMNS[c]["task"], metric=COLUMNS[c]["metric"],
                 value=v, n=256, status="ok", point=point, total_tokens=tokens,
                 tokens_per_forward=(tpf or {}).get(c, 1.0), nfe=7)
            for (c, v), tokens in zip(values.items(), (300, 100))]


def test_summary_gaps_verdicts_and_speed(tmp_path):
    acc = pd.DataFrame(
        _acc_rows("bd", "bd", 1, 0, {"gsm8k": 30.0, "humaneval_base": 60.0}, "bd_t1")
        + _acc_rows("bd", "bd", 1, 1, {"gsm8k": 34.0, "humaneval_base": 62.0}, "bd_t1")
        + _acc_rows("bd", "bd", 1, 0, {"gsm8k": 29.0, "humaneval_base": 60.0}, "bd_t09",
                    tpf={"gsm8k": 1.5, "humaneval_base": 3.0})
        + _acc_rows("bd", "bd", 1, 1, {"gsm8k": 33.0, "humaneval_base": 61.0}, "bd_t09",
                    tpf={"gsm8k": 2.5, "humaneval_base": 1.0})
        + _acc_rows("ntp", "ar", 1, 0, {"gsm8k": 60.0, "humaneval_base": 61.0}, "ar"))
    ar = pd.DataFrame([dict(task=c["task"], metric=c["metric"], value=v, n=256, status="ok")
                       for c, v in zip(COLUMNS.values(), (62.0, 61.0))])
    speed = pd.DataFrame([dict(side=side, snapshot=s, speedup_vs_main_ar=x, mode=m, lever="", lever_value="",
                               budget=1)
                          for s, x, m in (("bd.s0.x1", 1.5, "bd"), ("bd.s1.x1", 1.7, "bd"), ("ntp.s0.x1", 1.0, "ar"))
                          for side in ("snapshot", "ar_base")])
    metrics = pd.DataFrame([dict(model_group=g, snapshot=f"{g}.s0.x1", lever="", lever_value="", budget=1, step=10,
                                 passes=0.5, loss=1.0) for g in ("bd", "ntp")])
    s = analysis.summarize(acc, speed, metrics, ar, COLUMNS, POINTS)
    bd = s[(s["model"] == "bd") & (s["quantity"] == "accuracy")].set_index("column")
    assert bd.loc["gsm8k", "value"] == pytest.approx(32.0) and bd.loc["gsm8k", "seeds"] == 2
    assert bd.loc["gsm8k", "difference"] == pytest.approx(-30.0) and bd.loc["gsm8k", "verdict"] == "below"
    assert bd.loc["humaneval_base", "verdict"] == "within noise"
    assert bd.loc["avg", "value"] == pytest.approx(46.5) and bd.loc["avg", "ref_value"] == pytest.approx(61.5)
    # tokens over each sequence's forwards: the rows' tokens / tokens_per_forward, never over nfe (batched)
    tpf = s[(s["model"] == "bd") & (s["quantity"] == "tokens_per_forward")]["value"].iloc[0]
    assert tpf == pytest.approx((300 + 100) * 2 / ((300 / 1.5 + 100 / 3.0) + (300 / 2.5 + 100 / 1.0)))
    fast = s[(s["model"] == "bd") & (s["quantity"] == "speedup_b1")].iloc[0]
    assert (fast["value"], fast["ci_low"], fast["ci_high"]) == pytest.approx((1.6, 1.5, 1.7))
    assert set(s[s["model"] == "ntp"]["quantity"]) == {"accuracy", "speedup_b1"}
    text = analysis.markdown(s, COLUMNS, 0.9, "provenance")
    assert "| bd | 1x |" in text and "below" in text and "1.60x" in text and "paper 1.5B 2.05" in text
    # the table from budget_study.csv read back (text columns, empty levers as NaN) is the same table
    from analysis.results_io import load_csv
    from fastdllm_core.provenance import write_csv_atomic

    write_csv_atomic(tmp_path / "summary.csv", s.to_dict("records"))
    assert analysis.markdown(load_csv(tmp_path / "summary.csv"), COLUMNS, 0.9, "provenance") == text
    assert analysis._colours(s) == {"bd": "C0", "ntp": "C1"}  # one colour per line, the same in every panel


def test_figure_draws(tmp_path):
    acc = pd.DataFrame(_acc_rows("bd", "bd", 1, 0, {"gsm8k": 30.0, "humaneval_base": 60.0}, "bd_t1")
                       + _acc_rows("bd", "bd", 4, 0, {"gsm8k": 40.0, "humaneval_base": 60.0}, "bd_t1"))
    ar = pd.DataFrame([dict(task=c["task"], metric=c["metric"], value=60.0, n=256, status="ok")
                       for c in COLUMNS.values()])
    empty = pd.DataFrame(columns=["side", "snapshot", "speedup_vs_main_ar", "mode", "lever", "lever_value", "budget"])
    metrics = pd.DataFrame(columns=["model_group", "snapshot", "lever", "lever_value", "budget", "step", "passes",
                                    "loss"])
    s = analysis.summarize(acc, empty, metrics, ar, COLUMNS, POINTS)
    analysis.figure(s, tmp_path / "f.png", tmp_path / "f.pdf", "bd", 0.9, "footer")
    assert (tmp_path / "f.png").stat().st_size > 0 and (tmp_path / "f.pdf").stat().st_size > 0
