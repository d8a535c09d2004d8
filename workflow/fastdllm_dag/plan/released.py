"""Released checkpoints that the DAG can also build: which models a run loads and which it trains.

The paper starts from a released Qwen2.5-Instruct; the embedded default likewise starts from a released tiny AR
base kept in the repository (``models.ar_base.source``, ``use_released: true``), built once by this DAG from
scratch (``ar_pretrained`` -> ``ar_base``) and written there with a manifest by the ``release_base`` rule
(:mod:`fastdllm_core.release`).  Two config keys say which:

* ``build_released: true`` (``snakemake --config build_released=True``) trains every model that has both a
  ``source`` and a ``train:`` block from its ``train:`` block instead of loading the source;
* ``models.<m>.released_with: <r>`` marks ``m`` as a stage of ``r``'s build (``ar_pretrained`` of ``ar_base``):
  it exists in a run only when ``r`` is built there.

:func:`resolve` applies both, once, at parse time (``common.smk``), so every other part of the plan sees a plain
config: a model is loaded or trained, and a build stage that nothing needs is not in it.
"""
from __future__ import annotations

import copy

from fastdllm_dag.plan import models as plan
from fastdllm_dag.plan import pairs


def resolve(config: dict) -> dict:
    """``config`` with ``build_released`` applied to the models and the unneeded build stages removed (a copy;
    ``build_released`` and ``released_with`` themselves are dropped, so the rest of the plan never sees them)."""
    out = copy.deepcopy(config)
    build = bool(out.pop("build_released", False))
    models = out["models"]
    for m in models.values():
        if build and "train" in m and m.get("source"):
            m["use_released"] = False
    for name in [n for n, m in models.items() if "released_with" in m]:
        owner = models[name].pop("released_with")
        if plan.uses_released(models[owner]):
            del models[name]
    return out


def check(config: dict, fail) -> None:
    """``released_with`` names a model that has a source and a ``train:`` block, and is not itself a stage."""
    models = config["models"]
    for name, m in models.items():
        owner = m.get("released_with")
        if owner is None:
            continue
        key = f"models.{name}.released_with"
        if owner not in models:
            fail(key, f"unknown model {owner!r}; defined: {sorted(models)}")
        if not (models[owner].get("source") and "train" in models[owner]):
            fail(key, f"{owner!r} must have both a source (the released checkpoint) and a train: block (its build)")
        if "released_with" in models[owner] or "train" not in m:
            fail(key, f"{name!r} must have a train: block and {owner!r} must not be a build stage itself")


def builds(config: dict) -> list[str]:
    """Models of a resolved config that are trained here and have a ``source``: the released checkpoints this run
    builds (``release_base`` writes each into its source directory)."""
    return [n for n, m in config["models"].items() if m.get("source") and plan.is_trained(m)]


def build_chain(config: dict, name: str) -> list[str]:
    """``name`` and the models it is trained from, first stage first (``ar_pretrained``, ``ar_base``)."""
    models = config["models"]
    return [m for m in reversed([name, *pairs.init_chain(config, name)]) if m in models and plan.is_trained(models[m])]


# the synthetic suite's settings that decide the base's training data (which problems are held out for testing,
# and how many training rows of each kind)
SYNTHETIC_BUILD_KEYS = ("enabled", "seed", "n_eval", "n_pretrain", "n_sft", "n_adapt")


def build_settings(config: dict, name: str) -> dict:
    """What builds the released model ``name`` in a resolved config with ``build_released`` on: every stage's
    ``fastdllm train`` config in full (defaults filled; paths replaced by the stage names they stand for) and the
    synthetic suite's settings.  Its :func:`fastdllm_core.release.config_digest` is the manifest's
    ``config_digest``."""
    from fastdllm_core.training.config import TrainConfig

    chain = build_chain(config, name)
    stages = {}
    for stage in chain:
        raw = plan.training_config(config, stage, plan.train_files(config, stage))
        cfg = TrainConfig.from_dict(raw, check_files=False).to_dict()  # a digest of settings, not of files
        init = config["models"][stage]["train"]["init"]
        cfg["model"]["init"] = init  # a stage name or "tiny", not a run directory
        cfg["data"]["train_files"] = [config["models"][stage]["train"].get("dataset", "adapt")]
        cfg["train"].pop("output_dir", None)
        stages[stage] = {"train": cfg, "processes": config["models"][stage]["train"].get("processes", 1)}
    syn = config["data"].get("synthetic", {})
    return {"stages": stages, "synthetic": {k: syn.get(k) for k in SYNTHETIC_BUILD_KEYS}}


def numerics_cases(config: dict, name: str) -> list[str]:
    """The stored-numerics cases (tests/data/numerics/training.json) of the recipes that build ``name``."""
    return [config["models"][s]["train"]["recipe"] for s in build_chain(config, name)]
