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
dream         dream       pad       no (full-attention masked diffusion: Dream's recipe)
============  ==========  ========  ======================================================

Determinism and resume: the sequences of optimiser step k and their noise masks are pure functions of
(seed, k, global sample index), so a run killed and resumed from a checkpoint ends with the same weights as an
uninterrupted one, and a run on W processes sees exactly the batches and masks of a single-process run with the
same global batch.  Multi-process through ``accelerate launch`` (DDP; DeepSpeed / FSDP via accelerate configs).
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import time
from pathlib import Path

import torch
import yaml

from . import data as data_mod
from . import objective as obj
from .configkeys import merge_config as _merge  # noqa: F401  (tests and scripts merge configs through here)
from .hostload import HostLoad
from .provenance import run_metadata, write_csv_atomic
from .train_config import DEFAULTS, RECIPES, resolve_config, set_key  # noqa: F401  (DEFAULTS, set_key re-exported)
from .train_init import build_model, init_mask_embedding  # noqa: F401  (init_mask_embedding re-exported)
from .train_io import checkpoints, read_metrics, save_checkpoint, save_final

log = logging.getLogger(__name__)


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


# ------------------------------------------------------------------------------------------------ one step
def step_views(ds, cfg: dict, step: int, n_micro: int):
    """The micro-batches of optimiser step ``step`` as (input ids, labels or None, mask or None) and the number of
    supervised tokens in the whole global batch (the loss is summed over it and divided by it)."""
    o, recipe, D = cfg["optim"], RECIPES[cfg["recipe"]], cfg["objective"]["block_size"]
    micro = o["micro_batch_size"]
    idx = batch_indices(len(ds), o["batch_size"], step, cfg["train"]["seed"])
    ids_all, lab_all = ds.input_ids[idx], ds.labels[idx]
    part = [slice(j * micro, (j + 1) * micro) for j in range(n_micro)]
    if recipe["objective"] in ("bd", "dream"):  # dream: one noise level per sequence (a single block of length L)
        D = D if recipe["objective"] == "bd" else ids_all.shape[1]
        gens = [obj.sample_generator(cfg["train"]["seed"], step, i) for i in range(len(idx))]
        views = [obj.noise_batch(ids_all[p], lab_all[p], block_size=D, eps=cfg["objective"]["eps"],
                                 complementary=recipe["complementary"], generators=gens[p]) for p in part]
        norm = sum(obj.supervised_count(v[2]) for v in views)
    else:
        views = [(ids_all[p], lab_all[p], None) for p in part]
        norm = sum(obj.supervised_count(v[1]) for v in views)
    return views, max(norm, 1), len(idx)


def accumulate(accelerator, model, views, my_micros, cfg: dict, mask_id: int, norm: int) -> torch.Tensor:
    """Forward and backward over this process' micro-batches; returns their summed (unnormalised) loss."""
    world, objective = accelerator.num_processes, RECIPES[cfg["recipe"]]["objective"]
    loss_sum = torch.zeros((), device=accelerator.device)
    for k, j in enumerate(my_micros):
        ids, lab, m = (v.to(accelerator.device) if v is not None else None for v in views[j])
        last = k == len(my_micros) - 1
        ctx = accelerator.no_sync(model) if (world > 1 and not last) else contextlib.nullcontext()
        with ctx, accelerator.autocast():
            if objective == "bd":
                ls, _ = obj.bd_loss_sum(model, ids, m, mask_id, cfg["objective"]["block_size"])
            elif objective == "dream":
                ls, _ = obj.dream_loss_sum(model, ids, m, mask_id)
            else:
                ls, _ = obj.ntp_loss_sum(model, ids, lab)
            # DDP averages gradients over processes: scale by world so the result is sum / global count
            accelerator.backward(ls * (world / norm))
        loss_sum += ls.detach()
    return loss_sum


# ------------------------------------------------------------------------------------------------ set-up
def check_split(cfg: dict, processes: int) -> None:
    """The global batch's micro-batches must split evenly over the data-parallel processes."""
    o = cfg["optim"]
    n_micro = o["batch_size"] // o["micro_batch_size"]
    if n_micro % processes:
        raise ValueError(f"optim.batch_size / micro_batch_size = {n_micro} micro-batches cannot be split over "
                         f"{processes} processes")


def make_accelerator(cfg: dict):
    """The accelerate ``Accelerator`` for ``train.device`` / ``train.dtype``; errors before any model is built."""
    from accelerate import Accelerator

    t = cfg["train"]
    device_pref = t["device"]
    cpu = device_pref == "cpu" or (device_pref == "auto" and not torch.cuda.is_available())
    if device_pref.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"train.device={device_pref!r} but no CUDA device is available")
    mixed = "bf16" if (not cpu and t["dtype"] in ("auto", "bf16", "bfloat16")) else "no"
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed)
    check_split(cfg, accelerator.num_processes)
    return accelerator


def prepare(accelerator, model, cfg: dict):
    """AdamW and the lr schedule, prepared for (distributed) training.  The scheduler is stepped once per
    optimiser step by the loop (accelerate's wrapper would step it once per process, assuming a sharded
    dataloader); it is registered so that checkpoints hold its state."""
    o = cfg["optim"]
    optimizer = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=tuple(o["betas"]),
                                  weight_decay=o["weight_decay"])
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(cfg))
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.register_for_checkpointing(scheduler)
    return model, optimizer, scheduler


def resume(accelerator, output_dir: Path) -> tuple[int, int]:
    """(step, tokens seen) of the newest checkpoint in ``output_dir``, whose state is loaded; (0, 0) if none."""
    cks = checkpoints(output_dir)
    if not cks:
        return 0, 0
    accelerator.load_state(str(cks[-1]))
    state = json.loads((cks[-1] / "state.json").read_text())
    log.info("resumed from %s", cks[-1])
    return state["step"], state["tokens_seen"]


def model_and_data(cfg: dict, device: str, rows: list[dict]):
    """The starting model, its tokenizer and mask id, and the packed training sequences of the recipe."""
    model, tok, mask_id = build_model(cfg, device, rows)
    if cfg["train"]["gradient_checkpointing"]:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    ds = data_mod.build_dataset(tok, rows, seq_len=cfg["data"]["seq_len"], block_size=cfg["objective"]["block_size"],
                                packing=RECIPES[cfg["recipe"]]["packing"], pad_id=mask_id, seed=cfg["train"]["seed"],
                                max_examples=cfg["data"]["max_examples"],
                                drop_after_answer=cfg["data"]["drop_after_answer"])
    return model, tok, mask_id, ds


# ------------------------------------------------------------------------------------------------ training
def train(cfg: dict, output_dir: str | Path, *, max_steps: int | None = None, stop_after: int | None = None,
          progress: bool = True, rows: list[dict] | None = None) -> Path:
    """Train per ``cfg``; returns the path of the final HF checkpoint (``output_dir/final``).  ``rows``: the
    training rows when the caller has already read (and so checked) ``data.train_files``.

    ``stop_after`` ends the run after that many optimiser steps *without* writing ``final`` (a checkpoint is
    written there), as a controlled "kill" for resume tests.
    """
    from tqdm.auto import tqdm

    cfg = resolve_config(cfg)
    if max_steps is not None:
        cfg["optim"]["max_steps"] = int(max_steps)
    rows = data_mod.read_train_files(cfg["data"]["train_files"]) if rows is None else rows  # before any model
    output_dir = Path(output_dir)
    o, t, L = cfg["optim"], cfg["train"], cfg["data"]["seq_len"]
    accelerator = make_accelerator(cfg)
    world, device = accelerator.num_processes, str(accelerator.device)
    model, tok, mask_id, ds = model_and_data(cfg, device, rows)
    model, optimizer, scheduler = prepare(accelerator, model, cfg)
    raw_model = accelerator.unwrap_model(model)
    start_step, tokens_seen = resume(accelerator, output_dir)
    metrics_path = output_dir / "metrics.csv"
    metrics = read_metrics(metrics_path, start_step)
    meta = run_metadata({k: cfg[k] for k in ("recipe", "model", "data", "objective", "optim")}, t["seed"], device)

    n_micro = o["batch_size"] // o["micro_batch_size"]
    my_micros = list(range(accelerator.process_index, n_micro, world))
    total = o["max_steps"]
    end = total if stop_after is None else min(total, start_step + stop_after)
    bar = tqdm(range(start_step, end), initial=start_step, total=total, desc=f"train {cfg['recipe']}",
               disable=not (progress and accelerator.is_main_process), dynamic_ncols=True)
    clock = _Clock(tokens_seen, HostLoad(processes=world).start())  # and how busy the machine was meanwhile
    for step in bar:
        views, norm, n_seq = step_views(ds, cfg, step, n_micro)
        loss_sum = accumulate(accelerator, model, views, my_micros, cfg, mask_id, norm)
        grad_norm = accelerator.clip_grad_norm_(model.parameters(), o["grad_clip"]) if o["grad_clip"] else None
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        loss = (accelerator.reduce(loss_sum, reduction="sum") / norm).item()
        tokens_seen += n_seq * L
        done = step + 1
        if done % t["log_every"] == 0 or done == total or done == end:
            tps = clock.tokens_per_s(tokens_seen)
            metrics.append({"step": done, "loss": round(loss, 6), "lr": scheduler.get_last_lr()[0],
                            "grad_norm": "" if grad_norm is None else round(float(grad_norm), 6),
                            "supervised_tokens": norm, "tokens_seen": tokens_seen, "tokens_per_s": round(tps, 2),
                            **clock.context(cfg["recipe"], world), **meta})
            if accelerator.is_main_process:
                write_csv_atomic(metrics_path, metrics)
            bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tps:.0f}")
        if done % t["save_every"] == 0 or done == end:
            save_checkpoint(accelerator, output_dir, done, tokens_seen, t["keep_checkpoints"])
    bar.close()
    if end == total:
        accelerator.wait_for_everyone()
        if accelerator.is_main_process:
            save_final(raw_model, tok, cfg, RECIPES[cfg["recipe"]], output_dir, meta)
        accelerator.wait_for_everyone()
    return output_dir / "final"


class _Clock:
    """Tokens per second over each logged interval, with the host's load sampled over the same interval."""

    def __init__(self, tokens_seen: int, host: HostLoad):
        self.t_last, self.tok_last, self.host = time.perf_counter(), tokens_seen, host

    def tokens_per_s(self, tokens_seen: int) -> float:
        now = time.perf_counter()
        tps = (tokens_seen - self.tok_last) / max(now - self.t_last, 1e-9)
        self.t_last, self.tok_last = now, tokens_seen
        return tps

    def context(self, recipe: str, world: int) -> dict:
        """The run's columns of a metrics row: recipe, processes, threads, and the host's load since the last."""
        return {"recipe": recipe, "world_size": world, "torch_threads": torch.get_num_threads(), **self.host.sample()}


# ------------------------------------------------------------------------------------------------ CPU processes
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
    check_split(resolve_config(cfg), processes)  # named errors before any process starts
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
