"""The evaluation cost model and the shard plan (workflow/fastdllm_dag/plan/eval_cost.py): known points, a budget that
splits a point into n shard jobs, and no shard (the same DAG) without eval.shards."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from fastdllm_dag.plan import eval_cost
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points
from fastdllm_dag.plan import summaries as plan_summaries

ROOT = Path(__file__).resolve().parents[1]


def _config(name="config.yaml", **shards):
    from snakemake.utils import update_config

    cfg = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    if name == "ci.yaml":  # an overlay of the embedded default
        update_config(cfg, yaml.safe_load((ROOT / "config" / name).read_text()))
    elif name != "config.yaml":
        cfg = yaml.safe_load((ROOT / "config" / name).read_text())
    cfg = plan.expand_seeds(cfg)
    if shards:
        cfg["eval"]["shards"] = shards
    return cfg


def _point(mode, **decode):
    return plan_points.point_name(mode, decode)


def test_item_cost_of_known_points():
    cfg = _config(job_minutes=10, token_forwards_per_s=100, prompt_tokens={"gsm8k": 100})
    cfg["decode"]["max_new_tokens"] = 64
    # AR: the prompt once, one token per forward
    assert eval_cost.item_cost(cfg, "gsm8k", "ar") == 100 + 64
    bd = dict(plan_points.base_decode(cfg), block_size=32, sub_block_size=8, use_sub_block_cache=False)
    assert eval_cost.item_cost(cfg, "gsm8k", _point("bd", **bd)) == 100 + 64 * 32
    assert eval_cost.item_cost(cfg, "gsm8k", _point("bd", **dict(bd, use_sub_block_cache=True))) == 100 + 64 * 8
    # LLaDA: steps forwards over prompt + generation
    llada = _point("llada", max_new_tokens=256, steps=128, block_size=32)
    assert eval_cost.item_cost(cfg, "gsm8k", llada) == 128 * (100 + 256)
    # Fast-dLLM v1 with the dual cache: one full forward per block, the other steps over one block
    v1 = _point("v1", max_new_tokens=256, steps=256, block_size=32, cache="dual", threshold=0.9)
    assert eval_cost.item_cost(cfg, "gsm8k", v1) == 8 * (100 + 256) + (256 - 8) * 32
    # multiple choice: one forward per option; Monte Carlo on a masked-diffusion model multiplies by mc_num
    cfg["eval"].update(mdm_loglikelihood="mc", mc_num=16)
    assert eval_cost.item_cost(cfg, "mmlu", "ar") == 4 * 700
    assert eval_cost.item_cost(cfg, "mmlu", llada) == 4 * 700 * 16


def test_items_come_from_the_data_file_and_the_limits(tmp_path):
    cfg = _config(job_minutes=10, token_forwards_per_s=100)
    f = tmp_path / "gsm8k.jsonl"
    f.write_text("".join('{"question": "q", "answer": "a"}\n' for _ in range(37)))
    cfg["data"]["eval_paths"] = {"gsm8k": str(f)}
    cfg["eval"]["limit"] = None
    assert eval_cost.n_items(cfg, "gsm8k", "ar") == 37
    assert eval_cost.n_items(cfg, "gsm8k", "bd_x@5") == 5  # a sweep point's prefix
    assert eval_cost.n_items(cfg, "ifeval", "ar") == 541  # no local file: the official size
    cfg["eval"]["limit"] = 3
    assert eval_cost.n_items(cfg, "minerva_math", "ar") == 3 * 7  # lm-eval's limit is per subtask


def test_a_point_over_the_budget_is_planned_as_n_shards():
    cfg = _config(job_minutes=1, token_forwards_per_s=1)
    pts = plan_points.accuracy_points(cfg)
    m, t, p = pts[0]
    minutes = eval_cost.point_cost(cfg, t, p)[1]
    want = min(math.ceil(minutes), eval_cost.n_items(cfg, t, p))
    assert want > 1
    shards = eval_cost.shard_jobs(cfg)
    mine = sorted(s for s, sj in shards.items() if (sj["model"], sj["task"], sj["point"]) == (m, t, p))
    assert mine == sorted(eval_cost.shard_name(m, t, p, k, want) for k in range(1, want + 1))
    assert all("@" not in s and "/" not in s for s in shards)
    job = next(j for j in plan_points.evaluation_jobs(cfg).values() if j["model"] == m and p in j["points"].get(t, []))
    assert sorted(eval_cost.job_shards(cfg, job)[(t, p)]) == mine
    assert "merged from shards" in plan_summaries.eval_summary(cfg, job)
    # every evaluation job keeps within the budget the points it runs itself
    for job in plan_points.evaluation_jobs(cfg).values():
        own = eval_cost.job_shards(cfg, job)
        kept = [eval_cost.point_cost(cfg, t, p)[1] for t, ps in job["points"].items() for p in ps if (t, p) not in own]
        assert sum(kept) <= 1


@pytest.mark.parametrize("name", ["config.yaml", "ci.yaml"])
def test_no_shards_without_eval_shards(name):
    cfg = _config(name)
    assert eval_cost.shard_config(cfg) is None and eval_cost.shard_jobs(cfg) == {}
    for job in plan_points.evaluation_jobs(cfg).values():
        assert "estimated cost" not in plan_summaries.eval_summary(cfg, job)


def test_paper_shards_fit_the_budget():
    cfg = _config("paper.yaml")
    budget = cfg["eval"]["shards"]["job_minutes"]
    shards = eval_cost.shard_jobs(cfg)
    assert any(sj["task"] == "minerva_math" for sj in shards.values())  # LLaDA-1.5 on MATH: 5,000 x 1,024 steps
    for sj in shards.values():  # every task is split, EvalPlus' too
        assert eval_cost.point_cost(cfg, sj["task"], sj["point"])[1] / sj["n"] <= budget
    split = {sj["task"] for sj in shards.values() if sj["n"] > 1}
    assert {"humaneval", "mbpp"} <= split and "gpqa" not in split  # GPQA scored exactly: 3 forwards an option


def test_multiple_choice_cost_follows_the_method_that_runs():
    cfg = _config("paper.yaml")
    assert cfg["eval"]["mdm_loglikelihood"] == "auto" and cfg["eval"]["mc_num"] == 128
    assert eval_cost.option_forwards(cfg, "mmlu", "llada") == 1  # "A": one mask pattern
    assert eval_cost.option_forwards(cfg, "gpqa", "dream") == 3  # "(A", ")": three
    assert eval_cost.option_forwards(cfg, "gpqa", "bd") == 1
    mc = dict(cfg, eval=dict(cfg["eval"], mdm_loglikelihood="mc"))
    assert eval_cost.option_forwards(mc, "mmlu", "llada") == 128
    few = dict(cfg, eval=dict(cfg["eval"], mc_num=2))  # auto: exact only where no dearer than the estimate
    assert eval_cost.option_forwards(few, "mmlu", "llada") == 1 and eval_cost.option_forwards(few, "gpqa", "llada") == 2


def test_rehearsal_splits_a_point_in_two_shards():
    """config/rehearsal.yaml (over config/paper.yaml) exercises a shard split and merge: MATH points of the
    masked-diffusion rows in 2 shards each, merged by their model's evaluate job."""
    from snakemake.utils import update_config

    cfg = yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())
    update_config(cfg, yaml.safe_load((ROOT / "config" / "rehearsal.yaml").read_text()))
    cfg = plan.expand_seeds(cfg)
    shards = eval_cost.shard_jobs(cfg)
    assert {sj["n"] for sj in shards.values()} <= {1, 2} and any(sj["n"] == 2 for sj in shards.values())
    merged = [ss for j in plan_points.evaluation_jobs(cfg).values() for ss in eval_cost.job_shards(cfg, j).values()
              if len(ss) == 2]
    assert merged and all(s.endswith(("s1of2", "s2of2")) for ss in merged for s in ss)


def test_the_shard_plan_is_computed_once_and_passed_in(monkeypatch):
    """workflow/rules/common.smk computes shard_jobs and evaluation_jobs once (SHARD_JOBS, EVAL_JOBS); the per-job
    helpers given them compute neither again, and give what they compute themselves."""
    cfg = _config("paper.yaml")
    shards, jobs = eval_cost.shard_jobs(cfg), plan_points.evaluation_jobs(cfg)
    own = {j: (eval_cost.job_shards(cfg, job), plan_summaries.eval_summary(cfg, job), plan_points.eval_priority(cfg, j))
           for j, job in jobs.items()}

    def refused(*a, **k):
        raise AssertionError("recomputed per job")

    monkeypatch.setattr(eval_cost, "shard_jobs", refused)
    monkeypatch.setattr(plan_points, "evaluation_jobs", refused)
    for j, job in jobs.items():
        assert (eval_cost.job_shards(cfg, job, shards), plan_summaries.eval_summary(cfg, job, shards),
                plan_points.eval_priority(cfg, j, jobs)) == own[j]
    assert any(own[j][0] for j in jobs) and {own[j][2] for j in jobs} == {0, 1}
