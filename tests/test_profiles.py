"""Snakemake profiles: the paper config's one-GPU command limits the model jobs to one GPU at a time (issue 24)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fastdllm_dag.plan import models as plan

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "snakemake --profile profiles/local-gpu --configfile config/paper.yaml"


def _resources(monkeypatch, *argv):
    from snakemake.cli import parse_args

    monkeypatch.chdir(ROOT)  # the workflow profile (profiles/default) is found beside the Snakefile
    _, args = parse_args(["-n", *argv])
    return {k: v.value for k, v in (args.resources or {}).items()}


def test_local_gpu_profile_sets_a_global_gpu_limit(monkeypatch):
    assert _resources(monkeypatch, "--profile", "profiles/local-gpu") == {"gpu": 1}
    assert _resources(monkeypatch, "--profile", "profiles/local-gpu", "--resources", "gpu=2") == {"gpu": 2}
    assert "gpu" not in _resources(monkeypatch, "--profile", "profiles/slurm")  # the cluster schedules GPUs


@pytest.mark.parametrize("doc", ["README.md", "config/paper.yaml"])
def test_documented_one_gpu_command_uses_the_profile(doc):
    text = (ROOT / doc).read_text()
    assert COMMAND in text
    # no documented local paper-scale run without the GPU limit
    assert not re.search(r"snakemake --cores all --configfile config/paper\.yaml", text)


def _paper_config():
    from fastdllm_core.cli.plan_training import load_config

    return load_config([str(ROOT / "config" / "paper.yaml")])


def _profile(name):
    return yaml.safe_load((ROOT / "profiles" / name / "config.yaml").read_text())


MODEL_RULES = {"train_model", "evaluate", "evaluate_shard", "case_study", "bench"}


def test_slurm_profile_keeps_the_gpu_requests_and_names_no_placeholder():
    prof = _profile("slurm")
    assert prof["executor"] == "slurm"
    assert set(prof["set-resources"]) == MODEL_RULES
    train = prof["set-resources"]["train_model"]
    # GPUs per node as gres (gpu: N would be a job-wide --gpus); nodes and runtime from the config's training plan
    assert (train["gres"], train["gpu"], train["cpus_per_task"]) == ("gpu:a100:8", 0, 32)
    assert "nodes" not in train and "runtime" not in train  # set-resources would override the rule's plan
    assert all(prof["set-resources"][r]["gpu"] == 1 for r in MODEL_RULES - {"train_model"})
    # a placeholder partition/account is refused by the controller (and the account by the plugin before sbatch):
    # unset, the cluster's default partition and the user's default account are used
    text = (ROOT / "profiles/slurm/config.yaml").read_text()
    assert "YOUR_" not in text
    # bench's threads are workflow.cores, i.e. the submitting machine's cores, unless cpus_per_task says otherwise
    assert isinstance(prof["set-resources"]["bench"]["cpus_per_task"], int)


@pytest.mark.parametrize("profile,configs", [("slurm", ["paper.yaml"]),
                                             ("slurm-rehearsal", ["paper.yaml", "rehearsal.yaml"])])
def test_shard_budget_fits_the_profiles_evaluation_runtime(profile, configs):
    """eval.shards.job_minutes (the estimate one shard may take) is at most the runtime the profile gives an
    evaluation or shard job (SLURM's -t): a shard sized to the budget is not killed at the limit."""
    import yaml
    from snakemake.utils import update_config

    cfg: dict = {}
    for c in configs:
        update_config(cfg, yaml.safe_load((ROOT / "config" / c).read_text()))
    budget = cfg["eval"]["shards"]["job_minutes"]
    res = _profile(profile)["set-resources"]
    assert res["evaluate_shard"]["runtime"] == res["evaluate"]["runtime"]
    assert 0 < budget <= res["evaluate_shard"]["runtime"], (profile, budget)


def test_rehearsal_profile_is_the_slurm_profile_without_gpus():
    """profiles/slurm-rehearsal (scripts/cluster/slurm_rehearsal.sh: a one-node SLURM cluster, 2 CPUs, no GPU)."""
    slurm, rehearsal = _profile("slurm"), _profile("slurm-rehearsal")
    assert rehearsal["executor"] == slurm["executor"]
    assert set(rehearsal["set-resources"]) == set(slurm["set-resources"])
    assert set(rehearsal["default-resources"]) == set(slurm["default-resources"]) | {"slurm_partition",
                                                                                    "slurm_account"}
    assert rehearsal["default-resources"]["gpu"] == 0
    for rule, res in rehearsal["set-resources"].items():
        assert res["gpu"] == 0 and "gpu_model" not in res, rule
        # train_model's time limit is the rule's (the training plan's job_minutes, as profiles/slurm)
        assert res.get("cpus_per_task", 1) <= 2 and res["mem_mb"] <= 4000, rule
        assert res["runtime"] <= 60 if rule != "train_model" else "runtime" not in res, rule
    assert "runtime" not in slurm["set-resources"]["train_model"]


class _Resources(dict):
    __getattr__ = dict.__getitem__


class _Job:
    def __init__(self, resources, threads=1):
        self.resources, self.threads = _Resources(resources), threads


def _sbatch(resources, threads=1):
    pytest.importorskip("snakemake_executor_plugin_slurm")
    from snakemake_executor_plugin_slurm.submit_string import get_submit_command
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    job = _Job(resources, threads)
    params = {"run_uuid": "u", "slurm_logfile": "l", "comment_str": "c", "account": "", "partition": "",
              "workdir": None}
    return get_submit_command(job, params) + set_gres_string(job)


def test_slurm_profile_sbatch_flags():
    """The flags snakemake-executor-plugin-slurm builds from profiles/slurm (units: mem_mb MB, runtime minutes);
    scripts/cluster/slurm_rehearsal.sh checks the same calls against a real slurmctld with sbatch --test-only."""
    prof = _profile("slurm")
    paper = _paper_config()  # train_model's nodes and runtime: the rule's, from training_plan
    rule = {"nodes": plan.train_nodes(paper), "runtime": plan.train_runtime(paper, attempt=2), "tasks": 0}
    assert rule == {"nodes": 8, "runtime": 1440, "tasks": 0} and plan.train_retries(paper) >= 1
    # retries: the planned jobs less the first, plus training_plan.spare_jobs (default 1); at least one job
    spare = {**paper, "training_plan": {**paper["training_plan"], "spare_jobs": 3}}
    assert plan.train_retries(spare) == plan.train_retries(paper) + 2
    month = {**paper, "training_plan": {**paper["training_plan"], "job_minutes": 60 * 24 * 30}}
    assert plan.train_retries(month) == 1  # one job of a month plans the run: one spare
    train = _sbatch({**prof["default-resources"], **rule, **prof["set-resources"]["train_model"]})
    for flag in ("-t 1440", "--mem 480000", "--cpus-per-task=32", "--gres=gpu:a100:8", "--nodes=8"):
        assert flag in train
    assert "--gpus" not in train  # per node, not job-wide
    # one batch task: train_gpus starts one process per GPU (one torchrun per node through srun)
    assert "--ntasks" not in train
    assert "--gres=gpu:a100:8" in train  # the paper's 8 x 8 A100
    bench = _sbatch({**prof["default-resources"], **prof["set-resources"]["bench"]}, threads=128)
    assert "--cpus-per-task=8" in bench and "--gpus=a100:1" in bench
    cpu = _sbatch(prof["default-resources"])
    assert "--gpus" not in cpu and "--ntasks=1" in cpu and "--mem 8000" in cpu
    rehearsal = _profile("slurm-rehearsal")
    from fastdllm_core.cli.plan_training import load_config

    rcfg = load_config([str(ROOT / "config" / f) for f in ("paper.yaml", "rehearsal.yaml")])
    rrule = {"nodes": plan.train_nodes(rcfg), "runtime": plan.train_runtime(rcfg, attempt=1),
             "tasks": plan.train_nodes(rcfg)}  # a CPU job: one batch task a node (workflow/rules/training.smk)
    assert "nodes" not in rehearsal["set-resources"]["train_model"]  # the plan's, not pinned by the profile
    rtrain = _sbatch({**rehearsal["default-resources"], **rrule, **rehearsal["set-resources"]["train_model"]})
    # the real profile's shape on the 2-CPU node: the rehearsal plan's one node and the paper's time limit, one
    # batch task (the plugin writes --ntasks=1 for a job without GPUs, and nothing -- SLURM's default, one task --
    # for a GPU job), a CPU per training process
    assert "--gpus" not in rtrain and "--ntasks=1" in rtrain
    assert "--nodes=1" in rtrain and "--cpus-per-task=2" in rtrain and "-t 1440" in rtrain
    # two nodes (scripts/cluster/slurm_rehearsal.sh REHEARSAL_NODES=2): a task on each, else SLURM cuts the nodes to 1
    r2 = _sbatch({**rehearsal["default-resources"], **rrule, "nodes": 2, "tasks": 2,
                  **rehearsal["set-resources"]["train_model"]})
    assert "--nodes=2" in r2 and "--ntasks=2" in r2 and "--cpus-per-task=2" in r2


# what Snakemake itself resolves (snakemake.cli.parse_args, the parsing `snakemake` runs): the workflow profile
# profiles/default is loaded on every run and its values win key by key over an explicit --profile (issue 30)
SCALAR_SKIP = {"default-resources", "set-resources", "resources", "cores"}


def _resolved(monkeypatch, *argv):
    from snakemake.cli import parse_args

    monkeypatch.chdir(ROOT)
    return parse_args(["-n", *argv])[1]


@pytest.mark.parametrize("name", ["slurm", "slurm-rehearsal", "local-gpu"])
def test_every_setting_of_an_explicit_profile_is_in_force(monkeypatch, name):
    args = _resolved(monkeypatch, "--profile", f"profiles/{name}")
    wanted = {k: v for k, v in _profile(name).items() if k not in SCALAR_SKIP}
    got = {k: getattr(args, k.replace("-", "_")) for k in wanted}
    assert got == wanted


def test_slurm_profile_values_win_over_the_workflow_default(monkeypatch):
    args = _resolved(monkeypatch, "--profile", "profiles/slurm")
    assert (args.latency_wait, args.retries, args.jobs, args.rerun_incomplete) == (60, 1, 32, True)
    assert args.executor == "slurm"


def test_default_local_run_gets_the_workflow_profile(monkeypatch):
    import os

    args = _resolved(monkeypatch)
    assert args.rerun_incomplete is True and args.printshellcmds is True and args.show_failed_logs is True
    assert args.cores == os.cpu_count()  # cores: all
    assert args.executor in (None, "local")  # no cluster settings leak into a local run
    # nothing in profiles/default may contradict a cluster profile (it would win over it)
    default = _profile("default")
    for name in ("slurm", "slurm-rehearsal", "local-gpu"):
        prof = _profile(name)
        clash = {k: (default[k], prof[k]) for k in set(default) & set(prof) if default[k] != prof[k]}
        assert not clash, (name, clash)


def test_profile_settings_helper_reports_what_snakemake_resolves(monkeypatch):
    """scripts/cluster/profile_settings.py, run as scripts/cluster/slurm_rehearsal.sh runs it (its
    evidence/profile_settings.txt): the same values as parse_args, the resources as the profiles write them."""
    script = [sys.executable, str(ROOT / "scripts" / "cluster" / "profile_settings.py")]
    r = subprocess.run(script + ["profiles/slurm", "profiles/slurm-rehearsal"], cwd=ROOT, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    docs = list(yaml.safe_load_all(r.stdout))
    for name, got in zip(("slurm", "slurm-rehearsal"), docs, strict=True):
        args = _resolved(monkeypatch, "--profile", f"profiles/{name}")
        assert (got["executor"], got["jobs"], got["retries"]) == (args.executor, args.jobs, args.retries)
        prof = _profile(name)
        assert got["set-resources"] == prof["set-resources"], name
        assert {k: got["default-resources"][k] for k in prof["default-resources"]} == prof["default-resources"]
    r = subprocess.run(script + ["profiles/nope"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1 and "profile 'profiles/nope': no profiles/nope/config.yaml" in r.stderr
