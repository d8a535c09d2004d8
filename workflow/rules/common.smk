# Helpers shared by all the rules: config validation (schema + semantic checks), paths, resources.
import os
import sys

from snakemake.utils import validate


validate(config, "../schemas/config.schema.yaml")

sys.path.insert(0, os.path.join(workflow.basedir, "workflow", "scripts"))
import dagconfig as dc  # noqa: E402

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

EVALUATIONS = dc.evaluations(config)
ACCURACY_CSVS = [dc.accuracy_path(config, m, t) for m, t in EVALUATIONS]
SWEEPS = dc.bench_sweeps(config)
THROUGHPUT_CSVS = [f"{R}/throughput/{s}.csv" for s in SWEEPS]
TRAINED = dc.trained_models(config)
SYN_FILES = {
    "arith_train": f"{R}/data/synthetic/arith_train.jsonl",
    "code_train": f"{R}/data/synthetic/code_train.jsonl",
    "arith_test": f"{R}/data/synthetic/arith_test.jsonl",
    "code_test": f"{R}/data/synthetic/code_test.jsonl.gz",
}


def train_files():
    files = [SYN_FILES["arith_train"], SYN_FILES["code_train"]] if SYN.get("enabled") else []
    return files + [dc.shared_path(config, f) for f in config["data"].get("train_files", [])]


def train_inputs():
    """Training files as Snakemake inputs: the synthetic ones, and external ones that exist (a missing external
    file is reported by the training job itself before any work, so that the rest of the DAG stays runnable)."""
    return [f for f in train_files() if f in SYN_FILES.values() or os.path.exists(f)]


MISSING_TRAIN_FILES = [f for f in train_files() if f not in SYN_FILES.values() and not os.path.exists(f)]
if MISSING_TRAIN_FILES and TRAINED:
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
