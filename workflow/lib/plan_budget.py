"""The budget study's plan (``snakemake --cores all budget_study``; not part of ``paper_figures``): the recipe and
its NTP baseline adapted from the AR base at growing budgets of adaptation tokens, on unique data that grows with
the budget, and the same at one other setting (a *lever*).  Pure functions of the config (no Snakemake, no torch).

A *chain* is one training run (a model of ``budget_study.models`` or a lever's, one seed) to its largest budget;
its *snapshots* are the final checkpoints at each budget of the chain.  Under a constant learning rate after the
warm-up the schedule does not depend on the run's length, and the data order depends only on the step
(:func:`fastdllm_core.training.loop.batch_indices`), so the snapshot at budget b of a longer chain *is* the run
that stops at b: one run per chain gives every budget (tests/test_budget_study.py checks it on a tiny model).
Every budget's data is the study's own set (``budget_study.n_adapt`` rows per task, about one pass at the
largest budget), so no token is seen twice below it.
"""
from __future__ import annotations

import math

import plan
import plan_points

# a lever: a name the config may use -> the training-config key it sets (one setting changed from the recipe's)
LEVERS = {
    "lr": ("optim", "lr"),
    "batch_size": ("optim", "batch_size"),   # the steps follow: the budget counts tokens, not steps
    "weight_decay": ("optim", "weight_decay"),
    "mask_init": ("model", "mask_init"),
}
SEP = "."  # chain = <model>[.<lever>-<value>].s<seed>; snapshot = <chain>.x<budget>


def study(config: dict) -> dict | None:
    return config.get("budget_study") or None


def base_tokens(config: dict) -> int:
    """The default's adaptation tokens (budget 1): ``training.optim`` max_steps x batch_size x ``data.seq_len``."""
    t = config["training"]
    return int(t["optim"]["max_steps"]) * int(t["optim"]["batch_size"]) * int(t["data"]["seq_len"])


def _lever_slug(lever: dict) -> str:
    v = lever["value"]
    text = f"{float(v):g}" if isinstance(v, (int, float)) or _number(v) else str(v)
    return f"{lever['name']}-{text}".replace("+", "")


def _number(v) -> bool:
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def chains(config: dict) -> dict[str, dict]:
    """``{chain: {model, seed, lever, budgets, batch_size}}``: every model at every budget with ``seeds``, at the
    smallest and largest budget with ``endpoint_seeds``; each lever on the first model, seed of ``seeds[0]``."""
    s = study(config)
    if not s:
        return {}
    budgets = sorted(int(b) for b in s["budgets"])
    ends = [budgets[0], budgets[-1]]
    out: dict[str, dict] = {}
    # in the order they are run (:func:`priority`): every budget, the levers, then the endpoints' other seeds
    for m in s["models"]:
        for seed in s["seeds"]:
            out[f"{m}{SEP}s{seed}"] = dict(model=m, seed=int(seed), lever=None, budgets=budgets)
    for lever in s.get("levers") or []:
        m, seed = s["models"][0], int(s["seeds"][0])
        out[f"{m}{SEP}{_lever_slug(lever)}{SEP}s{seed}"] = dict(model=m, seed=seed, lever=dict(lever),
                                                                 budgets=budgets)
    for seed in s.get("endpoint_seeds") or []:
        for m in s["models"]:
            key = f"{m}{SEP}s{seed}"
            if key not in out:
                out[key] = dict(model=m, seed=int(seed), lever=None, budgets=sorted(set(ends)))
    for c in out.values():
        c["batch_size"] = int(_training_value(config, c, ("optim", "batch_size")))
    return out


def _training_value(config: dict, chain: dict, key: tuple):
    lever = chain["lever"]
    if lever and LEVERS[lever["name"]] == key:
        return lever["value"]
    cfg = plan.training_config(config, chain["model"], [])
    return cfg[key[0]][key[1]]


def steps(config: dict, chain: dict, budget: int) -> int:
    """Optimiser steps of ``chain`` at ``budget``: the budget's tokens over the chain's batch x seq_len."""
    per_step = chain["batch_size"] * int(config["training"]["data"]["seq_len"])
    return max(1, round(budget * base_tokens(config) / per_step))


def snapshots(config: dict, chain_map: dict[str, dict] | None = None) -> dict[str, dict]:
    """``{snapshot: {chain, budget, steps, tokens, previous}}`` (``previous``: the chain's snapshot before it) of
    ``chain_map`` (default: :func:`chains`)."""
    out = {}
    for name, c in (chains(config) if chain_map is None else chain_map).items():
        prev = None
        for b in c["budgets"]:
            key = f"{name}{SEP}x{b}"
            out[key] = dict(chain=name, budget=b, steps=steps(config, c, b), previous=prev,
                            tokens=tokens(config, c, b))
            prev = key
    return out


def tokens(config: dict, chain: dict, budget: int) -> int:
    """Adaptation tokens of ``chain`` at ``budget``: its :func:`steps` x batch x seq_len."""
    return steps(config, chain, budget) * chain["batch_size"] * int(config["training"]["data"]["seq_len"])


def train_config(config: dict, c: dict, train_files: list[str]) -> dict:
    """The ``fastdllm train`` config of chain ``c`` (a value of :func:`chains`): the model's
    (:func:`plan.training_config`), its seed, its lever, and max_steps of its largest budget (each snapshot's job
    stops the same run earlier)."""
    cfg = plan.training_config(config, c["model"], train_files)
    cfg.setdefault("train", {})["seed"] = c["seed"]
    if c["lever"]:
        section, key = LEVERS[c["lever"]["name"]]
        cfg.setdefault(section, {})[key] = c["lever"]["value"]
    cfg["optim"]["max_steps"] = steps(config, c, max(c["budgets"]))
    cfg["optim"]["micro_batch_size"] = min(int(cfg["optim"]["micro_batch_size"]), c["batch_size"])
    return cfg


def estimate_minutes(config: dict, chain: dict) -> float:
    """``chain``'s training time to its largest budget at ``budget_study.train_rate`` (tokens/s of its model)."""
    rate = float(study(config)["train_rate"][chain["model"]])
    return tokens(config, chain, max(chain["budgets"])) / rate / 60.0


def check(config: dict) -> None:
    """Named errors before any training: an unknown lever or a bad value of one, a model the study cannot train, a
    schedule under which a snapshot is not the shorter run, a chain whose estimate exceeds ``ceiling_minutes``."""
    s = study(config)
    if not s:
        return
    for lever in s.get("levers") or []:
        if lever.get("name") not in LEVERS:
            raise ValueError(f"budget_study.levers: unknown lever {lever.get('name')!r}; known: {sorted(LEVERS)}")
    models = config["models"]
    for m in s["models"]:
        if m not in models or not plan.is_adaptation(models[m]):
            raise ValueError(f"budget_study.models: {m!r} is not a model adapted here (models.<m>.train with the "
                             f"adaptation data); adapted: {[n for n, v in models.items() if plan.is_adaptation(v)]}")
        if m not in (s.get("train_rate") or {}):
            raise ValueError(f"budget_study.train_rate: no rate for {m!r} (tokens/s of one training job)")
        sched = plan.training_config(config, m, [])["optim"].get("schedule", "constant")
        if sched != "constant":
            raise ValueError(f"budget_study: {m!r} trains with schedule {sched!r}; a snapshot equals the shorter run "
                             "only under a constant learning rate after the warm-up (training.optim.schedule)")
    from fastdllm_core.training.config import TrainConfig

    ceiling = float(s["ceiling_minutes"])
    for name, c in chains(config).items():
        try:  # a lever's value (an lr that is not a number, an unknown mask_init) named here, not in the job
            TrainConfig.from_dict(train_config(config, c, ["<the study's set>"]), check_files=False)
        except ValueError as exc:
            raise ValueError(f"budget_study: chain {name} (lever {c['lever']}): {exc}") from exc
        est = estimate_minutes(config, c)
        if est > ceiling:
            raise ValueError(f"budget_study: chain {name} (budget {max(c['budgets'])}x, "
                             f"{steps(config, c, max(c['budgets']))} steps) is estimated at {est:.0f} min, over "
                             f"budget_study.ceiling_minutes={ceiling:g}; lower budget_study.budgets or raise the "
                             "ceiling")


def data_rows(config: dict) -> int:
    """Adaptation rows per task of the study's set (``budget_study.n_adapt``)."""
    return int(study(config)["n_adapt"])


def priority(chain_map: dict[str, dict], snapshot: dict) -> int:
    """A snapshot job's priority: its chain's place in ``chain_map`` (:func:`chains`; the first chains' budgets land
    first)."""
    names = list(chain_map)
    return len(names) - names.index(snapshot["chain"])


def row_fields(name: str, snapshot: dict, chain: dict) -> dict:
    """What every accuracy and speed row of snapshot ``name`` carries: its chain, lever, budget and seed."""
    lever = chain["lever"] or {}
    return {"snapshot": name, "chain": snapshot["chain"], "lever": lever.get("name", ""),
            "lever_value": lever.get("value", ""), "budget": snapshot["budget"], "budget_tokens": snapshot["tokens"],
            "train_seed": chain["seed"], "model_group": chain["model"]}


def report_columns(config: dict) -> dict:
    """The table's columns (``budget_study.columns``, default Table 2's) that score a task."""
    names = study(config).get("columns") or config["tables"]["table2"]["columns"]
    return {c: config["columns"][c] for c in names if "task" in config["columns"][c]}


def report_points(config: dict) -> dict:
    """The decoding points the report reads: ``accuracy`` (the accuracy setting) and ``speed`` (the speed one)."""
    return {"accuracy": plan_points.point_name("bd", plan_points.base_decode(config)),
            "speed": plan_points.point_name("bd", plan_points.speed_decode(config))}


def describe(config: dict) -> str:
    """The study a report comes from, for its footer: the config's models, budgets, seeds and levers."""
    s = study(config)
    levers = ", ".join(f"{lv['name']} = {lv['value']}" for lv in s.get("levers") or []) or "none"
    return (f"models {', '.join(s['models'])}; budgets {', '.join(f'{b}x' for b in s['budgets'])}; seeds "
            f"{', '.join(map(str, s['seeds']))} (endpoints {', '.join(map(str, s.get('endpoint_seeds') or []))}); "
            f"levers: {levers}")


def runtime_minutes(config: dict, chain: dict, attempt: int) -> int:
    """A snapshot job's SLURM/resource runtime: its chain's estimate (it trains at most that far), doubled."""
    return int(math.ceil(2 * estimate_minutes(config, chain) + 10)) * attempt
