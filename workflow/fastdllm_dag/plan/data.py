"""Where the adaptation (training) data of the DAG comes from, and which trained rows cannot be trained here.

* ``data.adaptation`` (:mod:`fastdllm_core.training.adaptation_data`): the rule ``adaptation_data`` builds
  ``data.adaptation.output`` from the LLaMA-Nemotron post-training dataset (the Hub, or ``local_dir``).
* A model trained here on the adaptation data (``train.dataset: adapt``, the default) whose external training
  file is absent -- not on disk, not a stand-in the DAG builds, not buildable by ``adaptation_data`` (disabled,
  or offline without ``local_dir``) -- is *unavailable*: :func:`mark_unavailable` sets its
  ``train_unavailable`` to the reason (naming the keys to set); it gets no training job, and its evaluation
  jobs write ``n/a`` rows with that reason, so that its table still builds (as a task without data does).
  Any other table or figure never waits on it.
Pure functions of the config (no Snakemake, no torch), used by ``workflow/rules/common.smk``.
"""
from __future__ import annotations

import os

from fastdllm_core.training import adaptation_data as ad
from fastdllm_dag.plan import models as plan

DEFAULT_OUTPUT = "data/sft/adaptation_train.jsonl"


def adaptation_config(config: dict) -> dict | None:
    """``data.adaptation`` when set and enabled (placeholders of ``local_dir`` filled), else None."""
    a = (config.get("data") or {}).get("adaptation")
    if not a or not a.get("enabled", True):
        return None
    out = {k: v for k, v in a.items() if k not in ("enabled", "output", "tokenizer")}
    if out.get("local_dir"):
        out["local_dir"] = plan.shared_path(config, out["local_dir"])
    return out


def adaptation_output(config: dict) -> str | None:
    """The file the ``adaptation_data`` rule writes (``data.adaptation.output``), or None without that rule."""
    if adaptation_config(config) is None:
        return None
    return plan.shared_path(config, config["data"]["adaptation"].get("output") or DEFAULT_OUTPUT)


def adaptation_unavailable(config: dict) -> str | None:
    """Why ``adaptation_data`` cannot run here (checked at DAG parse, cheaply), or None.  A ``local_dir`` that a
    stand-in rule of the DAG builds counts as there."""
    c = adaptation_config(config)
    if c is None:
        return "data.adaptation is not enabled"
    if c.get("local_dir") and plan.standin_inputs(config, c["local_dir"]):
        return None
    return ad.unavailable_reason(c)


def adaptation_tokenizer(config: dict) -> str:
    """The tokenizer that counts the budget: ``data.adaptation.tokenizer``, else the init model of the first
    model trained on the adaptation data (its chat template renders the rows in training)."""
    t = config["data"]["adaptation"].get("tokenizer")
    if t:
        return plan.shared_path(config, t)
    for m in config["models"].values():
        if plan.is_adaptation(m):
            init = m["train"]["init"]
            return plan.model_source(config, init) if init in config["models"] else plan.shared_path(config, init)
    raise ValueError("data.adaptation.tokenizer: not set and no model is trained on the adaptation data "
                     "(models.<m>.train with dataset adapt) to take its init model's tokenizer from")


def adaptation_inputs(config: dict) -> list[str]:
    """Snakemake inputs of ``adaptation_data``: the stand-ins its local copy and tokenizer lie in."""
    c = adaptation_config(config) or {}
    return plan.standin_inputs(config, c.get("local_dir")) + plan.standin_inputs(config, adaptation_tokenizer(config))


def train_data_reason(config: dict, name: str) -> str | None:
    """Why model ``name`` (trained here) has no training data, or None when it has (or will have) it."""
    m = config["models"][name]
    if not plan.is_trained(m) or m["train"].get("dataset", "adapt") != "adapt":
        return None
    synthetic = set(plan.synthetic_files(config).values())
    built = adaptation_output(config) if adaptation_unavailable(config) is None else None  # adaptation_data makes it
    absent = [f for f in plan.train_files(config, name)
              if f not in synthetic and not os.path.exists(f) and not plan.standin_inputs(config, f) and f != built]
    if not absent:
        return None
    why = adaptation_unavailable(config)
    return (f"not trained: training data {absent} (data.train_files) not found, and data.adaptation cannot build "
            f"it ({why}); set data.train_files to local SFT JSONL files, or {ad.LOCAL_DIR_KEY} to a local copy of "
            f"{ad.DATASET}")


def mark_unavailable(config: dict) -> dict:
    """``config`` with ``train_unavailable: <reason>`` on every trained model without training data.  A role
    (roles.<r>) played by such a model is an error naming it: those tables and figures need its checkpoint."""
    models = {}
    for name, m in config["models"].items():
        reason = train_data_reason(config, name)
        models[name] = dict(m, train_unavailable=reason) if reason else m
    out = dict(config, models=models)
    for r, name in (config.get("roles") or {}).items():
        if name in models and models[name].get("train_unavailable"):
            raise ValueError(f"roles.{r}: model {name!r} is to be trained here but {models[name]['train_unavailable']}")
    return out
