"""Findings that survive seeds: every adaptation trained once per seed, tables averaging them with an interval
that includes the spread between seeds, and each Table 1 row differenced against its own baseline."""
import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fastdllm_core.intervals import seed_interval, wilson_pct
from fastdllm_dag.plan import checks as plan_checks
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points

ROOT = Path(__file__).resolve().parents[1]


def load(name):
    return yaml.safe_load((ROOT / "config" / name).read_text())


def test_every_adaptation_is_trained_once_per_seed():
    cfg = load("config.yaml")
    seeds = cfg["adaptation_seeds"]
    assert seeds == [0, 1, 2]
    ex = plan.expand_seeds(cfg)
    adaptations = [n for n, m in cfg["models"].items() if plan.is_adaptation(m)]
    assert set(adaptations) >= {"ntp", "bd_naive", "bd_pad", "bd_pad_cm"}
    for n in adaptations:
        group = plan.seed_group(ex, n)
        assert group == [n] + [f"{n}.seed{s}" for s in seeds[1:]]
        assert [plan.train_seed(ex, m) for m in group] == seeds
        # the same recipe, init, data and budget: only the seed differs
        cfgs = [plan.training_config(ex, m, ["x.jsonl"]) for m in group]
        for c in cfgs:
            c["train"].pop("seed")
        assert all(c == cfgs[0] for c in cfgs)
    # the AR base and its pretraining are not replicated; expanding twice changes nothing
    assert plan.seed_group(ex, "ar_base") == ["ar_base"] and "ar_base.seed1" not in ex["models"]
    assert plan.expand_seeds(ex) is ex
    # every replicate is evaluated on Table 1/2's tasks at the accuracy point; the sweeps stay on the first seed
    ev = plan_points.evaluations(ex)
    assert ("bd_pad_cm.seed2", "synth_arith") in ev and ev[("bd_pad_cm.seed2", "synth_arith")] == ["bd_b32_s8_t1_c0"]
    assert all("@" not in p for (m, _), pts in ev.items() if ".seed" in m for p in pts)
    assert len(ev[("bd_pad_cm", "synth_arith")]) > 1


def test_paper_config_trains_one_seed():
    cfg = load("paper.yaml")
    ex = plan.expand_seeds(cfg)
    assert not any(".seed" in m for m in ex["models"])


def test_seed_interval_includes_the_spread_between_seeds():
    one = seed_interval([60.0], 256)
    assert one == (60.0, *wilson_pct(60.0, 256))
    tight = seed_interval([60.0, 60.5, 59.5], 256)
    spread = seed_interval([43.0, 26.6, 34.4], 256)
    assert tight[2] - tight[1] < spread[2] - spread[1]
    # wider than the items' interval alone, and than the seeds' standard error alone
    m = 34.666666666666664
    items_half = (wilson_pct(m, 256)[1] - wilson_pct(m, 256)[0]) / 2
    assert (spread[2] - spread[1]) / 2 > max(items_half, 8.2)
    assert spread[0] == pytest.approx(m)
    # known values: t quantile at the Welch-Satterthwaite df
    assert spread[1] == pytest.approx(18.954, abs=1e-3) and spread[2] == pytest.approx(50.379, abs=1e-3)
    assert seed_interval([0.0, 0.0], 10) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="n must be"):
        seed_interval([1.0, 2.0], 1)


def _rows(model, values, task="synth_arith", metric="exact_match_strict", n=256):
    return [{"model": f"{model}{'' if i == 0 else f'.seed{i}'}", "task": task, "metric": metric, "value": v,
             "n": n, "status": "ok", "mode": "bd", "block_size": 32, "sub_block_size": 8, "threshold": 1.0,
             "use_sub_block_cache": False} for i, v in enumerate(values)]


def test_table_rows_are_seed_means_with_their_interval():
    from fastdllm_dag.job import report_specs

    cfg = plan.expand_seeds(load("config.yaml"))
    acc = pd.DataFrame(_rows("ar_base", [62.5]) + _rows("ntp", [58.0, 64.0, 60.0]) +
                       _rows("bd_pad_cm", [43.0, 26.6, 34.4]))
    t = report_specs.build_table("table1_main", cfg, acc)
    text = "\n".join(" | ".join(r) for r in t.rows)
    assert "Fast-dLLM v2 recipe (tiny) (mean of 3 seeds)" in text
    mean, lo, hi = seed_interval([43.0, 26.6, 34.4], 256)
    assert f"{mean:.1f} ± {(hi - lo) / 2:.1f}" in text
    assert any("Welch-Satterthwaite" in n for n in t.notes)
    # the difference rows: each row against its own baseline, and this one is inside the noise
    diffs = [r for r in t.rows if r[1] == "reproduced difference"]
    assert [r[0].split(" - ")[1] for r in diffs] == ["AR instruct (tiny; stand-in for Qwen2.5-Instruct)"] * 3
    # a missing replicate is named, never silently averaged over fewer seeds
    acc2 = acc[acc["model"] != "bd_pad_cm.seed2"]
    text2 = "\n".join(t2 for t2 in report_specs.build_table("table1_main", cfg, acc2).footnotes)
    assert "bd_pad_cm.seed2" in text2


def test_baselines_are_validated():
    cfg = load("config.yaml")
    plan_checks.check(cfg)
    bad = copy.deepcopy(cfg)
    bad["tables"]["table1"]["rows"][2]["baseline"] = "ntp"
    with pytest.raises(plan_checks.ConfigError, match=r"rows\[2\].baseline.*mode bd|rows\[2\].baseline.*ntp"):
        plan_checks.check(bad)
    bad["tables"]["table1"]["rows"][2]["baseline"] = "nope"
    with pytest.raises(plan_checks.ConfigError, match="another row"):
        plan_checks.check(bad)
    paper = load("paper.yaml")
    plan_checks.check(paper)
    rows = {r["model"]: r.get("baseline") for r in paper["tables"]["table1"]["rows"]}
    assert rows["fastdllm_v2_7b"] == "qwen2.5_7b" and rows["fastdllm_v2_1.5b"] == "qwen2.5_1.5b"
    bad = copy.deepcopy(paper)
    for r in bad["tables"]["table1"]["rows"]:
        if r["model"] == "nemo_ft_1.5b":
            r["baseline"] = "qwen2.5_7b"  # trained from the 1.5B model: a 7B baseline is refused
    with pytest.raises(plan_checks.ConfigError, match="adapted from"):
        plan_checks.check(bad)
