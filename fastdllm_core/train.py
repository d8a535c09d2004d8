"""Training: adapt a causal LM to block diffusion (paper recipe and its ablations), or NTP fine-tune it.

Recipes (the paper's Table 2 and Table 1 baselines):

============  ==========  ========  ======================================================
recipe        objective   packing   complementary masks
============  ==========  ========  ======================================================
ar_pretrain   ntp         whole     -  (pretrain the tiny AR base from random init)
sft           ntp         whole     -  (instruct-tune it: the stand-in for Qwen2.5-Instruct)
ntp           ntp         pad       -  (the "NTP fine-tuned" / Nemo-FT baseline)
bd_naive      bd          naive     no ("naive token shift")
bd_pad        bd          pad       no ("+ pad")
bd_pad_cm     bd          pad       yes ("+ pad + CM": the paper's recipe)
============  ==========  ========  ======================================================

Determinism and resume: the sequences of optimiser step k and their noise masks are pure functions of
(seed, k, global sample index), so a run killed and resumed from a checkpoint ends with the same weights as an
uninterrupted one, and a run on W processes sees exactly the batches and masks of a single-process run with the
same global batch.  Multi-process through ``accelerate launch`` (DDP; DeepSpeed / FSDP via accelerate configs).
"""
from __future__ import annotations

import contextlib
import csv
import json
import logging
import math
import os
import shutil
import sys
import time
from pathlib import Path

import torch
import yaml

from . import data as data_mod
from . import objective as obj
from .configkeys import merge_config as _merge
from .hostload import HostLoad
from .provenance import run_metadata, write_csv_atomic, write_json_atomic

log = logging.getLogger(__name__)

RECIPES = {
    "ar_pretrain": {"objective": "ntp", "packing": "whole", "complementary": False},
    "sft": {"objective": "ntp", "packing": "whole", "complementary": False},
    "ntp": {"objective": "ntp", "packing": "pad", "complementary": False},
    "bd_naive": {"objective": "bd", "packing": "naive", "complementary": False},
    "bd_pad": {"objective": "bd", "packing": "pad", "complementary": False},
    "bd_pad_cm": {"objective": "bd", "packing": "pad", "complementary": True},
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


# ------------------------------------------------------------------------------------------------ config
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
        raise ValueError(f"optim.micro_batch_size={o['micro_batch_size']} must divide optim.batch_size={o['batch_size']}")
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


# ------------------------------------------------------------------------------------------------ model
def tokenizer_texts(rows: list[dict]):
    """The text a tokenizer is trained on: plain-text rows, and every chat turn as ``role\ncontent``."""
    for r in rows:
        if "text" in r:
            yield r["text"]
        else:
            for m in data_mod.to_messages(r):
                yield f"{m['role']}\n{m['content']}"


def build_model(cfg: dict, device: str, rows: list[dict] | None = None):
    """Model + tokenizer + mask token id from ``model.init``: ``tiny`` = a random tiny Qwen2 with the character
    tokenizer (``model.tokenizer: char``) or a byte-level BPE of ``model.vocab_size`` trained on ``rows``
    (``model.tokenizer: bpe``); anything else is loaded with :func:`~fastdllm_core.model.load_model`."""
    from .model import default_attn_implementation, ensure_mask_token, load_model

    attn = cfg["train"]["attn_implementation"] or default_attn_implementation(device)
    init = cfg["model"]["init"]
    if init == "tiny":
        from .tiny import bpe_tokenizer, char_tokenizer, tiny_model, tiny_qwen2_config

        kind = cfg["model"]["tokenizer"]
        if kind == "bpe":
            tok = bpe_tokenizer(tokenizer_texts(rows or []), cfg["model"]["vocab_size"])
        elif kind == "char":
            tok = char_tokenizer()
        else:
            raise ValueError(f"model.tokenizer must be 'char' or 'bpe', got {kind!r}")
        arch = {"vocab_size": -(-len(tok) // 8) * 8, **cfg["model"].get("tiny", {})}
        model = tiny_model(tiny_qwen2_config(**arch), seed=cfg["train"]["seed"], attn_implementation=attn)
        mask_id = ensure_mask_token(tok, model)
        if cfg["model"]["mask_init"] == "zero":
            init_mask_embedding(model, mask_id)
    else:
        lm = load_model(init, device="cpu", dtype=torch.float32, attn_implementation=attn,
                        block_size=cfg["objective"]["block_size"])
        model, tok, mask_id = lm.model, lm.tokenizer, lm.mask_token_id
        if cfg["model"]["mask_init"] == "zero":
            init_mask_embedding(model, mask_id)
    model.train()
    return model, tok, mask_id


def init_mask_embedding(model, mask_id: int) -> None:
    """Set the [MASK] token's input embedding (and, when tied, its output row) to zero before adaptation.

    An AR checkpoint never saw [MASK] as an input, but its row was trained all the same: as a class that is never
    the target, the output softmax pushed it away from every hidden state, and with tied embeddings that row *is*
    the input embedding.  Decoding then attends to a block of such vectors.  On the embedded default's tiny AR
    model this alone dropped the left-to-right accuracy of computed values under the block-diffusion mask from
    74% (zero row) to 38% before any training, and adaptation started from a loss of 7-10 nats on them
    (docs/embedded_default.md, "The [MASK] embedding").  A zero row makes [MASK] carry no content, only its
    position (RoPE) and the projections' biases; it is learned from there (the paper: "a learned [MASK]
    embedding").  ``model.mask_init: keep`` (the default, as the reference implementation) leaves the row as is.
    """
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        emb[mask_id].zero_()
        out = model.get_output_embeddings()
        if out is not None and out.weight.data_ptr() != emb.data_ptr():
            out.weight[mask_id].zero_()


def lr_lambda(cfg: dict):
    o = cfg["optim"]
    warm, total, sched = o["warmup_steps"], o["max_steps"], o["schedule"]

    def f(step: int) -> float:  # step = number of optimiser steps already taken
        if warm and step < warm:
            return (step + 1) / warm
        if sched == "constant":
            return 1.0
        frac = (step - warm) / max(1, total - warm)
        return max(0.0, 1 - frac) if sched == "linear" else 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))

    return f


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> list[int]:
    """Sequence indices of optimiser step ``step``: consecutive slices of per-epoch seeded permutations."""
    out = []
    pos = step * batch_size
    while len(out) < batch_size:
        epoch, off = divmod(pos, n)
        g = torch.Generator().manual_seed(seed * 100_003 + epoch)
        perm = torch.randperm(n, generator=g).tolist()
        take = min(batch_size - len(out), n - off)
        out += perm[off:off + take]
        pos += take
    return out


# ------------------------------------------------------------------------------------------------ checkpoints
def _checkpoints(output_dir: Path) -> list[Path]:
    d = output_dir / "checkpoints"
    if not d.is_dir():
        return []
    cks = [p for p in d.iterdir() if p.name.startswith("step-") and (p / "state.json").is_file()]
    return sorted(cks, key=lambda p: int(p.name.split("-")[1]))


def _save_checkpoint(accelerator, output_dir: Path, step: int, tokens_seen: int, keep: int) -> None:
    final = output_dir / "checkpoints" / f"step-{step}"
    tmp = output_dir / "checkpoints" / f".tmp-step-{step}"
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        write_json_atomic(tmp / "state.json", {"step": step, "tokens_seen": tokens_seen})
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in _checkpoints(output_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def _read_metrics(path: Path, upto: int) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if int(r["step"]) <= upto]


# ------------------------------------------------------------------------------------------------ training
def train(cfg: dict, output_dir: str | Path, *, max_steps: int | None = None, stop_after: int | None = None,
          progress: bool = True) -> Path:
    """Train per ``cfg``; returns the path of the final HF checkpoint (``output_dir/final``).

    ``stop_after`` ends the run after that many optimiser steps *without* writing ``final`` (a checkpoint is
    written there), as a controlled "kill" for resume tests.
    """
    from accelerate import Accelerator
    from tqdm.auto import tqdm

    cfg = resolve_config(cfg)
    if max_steps is not None:
        cfg["optim"]["max_steps"] = int(max_steps)
    # the data first: a bad row is named (file, line, field) before any model is built
    rows = [r for f in cfg["data"]["train_files"] for r in data_mod.read_jsonl(f)]
    if not rows:
        raise ValueError(f"the training dataset is empty: no rows in data.train_files {cfg['data']['train_files']}")
    output_dir = Path(output_dir)
    recipe = RECIPES[cfg["recipe"]]
    o, t = cfg["optim"], cfg["train"]
    seed, L, D = t["seed"], cfg["data"]["seq_len"], cfg["objective"]["block_size"]

    device_pref = t["device"]
    cpu = device_pref == "cpu" or (device_pref == "auto" and not torch.cuda.is_available())
    if device_pref.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"train.device={device_pref!r} but no CUDA device is available")
    dtype = t["dtype"]
    mixed = "bf16" if (not cpu and dtype in ("auto", "bf16", "bfloat16")) else "no"
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed)
    world, rank = accelerator.num_processes, accelerator.process_index
    if (o["batch_size"] // o["micro_batch_size"]) % world:
        raise ValueError(f"optim.batch_size / micro_batch_size = {o['batch_size'] // o['micro_batch_size']} "
                         f"micro-batches cannot be split over {world} processes")
    device = str(accelerator.device)

    model, tok, mask_id = build_model(cfg, device, rows)
    if t["gradient_checkpointing"]:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    ds = data_mod.build_dataset(tok, rows, seq_len=L, block_size=D, packing=recipe["packing"], pad_id=mask_id,
                                seed=seed, max_examples=cfg["data"]["max_examples"],
                                drop_after_answer=cfg["data"]["drop_after_answer"])

    optimizer = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]),
                                  weight_decay=o["weight_decay"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    # the scheduler is stepped once per optimiser step by this loop (accelerate's wrapper would step it once per
    # process, assuming a sharded dataloader); it is registered so that checkpoints hold its state
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(scheduler)
    raw_model = accelerator.unwrap_model(model)

    start_step, tokens_seen = 0, 0
    cks = _checkpoints(output_dir)
    if cks:
        accelerator.load_state(str(cks[-1]))
        state = json.loads((cks[-1] / "state.json").read_text())
        start_step, tokens_seen = state["step"], state["tokens_seen"]
        log.info("resumed from %s", cks[-1])
    metrics_path = output_dir / "metrics.csv"
    metrics = _read_metrics(metrics_path, start_step)
    meta = run_metadata({k: cfg[k] for k in ("recipe", "model", "data", "objective", "optim")}, seed, device)

    micro = o["micro_batch_size"]
    n_micro = o["batch_size"] // micro
    my_micros = list(range(rank, n_micro, world))
    total = o["max_steps"]
    end = total if stop_after is None else min(total, start_step + stop_after)
    bar = tqdm(range(start_step, end), initial=start_step, total=total, desc=f"train {cfg['recipe']}",
               disable=not (progress and accelerator.is_main_process), dynamic_ncols=True)
    t_last, tok_last = time.perf_counter(), tokens_seen
    host = HostLoad(processes=world).start()  # how busy the machine was over each logged interval
    for step in bar:
        idx = batch_indices(len(ds), o["batch_size"], step, seed)
        ids_all, lab_all = ds.input_ids[idx], ds.labels[idx]
        if recipe["objective"] == "bd":
            gens = [obj.sample_generator(seed, step, i) for i in range(len(idx))]
            views = [obj.noise_batch(ids_all[j * micro:(j + 1) * micro], lab_all[j * micro:(j + 1) * micro],
                                     block_size=D, eps=cfg["objective"]["eps"],
                                     complementary=recipe["complementary"], generators=gens[j * micro:(j + 1) * micro])
                     for j in range(n_micro)]
            norm = sum(obj.supervised_count(v[2]) for v in views)
        else:
            views = [(ids_all[j * micro:(j + 1) * micro], lab_all[j * micro:(j + 1) * micro], None)
                     for j in range(n_micro)]
            norm = sum(obj.supervised_count(v[1]) for v in views)
        norm = max(norm, 1)
        loss_sum = torch.zeros((), device=accelerator.device)
        for k, j in enumerate(my_micros):
            ids, lab, m = (v.to(accelerator.device) if v is not None else None for v in views[j])
            last = k == len(my_micros) - 1
            ctx = accelerator.no_sync(model) if (world > 1 and not last) else contextlib.nullcontext()
            with ctx, accelerator.autocast():
                if recipe["objective"] == "bd":
                    ls, _ = obj.bd_loss_sum(model, ids, m, mask_id, D)
                else:
                    ls, _ = obj.ntp_loss_sum(model, ids, lab)
                # DDP averages gradients over processes: scale by world so the result is sum / global count
                accelerator.backward(ls * (world / norm))
            loss_sum += ls.detach()
        grad_norm = None
        if o["grad_clip"]:
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), o["grad_clip"])
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss = (accelerator.reduce(loss_sum, reduction="sum") / norm).item()
        tokens_seen += len(idx) * L
        done = step + 1
        if done % t["log_every"] == 0 or done == total or done == end:
            now = time.perf_counter()
            tps = (tokens_seen - tok_last) / max(now - t_last, 1e-9)
            t_last, tok_last = now, tokens_seen
            row = {"step": done, "loss": round(loss, 6), "lr": scheduler.get_last_lr()[0],
                   "grad_norm": "" if grad_norm is None else round(float(grad_norm), 6),
                   "supervised_tokens": norm, "tokens_seen": tokens_seen, "tokens_per_s": round(tps, 2),
                   "recipe": cfg["recipe"], "world_size": world, "torch_threads": torch.get_num_threads(),
                   **host.sample(), **meta}
            metrics.append(row)
            if accelerator.is_main_process:
                write_csv_atomic(metrics_path, metrics)
            bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tps:.0f}")
        if done % t["save_every"] == 0 or done == end:
            _save_checkpoint(accelerator, output_dir, done, tokens_seen, t["keep_checkpoints"])
    bar.close()
    final = output_dir / "final"
    if end < total:
        return final
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        _save_final(raw_model, tok, cfg, recipe, output_dir, meta)
    accelerator.wait_for_everyone()
    return final


def _save_final(model, tok, cfg, recipe, output_dir: Path, meta: dict) -> None:
    tmp = output_dir / ".final.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    if recipe["objective"] == "bd":
        model.config.bd_size = cfg["objective"]["block_size"]
    model.config.use_cache = True
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    write_json_atomic(tmp / "fastdllm_train.json", {"config": cfg, "recipe": recipe, "metadata": meta})
    final = output_dir / "final"
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "GOTO_NUM_THREADS")


def train_processes(cfg: dict, output_dir: str | Path, processes: int) -> Path:
    """Train on the CPU with ``processes`` data-parallel processes of one thread each (``torchrun``, gloo), or
    in this process when ``processes`` is 1.

    On a 2-core machine two single-threaded processes train faster than one process with two OpenMP threads, and
    they do not collapse when another program takes a core (OpenMP threads spin at barriers while a sibling is
    preempted; a single-threaded process just runs at its share).  Batches, masks and results are those of a
    single process (see the module docstring)."""
    import subprocess
    import tempfile

    if not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    if processes == 1:
        return train(cfg, output_dir)
    resolved = resolve_config(cfg)  # named errors before any process starts
    o = resolved["optim"]
    if (o["batch_size"] // o["micro_batch_size"]) % processes:
        raise ValueError(f"optim.batch_size / micro_batch_size = {o['batch_size'] // o['micro_batch_size']} "
                         f"micro-batches cannot be split over {processes} processes")
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=output_dir, delete=False) as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
           "-m", "fastdllm_core.cli", "train", "--config", fh.name, "--output-dir", str(output_dir)]
    # one thread per process: every threading library's variable (a workflow manager may have set MKL's to the
    # job's cores, and torch takes the largest)
    env = dict(os.environ, **{v: "1" for v in THREAD_VARIABLES})
    out = {k: f for k, f in (("stdout", sys.stdout), ("stderr", sys.stderr)) if _has_fileno(f)}  # e.g. a log
    try:
        subprocess.run(cmd, env=env, check=True, **out)
    finally:
        os.unlink(fh.name)
    return output_dir / "final"


def _has_fileno(f) -> bool:
    try:
        f.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True
