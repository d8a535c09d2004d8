"""A study's plan (``studies.<name>`` of the config; ``snakemake --cores all <name>_study``, never part of
``paper_figures``): pure functions of the config (no Snakemake, no torch, no disk; what is on disk is read by
:mod:`study_rows`, the one place that does).

A study is a grid of *bases* x *budgets* x *models* x *seeds*:

* a *base* is the AR model every run of it starts from and is compared with: a Qwen2 shape of ``sizes`` (default:
  the default base's own, named ``default``) pretrained for a multiple of ``pretrain`` (default ``[1]``) of the
  default base's pretraining tokens, on data that grows with it.  The first size at ``1`` is the default's released
  base; every other base is built by the study with the default base's two stages (``ar_pretrained``, ``ar_base``),
  every learning rate times the default's width over its own (muP's rule for Adam), and released with a manifest;
* a *budget* is a multiple of the default's adaptation tokens per parameter (the same tokens per parameter at
  every size);
* a *chain* is one training run (a base, a model of ``models`` or a lever's change of the first, a seed) to its
  largest budget; its *snapshots* are the final checkpoints at each budget: under a constant learning rate after
  the warm-up the snapshot at budget b of a longer run *is* the run that stops at b.

``seeds`` run everywhere; ``endpoint_seeds`` at the smallest and largest point of one axis (``endpoints_of``:
``budgets`` or ``bases``); ``base_budgets`` gives one base more budgets (seeds of ``seeds`` only); ``levers``
change one training setting of the first model at the first base and seed.  ``x`` names the axis the report plots
against: ``adapt`` (adaptation tokens per parameter), ``params`` or ``pretrain`` (the base's pretraining tokens
per parameter).
"""
from __future__ import annotations

import copy
import math

from fastdllm_dag.plan import models as plan

SHAPE_KEYS = ("hidden_size", "layers", "heads", "kv_heads", "intermediate_size")
STAGES = {"pretrain": "ar_pretrained", "sft": "ar_base"}  # a base's stages and the default models they copy
X_AXES = ("adapt", "params", "pretrain")
SEP = "."  # chain = [<base>.]<model>[.<lever>].s<seed>; snapshot = <chain>.x<budget>; a base's rows: base.<base>
# a lever: a name the config may use -> the training-config key it sets (one setting changed from the recipe's)
LEVERS = {
    "lr": ("optim", "lr"),
    "batch_size": ("optim", "batch_size"),  # the steps follow: the budget counts tokens, not steps
    "weight_decay": ("optim", "weight_decay"),
    "mask_init": ("model", "mask_init"),
}


def names(config: dict) -> list[str]:
    """The config's studies (``studies``), in its order."""
    return list(config.get("studies") or {})


def spec(config: dict, name: str) -> dict:
    return config["studies"][name]


def resolve(config: dict) -> dict:
    """``config`` with the default base's two stages (``models.ar_pretrained``, ``models.ar_base``) copied into each
    study as ``stages``: bases are built from them even where the run loads the released default base and drops
    ``ar_pretrained`` (:func:`released.resolve`).  Call it first."""
    if not names(config):
        return dict(config)
    missing = [m for m in STAGES.values() if "train" not in config["models"].get(m, {})]
    if missing:
        raise ValueError(f"studies: bases are built as the default's: models {missing} need a train: block")
    stages = {stage: copy.deepcopy(config["models"][m]["train"]) for stage, m in STAGES.items()}
    studies = {n: dict(s, stages=s.get("stages") or stages) for n, s in config["studies"].items()}
    return dict(config, studies=studies)


def stage_train(config: dict, name: str, stage: str) -> dict:
    """The train block of a base's ``stage`` (``pretrain``, ``sft``): :func:`resolve`'s copy, else the model's."""
    stages = spec(config, name).get("stages") or {}
    return copy.deepcopy(stages.get(stage) or config["models"][STAGES[stage]]["train"])


def default_shape(config: dict, name: str) -> dict:
    """The default base's shape: ``models.ar_pretrained.train.model.tiny``."""
    tiny = stage_train(config, name, "pretrain")["model"]["tiny"]
    return {k: int(tiny[k]) for k in SHAPE_KEYS}


def vocab_rows(config: dict) -> int:
    """Rows of the embedding: ``training.model.vocab_size`` rounded up to 8 (as a tiny model is built)."""
    return -(-int(config["training"]["model"]["vocab_size"]) // 8) * 8


def n_params(shape: dict, vocab: int) -> int:
    """Parameters of a tiny Qwen2 of ``shape`` with tied embeddings (biases on q, k, v; RMSNorm weights)."""
    h, layers, heads, kv, mlp = (int(shape[k]) for k in SHAPE_KEYS)
    kv_width = kv * (h // heads)
    attn = (h * h + h) + 2 * (h * kv_width + kv_width) + h * h
    return vocab * h + layers * (attn + 3 * h * mlp + 2 * h) + h


def sizes(config: dict, name: str) -> dict[str, dict]:
    """``{size: shape}``, smallest first: ``sizes`` of the study, else the default base's shape as ``default``."""
    given = spec(config, name).get("sizes")
    if not given:
        return {"default": default_shape(config, name)}
    return {v["name"]: {k: int(v[k]) for k in SHAPE_KEYS} for v in given}


def pretrain_tokens(config: dict, name: str) -> int:
    """The default base's pretraining tokens: its pretraining stage's steps x batch x ``data.seq_len``."""
    o = stage_train(config, name, "pretrain")["optim"]
    return int(o["max_steps"]) * int(o["batch_size"]) * int(config["training"]["data"]["seq_len"])


def base_name(size: str, mult: int, n_sizes: int, n_mults: int) -> str:
    if n_mults == 1 and mult == 1:
        return size
    return f"p{mult}" if n_sizes == 1 else f"{size}-p{mult}"


def bases(config: dict, name: str) -> dict[str, dict]:
    """``{base: {size, shape, params, pretrain, pretrain_tokens, reference}}`` in order (sizes, then pretraining
    multiples); ``reference``: the default's released base (first size, pretrain 1)."""
    shapes, mults = sizes(config, name), [int(m) for m in spec(config, name).get("pretrain") or [1]]
    vocab, tokens, first = vocab_rows(config), pretrain_tokens(config, name), next(iter(sizes(config, name)))
    out = {}
    for size, shape in shapes.items():
        for m in mults:
            out[base_name(size, m, len(shapes), len(mults))] = dict(
                size=size, shape=shape, params=n_params(shape, vocab), pretrain=m, pretrain_tokens=tokens * m,
                reference=size == first and m == 1)
    return out


def reference_base(config: dict, name: str) -> str:
    return next(k for k, b in bases(config, name).items() if b["reference"])


def base_tokens(config: dict) -> int:
    """The default's adaptation tokens (budget 1): ``training.optim`` max_steps x batch_size x ``data.seq_len``."""
    t = config["training"]
    return int(t["optim"]["max_steps"]) * int(t["optim"]["batch_size"]) * int(t["data"]["seq_len"])


def lever_slug(lever: dict) -> str:
    v = lever["value"]
    try:
        text = f"{float(v):g}"
    except (TypeError, ValueError):
        text = str(v)
    return f"{lever['name']}-{text}".replace("+", "")


def _chain(config: dict, base: str, model: str, seed: int, lever: dict | None, budgets: list[int]) -> dict:
    c = dict(base=base, model=model, seed=int(seed), lever=dict(lever) if lever else None, budgets=budgets)
    c["batch_size"] = int(training_value(config, c, ("optim", "batch_size")))
    return c


def chains(config: dict, name: str) -> dict[str, dict]:
    """``{chain: {base, model, seed, lever, budgets, batch_size}}`` in the order they run: ``seeds`` at every base,
    the levers, then ``endpoint_seeds`` at the ends of ``endpoints_of``."""
    s, bs = spec(config, name), list(bases(config, name))
    budgets = sorted(int(b) for b in s["budgets"])
    prefix = (lambda b: f"{b}{SEP}") if len(bs) > 1 else (lambda b: "")
    extra = {k: sorted(int(v) for v in vs) for k, vs in (s.get("base_budgets") or {}).items()}
    out: dict[str, dict] = {}
    for seed in s["seeds"]:
        for b in bs:
            for m in s["models"]:
                out[f"{prefix(b)}{m}{SEP}s{seed}"] = _chain(config, b, m, seed, None, extra.get(b, budgets))
    for lever in s.get("levers") or []:
        b, m, seed = reference_base(config, name), s["models"][0], int(s["seeds"][0])
        out[f"{prefix(b)}{m}{SEP}{lever_slug(lever)}{SEP}s{seed}"] = _chain(config, b, m, seed, lever, budgets)
    by_budget = s.get("endpoints_of", "budgets") == "budgets"
    ends = bs if by_budget else sorted({bs[0], bs[-1]}, key=bs.index)
    for seed in s.get("endpoint_seeds") or []:
        for b in ends:
            for m in s["models"]:
                key = f"{prefix(b)}{m}{SEP}s{seed}"
                if key not in out:
                    own = sorted({budgets[0], budgets[-1]}) if by_budget else budgets
                    out[key] = _chain(config, b, m, seed, None, own)
    return out


def training_value(config: dict, chain: dict, key: tuple):
    lever = chain["lever"]
    if lever and LEVERS[lever["name"]] == key:
        return lever["value"]
    return plan.training_config(config, chain["model"], [])[key[0]][key[1]]


def budget_tokens(config: dict, name: str, base: str) -> float:
    """Adaptation tokens of budget 1 at ``base``: the default's, times its parameters over the reference's."""
    b = bases(config, name)
    return base_tokens(config) * b[base]["params"] / b[reference_base(config, name)]["params"]


def steps(config: dict, name: str, chain: dict, budget: int) -> int:
    per_step = chain["batch_size"] * int(config["training"]["data"]["seq_len"])
    return max(1, round(budget * budget_tokens(config, name, chain["base"]) / per_step))


def tokens(config: dict, name: str, chain: dict, budget: int) -> int:
    return steps(config, name, chain, budget) * chain["batch_size"] * int(config["training"]["data"]["seq_len"])


def snapshots(config: dict, name: str, chain_map: dict | None = None) -> dict[str, dict]:
    """``{snapshot: {chain, budget, steps, tokens, previous}}`` (``previous``: the chain's snapshot before it)."""
    out = {}
    for cname, c in (chains(config, name) if chain_map is None else chain_map).items():
        prev = None
        for b in c["budgets"]:
            key = f"{cname}{SEP}x{b}"
            out[key] = dict(chain=cname, budget=b, steps=steps(config, name, c, b), tokens=tokens(config, name, c, b),
                            previous=prev)
            prev = key
    return out


def train_config(config: dict, name: str, chain: dict, train_files: list[str], base_source: str) -> dict:
    """The ``fastdllm train`` config of ``chain``: its model's (:func:`plan.training_config`) from ``base_source``,
    its seed and lever, and max_steps of its largest budget (each snapshot's job stops the same run earlier)."""
    cfg = plan.training_config(config, chain["model"], train_files)
    cfg["model"]["init"] = base_source
    cfg.setdefault("train", {})["seed"] = chain["seed"]
    if chain["lever"]:
        section, key = LEVERS[chain["lever"]["name"]]
        cfg.setdefault(section, {})[key] = chain["lever"]["value"]
    cfg["optim"]["max_steps"] = steps(config, name, chain, max(chain["budgets"]))
    cfg["optim"]["micro_batch_size"] = min(int(cfg["optim"]["micro_batch_size"]), chain["batch_size"])
    return cfg


def base_train_config(config: dict, name: str, base: str, stage: str, files: list[str], init: str) -> dict:
    """The ``fastdllm train`` config of ``stage`` (pretrain, sft) of a built ``base``: the default stage's from
    ``init`` (``tiny`` or the pretrained stage), with the base's shape, every learning rate times the default's
    width over the base's, and the pretraining steps times the base's multiple."""
    from fastdllm_core.training.config import merge_config

    train, b = stage_train(config, name, stage), bases(config, name)[base]
    cfg = merge_config(config.get("training", {}),
                       {k: v for k, v in train.items() if k not in ("init", "dataset", "processes")})
    cfg.setdefault("model", {})["init"] = init
    if stage == "pretrain":
        cfg["model"]["tiny"] = dict(cfg["model"].get("tiny") or {}, **b["shape"])
        cfg["optim"]["max_steps"] = int(cfg["optim"]["max_steps"]) * b["pretrain"]
    cfg.setdefault("data", {})["train_files"] = list(files)
    if config.get("device") in ("cpu", "cuda"):
        cfg.setdefault("train", {})["device"] = config["device"]
    width = default_shape(config, name)["hidden_size"] / b["shape"]["hidden_size"]
    cfg["optim"]["lr"] = float(cfg["optim"]["lr"]) * width
    return cfg


def base_processes(config: dict, name: str, stage: str) -> int:
    return int(stage_train(config, name, stage).get("processes", 1))


def priority(config: dict, name: str, chain: dict, budget: int) -> int:
    """A snapshot job's priority: the smallest budget first, then seed 0 of every base before further seeds, the
    largest base first among equals (the longest job starts first)."""
    bs = list(bases(config, name))
    return 50 - 20 * chain["budgets"].index(budget) - 8 * (chain["seed"] > 0) + min(bs.index(chain["base"]), 7)


def row_fields(config: dict, name: str, snapshot: str, snap: dict, chain: dict) -> dict:
    """What every accuracy, speed and training row of ``snapshot`` carries: its base, chain, lever, budget, seed."""
    lever = chain["lever"] or {}
    return dict(snapshot=snapshot, chain=snap["chain"], **base_fields(config, name, chain["base"]),
                lever=lever.get("name", ""), lever_value=lever.get("value", ""), budget=snap["budget"],
                budget_tokens=snap["tokens"], train_seed=chain["seed"], model_group=chain["model"])


def base_fields(config: dict, name: str, base: str) -> dict:
    b = bases(config, name)[base]
    return dict(base=base, size=b["size"], size_params=b["params"], pretrain=b["pretrain"],
                pretrain_tokens=b["pretrain_tokens"])


def base_row_fields(config: dict, name: str, base: str) -> dict:
    """The same fields for ``base``'s own rows (``base.<base>``): no chain, budget 0, group ``base``."""
    return dict(snapshot=f"base{SEP}{base}", chain="", **base_fields(config, name, base), lever="", lever_value="",
                budget=0, budget_tokens=0, train_seed="", model_group="base")


def _times(budgets: list) -> str:
    return ", ".join(f"{b}x" for b in budgets)


def describe(config: dict, name: str) -> str:
    """The study a report comes from, for its footer."""
    s = spec(config, name)
    shown = ", ".join(f"{k} ({b['params'] / 1e6:.2f}M, pretraining {b['pretrain']}x)"
                      for k, b in bases(config, name).items())
    levers = ", ".join(f"{lv['name']} = {lv['value']}" for lv in s.get("levers") or []) or "none"
    budgets = _times(s["budgets"]) + "".join(f" ({b}: {_times(v)})" for b, v in (s.get("base_budgets") or {}).items())
    return (f"bases {shown}; models {', '.join(s['models'])}; budgets {budgets}; "
            f"seeds {', '.join(map(str, s['seeds']))} (at the ends of {s.get('endpoints_of', 'budgets')} also "
            f"{', '.join(map(str, s.get('endpoint_seeds') or [])) or 'none'}); levers: {levers}")


def report_columns(config: dict, name: str) -> dict:
    """The columns averaged (``columns``, default Table 2's) that score a task."""
    ids = spec(config, name).get("columns") or config["tables"]["table2"]["columns"]
    return {c: config["columns"][c] for c in ids if "task" in config["columns"][c]}


def rate(config: dict, name: str, key: str, base: str) -> float:
    """Training tokens/s of one job of ``key`` (a model, or ``base``) at ``base``: ``train_rate`` at the default
    size, falling in proportion to parameters (measured, it falls a little slower: estimates err long)."""
    b = bases(config, name)
    return float(spec(config, name)["train_rate"][key]) * b[reference_base(config, name)]["params"] / b[base]["params"]


def runtime_minutes(config: dict, name: str, chain: dict, attempt: int) -> int:
    """A snapshot job's resource runtime: its chain's estimate to its largest budget, doubled."""
    secs = tokens(config, name, chain, max(chain["budgets"])) / rate(config, name, chain["model"], chain["base"])
    return int(math.ceil(2 * secs / 60 + 10)) * attempt


def estimate_hours(config: dict, name: str, built: list[str], todo: dict) -> dict[str, float]:
    """Training time of what a run makes (the bases in ``built``; each chain with a snapshot in ``todo`` to its
    largest such budget, from scratch), in hours of one job, and ``wall`` over ``cores``."""
    seq, cs = int(config["training"]["data"]["seq_len"]), chains(config, name)
    base_s = 0.0
    for base in built:
        for stage in STAGES:
            o = base_train_config(config, name, base, stage, [], "tiny")["optim"]
            base_s += int(o["max_steps"]) * int(o["batch_size"]) * seq / rate(config, name, "base", base)
    last: dict[str, int] = {}
    for snap in todo.values():
        last[snap["chain"]] = max(last.get(snap["chain"], 0), snap["budget"])
    adapt = sum(tokens(config, name, cs[c], b) / rate(config, name, cs[c]["model"], cs[c]["base"])
                for c, b in last.items())
    total = (base_s + adapt) / 3600
    return {"bases": base_s / 3600, "chains": adapt / 3600, "total": total,
            "wall": total / int(spec(config, name).get("cores", 1))}
