"""Training configuration: the recipes, their defaults and the paper's hyper-parameters; ``resolve_config`` fills
the defaults and names the bad field before any expensive work."""
from __future__ import annotations

from pathlib import Path

import yaml

from . import data as data_mod
from .configkeys import merge_config as _merge

RECIPES = {
    "ar_pretrain": {"objective": "ntp", "packing": "whole", "complementary": False},
    "sft": {"objective": "ntp", "packing": "whole", "complementary": False},
    "ntp": {"objective": "ntp", "packing": "pad", "complementary": False},
    "bd_naive": {"objective": "bd", "packing": "naive", "complementary": False},
    "bd_pad": {"objective": "bd", "packing": "pad", "complementary": False},
    "bd_pad_cm": {"objective": "bd", "packing": "pad", "complementary": True},
    # full-attention masked diffusion from the AR model (Dream's recipe) on the same packed data as "+ pad"
    "dream": {"objective": "dream", "packing": "pad", "complementary": False},
}

# The paper's hyper-parameters (Sec. 4.1): global batch 256 sequences of L 2048, D 32, AdamW, 500 warm-up steps.
PAPER_HPARAMS = {
    "1.5B": {"model": "Qwen/Qwen2.5-1.5B-Instruct", "lr": 2e-5, "max_steps": 6000, "batch_size": 256,
             "seq_len": 2048, "block_size": 32, "warmup_steps": 500},
    "7B": {"model": "Qwen/Qwen2.5-7B-Instruct", "lr": 1e-5, "max_steps": 2500, "batch_size": 256,
           "seq_len": 2048, "block_size": 32, "warmup_steps": 500},
}

DEFAULTS = {
    "recipe": "bd_pad_cm",
    "model": {"init": "tiny", "tiny": {}, "tokenizer": "char", "vocab_size": 768, "mask_init": "keep"},
    "data": {"train_files": [], "seq_len": 128, "max_examples": None, "drop_after_answer": True},
    "objective": {"block_size": 32, "eps": 1e-3},
    "optim": {"lr": 2e-5, "weight_decay": 0.0, "betas": [0.9, 0.999], "warmup_steps": 500, "max_steps": 6000,
              "batch_size": 256, "micro_batch_size": 8, "grad_clip": 1.0, "schedule": "constant"},
    "train": {"seed": 0, "save_every": 500, "keep_checkpoints": 2, "dtype": "auto", "gradient_checkpointing": False,
              "log_every": 10, "device": "auto", "attn_implementation": None},
}
SCHEDULES = ("constant", "linear", "cosine")
MASK_INITS = ("keep", "zero")


def set_key(cfg: dict, dotted: str, value: str) -> None:
    """``--set optim.lr=1e-4``: the value is parsed as YAML."""
    keys = dotted.split(".")
    d = cfg
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d[keys[-1]] = yaml.safe_load(value)


def resolve_config(cfg: dict) -> dict:
    """Fill defaults and validate, naming the bad field, before any expensive work.  A key that DEFAULTS does not
    have (at any depth) is an error naming it and the closest valid key (:mod:`fastdllm_core.configkeys`)."""
    from .configkeys import check_keys

    check_keys(cfg or {}, DEFAULTS, "training config")
    cfg = _merge(DEFAULTS, cfg)
    if cfg["model"]["mask_init"] not in MASK_INITS:
        raise ValueError(f"model.mask_init must be one of {MASK_INITS}, got {cfg['model']['mask_init']!r}")
    for sec, key in (("optim", "lr"), ("optim", "weight_decay"), ("optim", "grad_clip"), ("objective", "eps")):
        v = cfg[sec][key]
        if isinstance(v, str):  # YAML 1.1 reads "2e-5" as a string
            try:
                cfg[sec][key] = float(v)
            except ValueError:
                raise ValueError(f"{sec}.{key} must be a number, got {v!r}") from None
    if cfg["recipe"] not in RECIPES:
        raise ValueError(f"recipe: unknown {cfg['recipe']!r}; choose from {sorted(RECIPES)}")
    L, D = cfg["data"]["seq_len"], cfg["objective"]["block_size"]
    data_mod.check_lengths(L, D)
    o, t = cfg["optim"], cfg["train"]
    for key in ("batch_size", "micro_batch_size", "max_steps"):
        if not isinstance(o[key], int) or o[key] <= 0:
            raise ValueError(f"optim.{key} must be a positive integer, got {o[key]!r}")
    if o["batch_size"] % o["micro_batch_size"]:
        raise ValueError(f"optim.micro_batch_size={o['micro_batch_size']} must divide "
                         f"optim.batch_size={o['batch_size']}")
    if not (isinstance(o["lr"], (int, float)) and o["lr"] > 0):
        raise ValueError(f"optim.lr must be > 0, got {o['lr']!r}")
    if o["schedule"] not in SCHEDULES:
        raise ValueError(f"optim.schedule must be one of {SCHEDULES}, got {o['schedule']!r}")
    if not 0 <= cfg["objective"]["eps"] < 1:
        raise ValueError(f"objective.eps must be in [0, 1), got {cfg['objective']['eps']!r}")
    if not isinstance(t["save_every"], int) or t["save_every"] <= 0:
        raise ValueError(f"train.save_every must be a positive integer, got {t['save_every']!r}")
    files = cfg["data"]["train_files"]
    if isinstance(files, str):
        files = cfg["data"]["train_files"] = [files]
    if not files:
        raise ValueError("data.train_files is empty: give at least one JSONL file")
    for f in files:
        if not Path(f).is_file():
            raise FileNotFoundError(f"data.train_files: file not found: {f}")
    return cfg
