"""The Snakemake DAG: config validation, dry runs of paper_figures (default and paper config), lint, rerun
granularity, GPU checks (the slow end-to-end run of config/ci.yaml: test_workflow_e2e.py)."""
import copy
import re
from pathlib import Path

import pytest
import yaml

from conftest import smk
from fastdllm_core.decode_config import DecodeConfig
from fastdllm_dag.job import common as jobs
from fastdllm_dag.plan import checks as plan_checks
from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import points as plan_points
from fastdllm_dag.plan import summaries as plan_summaries

ROOT = Path(__file__).resolve().parents[1]


def default_config():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_dry_run_default(tmp_path):
    r = smk("paper_figures", "-n", "--nolock", "--cores", "2", "--config", f"results_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    for rule in ("train_model", "evaluate", "bench", "table1_main", "fig_attention_masks", "case_study"):
        assert rule in out


def _job_messages(out: str) -> dict[str, str]:
    """The dry run's job messages ("Job N: <message>"), keyed by their text up to the first " -> "."""
    msgs = {}
    for line in out.splitlines():
        m = re.match(r"Job \d+: (.*?) -> (.*)$", line)
        if m:
            msgs[m[1]] = m[2]
    return msgs


def test_dry_run_paper_config(tmp_path):
    """The paper config's dry run says which model each table, figure, sweep and case study uses: the 1.5B
    model for Tables 3, 4 and Figure 6; Fast-dLLM v2 7B against Qwen2.5-7B-Instruct for Figures 1a, 1b and 5
    (Figure 5 at threshold 0.9 with the sub-block cache on); Table 2's rows trained here by the same budget;
    the paper's four case-study dialogues; each benchmark's own generation length."""
    r = smk("paper_figures", "-n", "--nolock", "--cores", "2", "--configfile", "config/paper.yaml", "--config",
            f"results_dir={tmp_path}")
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout + r.stderr
    assert "gpu_batch" in out and "fig_gpu_batch_throughput" in out
    jobs = _job_messages(out)
    ablation = "fastdllm_v2_1.5b (roles.ablation_bd)"
    bd7, ar7 = "fastdllm_v2_7b (roles.speed_bd)", "qwen2.5_7b (roles.speed_ar)"
    for key in ("Table 3 (sub-block size)", "Table 4 (inference block size)",
                "Figure 6a (accuracy vs sub-block size)", "Figure 6b (throughput vs sub-block size)"):
        assert jobs[key].endswith(f"model {ablation}") or jobs[key].endswith(f"models {ablation}"), (key, jobs[key])
    for key in ("Figure 1a (throughput vs accuracy; speed-up)", "Figure 1b (throughput by batch size)",
                "Figure 5 (AR vs diffusion by batch size, GPU)"):
        assert f"models {bd7}, {ar7}" in jobs[key], (key, jobs[key])
    assert jobs["Figure 5 (AR vs diffusion by batch size, GPU)"].endswith(
        "diffusion at threshold 0.9, block 32, sub-block 8, sub-block cache on")
    gpu = jobs["throughput sweep gpu_batch"]
    assert "fastdllm_v2_1.5b" not in gpu and "qwen2.5_1.5b" not in gpu
    assert "qwen2.5_7b (ar) batch 1,4,16,32,64; fastdllm_v2_7b (bd) batch 1,4,16,32,64 at threshold 0.9, block 32, " \
           "sub-block 8, sub-block cache on" in gpu
    assert "fastdllm_v2_1.5b (bd) batch 1,32 at" in jobs["throughput sweep subblock"]
    assert "1.5b" not in jobs["throughput sweep threshold"].split(":", 1)[1]
    t2 = jobs["Table 2 (training recipe ablation)"]
    # offline (smk sets HF_HUB_OFFLINE) without data/sft/adaptation_train.jsonl: the trained rows are n/a rows
    assert "bd_pad_cm_1.5b (n/a rows: no training data)" in t2 and "share init, code and optimiser budget" in t2
    # the case studies: the paper's four dialogues (Tables 5, 6), later turns following the model's own answers
    from analysis import paper_cases

    single, multi = jobs["case study single_turn"], jobs["case study multi_turn"]
    assert "fastdllm_v2_7b (roles.main_bd); 2 conversation(s):" in single
    assert "2 conversation(s) (each later user turn follows the model's own previous answers):" in multi
    for prompt in paper_cases.conversations("single_turn"):
        assert f'"{prompt}"' in single
    for i, turns in enumerate(paper_cases.conversations("multi_turn"), 1):
        assert f"[{i}] " + " / ".join(f'"{u}"' for u in turns) in multi
    assert [len(t) for t in paper_cases.conversations("multi_turn")] == [3, 2]
    evals = {k: v for k, v in jobs.items() if k.startswith("accuracy ") and not k.startswith("accuracy shard ")}
    assert len(evals) >= 8 and all("generation length: each benchmark's own" in v for v in evals.values())
    # eval.shards: every evaluation job and shard shows its estimated cost; LLaDA-1.5 on MATH comes from shards
    shards = {k: v for k, v in jobs.items() if k.startswith("accuracy shard ")}
    assert all("estimated cost" in v and "budget 180 min" in v for v in [*evals.values(), *shards.values()])
    assert "minerva_math llada_g1024_s1024_b128_lc_ce in 126 shards" in evals["accuracy llada_1.5_8b"]


def test_lint_is_clean():
    r = smk("--lint", "--nolock", timeout=200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "Lints for" not in r.stdout + r.stderr


def test_invalid_value_fails_at_parse_time_naming_the_field(tmp_path):
    r = smk("-n", "--nolock", "--cores", "1", "--config", "speed_threshold=1.5", f"results_dir={tmp_path}")
    assert r.returncode != 0
    assert "speed_threshold" in r.stdout + r.stderr


def test_semantic_checks_name_the_field():
    cfg = default_config()
    bad = copy.deepcopy(cfg)
    bad["decode"]["sub_block_size"] = 5
    with pytest.raises(plan_checks.ConfigError, match="decode.sub_block_size"):
        plan_checks.check(bad)
    bad = copy.deepcopy(cfg)
    bad["roles"]["main_bd"] = "ar_base"
    with pytest.raises(plan_checks.ConfigError, match="roles.main_bd"):
        plan_checks.check(bad)
    bad = copy.deepcopy(cfg)
    bad["tables"]["table3"]["sub_blocks"] = [3]
    with pytest.raises(plan_checks.ConfigError, match="tables.table3.sub_blocks"):
        plan_checks.check(bad)
    plan_checks.check(cfg)


def test_gpu_job_fails_clearly_without_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        jobs.require_device({"gpu": True, "device": "cuda"})
    assert jobs.require_device({"gpu": False, "device": "cpu"}) == "cpu"
    assert "gpu_batch" not in plan_points.bench_sweeps(default_config())  # GPU-only sweep left out by config


def test_changing_one_decoding_parameter_touches_only_its_jobs():
    cfg = default_config()
    ev0, sw0 = plan_points.evaluations(cfg), plan_points.bench_sweeps(cfg)
    cfg2 = copy.deepcopy(cfg)
    cfg2["figures"]["threshold"]["thresholds"] = [0.6, 0.9, 1.0]
    ev1, sw1 = plan_points.evaluations(cfg2), plan_points.bench_sweeps(cfg2)
    changed = {k for k in ev0.keys() | ev1.keys() if ev0.get(k) != ev1.get(k)}
    assert changed == {(cfg["roles"]["main_bd"], cfg["columns"]["gsm8k"]["task"])}
    assert {k for k in sw0 if sw0[k] != sw1[k]} == {"threshold"}
    assert DecodeConfig.from_slug("bd_b32_s8_t0.9_c1").point_fields() == {
        "block_size": 32, "sub_block_size": 8, "threshold": 0.9, "use_sub_block_cache": True, "eos_rule": "fill_block"}
    assert (plan_points.point_name("bd", DecodeConfig.from_slug("bd_b32_s8_t0.9_c1").point_fields())
            == "bd_b32_s8_t0.9_c1")


def paper_config():
    return yaml.safe_load((ROOT / "config" / "paper.yaml").read_text())


def _schema_errors(cfg):
    from snakemake.utils import validate

    try:
        validate(copy.deepcopy(cfg), str(ROOT / "workflow" / "schemas" / "config.schema.yaml"))
    except Exception as exc:  # noqa: BLE001 - snakemake wraps jsonschema's ValidationError
        return str(exc)
    return ""


@pytest.mark.parametrize("role,mode", [(r, m) for r, (m, _) in plan.ROLES.items()])
def test_role_validation_names_the_field(role, mode):
    for cfg in (default_config(), paper_config()):
        plan_checks.check(cfg)
        bad = copy.deepcopy(cfg)
        bad["roles"][role] = "no_such_model"
        with pytest.raises(plan_checks.ConfigError, match=rf"roles\.{role}: unknown model 'no_such_model'"):
            plan_checks.check(bad)
        bad = copy.deepcopy(cfg)
        bad["roles"][role] = next(n for n, m in cfg["models"].items() if m["mode"] != mode)
        with pytest.raises(plan_checks.ConfigError, match=rf"roles\.{role}: must name a model with mode: {mode}"):
            plan_checks.check(bad)
        bad = copy.deepcopy(cfg)
        del bad["roles"][role]
        with pytest.raises(plan_checks.ConfigError, match=rf"roles\.{role}: is missing"):
            plan_checks.check(bad)
        assert role in _schema_errors(bad)  # the schema requires every role too


def test_every_config_sets_every_role():
    ci = yaml.safe_load((ROOT / "config" / "ci.yaml").read_text())
    for cfg in (default_config(), paper_config(), ci):
        assert set(cfg["roles"]) == set(plan.ROLES)
    assert default_config()["roles"] == ci["roles"] == {
        "main_bd": "bd_pad_cm", "main_ar": "ar_base", "ablation_bd": "bd_pad_cm", "speed_bd": "bd_pad_cm",
        "speed_ar": "ar_base"}


def test_paper_scale_compares_like_with_like():
    cfg = paper_config()
    r = cfg["roles"]
    assert (r["ablation_bd"], r["speed_bd"], r["speed_ar"]) == ("fastdllm_v2_1.5b", "fastdllm_v2_7b", "qwen2.5_7b")
    ev = plan_points.evaluations(cfg)
    base = plan_points.base_decode(cfg)
    t3 = {plan_points.point_name("bd", dict(base, sub_block_size=s)) for s in cfg["tables"]["table3"]["sub_blocks"]}
    t4 = {plan_points.point_name("bd", dict(base, block_size=b, sub_block_size=b))
          for b in cfg["tables"]["table4"]["block_sizes"]}
    for task in ("gsm8k", "humaneval"):
        assert t3 | t4 <= set(ev[("fastdllm_v2_1.5b", task)])  # Tables 3, 4 on the 1.5B model ...
        # ... not the 7B
        assert not (t3 | t4) - {plan_points.point_name("bd", base)} & set(ev[("fastdllm_v2_7b", task)])
    sw = plan_points.bench_sweeps(cfg)
    assert {x["model"] for x in sw["subblock"]} == {"fastdllm_v2_1.5b"}  # Figure 6
    assert {x["model"] for x in sw["threshold"]} == {"fastdllm_v2_7b"}
    # Figures 1a and 1b: every Table 1 model (the baselines) but the NTP baseline Nemo-FT (not in the paper's
    # Figure 1: no training for the figures; nor the 7B Nemo-FT) at batch 1 and 4, measured in one sweep; Figure 5:
    # Fast-dLLM v2 7B against Qwen2.5-7B-Instruct only
    t1 = {r["model"] for r in cfg["tables"]["table1"]["rows"]} - {"nemo_ft_1.5b", "nemo_ft_7b"}
    assert {x["model"] for x in sw["batch"] if x["batch_size"] == 4} == t1 == {x["model"] for x in sw["batch"]}
    assert {x["model"] for x in sw["gpu_batch"]} == {"fastdllm_v2_7b", "qwen2.5_7b"}
    # Figure 5: the paper's setting, threshold 0.9 with the sub-block cache on
    assert all(x["decode"]["threshold"] == 0.9 and x["decode"]["use_sub_block_cache"] for x in sw["gpu_batch"]
               if x["mode"] == "bd")
    # Table 2: every row trained here by the same code and budget (no released checkpoint among them)
    rows = [x["model"] for x in cfg["tables"]["table2"]["rows"]]
    assert all(plan.is_trained(cfg["models"][m]) for m in rows)
    assert len({repr(plan.training_config(cfg, m, [])["optim"]) for m in rows}) == 1
    assert cfg["decode"]["max_new_tokens"] == "task" and isinstance(default_config()["decode"]["max_new_tokens"], int)


def test_paper_scale_has_every_table1_baseline_with_its_own_sampler():
    """Table 1's other rows are models of the paper config, each at its own evaluation's setting: LLaDA and
    LLaDA-1.5 with LLaDA's generate (per-task lengths and blocks of LLaDA's EVAL.md), Dream with its
    diffusion_generate (entropy, one step per token), LLaMA-3.2 and SmolLM2 as AR rows; every row differenced
    only against a baseline of its own size; Figure 1a/1b measure the masked-diffusion rows with their own
    sampler and with Fast-dLLM v1."""
    cfg = paper_config()
    rows = {r["paper_row"]: r for r in cfg["tables"]["table1"]["rows"]}
    assert {"LLaMA-3.2", "SmolLM2", "LLaDA", "LLaDA-1.5", "Dream"} <= set(rows)
    assert "LLaDA-MoE" not in rows  # no stock architecture: the paper's row only (fastdllm_core.modeling)
    modes = {p: cfg["models"][r["model"]]["mode"] for p, r in rows.items()}
    assert (modes["LLaDA"], modes["LLaDA-1.5"], modes["Dream"], modes["LLaMA-3.2"], modes["SmolLM2"]) == (
        "llada", "llada", "dream", "ar", "ar")
    for p in ("LLaMA-3.2", "SmolLM2", "LLaDA", "LLaDA-1.5", "Dream"):
        assert cfg["models"][rows[p]["model"]]["citation"]
    assert rows["Dream"]["baseline"] == "qwen2.5_7b" and "baseline" not in rows["LLaDA"]
    llada = plan_points.model_decode(cfg, rows["LLaDA"]["model"], "gsm8k")
    assert (llada["max_new_tokens"], llada["block_size"], llada["steps"]) == (256, 8, 256)
    assert plan_points.model_decode(cfg, rows["LLaDA"]["model"], "humaneval")["logits_eos_inf"] is True
    assert plan_points.model_decode(cfg, rows["Dream"]["model"], "humaneval")["max_new_tokens"] == 768
    pts = {(x["model"], x["mode"]) for x in plan_points.bench_sweeps(cfg)["batch"]}
    for p in ("LLaDA", "Dream"):
        m = rows[p]["model"]
        assert {(m, modes[p]), (m, "v1")} <= pts
    plan_checks.check(cfg)


def test_a_sampling_field_on_a_masked_diffusion_model_is_refused_not_dropped():
    cfg = paper_config()
    bad = copy.deepcopy(cfg)
    bad["models"]["dream_7b"]["decode"]["temperature"] = 0.1
    with pytest.raises(plan_checks.ConfigError, match=r"models\.dream_7b\.decode: 'temperature' cannot be set"):
        plan_checks.check(bad)
    bad = copy.deepcopy(cfg)
    bad["models"]["llada_8b"]["decode"]["per_task"]["gsm8k"]["top_p"] = 0.9
    with pytest.raises(plan_checks.ConfigError, match=r"per_task\.gsm8k: 'top_p' cannot be set"):
        plan_checks.check(bad)


def test_table2_labels_a_released_row_beside_trained_ones():
    from fastdllm_dag.job import report_specs

    cfg = paper_config()
    assert report_specs.table2_provenance(cfg)[0] == {}
    cfg["tables"]["table2"]["rows"][2]["model"] = "fastdllm_v2_1.5b"  # the released checkpoint
    suffix, note = report_specs.table2_provenance(cfg)
    assert suffix == {"fastdllm_v2_1.5b": " [released checkpoint (not trained here)]"}
    t = report_specs.build_table("table2_recipe_ablation", cfg)
    labels = [row[0] for row in t.rows if row[0]]
    assert labels[2].endswith("[released checkpoint (not trained here)]") and "released" not in labels[0]
    assert any("not trained by this code" in n for n in t.notes)


def test_case_study_config_structure():
    from analysis import paper_cases

    ci = yaml.safe_load((ROOT / "config" / "ci.yaml").read_text())
    for cfg in (default_config(), paper_config(), ci):
        cases = cfg["tables"]["cases"]
        assert len(cases["single_turn"]) == 2 and all(isinstance(p, str) for p in cases["single_turn"])
        assert len(cases["multi_turn"]) == 2
        assert all(isinstance(c, list) and 2 <= len(c) <= 3 and all(isinstance(u, str) for u in c)
                   for c in cases["multi_turn"])
        assert plan_points.case_conversations(cfg, "single_turn") == [[p] for p in cases["single_turn"]]
        assert plan_points.case_conversations(cfg, "multi_turn") == cases["multi_turn"]
    # paper scale: the paper's own dialogues, verbatim (Tables 5 and 6)
    cases = paper_config()["tables"]["cases"]
    assert cases["single_turn"] == paper_cases.conversations("single_turn")
    assert cases["multi_turn"] == paper_cases.conversations("multi_turn")
    assert "NVIDIA" in plan_summaries.case_summary(paper_config(), "multi_turn")
    # a flat list of strings (the old single-conversation form) is rejected by the schema
    bad = default_config()
    bad["tables"]["cases"]["multi_turn"] = ["What is 2 + 3?", "Add 4."]
    assert "multi_turn" in _schema_errors(bad)
    assert _schema_errors(default_config()) == "" and _schema_errors(paper_config()) == ""


@pytest.mark.parametrize("which", ["default", "paper"])
def test_every_point_round_trips_through_decode_config(which):
    """The DAG names a point by DecodeConfig.slug() and each job rebuilds it with from_slug(): the names of both
    configs' jobs survive the round trip byte for byte (job lists and cached results are keyed by them)."""
    cfg = default_config() if which == "default" else paper_config()
    points = {p for job in plan_points.evaluation_jobs(cfg).values() for ps in job["points"].values() for p in ps}
    assert points and "bd_b32_s8_t1_c0" in points
    for p in points:
        slug, limit = p.split("@")[0], plan_points.point_limit(p)
        mode = DecodeConfig.slug_mode(p)
        assert plan_points.point_name(mode, DecodeConfig.from_slug(p).point_fields(mode), limit) == p
        assert DecodeConfig.from_slug(p).slug(mode) == slug
    for runs in plan_points.bench_sweeps(cfg).values():
        for r in runs:
            assert DecodeConfig.from_dict(r["decode"]).validate(r["mode"]).point_fields(r["mode"]) == r["decode"]


def test_report_rules_are_the_tables_and_figures():
    from fastdllm_dag.plan import report_rules

    rules = report_rules.report_rules(default_config())
    assert [r["name"] for r in rules] == report_rules.TABLE_NAMES + report_rules.FIGURE_NAMES
    assert len(rules) == 13 and len(report_rules.TABLE_NAMES) == 6
    for r in rules:
        assert (ROOT / "workflow" / "report" / f"{r['name']}.rst").is_file()
        assert r["message"] is None or "{summary}" not in r["message"]


@pytest.mark.parametrize("name", ["default", "paper"])
def test_sweeps_are_split_into_bounded_jobs_whatever_their_item_count(name):
    """Issue 24, fault 11: with `eval.sweep_limit: null` (paper scale) the sweep points carry no `@N`, and they
    once all went into the model's Table 1 job (19 points of fastdllm_v2_1.5b, full GSM8K each).  A model's main
    job holds only its Table 1-2 points; its sweep points go to jobs of at most `eval.sweep_points_per_job`."""
    cfg = default_config() if name == "default" else paper_config()
    tables = plan_points.table_points(cfg)
    per_job = cfg["eval"].get("sweep_points_per_job", plan_points.SWEEP_POINTS_PER_JOB)
    jobs = plan_points.evaluation_jobs(cfg)
    for job, spec in jobs.items():
        pts = [(spec["model"], t, p) for t, ps in spec["points"].items() for p in ps]
        if ".sweep" in job:
            assert len(pts) <= per_job and not set(pts) & tables, job
        else:
            assert set(pts) <= tables, (job, set(pts) - tables)
    every = {(m, t, p) for m, t, p in plan_points.accuracy_points(cfg)}
    assert every == {(s["model"], t, p) for s in jobs.values() for t, ps in s["points"].items() for p in ps}
    if name == "paper":
        assert cfg["eval"].get("sweep_limit") is None
        assert len([j for j in jobs if j.startswith("fastdllm_v2_1.5b.")]) >= 4
        main = jobs["fastdllm_v2_1.5b"]["points"]
        assert all(ps == ["bd_b32_s8_t1_c0"] for ps in main.values()), main


def test_a_shared_default_that_is_absent_falls_back_to_the_task_own_source(tmp_path):
    """Issue 24, fault 5: config/paper.yaml's `{shared}` data paths on a machine without ../shared are defaults that
    do not apply (the task then loads its data itself: override variable, Hub, or n/a naming
    data.eval_paths.<task>), not a missing file; a path the user gave stays as given."""
    cfg = paper_config()
    cfg["shared_dir"] = str(tmp_path / "empty")
    assert plan.eval_path(cfg, "gsm8k") is None and plan.eval_path(cfg, "mmlu") is None
    (tmp_path / "empty" / "data" / "gsm8k").mkdir(parents=True)
    (tmp_path / "empty" / "data" / "gsm8k" / "test.jsonl").write_text("{}\n")
    assert plan.eval_path(cfg, "gsm8k") == str(tmp_path / "empty" / "data" / "gsm8k" / "test.jsonl")
    cfg["data"]["eval_paths"]["gsm8k"] = str(tmp_path / "mine.jsonl")  # absent, but the user's own
    assert plan.eval_path(cfg, "gsm8k") == str(tmp_path / "mine.jsonl")

