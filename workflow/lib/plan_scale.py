"""The scale study's plan (``snakemake --cores all scale_study``; not part of ``paper_figures``): AR bases of growing
size, each built once by this DAG from scratch, each adapted with the recipe and its NTP baseline at the default's
adaptation tokens per parameter and at multiples of it.  Pure functions of the config (no Snakemake, no torch).

* A *size* is a Qwen2 shape (``plan_scale.sizes``: width, layers, heads, key/value heads, MLP width).  The first
  size is the default's own (``models.ar_pretrained``'s shape): its base is the default's released AR base.
* A *base* of any other size is built with the default base's recipe: the same two stages (``ar_pretrained``:
  pretraining on whole samples; ``ar_base``: instruct SFT), the same data, steps, batch and schedule, with every
  learning rate times ``reference width / width`` (muP's rule for Adam on the hidden matrices: at a fixed rate the
  wider models train worse on the same tokens).  It is released with a manifest (``scale_release``), as the
  default's base is, and loaded from there when the release exists (``--config build_released=True`` rebuilds).
* A *chain* is one training run (a size, a model of ``plan_scale.models``, a seed) to its largest budget; its
  *snapshots* are the budgets (:mod:`plan_budget`'s scheme: under a constant rate a snapshot is the shorter run).
  Budget ``b`` of a size with ``N`` parameters is ``b`` times the default's adaptation tokens times ``N`` over the
  default's parameters: the same tokens per parameter at every size.
"""
from __future__ import annotations

import copy
import math
import os

import plan
import plan_budget

SHAPE_KEYS = ("hidden_size", "layers", "heads", "kv_heads", "intermediate_size")
SEP = "."  # chain = <size>.<model>.s<seed>; snapshot = <chain>.x<budget>
STAGES = {"pretrain": "ar_pretrained", "sft": "ar_base"}  # a base's stages and the default models they copy


def study(config: dict) -> dict | None:
    return config.get("scale_study") or None


def vocab_rows(config: dict) -> int:
    """Rows of the embedding: the BPE's ``model.vocab_size`` (its special tokens included), rounded up to 8 (as
    :func:`fastdllm_core.training.model_init.build_model` sizes a tiny model)."""
    return -(-int(config["training"]["model"]["vocab_size"]) // 8) * 8


def n_params(shape: dict, vocab: int) -> int:
    """Parameters of a tiny Qwen2 of ``shape`` with tied embeddings (biases on q, k, v; RMSNorm weights)."""
    h, layers, heads, kv, mlp = (int(shape[k]) for k in SHAPE_KEYS)
    kv_width = kv * (h // heads)
    attn = (h * h + h) + 2 * (h * kv_width + kv_width) + h * h
    per_layer = attn + 3 * h * mlp + 2 * h
    return vocab * h + layers * per_layer + h


def sizes(config: dict) -> dict[str, dict]:
    """``{size: shape}`` of ``plan_scale.sizes`` (a list of ``{name, <shape>}``: an overlay replaces it whole), in
    its order (smallest first; :func:`check` enforces it)."""
    return {v["name"]: {s: int(v[s]) for s in SHAPE_KEYS} for v in (study(config) or {}).get("sizes", [])}


def resolve(config: dict) -> dict:
    """``config`` with the default base's two stages (``models.ar_pretrained``, ``models.ar_base``) copied into
    ``plan_scale.stages`` (a copy): the bases of other sizes are built from them even where the run itself loads
    the released default base and drops ``ar_pretrained`` (:func:`released.resolve`).  Call it first."""
    s = study(config)
    if not s or "stages" in s:
        return dict(config)
    missing = [m for m in STAGES.values() if "train" not in config["models"].get(m, {})]
    if missing:
        raise ValueError(f"scale_study: the bases are built as the default's: models {missing} need a train: block")
    stages = {stage: copy.deepcopy(config["models"][m]["train"]) for stage, m in STAGES.items()}
    return dict(config, scale_study=dict(s, stages=stages))


def stage_train(config: dict, stage: str) -> dict:
    """The train block of a base's ``stage`` (``pretrain``, ``sft``): :func:`resolve`'s copy, else the model's."""
    return copy.deepcopy((study(config).get("stages") or {}).get(stage) or config["models"][STAGES[stage]]["train"])


def default_shape(config: dict) -> dict:
    """The default base's shape: ``models.ar_pretrained.train.model.tiny``."""
    tiny = stage_train(config, "pretrain")["model"]["tiny"]
    return {k: int(tiny[k]) for k in SHAPE_KEYS}


def params_of(config: dict) -> dict[str, int]:
    vocab = vocab_rows(config)
    return {k: n_params(s, vocab) for k, s in sizes(config).items()}


def reference_size(config: dict) -> str:
    return next(iter(sizes(config)))


def release_dir(config: dict, size: str) -> str:
    """Where a size's base is released: the default's own base for the reference size, else
    ``<scale_study.released_dir>/scale_<size>``."""
    if size == reference_size(config):
        return plan.model_source(config, "ar_base")
    return f"{study(config)['released_dir']}/scale_{size}"


def points_dir(config: dict) -> str:
    """Where the study's rows live: ``<results_dir>/scale_study/points`` (committed: a point made once, on any
    machine, is read by every later report; delete it to remake it)."""
    return f"{config['results_dir']}/scale_study/points"


def run_sizes(config: dict) -> list[str]:
    """Sizes this run computes (``scale_study.run_sizes``, default every size; ``[]``: none, the report of the
    committed rows only); the others' rows are read where they exist."""
    chosen = (study(config) or {}).get("run_sizes")
    return list(sizes(config) if chosen is None else chosen)


def run_subset(config: dict, key: str) -> set[int] | None:
    """``scale_study.run_budgets`` or ``run_seeds`` as integers (``--config`` passes nested numbers as strings);
    None when unset (every budget, every seed)."""
    chosen = (study(config) or {}).get(key)
    return None if chosen is None else {int(v) for v in chosen}


def point_files(config: dict, name: str) -> dict[str, str]:
    """A snapshot's three files (accuracy, speed, training rows); a base's (``base.<size>``) accuracy only."""
    d = points_dir(config)
    if name.startswith("base" + SEP):
        return {"accuracy": f"{d}/{name}.accuracy.csv"}
    return {k: f"{d}/{name}.{k}.csv" for k in ("accuracy", "speed", "metrics")}


def is_done(config: dict, name: str) -> bool:
    return all(os.path.isfile(f) for f in point_files(config, name).values())


def todo(config: dict) -> dict[str, dict]:
    """Snapshots of :func:`snapshots` that this run makes: of a size in :func:`run_sizes`, a budget in
    ``run_budgets`` and a seed in ``run_seeds`` (:func:`run_subset`), with a file missing."""
    mine, cs = set(run_sizes(config)), chains(config)
    budgets, seeds = run_subset(config, "run_budgets"), run_subset(config, "run_seeds")
    return {k: v for k, v in snapshots(config).items()
            if cs[v["chain"]]["size"] in mine and (budgets is None or v["budget"] in budgets)
            and (seeds is None or cs[v["chain"]]["seed"] in seeds) and not is_done(config, k)}


def todo_bases(config: dict) -> list[str]:
    """Sizes of :func:`run_sizes` whose base is scored in this run (no accuracy file yet)."""
    return [s for s in run_sizes(config) if not is_done(config, f"base{SEP}{s}")]


def built_sizes(config: dict) -> list[str]:
    """Sizes whose base this run builds: a size other than the reference that a job of this run needs and that
    has no released manifest (every such size with ``build_released``)."""
    build = bool(config.get("build_released"))
    need = set(todo_bases(config)) | {chains(config)[v["chain"]]["size"] for v in todo(config).values()}
    return [s for s in list(sizes(config))[1:]
            if s in need and (build or not os.path.isfile(os.path.join(release_dir(config, s), "manifest.json")))]


def plan_digest(todo_snapshots: dict, built: list[str]) -> str:
    """A short name for what a run makes (its snapshots and built bases): rule scale_plan's file."""
    import hashlib
    import json

    text = json.dumps({"todo": todo_snapshots, "built": built}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def priority(config: dict, snapshot: dict) -> int:
    """A snapshot job's priority: the smallest budget first, then seed 0 of every size before further seeds, the
    largest size first among equals (the longest job starts first)."""
    c = chains(config)[snapshot["chain"]]
    names = list(sizes(config))
    return (50 - 20 * sorted(c["budgets"]).index(snapshot["budget"]) - 8 * (c["seed"] > 0)
            + min(names.index(c["size"]), 7))


def base_train_config(config: dict, size: str, stage: str, files: list[str], init: str) -> dict:
    """The ``fastdllm train`` config of ``stage`` (pretrain, sft) of ``size``'s base: the default stage's
    (:func:`stage_train`) from ``init`` (``tiny`` or the pretrained stage), with the size's shape and every
    learning rate times reference width over width."""
    from fastdllm_core.training.config import merge_config

    train = stage_train(config, stage)
    cfg = merge_config(config.get("training", {}),
                       {k: v for k, v in train.items() if k not in ("init", "dataset", "processes")})
    shape = sizes(config)[size]
    cfg.setdefault("model", {})["init"] = init
    if stage == "pretrain":
        cfg["model"]["tiny"] = dict(cfg["model"].get("tiny") or {}, **shape)
    cfg.setdefault("data", {})["train_files"] = list(files)
    if config.get("device") in ("cpu", "cuda"):
        cfg.setdefault("train", {})["device"] = config["device"]
    cfg["optim"]["lr"] = float(cfg["optim"]["lr"]) * default_shape(config)["hidden_size"] / shape["hidden_size"]
    return cfg


def base_dataset(config: dict, stage: str) -> str:
    """The synthetic file a base stage trains on (``pretrain``, ``sft``)."""
    return plan.synthetic_files(config)[stage_train(config, stage).get("dataset", stage)]


def base_processes(config: dict, stage: str) -> int:
    return int(stage_train(config, stage).get("processes", 1))


def base_source(config: dict, size: str, study_dir: str) -> str:
    """The base every job of ``size`` reads: the default's for the reference size; the released one; or, when this
    run builds it, its bf16 copy under ``study_dir`` (what is then released)."""
    if size == reference_size(config) or size not in built_sizes(config):
        return release_dir(config, size)
    return f"{study_dir}/bases/{size}/bf16"


def chains(config: dict) -> dict[str, dict]:
    """``{chain: {size, model, seed, budgets, batch_size, lever}}``: every size with ``seeds``; the smallest and the
    largest size also with ``endpoint_seeds``; in the order they run (seed 0 of every size first)."""
    s = study(config)
    if not s:
        return {}
    budgets = sorted(int(b) for b in s["budgets"])
    names = list(sizes(config))
    ends = [names[0], names[-1]]
    out: dict[str, dict] = {}
    order = [(size, seed) for seed in s["seeds"] for size in names]
    order += [(size, seed) for seed in s.get("endpoint_seeds") or [] for size in ends]
    for size, seed in order:
        for m in s["models"]:
            key = f"{size}{SEP}{m}{SEP}s{seed}"
            if key not in out:
                batch = int(plan.training_config(config, m, [])["optim"]["batch_size"])
                out[key] = dict(size=size, model=m, seed=int(seed), budgets=budgets, batch_size=batch, lever=None)
    return out


def budget_tokens(config: dict, size: str) -> float:
    """Adaptation tokens of budget 1 at ``size``: the default's, times its parameters over the reference's."""
    p = params_of(config)
    return plan_budget.base_tokens(config) * p[size] / p[reference_size(config)]


def steps(config: dict, chain: dict, budget: int) -> int:
    per_step = chain["batch_size"] * int(config["training"]["data"]["seq_len"])
    return max(1, round(budget * budget_tokens(config, chain["size"]) / per_step))


def tokens(config: dict, chain: dict, budget: int) -> int:
    return steps(config, chain, budget) * chain["batch_size"] * int(config["training"]["data"]["seq_len"])


def snapshots(config: dict, chain_map: dict | None = None) -> dict[str, dict]:
    """``{snapshot: {chain, budget, steps, tokens, previous}}``."""
    out = {}
    for name, c in (chains(config) if chain_map is None else chain_map).items():
        prev = None
        for b in c["budgets"]:
            key = f"{name}{SEP}x{b}"
            out[key] = dict(chain=name, budget=b, steps=steps(config, c, b), tokens=tokens(config, c, b),
                            previous=prev)
            prev = key
    return out


def train_config(config: dict, c: dict, train_files: list[str], base: str) -> dict:
    """The ``fastdllm train`` config of chain ``c``: its model's from ``base`` (the size's released base), its seed,
    and max_steps of its largest budget."""
    cfg = plan_budget.train_config(config, dict(c, lever=None), train_files)
    cfg["model"]["init"] = base
    cfg["optim"]["max_steps"] = steps(config, c, max(c["budgets"]))
    return cfg


def estimate_hours(config: dict) -> dict[str, float]:
    """Training time of what this run makes (:func:`built_sizes`' bases, each chain with a snapshot in
    :func:`todo` to its largest such budget, from scratch) at ``scale_study.train_rate`` (tokens/s of one job at
    the reference size), taken as falling in proportion to parameters (measured, it falls a little slower: this
    errs long): ``{"bases", "chains", "total"}`` in hours of one job, ``wall`` over ``scale_study.cores``."""
    s, p = study(config), params_of(config)
    ref = p[reference_size(config)]
    rate = {k: float(v) for k, v in s["train_rate"].items()}
    seq = int(config["training"]["data"]["seq_len"])
    bases = 0.0
    for size in built_sizes(config):
        for stage in STAGES:
            o = base_train_config(config, size, stage, [], "tiny")["optim"]
            bases += int(o["max_steps"]) * int(o["batch_size"]) * seq / (rate["base"] * ref / p[size])
    last: dict[str, int] = {}
    for snap in todo(config).values():
        last[snap["chain"]] = max(last.get(snap["chain"], 0), snap["budget"])
    cs = chains(config)
    adapt = sum(tokens(config, cs[c], b) / (rate[cs[c]["model"]] * ref / p[cs[c]["size"]]) for c, b in last.items())
    total = (bases + adapt) / 3600
    return {"bases": bases / 3600, "chains": adapt / 3600, "total": total, "wall": total / int(s.get("cores", 1))}


def check_ceiling(config: dict) -> dict[str, float]:
    """:func:`estimate_hours`, or a named error when it exceeds ``scale_study.ceiling_hours`` (rule scale_plan,
    before any training)."""
    est, s = estimate_hours(config), study(config)
    if est["wall"] > float(s["ceiling_hours"]):
        raise ValueError(f"scale_study: what this run would make is estimated at {est['wall']:.1f} h on "
                         f"{s.get('cores', 1)} cores (bases {est['bases']:.1f} h, chains {est['chains']:.1f} h of one "
                         f"job), over scale_study.ceiling_hours={s['ceiling_hours']:g}; choose what to run with "
                         "scale_study.run_sizes, run_budgets and run_seeds, run the largest on a GPU "
                         "(docs/scale_study.md), or raise the ceiling")
    return est


def _check_shapes(config: dict) -> None:
    names = [v.get("name") for v in study(config).get("sizes") or []]
    if len(set(names)) != len(names):
        raise ValueError(f"scale_study.sizes: names must be unique, got {names}")
    for shape in study(config).get("sizes") or []:
        key = shape.get("name")
        missing = [k for k in SHAPE_KEYS if k not in shape]
        if missing:
            raise ValueError(f"scale_study.sizes.{key}: missing {missing} (a size is {list(SHAPE_KEYS)})")
        h, heads, kv = int(shape["hidden_size"]), int(shape["heads"]), int(shape["kv_heads"])
        if heads <= 0 or h % heads:
            raise ValueError(f"scale_study.sizes.{key}: heads={heads} does not divide hidden_size={h}")
        if kv <= 0 or heads % kv:
            raise ValueError(f"scale_study.sizes.{key}: kv_heads={kv} does not divide heads={heads}")
    shapes = sizes(config)
    if not shapes:
        raise ValueError("scale_study.sizes: no size")
    first = next(iter(shapes))
    if shapes[first] != default_shape(config):
        raise ValueError(f"scale_study.sizes: the first size ({first}: {shapes[first]}) must be the default base's "
                         f"shape {default_shape(config)} (models.ar_pretrained.train.model.tiny): the study starts "
                         "from the default's released base")
    p = params_of(config)
    order = list(p.values())
    if order != sorted(order) or len(set(order)) != len(order):
        raise ValueError(f"scale_study.sizes: sizes must grow in parameters, in order; got {p}")


def check(config: dict) -> None:
    """Named errors before any training: a bad shape (heads that do not divide the width, a missing key), a first
    size that is not the default base's, sizes out of order, a model the
    study cannot train, a non-constant schedule, a missing rate, or a study estimated over its ceiling."""
    s = study(config)
    if not s:
        return
    _check_shapes(config)
    models = config["models"]
    for m in s["models"]:
        if m not in models or not plan.is_adaptation(models[m]):
            raise ValueError(f"scale_study.models: {m!r} is not a model adapted here; adapted: "
                             f"{[n for n, v in models.items() if plan.is_adaptation(v)]}")
        if m not in s["train_rate"]:
            raise ValueError(f"scale_study.train_rate: no rate for {m!r} (tokens/s of one job at the default size)")
        sched = plan.training_config(config, m, [])["optim"].get("schedule", "constant")
        if sched != "constant":
            raise ValueError(f"scale_study: {m!r} trains with schedule {sched!r}; a snapshot equals the shorter run "
                             "only under a constant learning rate after the warm-up")
    if "base" not in s["train_rate"]:
        raise ValueError("scale_study.train_rate: no rate for 'base' (tokens/s of the base's training at the "
                         "default size)")
    for key in s.get("run_sizes") or []:
        if key not in sizes(config):
            raise ValueError(f"scale_study.run_sizes: unknown size {key!r}; known: {list(sizes(config))}")
    _check_subsets(s)


def _check_subsets(s: dict) -> None:
    known = {"run_budgets": sorted(int(b) for b in s["budgets"]),
             "run_seeds": sorted({int(v) for v in list(s["seeds"]) + list(s.get("endpoint_seeds") or [])})}
    for key, values in known.items():
        for v in s.get(key) or []:
            if not str(v).isdigit() or int(v) not in values:
                raise ValueError(f"scale_study.{key}: unknown value {v!r}; the study's: {values}")


def row_fields(config: dict, name: str, snapshot: dict, chain: dict) -> dict:
    """What every accuracy and speed row of snapshot ``name`` carries: size, parameters, chain, budget, seed."""
    return {"snapshot": name, "chain": snapshot["chain"], "size": chain["size"],
            "size_params": params_of(config)[chain["size"]], "budget": snapshot["budget"],
            "budget_tokens": snapshot["tokens"], "train_seed": chain["seed"], "model_group": chain["model"]}


def base_row_fields(config: dict, size: str) -> dict:
    """The same fields for a size's AR base (``base.<size>``): no chain, budget 0, group ``base``."""
    return {"snapshot": f"base{SEP}{size}", "chain": "", "size": size, "size_params": params_of(config)[size],
            "budget": 0, "budget_tokens": 0, "train_seed": "", "model_group": "base"}


def describe(config: dict) -> str:
    """The study a report comes from, for its footer."""
    s, p = study(config), params_of(config)
    shown = ", ".join(f"{k} ({v / 1e6:.2f}M)" for k, v in p.items())
    return (f"sizes {shown}; models {', '.join(s['models'])}; budgets {', '.join(f'{b}x' for b in s['budgets'])}; "
            f"seeds {', '.join(map(str, s['seeds']))} (smallest and largest size also "
            f"{', '.join(map(str, s.get('endpoint_seeds') or [])) or 'none'})")


def runtime_minutes(config: dict, chain: dict, attempt: int) -> int:
    """A snapshot job's resource runtime: its chain's estimate to its largest budget, doubled."""
    s, p = study(config), params_of(config)
    rate = float(s["train_rate"][chain["model"]]) * p[reference_size(config)] / p[chain["size"]]
    return int(math.ceil(2 * tokens(config, chain, max(chain["budgets"])) / rate / 60 + 10)) * attempt


def report_columns(config: dict) -> dict:
    """The columns averaged (``scale_study.columns``, default Table 2's) that score a task."""
    names = study(config).get("columns") or config["tables"]["table2"]["columns"]
    return {c: config["columns"][c] for c in names if "task" in config["columns"][c]}
