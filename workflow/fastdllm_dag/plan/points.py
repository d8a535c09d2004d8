"""The DAG plan's decoding points, evaluation jobs and throughput sweeps: which points every table and figure
needs, how they are grouped into evaluation jobs, and which runs each throughput sweep measures.  Pure functions of
the config (no Snakemake, no torch) over :mod:`plan` (the models), imported by ``workflow/rules/common.smk``.

A decoding *point* is a :class:`~fastdllm_core.decode_config.DecodeConfig` named by its :meth:`~DecodeConfig.slug`
(``ar``, ``bd_b32_s8_t1_c0``), with ``@N`` appended when it is measured on the first N test items only; a job
rebuilds the setting with :meth:`DecodeConfig.from_slug` and the limit with :func:`point_limit`.
"""
from __future__ import annotations

from fastdllm_core.decode_config import MDM_MODES, SLUG_FIELDS, DecodeConfig
from fastdllm_dag.plan import models as plan


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


# "v1": Fast-dLLM v1 on a masked-diffusion model (mode llada or dream: its own sampler, LLaDA's generate or Dream's
# diffusion_generate), a decoding measured in the speed comparisons
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
    out = [plan.role(config, "speed_bd"), plan.role(config, "speed_ar")]
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

    base, abl, speed_bd = base_decode(config), plan.role(config, "ablation_bd"), plan.role(config, "speed_bd")
    t, f = config["tables"], config["figures"]
    table_tasks = {"table1": plan.tasks(config), "table2": [plan.col_task(config, c) for c in t["table2"]["columns"]]}
    for table, tasks in table_tasks.items():
        for row in t[table]["rows"]:  # a row is the mean over the model's seed replicates
            for m in plan.seed_group(config, row["model"]):
                for task in tasks:
                    add(m, task, model_decode(config, m, task))
    tables = set(pts)
    for s in t["table3"]["sub_blocks"]:
        for c in t["table3"]["columns"]:
            add(abl, plan.col_task(config, c), dict(base, sub_block_size=s), sweep=True)
    for b in t["table4"]["block_sizes"]:
        for c in t["table4"]["columns"]:
            add(abl, plan.col_task(config, c), dict(base, block_size=b, sub_block_size=b), sweep=True)
    fig_task = plan.col_task(config, f["threshold"]["column"])
    for th in f["threshold"]["thresholds"]:
        add(speed_bd, fig_task, dict(base, threshold=th), sweep=True)
    for m in fig1a_models(config):  # fig 1a: accuracy at the speed setting (each of a model's speed points)
        for mode, dec in speed_points(config, m, fig_task):
            add(m, fig_task, dec, sweep=True, mode=mode)
    for s in f["subblock"]["sub_blocks"]:
        for cache in f["subblock"]["caches"]:
            add(abl, plan.col_task(config, f["subblock"]["column"]),
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
    return f"{plan.run_dir(config)}/accuracy/{job}.csv"


def case_conversations(config: dict, kind: str) -> list[list[str]]:
    """The case studies of ``kind`` as conversations (lists of user turns): single_turn, one per prompt."""
    c = config["tables"]["cases"][kind]
    return [[m] for m in c] if kind == "single_turn" else [list(turns) for turns in c]


# ------------------------------------------------------------------------------------------------- sweeps
def bench_sweeps(config: dict) -> dict[str, list[dict]]:
    """Throughput sweeps: name -> list of runs {model, mode, batch_size, decode}."""
    f = config["figures"]
    abl, speed_bd, speed_ar = (plan.role(config, r) for r in ("ablation_bd", "speed_bd", "speed_ar"))
    # Figures 1a and 1b: every drawn model (the speed pair, the other Table 1 rows: the baselines) at each speed
    # point and every batch size of figures.batch; batch 1 is Figure 1a's
    task = plan.col_task(config, f["threshold"]["column"])
    batch_runs = [{"model": m, "mode": mode, "batch_size": b, "decode": dec}
                  for m in fig1a_models(config) for mode, dec in speed_points(config, m, task)
                  for b in f["batch"]["batches"]]
    sweeps = {
        "batch": batch_runs,
        "threshold": [{"model": speed_bd, "mode": "bd", "batch_size": f["threshold"]["batch"],
                       "decode": dict(base_decode(config), threshold=t)} for t in f["threshold"]["thresholds"]],
        "subblock": [{"model": abl, "mode": "bd", "batch_size": b,
                      "decode": dict(speed_decode(config), sub_block_size=s, use_sub_block_cache=c)}
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


def eval_priority(config: dict, job: str, jobs: dict | None = None) -> int:
    """Evaluation jobs of the models the sweeps use come first among evaluations (they have the most points).
    ``jobs``: the run's :func:`evaluation_jobs` (computed here when None)."""
    model = (evaluation_jobs(config) if jobs is None else jobs)[job]["model"]
    return 1 if model in {plan.role(config, r) for r in ("ablation_bd", "speed_bd")} else 0
