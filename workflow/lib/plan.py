"""The DAG plan as data: which models are trained or loaded, and which decoding points, evaluation jobs and
throughput sweeps every table and figure needs.  Pure functions of the config (no Snakemake, no torch), imported
by ``workflow/rules/common.smk`` and unit-tested on their own (``tests/test_workflow.py``).

A decoding *point* is a :class:`~fastdllm_core.config.DecodeConfig` named by its :meth:`~DecodeConfig.slug`
(``ar``, ``bd_b32_s8_t1_c0``), with ``@N`` appended when it is measured on the first N test items only; a job
rebuilds the setting with :meth:`DecodeConfig.from_slug` and the limit with :func:`point_limit`.
"""
from __future__ import annotations

import os

from pathlib import Path

from fastdllm_core.config import MDM_MODES, SLUG_FIELDS, DecodeConfig
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


def standin_data_dir(config: dict) -> str | None:
    """The stand-in data directory when ``standins.data`` is set, else None."""
    return f"{standin_dir(config)}/data" if (config.get("standins") or {}).get("data") else None


def standin_inputs(config: dict, path: str | None) -> list[str]:
    """The stand-in output (a model directory or the data directory) that ``path`` lies in, as a Snakemake
    input; [] for any other path."""
    if not path or not config.get("standins"):
        return []
    for d in [*standin_models(config).values(), standin_data_dir(config)]:
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
    if m.get("train_unavailable"):  # no training data: its jobs write n/a rows (workflow/lib/plan_data.py)
        return []
    return [model_final(config, name)] if is_trained(m) else standin_inputs(config, model_source(config, name))


def trained_models(config: dict) -> list[str]:
    """Models trained by the DAG: trained here and with training data (not ``train_unavailable``)."""
    return [n for n, m in config["models"].items() if is_trained(m) and not m.get("train_unavailable")]


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
    init = m["init"]
    cfg.setdefault("model", {})
    cfg["model"]["init"] = (model_final(config, init) if init in config["models"]
                            and is_trained(config["models"][init]) else
                            model_source(config, init) if init in config["models"] else shared_path(config, init))
    cfg.setdefault("data", {})
    cfg["data"]["train_files"] = list(train_files)
    cfg.setdefault("train", {})
    if config.get("device") in ("cpu", "cuda"):
        cfg["train"]["device"] = config["device"]
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
    m = config["models"][name]
    t = merge_config(config.get("training", {}), {k: v for k, v in m.get("train", {}).items()
                                                   if k not in ("init", "dataset", "processes")})
    return int(t.get("train", {}).get("seed", 0))


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


RECIPE_COST = {"ar_pretrain": 4, "sft": 4, "bd_pad_cm": 3, "bd_naive": 2, "bd_pad": 2, "ntp": 1, "dream": 1}


def train_priority(config: dict, name: str) -> int:
    """Snakemake priority of a training job: the costlier recipe first (the complementary-mask recipe costs
    twice the others), so that the longest job does not end up last on the critical path."""
    return 10 + RECIPE_COST.get(config["models"][name]["train"]["recipe"], 0)


def eval_priority(config: dict, job: str) -> int:
    """Evaluation jobs of the models the sweeps use come first among evaluations (they have the most points)."""
    model = evaluation_jobs(config)[job]["model"]
    return 1 if model in {role(config, r) for r in ("ablation_bd", "speed_bd")} else 0


def gpu_result_files(results_dir: str) -> list[str]:
    """Committed GPU throughput CSVs (``results/gpu/**/*.csv``)."""
    root = Path(results_dir) / "gpu"
    return sorted(str(p) for p in root.rglob("*.csv")) if root.is_dir() else []


# ------------------------------------------------------------------------------------------------- points
def point_name(mode: str, decode: dict | None, limit: int | None = None) -> str:
    """The point of ``mode`` at the setting ``decode`` (a dict of :data:`SLUG_FIELDS`):
    ``DecodeConfig.slug()``, with ``@limit`` for a sweep measured on the first ``limit`` items (never for AR)."""
    slug = DecodeConfig.from_dict(decode or {}).slug(mode)
    return f"{slug}@{limit}" if limit and mode != "ar" else slug


def point_limit(point: str) -> int | None:
    """The number of test items of a point measured on a prefix of the test set (``<point>@N``), else None."""
    return int(point.rsplit("@", 1)[1]) if "@" in point else None


def base_decode(config: dict) -> dict:
    """The accuracy setting (config ``decode:``) as a dict of the fields a point carries."""
    d = {"eos_rule": DecodeConfig().eos_rule, **config["decode"]}  # eos_rule: optional, the default when absent
    return {k: d[k] for k in SLUG_FIELDS}


def speed_decode(config: dict) -> dict:
    """The speed setting of the throughput figures: ``speed_threshold`` (and the sub-block cache when
    ``speed_use_sub_block_cache``), the rest as the accuracy setting."""
    return dict(base_decode(config), threshold=config["speed_threshold"],
                use_sub_block_cache=bool(config.get("speed_use_sub_block_cache",
                                                    config["decode"]["use_sub_block_cache"])))


# a model's own decoder (models.<m>.mode): AR, the Fast-dLLM v2 block-diffusion decoder, or a masked-diffusion
# model's own sampler (LLaDA's generate, Dream's diffusion_generate); "v1" (Fast-dLLM v1 on a masked-diffusion
# model) is a decoding of the latter, measured in the speed comparisons
MODEL_MODES = ("ar", "bd", "llada", "dream")
V1_CACHE = "dual"  # Fast-dLLM v1's fastest cache (its DualCache), the "Fast-dLLM-LLaDA" of the paper's Figure 1a


def is_mdm(config: dict, name: str) -> bool:
    """A full-attention masked-diffusion model (LLaDA, Dream, the tiny Dream-style row)."""
    return config["models"][name]["mode"] in MDM_MODES


def model_decode(config: dict, name: str, task: str | None = None) -> dict:
    """The accuracy setting of model ``name`` (the fields its point name carries): nothing for AR, Table 1's
    ``decode:`` for block diffusion, and for a masked-diffusion model its own sampler's published setting
    (``models.<m>.decode``, with ``per_task`` overrides; generation length from ``decode.max_new_tokens`` when
    the model's block does not set it, steps = one per token unless set)."""
    mode = config["models"][name]["mode"]
    if mode == "ar":
        return {}
    if mode == "bd":
        return base_decode(config)
    d = {k: v for k, v in (config["models"][name].get("decode") or {}).items() if k != "per_task"}
    d.update(((config["models"][name].get("decode") or {}).get("per_task") or {}).get(task, {}))
    mnt = config["decode"]["max_new_tokens"]
    if "max_new_tokens" not in d and isinstance(mnt, int):
        d["max_new_tokens"] = mnt
    d.setdefault("block_size", config["decode"]["block_size"])
    return DecodeConfig.from_dict(d).with_mode_defaults(mode).point_fields(mode)


def v1_decode(config: dict, name: str, task: str | None = None) -> dict:
    """Fast-dLLM v1 on masked-diffusion model ``name`` at the speed setting: its own generation length, the block
    size of ``decode:``, ``speed_threshold`` and the dual cache (``speed_v1: {cache, block_size}`` override)."""
    own = model_decode(config, name, task)
    v1 = config.get("speed_v1") or {}
    d = DecodeConfig(max_new_tokens=own["max_new_tokens"], threshold=float(config["speed_threshold"]),
                     block_size=int(v1.get("block_size", config["decode"]["block_size"])),
                     cache=v1.get("cache", V1_CACHE))
    return d.with_mode_defaults("v1").point_fields("v1")


def speed_points(config: dict, name: str, task: str | None = None) -> list[tuple[str, dict]]:
    """(mode, decode) of model ``name`` in the speed comparisons (Figures 1a, 1b): AR as it is, block diffusion at
    the speed setting, a masked-diffusion model with its own sampler and with Fast-dLLM v1."""
    mode = config["models"][name]["mode"]
    if mode == "ar":
        return [("ar", {})]
    if mode == "bd":
        return [("bd", speed_decode(config))]
    return [(mode, model_decode(config, name, task)), ("v1", v1_decode(config, name, task))]


def gpu_batch_decode(config: dict) -> dict:
    """Figure 5's setting (the paper: threshold 0.9 with the sub-block cache on)."""
    return dict(speed_decode(config),
                use_sub_block_cache=bool(config["figures"]["gpu_batch"].get("use_sub_block_cache", True)))


def fig1a_models(config: dict) -> list[str]:
    """Models drawn in Figure 1a: the speed pair (speed_bd vs speed_ar, whose ratio is the speed-up) and the
    context points: ``figures.batch.context`` (default: the other Table 1 rows), less the models without training
    data (``train_unavailable``: nothing to time)."""
    out = [role(config, "speed_bd"), role(config, "speed_ar")]
    context = config["figures"]["batch"].get("context") or [r["model"] for r in config["tables"]["table1"]["rows"]]
    return out + [m for m in context if m not in out and not config["models"][m].get("train_unavailable")]


def accuracy_points(config: dict) -> list[tuple[str, str, str]]:
    """Every (model, task, point) some table or figure needs, deduplicated.

    Tables 1 and 2 use every test item; the sweeps (Tables 3-4, the figures) use the first ``eval.sweep_limit``
    items (the point is then named ``<point>@N``), unless the same point is measured on all items anyway."""
    return _points(config)[0]


def table_points(config: dict) -> set[tuple[str, str, str]]:
    """The (model, task, point)s of Tables 1 and 2 (the others are sweep points, whatever their item count)."""
    return _points(config)[1]


def _points(config: dict) -> tuple[list[tuple[str, str, str]], set[tuple[str, str, str]]]:
    pts: list[tuple[str, str, str]] = []
    models = config["models"]
    sweep_limit = config["eval"].get("sweep_limit")

    def add(model, task, decode, sweep=False, mode=None):
        if task is None:
            return
        p = point_name(mode or models[model]["mode"], decode, sweep_limit if sweep else None)
        if (model, task, p) not in pts:
            pts.append((model, task, p))

    base, abl, speed_bd = base_decode(config), role(config, "ablation_bd"), role(config, "speed_bd")
    t1_tasks = tasks(config)
    for row in config["tables"]["table1"]["rows"]:  # a row is the mean over the model's seed replicates
        for m in seed_group(config, row["model"]):
            for t in t1_tasks:
                add(m, t, model_decode(config, m, t))
    for row in config["tables"]["table2"]["rows"]:
        for m in seed_group(config, row["model"]):
            for c in config["tables"]["table2"]["columns"]:
                add(m, col_task(config, c), model_decode(config, m, col_task(config, c)))
    tables = set(pts)
    for s in config["tables"]["table3"]["sub_blocks"]:
        for c in config["tables"]["table3"]["columns"]:
            add(abl, col_task(config, c), dict(base, sub_block_size=s), sweep=True)
    for b in config["tables"]["table4"]["block_sizes"]:
        for c in config["tables"]["table4"]["columns"]:
            add(abl, col_task(config, c), dict(base, block_size=b, sub_block_size=b), sweep=True)
    f = config["figures"]
    for th in f["threshold"]["thresholds"]:
        add(speed_bd, col_task(config, f["threshold"]["column"]), dict(base, threshold=th), sweep=True)
    fig_task = col_task(config, f["threshold"]["column"])
    for m in fig1a_models(config):  # fig 1a: accuracy at the speed setting (each of a model's speed points)
        for mode, dec in speed_points(config, m, fig_task):
            add(m, fig_task, dec, sweep=True, mode=mode)
    for s in f["subblock"]["sub_blocks"]:
        for cache in f["subblock"]["caches"]:
            add(abl, col_task(config, f["subblock"]["column"]),
                dict(speed_decode(config), sub_block_size=s, use_sub_block_cache=cache), sweep=True)
    full = set(pts)  # a sweep point also measured on every item is taken from that measurement
    return [(m, t, p) for m, t, p in pts if "@" not in p or (m, t, p.split("@")[0]) not in full], tables


def evaluations(config: dict) -> dict[tuple[str, str], list[str]]:
    """(model, task) -> the decoding points to evaluate, in first-needed order."""
    out: dict[tuple[str, str], list[str]] = {}
    for m, t, p in accuracy_points(config):
        out.setdefault((m, t), []).append(p)
    return out


SWEEP_POINTS_PER_JOB = 8


def evaluation_jobs(config: dict) -> dict[str, dict]:
    """Evaluation jobs: ``{job: {"model": m, "points": {task: [points]}}}``.

    A model's Table 1-2 points form one job named after the model (loaded once for all its tasks); its other
    points (the sweeps of Tables 3-4 and the figures, ``<point>@N`` or, with ``eval.sweep_limit: null``, on every
    item) are split into jobs ``<model>.sweep<k>`` of at most ``eval.sweep_points_per_job`` points
    (:data:`SWEEP_POINTS_PER_JOB` by default), so that a model with many decoding settings is evaluated on every
    core, and no job of the paper scale holds every sweep of a model."""
    jobs: dict[str, dict] = {}
    sweeps: dict[str, list[tuple[str, str]]] = {}
    tables = table_points(config)
    per_job = int(config["eval"].get("sweep_points_per_job") or SWEEP_POINTS_PER_JOB)
    for (m, t), pts in evaluations(config).items():
        for p in pts:
            if (m, t, p) not in tables:
                sweeps.setdefault(m, []).append((t, p))
            else:
                jobs.setdefault(m, {"model": m, "points": {}})["points"].setdefault(t, []).append(p)
    for m, items in sweeps.items():
        for k in range(0, len(items), per_job):
            job = jobs.setdefault(f"{m}.sweep{k // per_job + 1}", {"model": m, "points": {}})
            for t, p in items[k:k + per_job]:
                job["points"].setdefault(t, []).append(p)
    return jobs


def accuracy_path(config: dict, job: str) -> str:
    """One CSV per evaluation job (see :func:`evaluation_jobs`)."""
    return f"{run_dir(config)}/accuracy/{job}.csv"


def case_conversations(config: dict, kind: str) -> list[list[str]]:
    """The case studies of ``kind`` as conversations (lists of user turns): single_turn, one per prompt."""
    c = config["tables"]["cases"][kind]
    return [[m] for m in c] if kind == "single_turn" else [list(turns) for turns in c]


# ------------------------------------------------------------------------------------------------- sweeps
def bench_sweeps(config: dict) -> dict[str, list[dict]]:
    """Throughput sweeps: name -> list of runs {model, mode, batch_size, decode}."""
    models, f = config["models"], config["figures"]
    abl, speed_bd, speed_ar = role(config, "ablation_bd"), role(config, "speed_bd"), role(config, "speed_ar")
    sp = speed_decode(config)
    # Figures 1a and 1b: every drawn model (the speed pair, the other Table 1 rows: the baselines) at each speed
    # point and every batch size of figures.batch; batch 1 is Figure 1a's
    task = col_task(config, f["threshold"]["column"])
    batch_runs = [{"model": m, "mode": mode, "batch_size": b, "decode": dec}
                  for m in fig1a_models(config) for mode, dec in speed_points(config, m, task)
                  for b in f["batch"]["batches"]]
    sweeps = {
        "batch": batch_runs,
        "threshold": [{"model": speed_bd, "mode": "bd", "batch_size": f["threshold"]["batch"],
                       "decode": dict(base_decode(config), threshold=t)} for t in f["threshold"]["thresholds"]],
        "subblock": [{"model": abl, "mode": "bd", "batch_size": b,
                      "decode": dict(sp, sub_block_size=s, use_sub_block_cache=c)}
                     for b in f["subblock"]["batches"] for s in f["subblock"]["sub_blocks"]
                     for c in f["subblock"]["caches"]],
    }
    if config["gpu"]:
        gd = gpu_batch_decode(config)
        sweeps["gpu_batch"] = (
            [{"model": speed_ar, "mode": "ar", "batch_size": b, "decode": {}} for b in f["gpu_batch"]["batches"]]
            + [{"model": speed_bd, "mode": "bd", "batch_size": b, "decode": gd} for b in f["gpu_batch"]["batches"]])
    return sweeps


def sweep_models(config: dict, sweep: str) -> list[str]:
    return list(dict.fromkeys(r["model"] for r in bench_sweeps(config)[sweep]))
