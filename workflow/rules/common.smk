# Helpers shared by all the rules: config validation (schema + semantic checks), paths, resources.
import os
import sys

import yaml
from snakemake.utils import validate

from fastdllm_dag.plan import models as plan  # the DAG plan as data: models, training
from fastdllm_dag.plan import points as plan_points  # decoding points, evaluation jobs, sweeps
from fastdllm_dag.plan import checks as plan_checks
from fastdllm_dag.plan import data as plan_data  # the adaptation data; trained rows without training data
from fastdllm_dag.plan import summaries  # dry-run messages
from fastdllm_dag.plan import eval_cost  # evaluation cost estimates and shards, eval.shards
from fastdllm_dag.plan import released  # released checkpoints the DAG can also build
from fastdllm_dag.plan import study as study_plan  # the studies: bases, chains, snapshots, estimates
from fastdllm_dag.plan import study_checks
from fastdllm_dag.plan import study_rows  # what the studies have on disk; each study's plan for the rules
from fastdllm_dag.plan import study_specs  # what each study job receives
from fastdllm_dag.plan import report_inputs  # which results each table and figure reads
from fastdllm_dag.plan import report_rules  # the tables and figures

_SCHEMA = os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml")
# --config values below the top level arrive as strings ('decode={threshold: 0.8}' gives "0.8"): read each as the
# type the schema asks for, so that the checks, the plan and the jobs see numbers, booleans and lists (same keys)
with open(_SCHEMA) as _f:
    config.update(plan_checks.coerce_types(dict(config), yaml.safe_load(_f)))
# a schema error in a few lines (field, bad value, what is allowed), not Snakemake's dump of schema and config
plan_checks.validate_schema(config, _SCHEMA)
validate(config, "../schemas/config.schema.yaml")  # passes now; kept for Snakemake's schema defaults

plan_checks.check(config)
study_checks.check(config)  # a bad size, an unknown lever or subset: named before any training
_resolved = study_plan.resolve(config)  # the default base's stages, kept for the bases the studies build
# build_released / released_with: which released checkpoints this run loads and which it builds (ar_base)
_resolved = released.resolve(_resolved)
# every adaptation once per seed of adaptation_seeds (<model>.seed<S>; the first seed keeps the model's key)
_resolved = plan.expand_seeds(_resolved)
# a trained model without training data (none on disk, none the adaptation_data rule can build here) is planned as
# n/a rows naming the keys to set (models.<m>.train_unavailable), with no training job
_resolved = plan_data.mark_unavailable(_resolved)
config.clear()
config.update(_resolved)
ADAPTATION_OUT = plan_data.adaptation_output(config)
ADAPTATION_UNAVAILABLE = plan_data.adaptation_unavailable(config)

# the library's own fallbacks (the original HumanEval, ...) look in shared_dir too: the config decides, not the
# environment, so that every job -- local or submitted -- reads the same shared copy
os.environ.update(FASTDLLM_SHARED_DIR=os.path.abspath(config.get("shared_dir", "../shared")))

RESULTS = config["results_dir"]
R = plan.run_dir(config)  # intermediate results of this scale: results/<scale>/...
LOGS = f"{R}/logs"
TABLES_DIR = f"{RESULTS}/tables"
FIGURES_DIR = f"{RESULTS}/figures"
GPU = 1 if config["gpu"] else 0
SYN = config["data"].get("synthetic", {})

# each table and figure as two files: the first shown in the HTML report, the second for papers
EXTENSIONS = {"table": ("md", "tex"), "figure": ("png", "pdf")}
ALL_TABLES = [f"{TABLES_DIR}/{n}.{ext}" for n in report_rules.TABLE_NAMES for ext in EXTENSIONS["table"]]
ALL_FIGURES = [f"{FIGURES_DIR}/{n}.{ext}" for n in report_rules.FIGURE_NAMES for ext in EXTENSIONS["figure"]]

EVAL_JOBS = plan_points.evaluation_jobs(config)
ACCURACY_CSVS = [plan_points.accuracy_path(config, j) for j in EVAL_JOBS]
SHARD_JOBS = eval_cost.shard_jobs(config)  # points over eval.shards.job_minutes: {shard: {model, task, point, k, n}}
SWEEPS = plan_points.bench_sweeps(config)
THROUGHPUT_CSVS = [f"{R}/throughput/{s}.csv" for s in SWEEPS]
TRAINED = plan.trained_models(config)
RELEASE_BUILDS = released.builds(config)
SYN_FILES = plan.synthetic_files(config)


def eval_params(model_of):
    """The params of rules evaluate and evaluate_shard alike: the model (``model_of(wildcards)``) and the settings
    of its evaluation."""
    return dict(
        model=model_of,
        source=lambda wc: plan.model_source(config, model_of(wc)),
        label=lambda wc: config["models"][model_of(wc)].get("label", model_of(wc)),
        mode=lambda wc: config["models"][model_of(wc)]["mode"],
        max_new_tokens=config["decode"]["max_new_tokens"],
        batch_size=config["eval"]["batch_size"],
        limit=config["eval"].get("limit"),
        mdm_loglikelihood=config["eval"].get("mdm_loglikelihood", "mc"),
        mc_num=config["eval"].get("mc_num", 128),
        cache_dir=lambda wc: f"{R}/accuracy/{model_of(wc)}",
        verdict_cache=f"{R}/cache/verdicts",  # code checks made before (same problem, solution, limits, code)
    )


def eval_shard_inputs(job):
    """``{"shards": [the shard files of job's points split in shards]}``; nothing without eval.shards."""
    if not eval_cost.shard_config(config):
        return {}
    return {"shards": [f"{R}/accuracy/shards/{s}.json"
                       for ss in eval_cost.job_shards(config, EVAL_JOBS[job], SHARD_JOBS).values() for s in ss]}


def train_inputs(model):
    """Training files as Snakemake inputs: the synthetic ones, and external ones that exist (a missing external
    file is reported by the training job itself before any work, so that the rest of the DAG stays runnable)."""
    files = plan.train_files(config, model)
    built = ADAPTATION_OUT if ADAPTATION_UNAVAILABLE is None else None
    return [f for f in files if f in SYN_FILES.values() or os.path.exists(f) or f == built] + [
        d for f in files for d in plan.standin_inputs(config, f)]


NA_TRAINED = {n: m["train_unavailable"] for n, m in config["models"].items() if m.get("train_unavailable")}
if NA_TRAINED:
    print(f"note: {', '.join(NA_TRAINED)}: n/a rows, {next(iter(NA_TRAINED.values()))}", file=sys.stderr)


def release_inputs(wildcards):
    """The checkpoints this run builds (build_released), their stages' training curves and their own scores."""
    if not RELEASE_BUILDS:
        raise ValueError("release_base writes the released checkpoints that a run builds, and this one builds none: "
                         "run it as `snakemake --cores all release_base --config build_released=True`")
    chains = [s for m in RELEASE_BUILDS for s in released.build_chain(config, m)]
    return {
        "finals": [plan.model_final(config, m) for m in RELEASE_BUILDS],
        "metrics": [f"{R}/models/{s}/training_metrics.csv" for s in chains],
        "accuracy": [plan_points.accuracy_path(config, j) for j, job in EVAL_JOBS.items() if job["model"] in RELEASE_BUILDS],
        "numerics": "tests/data/numerics/training.json",
    }


def task_inputs(task):
    p = plan.task_data(config, task)
    return [p] if p and task in plan.TASK_DATA_KEYS else plan.standin_inputs(config, p)


def model_mem_mb(wildcards, attempt):
    return (48000 if config["scale"].startswith("paper") else 4000) * attempt


def model_runtime(wildcards, attempt):
    return (240 if config["scale"].startswith("paper") else 30) * attempt


# a job that loads a model: its memory and time (more at the paper scale, more at each attempt) and its GPU
MODEL_RESOURCES = dict(mem_mb=model_mem_mb, runtime=model_runtime, gpu=GPU)


# inputs and outputs of the table and figure rules (workflow/rules/reports.smk): each reads only the results of
# what it shows (workflow/fastdllm_dag/plan/report_inputs.py), never the collected accuracy.csv / throughput.csv, so
# that a table of released checkpoints does not wait on a training job


def report_input_files(spec):
    """Named inputs of a table's or figure's rule: acc, the evaluation-job CSVs of the models it shows; thr, its
    throughput sweep's CSV; cases, the case studies' CSV (the name the scripts read); the GPU result files."""
    name = spec["name"]
    files = {
        "acc": lambda: report_inputs.accuracy_inputs(config, name, EVAL_JOBS),
        "thr": lambda: report_inputs.throughput_inputs(config, name),
        "cases_single_turn": lambda: f"{R}/cases/single_turn.csv",
        "cases_multi_turn": lambda: f"{R}/cases/multi_turn.csv",
        "gpu": lambda: plan.gpu_result_files(RESULTS),
    }
    return {"cases" if k.startswith("cases_") else k: files[k]() for k in spec["inputs"]}


def report_outputs(spec):
    """Tables: md (in the HTML report) + tex; figures: png (in the report) + pdf."""
    name, kind = spec["name"], spec["kind"]
    first, second = EXTENSIONS[kind]
    folder, category = (TABLES_DIR, "Tables") if kind == "table" else (FIGURES_DIR, "Figures")
    return {first: report(f"{folder}/{name}.{first}", caption=f"../report/{name}.rst", category=category),
            second: f"{folder}/{name}.{second}"}


# the studies (workflow/rules/studies.smk makes a family of rules for each entry of `studies`): each plan, with what
# this run makes (a snapshot whose rows are committed under results/<name>_study/points is read, not remade)
STUDIES = {name: study_rows.load(config, name) for name in study_plan.names(config)}


def study_todo_pattern(st):
    """The snapshots this run makes, as a wildcard pattern (none: a pattern no name matches)."""
    return "|".join(s.replace(".", r"\.") for s in st.todo) or "none"


def study_data_kinds(st):
    """The data files a study writes: its adaptation set, and the pretraining text of each base pretrained longer."""
    return ["adapt"] + [f"pretrain\\.x{b['pretrain']}" for b in st.bases.values() if b["pretrain"] > 1]


def study_data_rows(st, kind):
    """Rows per task of a study's data file (``adapt`` or ``pretrain.x<m>``)."""
    if kind == "adapt":
        return {"n_adapt": int(st.spec["n_adapt"])}
    return {"n_pretrain": int(SYN.get("n_pretrain", 3000)) * int(kind.rsplit("x", 1)[1])}


def study_base_inputs(st, base):
    """A base as an input: the default's (released, or trained in this run), the bf16 copy this run builds, or the
    released directory."""
    if st.bases[base]["reference"]:
        return plan.model_inputs(config, "ar_base")
    src = study_rows.base_source(config, st, base)
    return [src] if base in st.built else plan.standin_inputs(config, src)


def study_stage_data(st, base, stage):
    """The text a built base's stage trains on: the default's, or the longer pretraining text of its multiple."""
    mult = st.bases[base]["pretrain"]
    if stage == "pretrain" and mult > 1:
        return f"{st.work}/data/pretrain.x{mult}.jsonl"
    return plan.synthetic_files(config)[study_plan.stage_train(config, st.name, stage).get("dataset", stage)]


def study_train_inputs(st, snapshot):
    """A snapshot's training inputs: the study's set, its base, the plan's estimate, and the chain's previous
    snapshot when this run makes it (its run goes on from there)."""
    s = st.snapshots[snapshot]
    prev = [f"{st.work}/models/{s['previous']}"] if s["previous"] in st.todo else []
    return {"data": f"{st.work}/data/adapt.jsonl", "prev": prev, "plan": ancient(st.plan_file),
            "init": study_base_inputs(st, st.chain_of(snapshot)["base"])}


def study_snapshot_priority(st, snapshot):
    return study_plan.priority(config, st.name, st.chain_of(snapshot), st.snapshots[snapshot]["budget"])
