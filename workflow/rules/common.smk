# Helpers shared by all the rules: config validation (schema + semantic checks), paths, resources.
import os
import sys

from snakemake.utils import validate

sys.path.insert(0, os.path.join(workflow.basedir, "workflow", "scripts"))
import dagconfig as dc  # noqa: E402

# a schema error in a few lines (field, bad value, what is allowed), not Snakemake's dump of schema and config
dc.validate_schema(config, os.path.join(workflow.basedir, "workflow", "schemas", "config.schema.yaml"))
validate(config, "../schemas/config.schema.yaml")  # passes now; kept for Snakemake's schema defaults

dc.check(config)

RESULTS = config["results_dir"]
R = dc.run_dir(config)  # intermediate results of this scale: results/<scale>/...
LOGS = f"{R}/logs"
SCRIPTS = os.path.join(workflow.basedir, "workflow", "scripts")
TABLES_DIR = f"{RESULTS}/tables"
FIGURES_DIR = f"{RESULTS}/figures"
GPU = 1 if config["gpu"] else 0
SYN = config["data"].get("synthetic", {})

TABLE_NAMES = [
    "table1_main",
    "table2_recipe_ablation",
    "table3_subblock_size",
    "table4_block_size_mismatch",
    "table5_case_single_turn",
    "table6_case_multi_turn",
]
FIGURE_NAMES = [
    "fig1a_throughput_vs_accuracy",
    "fig1b_throughput_batch",
    "fig_threshold_gsm8k",
    "fig_gpu_batch_throughput",
    "fig_subblock_accuracy",
    "fig_subblock_throughput",
    "fig_attention_masks",
]
ALL_TABLES = [f"{TABLES_DIR}/{n}.{ext}" for n in TABLE_NAMES for ext in ("md", "tex")]
ALL_FIGURES = [f"{FIGURES_DIR}/{n}.{ext}" for n in FIGURE_NAMES for ext in ("png", "pdf")]

EVAL_JOBS = dc.evaluation_jobs(config)
ACCURACY_CSVS = [dc.accuracy_path(config, j) for j in EVAL_JOBS]
SWEEPS = dc.bench_sweeps(config)
THROUGHPUT_CSVS = [f"{R}/throughput/{s}.csv" for s in SWEEPS]
TRAINED = dc.trained_models(config)
SYN_FILES = dc.synthetic_files(config)


def train_files(model):
    return dc.train_files(config, model)


def train_inputs(model):
    """Training files as Snakemake inputs: the synthetic ones, and external ones that exist (a missing external
    file is reported by the training job itself before any work, so that the rest of the DAG stays runnable)."""
    return [f for f in train_files(model) if f in SYN_FILES.values() or os.path.exists(f)]


MISSING_TRAIN_FILES = sorted({f for m in TRAINED for f in train_files(m)
                              if f not in SYN_FILES.values() and not os.path.exists(f)})
if MISSING_TRAIN_FILES:
    print(f"warning: training data not found: {MISSING_TRAIN_FILES}; jobs that train "
          f"({', '.join(TRAINED)}) will fail until it is provided (see README, 'Paper scale')", file=sys.stderr)


def task_data(task):
    """Local test data of a task: the synthetic files, or data.eval_paths (else the task loads it itself)."""
    if task in dc.TASK_DATA_KEYS:
        return SYN_FILES[dc.TASK_DATA_KEYS[task]]
    p = config["data"].get("eval_paths", {}).get(task)
    return dc.shared_path(config, p) if p else None


def task_inputs(task):
    p = task_data(task)
    return [p] if p and task in dc.TASK_DATA_KEYS else []


def model_mem_mb(wildcards, attempt):
    return (48000 if config["scale"].startswith("paper") else 4000) * attempt


def model_runtime(wildcards, attempt):
    return (240 if config["scale"].startswith("paper") else 30) * attempt
