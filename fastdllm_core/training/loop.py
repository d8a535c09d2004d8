"""The training loop: adapt a causal LM to block diffusion (paper recipe and its ablations), or NTP fine-tune it.

Recipes (the paper's Table 2 and Table 1 baselines; :data:`.config.RECIPES`):

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

Read top to bottom: :func:`train` resolves the :class:`~.config.TrainConfig`, builds the accelerator, the model and
the packed data (:func:`model_and_data`), AdamW (:func:`prepare`), resumes from the newest checkpoint, then per
optimiser step: :func:`step_views` (the step's micro-batches and noise masks) -> :func:`accumulate` (forward and
backward) -> clip, the finiteness check, step -> :meth:`~.run_book.RunBook.done_step` (metrics row, checkpoint).

Determinism and resume: the sequences of optimiser step k and their noise masks are pure functions of
(seed, k, global sample index), so a run killed and resumed from a checkpoint ends with the same weights as an
uninterrupted one, and a run on W processes sees exactly the batches and masks of a single-process run with the
same global batch.  Multi-process through ``torchrun`` (DDP or FSDP2, :mod:`.parallel`; :mod:`.launch` builds the
launch command, one process per GPU across nodes, or CPU processes).
"""
from __future__ import annotations

import json
import logging
import math
import os
import time
from pathlib import Path

import torch

from . import footprint
from . import objective as obj
from .checkpoints import checkpoints, final_dtype, save_final, together
from .config import OptimConfig, RunConfig, TrainConfig
from .data import check_train_files, read_train_files
from .failures import MARKER, TrainingDiverged
from .model_init import build_model, build_tokenizer
from .parallel import make_engine, resolve
from .run_book import RunBook
from .run_identity import ConfigChanged, check_same_run, run_identity
from .run_lock import run_lock
from .stopping import Stopper, StopRequested, TrainingInterrupted, interrupted_before_training
from .store_key import shared, tokenizer_digest
from .token_store import run_store, store_identity

log = logging.getLogger(__name__)


def lr_lambda(o: OptimConfig):
    """The learning-rate factor after ``step`` optimiser steps: linear warm-up, then constant, linear or cosine."""
    warm, total, sched = o.warmup_steps, o.max_steps, o.schedule

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
def step_views(ds, cfg: TrainConfig, step: int, n_micro: int):
    """The micro-batches of optimiser step ``step`` as (input ids, labels or None, mask or None) and the number of
    supervised tokens in the whole global batch (the loss is summed over it and divided by it)."""
    o, recipe, seed = cfg.optim, cfg.spec, cfg.train.seed
    micro = o.micro_batch_size
    idx = batch_indices(len(ds), o.batch_size, step, seed)
    ids_all, lab_all = ds.input_ids[idx], ds.labels[idx]
    part = [slice(j * micro, (j + 1) * micro) for j in range(n_micro)]
    if recipe.objective in ("bd", "dream"):  # dream: one noise level per sequence (a single block of length L)
        D = cfg.objective.block_size if recipe.objective == "bd" else ids_all.shape[1]
        gens = [obj.sample_generator(seed, step, i) for i in range(len(idx))]
        views = [obj.noise_batch(ids_all[p], lab_all[p], block_size=D, eps=cfg.objective.eps,
                                 complementary=recipe.complementary, generators=gens[p]) for p in part]
        norm = sum(obj.supervised_count(v[2]) for v in views)
    else:
        views = [(ids_all[p], lab_all[p], None) for p in part]
        norm = sum(obj.supervised_count(v[1]) for v in views)
    return views, max(norm, 1), len(idx)


def accumulate(engine, model, views, my_micros, cfg: TrainConfig, mask_id: int, norm: int) -> torch.Tensor:
    """Forward and backward over this process' micro-batches; returns their summed (unnormalised) loss."""
    accelerator, objective = engine.acc, cfg.spec.objective
    world = accelerator.num_processes
    loss_sum = torch.zeros((), device=accelerator.device)
    for k, j in enumerate(my_micros):
        ids, lab, m = (v.to(accelerator.device) if v is not None else None for v in views[j])
        with engine.sync(model, last=k == len(my_micros) - 1), engine.autocast():
            if objective == "bd":
                ls, _ = obj.bd_loss_sum(model, ids, m, mask_id, cfg.objective.block_size)
            elif objective == "dream":
                ls, _ = obj.dream_loss_sum(model, ids, m, mask_id)
            else:
                ls, _ = obj.ntp_loss_sum(model, ids, lab)
            # DDP and FSDP average gradients over processes: scale by world so the result is sum / global count
            engine.backward(ls * (world / norm))
        loss_sum += ls.detach()
    return loss_sum


# ------------------------------------------------------------------------------------------------ set-up
def check_split(o: OptimConfig, processes: int) -> None:
    """The global batch's micro-batches must split evenly over the data-parallel processes."""
    n_micro = o.batch_size // o.micro_batch_size
    if n_micro % processes:
        raise ValueError(f"optim.batch_size / micro_batch_size = {n_micro} micro-batches cannot be split over "
                         f"{processes} processes")


def make_accelerator(run: RunConfig, o: OptimConfig):
    """The accelerate ``Accelerator`` for ``train.device`` / ``train.dtype``; errors before any model is built."""
    from accelerate import Accelerator

    cpu = run.device == "cpu" or (run.device == "auto" and not torch.cuda.is_available())
    if run.device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"train.device={run.device!r} but no CUDA device is available")
    mixed = "bf16" if (not cpu and run.dtype in ("auto", "bf16", "bfloat16")) else "no"
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed, kwargs_handlers=[process_group_timeout()])
    check_split(o, accelerator.num_processes)
    return accelerator


PG_TIMEOUT_S = 7200.0  # FASTDLLM_PG_TIMEOUT_S: covers rank 0 consolidating and writing a 7B while the others wait


def process_group_timeout():
    """The collectives' timeout (torch's default: 10 min under NCCL), long enough for the slowest wait of a run:
    the other ranks at the barrier while rank 0 gathers and writes the final model."""
    from datetime import timedelta

    from accelerate.utils import InitProcessGroupKwargs

    raw = os.environ.get("FASTDLLM_PG_TIMEOUT_S") or PG_TIMEOUT_S
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"FASTDLLM_PG_TIMEOUT_S={raw!r} is not a number of seconds") from None
    return InitProcessGroupKwargs(timeout=timedelta(seconds=seconds))


def prepare(engine, model, o: OptimConfig):
    """AdamW and the lr schedule, with the model prepared by the run's engine (:mod:`.parallel`)."""
    def make_optimizer(m):
        optimizer = torch.optim.AdamW(m.parameters(), lr=o.lr, betas=tuple(o.betas), weight_decay=o.weight_decay)
        return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda(o))

    return engine.prepare(model, make_optimizer)


def resume(engine, output_dir: Path, max_steps: int) -> tuple[int, int]:
    """(step, tokens seen) of the newest checkpoint in ``output_dir``, whose state is loaded; (0, 0) if none.  A
    checkpoint past ``max_steps`` is refused (its final model would claim fewer steps than it took)."""
    cks = checkpoints(output_dir)
    if not cks:
        return 0, 0
    state = json.loads((cks[-1] / "state.json").read_text())
    if state["step"] > max_steps:
        raise ConfigChanged(f"{cks[-1]} is past optim.max_steps={max_steps}: train to at least {state['step']} "
                            f"steps, or remove the checkpoints past {max_steps} to go on from an earlier one")
    written = state.get("engine", "ddp")
    if written != engine.name:
        raise ValueError(f"{cks[-1]} was written by train.engine={written!r}, this run uses {engine.name!r} "
                         f"(train.engine / the process count changed): resume with the same engine")
    engine.load_state(cks[-1])
    log.info("resumed from %s", cks[-1])
    return state["step"], state["tokens_seen"]


def model_and_data(cfg: TrainConfig, accelerator, output_dir: Path, rows: list[dict] | None = None,
                   progress: bool = True, stop: Stopper | None = None, allow_data_change: bool = False):
    """The starting model, its tokenizer and mask id, and the packed training sequences of the recipe, in this
    order: the tokenizer, the run's token store (``output_dir/data``, :mod:`.token_store`: built once by the main
    process, every row encoded, so a row the tokenizer cannot take is named before any weights load; reused on
    resume), the model.  ``rows`` are read only when the tokenizer is trained on them (``model.init: tiny`` with
    ``bpe``); ``stop``: the run's :class:`~.stopping.Stopper` (told the phase)."""
    mc, d = cfg.model, cfg.data
    phase = (lambda text: setattr(stop, "phase", text)) if stop is not None else (lambda text: None)
    if rows is None and mc.init == "tiny" and mc.tokenizer == "bpe":
        rows = read_train_files(d.train_files)
    phase("while loading the tokenizer")
    tok, mask_id = build_tokenizer(mc, rows)
    phase("while preparing the token store")
    ds = run_store(tok, list(d.train_files), output_dir, is_main=accelerator.is_main_process,
                   distributed=accelerator.num_processes > 1, progress=progress, allow_change=allow_data_change,
                   seq_len=d.seq_len, block_size=cfg.objective.block_size, packing=cfg.spec.packing, pad_id=mask_id,
                   seed=cfg.train.seed, max_examples=d.max_examples, drop_after_answer=d.drop_after_answer)
    phase("while loading the model")
    model, model_tok, model_mask_id = build_model(
        mc, seed=cfg.train.seed, block_size=cfg.objective.block_size, device=str(accelerator.device),
        attn_implementation=cfg.train.attn_implementation, rows=rows, tokenizer=tok)
    if model_mask_id != mask_id or (model_tok is not tok and tokenizer_digest(model_tok) != tokenizer_digest(tok)):
        raise RuntimeError(f"{mc.init}: the tokenizer loaded with the model is not the one the data was encoded with")
    if cfg.train.gradient_checkpointing:
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
    return model, model_tok, mask_id, ds


# ------------------------------------------------------------------------------------------------ training
def train(cfg: TrainConfig | dict, output_dir: str | Path, *, max_steps: int | None = None,
          stop_after: int | None = None, progress: bool = True, rows: list[dict] | None = None,
          data_checked: bool = False, allow_data_change: bool = False, allow_config_change: bool = False) -> Path:
    """Train per ``cfg`` (a :class:`~.config.TrainConfig`, or its YAML mapping); returns the path of the final HF
    checkpoint (``output_dir/final``).  ``rows``: the training rows when the caller has already read them;
    ``data_checked``: the caller has checked ``data.train_files`` (:func:`~.data.check_train_files`);
    ``allow_data_change``: continue a run whose checkpoint was trained on other data, another tokenizer or other
    packing settings (refused otherwise, :func:`~.store_key.check_resume`); ``allow_config_change``: continue a
    run whose checkpoint was trained under another config or from other start weights (refused otherwise,
    :func:`~.run_identity.check_same_run`).

    The main process holds ``output_dir`` (:func:`~.run_lock.run_lock`: a second run on it is refused).  A stop
    signal before the first step ends the run where it is, during the steps after the step (with a checkpoint):
    :class:`~.stopping.TrainingInterrupted` either way, nothing half-written.  A loss or gradient norm that is not
    finite stops the run with :class:`~.failures.TrainingDiverged` (policy: ``train.nonfinite_skips``), a write
    the disk refuses with :class:`~.failures.WriteFailed`.  ``stop_after`` ends the run after that many optimiser
    steps *without* writing ``final`` (a checkpoint is written there), as a controlled "kill" for resume tests.
    """
    cfg = cfg if isinstance(cfg, TrainConfig) else TrainConfig.from_dict(cfg)
    cfg = cfg if max_steps is None else cfg.with_max_steps(max_steps)
    main, output_dir = os.environ.get("RANK", "0") == "0", Path(output_dir)
    stop = Stopper(main, immediate=True)  # a signal or the job's deadline: stop (module .stopping)
    memory = footprint.PeakRss(interval=0.5)
    try:
        stop.phase = "while waiting for the run's lock"
        with run_lock(output_dir, main):
            stop.phase = "during the data check"
            if rows is None and not data_checked and main:
                check_train_files(cfg.data.train_files)  # bad data (file, line, field) before any model; no row kept
            allow = {"data": allow_data_change, "config": allow_config_change}
            return _train(cfg, output_dir, stop, memory, stop_after, progress, rows, allow)
    except StopRequested as exc:
        raise interrupted(output_dir, stop, exc) from None
    finally:
        stop.close()
        memory.stop()


def _train(cfg: TrainConfig, output_dir: Path, stop: Stopper, memory, stop_after, progress: bool, rows,
           allow: dict) -> Path:
    """:func:`train` once its lock is held."""
    o = cfg.optim
    stop.phase = "while starting"
    accelerator = make_accelerator(cfg.train, o)
    stop.phase = "while checking the run's identity"
    ident = shared(lambda: same_run(cfg, output_dir, allow["config"]), accelerator.is_main_process)
    model, tok, mask_id, ds = model_and_data(cfg, accelerator, output_dir, rows, progress, stop, allow["data"])
    stop.phase = "while preparing the model"
    engine = make_engine(resolve(cfg, model, accelerator), accelerator)
    model, optimizer, scheduler = prepare(engine, model, o)
    stop.phase = "while resuming"
    run = RunBook(cfg, engine, output_dir, *resume(engine, output_dir, o.max_steps), stop_after, progress,
                  store_identity(ds), memory, ident, model)
    stop.at_steps()  # from here: stop after the step, with a checkpoint
    try:
        for step in run.bar:
            t0 = time.perf_counter()
            views, norm, n_seq = step_views(ds, cfg, step, run.n_micro)
            loss_sum = accumulate(engine, model, views, run.my_micros, cfg, mask_id, norm)
            grad_norm = engine.clip(model, o.grad_clip) if o.grad_clip else None
            loss = (accelerator.reduce(loss_sum, reduction="sum") / norm).item()
            if not run.skip(step, loss, grad_norm):  # a non-finite step is skipped or stops the run, before the update
                optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            saved_s = run.done_step(step, loss, scheduler.get_last_lr()[0], grad_norm, norm, n_seq)
            stop.timed(time.perf_counter() - t0 - saved_s, saved_s)
            why = stop.reason(accelerator.device)
            if why and step + 1 < run.end:
                run.interrupt(step + 1, why, saved=saved_s > 0)
    finally:
        run.bar.close()
    if run.end == o.max_steps:
        _save_final(engine, model, tok, cfg, output_dir, run.meta)
    log.info("process %d: peak resident memory %s", accelerator.process_index, memory.stop().text())
    return output_dir / "final"


def same_run(cfg: TrainConfig, output_dir: Path, allow: bool) -> dict:
    """The run's identity, once the newest checkpoint of ``output_dir`` is known to be of this run
    (:func:`~.run_identity.check_same_run`) and not one that diverged under it (``diverged.json``)."""
    ident = run_identity(cfg)
    check_same_run(output_dir, ident, allow)
    marker = output_dir / MARKER
    if marker.is_file():
        note = json.loads(marker.read_text())
        cks = checkpoints(output_dir)
        if note.get("run") == ident and note.get("checkpoint", "") == str(cks[-1] if cks else ""):
            raise TrainingDiverged(note["step"], note["what"], cks[-1] if cks else None, earlier=True)
        marker.unlink()  # another run, or a checkpoint written since: this run goes on
    return ident


def interrupted(output_dir: Path, stop: Stopper, exc: StopRequested) -> TrainingInterrupted:
    """The :class:`TrainingInterrupted` of a stop that ended the run where it was: before its first step, or at
    once by a second SIGINT."""
    return interrupted_before_training(output_dir, stop.setup_reason(exc), during_steps=stop.in_steps)


def _save_final(engine, model, tok, cfg: TrainConfig, output_dir: Path, meta: dict) -> None:
    """``final/`` from the main process (FSDP: the state gathered there, every rank taking part); a failed write
    is :class:`~.failures.WriteFailed` in every process."""
    accelerator = engine.acc
    accelerator.wait_for_everyone()
    full = engine.full_state_dict(model)

    def write():
        if accelerator.is_main_process:
            save_final(engine.raw(model) if full is None else full, tok, cfg, output_dir, meta,
                       final_dtype(cfg, accelerator.device.type))

    together(write, output_dir / "final", "the final model", accelerator)
    accelerator.wait_for_everyone()
