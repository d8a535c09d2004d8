"""The DAG plan as data: which models are trained or loaded (their inputs, training configs, seed replicates,
threads and priorities).  Pure functions of the config (no Snakemake, no torch), imported by
``workflow/rules/common.smk`` and unit-tested on their own (``tests/test_workflow.py``); the decoding points,
evaluation jobs and throughput sweeps built on them are :mod:`plan_points`.
"""
from __future__ import annotations

import os
from pathlib import Path

from fastdllm_core.synthetic import TASKS as SYNTH_TASKS
from fastdllm_core.training.config import merge_config

# a synthetic task -> the key of its test file among the synthetic suite's files (synthetic_files)
TASK_DATA_KEYS = {t: f"{t}_test" for t in SYNTH_TASKS}
DATASETS = ("pretrain", "sft", "adapt")  # the synthetic suite's training files (models.<m>.train.dataset)
AVG_COLUMNS = ["humaneval_base", "humaneval_plus", "mbpp_base", "mbpp_plus", "gsm8k", "math", "ifeval", "mmlu", "gpqa"]


# Which model each table and figure uses (config `roles:`): role -> (required mode, what uses it).  The paper's
# ablations (Tables 3, 4; Figure 6) are on the 1.5B model; its speed comparisons (Figures 1, 4, 5) set
# Fast-dLLM v2 (7B) against Qwen2.5-7B-Instruct; its case studies (Tables 5, 6) are Fast-dLLM v2 (7B).
ROLES = {
    "main_bd": ("bd", "the model under test: case studies (Tables 5, 6)"),
    "main_ar": ("ar", "the AR reference of the model under test (speedup_vs_main_ar of throughput rows)"),
    "ablation_bd": ("bd", "Tables 3, 4 and Figure 6 (a, b): decoding ablations (the paper's 1.5B model)"),
    "speed_bd": ("bd", "Figures 1a, 1b, 4 (threshold sweep) and 5: block diffusion in the speed comparisons "
                       "(the paper's Fast-dLLM v2 7B)"),
    "speed_ar": ("ar", "Figures 1a, 1b and 5: the AR side of the speed comparisons (the paper's Qwen2.5-7B-Instruct)"),
}


def role(config: dict, name: str) -> str:
    """The model key that plays ``name`` (one of :data:`ROLES`)."""
    return config["roles"][name]


def tasks(config: dict) -> list[str]:
    return list(dict.fromkeys(c["task"] for c in config["columns"].values() if "task" in c))


def col_task(config: dict, col: str) -> str | None:
    return config["columns"][col].get("task")


# ------------------------------------------------------------------------------------------------- models
def uses_released(m: dict) -> bool:
    return bool(m.get("source")) and (m.get("use_released", True) or "train" not in m)


def is_trained(m: dict) -> bool:
    return "train" in m and not uses_released(m)


def run_dir(config: dict) -> str:
    return f"{config['results_dir']}/{config['scale']}"


def shared_path(config: dict, p: str) -> str:
    """``p`` with ``{shared}`` (shared_dir), ``{standins}`` (the stand-ins' directory, :func:`standin_dir`) and
    ``{results}`` (results_dir) filled in."""
    return (p.replace("{shared}", config.get("shared_dir", "../shared")).replace("{standins}", standin_dir(config))
            .replace("{results}", config["results_dir"]))


def eval_path(config: dict, task: str) -> str | None:
    """``data.eval_paths.<task>`` with its placeholders filled, or None when unset or when it is a ``{shared}``
    default whose file is absent here (the task then loads its data itself: override variable, Hub, or n/a)."""
    p = (config["data"].get("eval_paths") or {}).get(task)
    if not p:
        return None
    out = shared_path(config, p)
    return None if "{shared}" in p and not os.path.exists(out) else out


# ------------------------------------------------------------------------------------------------- stand-ins
# A rehearsal (config/rehearsal.yaml) points sources, inits and data.eval_paths at `{standins}/models/<name>` and
# `{standins}/data/...`, which rules of the DAG build offline (workflow/rules/standins.smk,
# fastdllm_core.rehearsal); a config without `standins:` has none of these jobs.
def standin_dir(config: dict) -> str:
    return f"{run_dir(config)}/standins"


def standin_models(config: dict) -> dict[str, str]:
    """Stand-in checkpoint name -> its directory (``standins.models``)."""
    return {n: f"{standin_dir(config)}/models/{n}" for n in (config.get("standins") or {}).get("models", {})}


def standin_inputs(config: dict, path: str | None) -> list[str]:
    """The stand-in output (a model directory, or the data directory when ``standins.data`` is set) that ``path``
    lies in, as a Snakemake input; [] for any other path."""
    standins = config.get("standins")
    if not path or not standins:
        return []
    for d in [*standin_models(config).values(), f"{standin_dir(config)}/data" if standins.get("data") else None]:
        if d and (path == d or path.startswith(d + "/")):
            return [d]
    return []


def model_final(config: dict, name: str) -> str:
    return f"{run_dir(config)}/models/{name}/run/final"


def model_source(config: dict, name: str) -> str:
    """What ``load_model`` gets: the trained checkpoint directory, or the released source (Hub id / dir / gguf)."""
    m = config["models"][name]
    return model_final(config, name) if is_trained(m) else shared_path(config, m["source"])


def model_inputs(config: dict, name: str) -> list[str]:
    """Snakemake inputs of a job using model ``name`` (the checkpoint when it is trained here)."""
    m = config["models"][name]
    if m.get("train_unavailable"):  # no training data: its jobs write n/a rows (workflow/fastdllm_dag/plan/data.py)
        return []
    return [model_final(config, name)] if is_trained(m) else standin_inputs(config, model_source(config, name))


def trained_models(config: dict) -> list[str]:
    """Models trained by the DAG: trained here and with training data (not ``train_unavailable``)."""
    return [n for n, m in config["models"].items() if is_trained(m) and not m.get("train_unavailable")]


def task_data(config: dict, task: str) -> str | None:
    """Local test data of a task: the synthetic suite's file, or :func:`eval_path` (else None: the task loads its
    data itself)."""
    if task in TASK_DATA_KEYS:
        return synthetic_files(config)[TASK_DATA_KEYS[task]]
    return eval_path(config, task)


def init_inputs(config: dict, name: str) -> list[str]:
    init = config["models"][name]["train"]["init"]
    return model_inputs(config, init) if init in config["models"] else standin_inputs(config, shared_path(config, init))


def synthetic_files(config: dict) -> dict[str, str]:
    """The synthetic suite's files (training datasets and test sets) under ``results/<scale>/data/synthetic``."""
    root = f"{run_dir(config)}/data/synthetic"
    files = {d: f"{root}/{d}.jsonl" for d in DATASETS}
    files.update({f"{t}_test": f"{root}/{task.test_file}" for t, task in SYNTH_TASKS.items()})
    return files


def train_files(config: dict, name: str) -> list[str]:
    """Training files of model ``name``: its synthetic ``train.dataset`` (when the suite is enabled), and for
    the adaptation data (``dataset: adapt``, the default) the external ``data.train_files``."""
    dataset = config["models"][name]["train"].get("dataset", "adapt")
    files = [synthetic_files(config)[dataset]] if config["data"].get("synthetic", {}).get("enabled") else []
    if dataset == "adapt":
        files += [shared_path(config, f) for f in config["data"].get("train_files", [])]
    return files


def training_config(config: dict, name: str, train_files: list[str]) -> dict:
    """The ``fastdllm train`` config of model ``name``: config.training, overridden by the model's train block
    (:func:`fastdllm_core.training.config.merge_config`, the merge ``fastdllm train`` uses for its defaults)."""
    m = config["models"][name]["train"]
    cfg = merge_config(config.get("training", {}),
                       {k: v for k, v in m.items() if k not in ("init", "dataset", "processes")})
    init = m["init"]  # a model of the config (its checkpoint or source), else a path or Hub id
    cfg.setdefault("model", {})["init"] = (model_source(config, init) if init in config["models"]
                                           else shared_path(config, init))
    cfg.setdefault("data", {})["train_files"] = list(train_files)
    train = cfg.setdefault("train", {})
    if config.get("device") in ("cpu", "cuda"):
        train["device"] = config["device"]
    return cfg


# ------------------------------------------------------------------------------------------------- seeds
SEED_SEP = ".seed"  # a seed replicate's key: <model>.seed<S>


def is_adaptation(m: dict) -> bool:
    """A model trained here on the adaptation data (``train.dataset: adapt``, the default): the recipes compared in
    Tables 1 and 2, which the DAG trains once per seed of ``adaptation_seeds``."""
    return is_trained(m) and m["train"].get("dataset", "adapt") == "adapt"


def adaptation_seeds(config: dict) -> list[int]:
    """``adaptation_seeds`` (default: the training config's one seed)."""
    default = (config.get("training") or {}).get("train", {}).get("seed", 0)
    return [int(s) for s in config.get("adaptation_seeds") or [default]]


def expand_seeds(config: dict) -> dict:
    """The config with every adaptation (:func:`is_adaptation`) trained once per seed of ``adaptation_seeds``.

    The first seed keeps the model's own key (the one roles, sweeps, case studies and figures use: one seed); each
    further seed S is a model ``<model>.seed<S>`` with the same entry and ``train.train.seed: S``, labelled
    ``[seed S]``, and ``seed_of: <model>``.  The tables average a model over its replicates (:func:`seed_group`).
    Idempotent: a config already expanded is returned as it is."""
    models = config["models"]
    if any("seed_of" in m for m in models.values()):
        return config
    seeds = adaptation_seeds(config)
    out: dict[str, dict] = {}
    for name, m in models.items():
        if not is_adaptation(m):
            out[name] = m
            continue
        for i, s in enumerate(seeds):
            key = name if i == 0 else f"{name}{SEED_SEP}{s}"
            train = dict(m["train"], train=dict(m["train"].get("train", {}), seed=s))
            entry = dict(m, train=train, seed_of=name)
            if i:
                entry["label"] = f"{m.get('label', name)} [seed {s}]"
            out[key] = entry
    return dict(config, models=out)


def seed_group(config: dict, name: str) -> list[str]:
    """The models whose results a table averages for row ``name``: its seed replicates (itself first), or itself."""
    return [k for k, m in config["models"].items() if m.get("seed_of") == name] or [name]


def train_seed(config: dict, name: str) -> int:
    """The training seed of model ``name`` (its train block over ``training:``)."""
    return int(training_config(config, name, [])["train"].get("seed", 0))


# how a Table 2 row that is not trained here is marked
RELEASED_TEXT = "released checkpoint (not trained here)"


def share_training(config: dict, models: list[str]) -> bool:
    """Whether the trained ``models`` share one starting model and one optimiser budget (Table 2's rows)."""
    budgets = {repr(training_config(config, m, []).get("optim")) for m in models}
    return len(budgets) == 1 and len({config["models"][m]["train"]["init"] for m in models}) == 1


def train_threads(config: dict, name: str) -> int:
    """Cores of model ``name``'s training job: ``train.processes`` (default 1).  On the CPU they are data-parallel
    processes of one thread each; Snakemake caps them at ``--cores`` and runs other jobs beside a 1-core job."""
    return int(config["models"][name]["train"].get("processes", 1))


BENCH_JOB_THREADS = 8


def bench_job_threads(config: dict) -> int:
    """Cores the bench job reserves, so that no other job of the run disturbs its timing: ``bench.job_threads``
    (default :data:`BENCH_JOB_THREADS`), declared and bounded -- never ``workflow.cores``, which under a cluster
    profile is the submit host's core count.  Snakemake caps it at ``--cores``; the decoding itself uses
    ``bench.threads`` torch threads."""
    return int((config.get("bench") or {}).get("job_threads", BENCH_JOB_THREADS))


JOB_MINUTES = 1440  # training_plan.job_minutes: the partition's time limit a training job asks for


def train_nodes(config: dict) -> int:
    """Nodes of a training job: ``training_plan.nodes`` (the paper: 8 x 8 A100), else 1."""
    return int((config.get("training_plan") or {}).get("nodes", 1))


def train_runtime(config: dict, attempt: int) -> int:
    """Minutes a training job asks for: ``training_plan.job_minutes`` (default :data:`JOB_MINUTES`) where there
    is a training plan -- every attempt the same, each resumes where the last stopped -- else 30 per attempt."""
    tp = config.get("training_plan")
    return int(tp.get("job_minutes", JOB_MINUTES)) if tp else 30 * attempt


def train_retries(config: dict) -> int | None:
    """Retries of a training job where there is a training plan: the jobs of ``job_minutes`` the longest
    planned run needs (``fastdllm plan-training``'s wall hours; at least one), less the first, plus
    ``training_plan.spare_jobs`` (default 1); each job stops with a checkpoint before its limit
    (fastdllm_core.training.stopping) and the next resumes.  None (Snakemake's ``--retries``) without a plan, or
    when the plan cannot be made here (plan-training names why)."""
    tp = config.get("training_plan")
    if not tp or not trained_models(config):
        return None
    from fastdllm_core.cli.plan_training import hardware, model_plans

    try:
        gpus, gb, nodes = hardware(config, type("Flags", (), dict.fromkeys(("gpus", "gpu_mem_gb", "nodes")))())
        hours = max(p.wall_hours for _, _, p in model_plans(config, gpus, gb, nodes, "auto"))
    except ValueError:
        return None
    jobs = max(1, -(-int(hours * 60) // train_runtime(config, 1)))
    return jobs - 1 + int(tp.get("spare_jobs", 1))


RECIPE_COST = {"ar_pretrain": 4, "sft": 4, "bd_pad_cm": 3, "bd_naive": 2, "bd_pad": 2, "ntp": 1, "dream": 1}


def train_priority(config: dict, name: str) -> int:
    """Snakemake priority of a training job: the costlier recipe first (the complementary-mask recipe costs
    twice the others), so that the longest job does not end up last on the critical path."""
    return 10 + RECIPE_COST.get(config["models"][name]["train"]["recipe"], 0)


def gpu_result_files(results_dir: str) -> list[str]:
    """Committed GPU throughput CSVs (``results/gpu/**/*.csv``)."""
    root = Path(results_dir) / "gpu"
    return sorted(str(p) for p in root.rglob("*.csv")) if root.is_dir() else []
