"""Fast-dLLM (v1) on the masked-diffusion families: confidence-threshold parallel decoding with no cache, the prefix
cache or the dual cache (the paper's Figure 1a "Fast-dLLM-LLaDA").  Mirrors NVlabs/Fast-dLLM at commit 24cc59e:

* LLaDA (no logit shift), ``llada/generate.py``: :func:`v1_llada` with ``cache="none"`` = ``generate``,
  ``"prefix"`` = ``generate_with_prefix_cache``, ``"dual"`` = ``generate_with_dual_cache``;
* Dream (logit shift), ``dream/model/generation_utils.py`` (alg ``confidence_threshold``, no cache) and
  ``generation_utils_block.py`` (prefix cache, ``dual_cache=True``): :func:`v1_dream`.

Blocks of ``block_length`` are decoded left to right.  With a ``threshold``, a step unmasks the most confident
masked position of the block and every other one whose confidence is at least ``threshold``; with
``threshold=None`` it unmasks the step schedule's count (LLaDA's even split; Dream's entropy schedule): the
"cache only" rows.  Caches, on the stock model (:class:`~fastdllm_core.decoding.forwards.BlockKVCache` over the whole
sequence): each block starts with a full forward that fills every position's keys/values; later steps forward
``x[:, block_start:]`` (prefix cache: the block and everything after it, against the prefix's cached keys) or only
the block (dual cache: the suffix's keys also stay as of the block's first forward).  Dream's no-cache variant
is the whole-sequence ``confidence_threshold`` of ``generation_utils.py``: ``masked / steps`` tokens per step
plus what earlier steps left for lack of confidence.

The official functions decode one prompt at a time (``generate*`` build a batch of 1; Dream's threshold paths
index row 0); these run a batch row by row where the official code would mix rows (the threshold choice), so a
row's result does not depend on its batch.  The factor-based variant of the Fast-dLLM paper is not in this
commit.  Counting: :mod:`.mdm_common` (NFE = forwards, the official ``nfe``).
"""
from __future__ import annotations

import logging

import numpy as np
import torch
import torch.nn.functional as F

from .dream import sample_tokens, select, shift_logits
from .llada import REMASKING
from .mdm_common import (
    Batch,
    add_gumbel_noise,
    check_blocks,
    full_attention_kwargs,
    make_generator,
    num_transfer_tokens,
    start_clock,
)

CACHES = ("none", "prefix", "dual")
log = logging.getLogger(__name__)


class _Progress:
    """The official threshold loops run until the block has no mask left; a step always unmasks the most confident
    position, so they end unless the model's choice there *is* the mask token (possible for random weights), when
    the official code never ends.  This stops such a block with its masks left (and says so)."""

    def __init__(self):
        self.prev = None
        self.stalled = 0

    def done(self, remaining: int, threshold, where: str) -> bool:
        if remaining == 0:
            return True
        if threshold is not None and remaining == self.prev:
            self.stalled += 1
            log.warning("%s: a threshold step unmasked nothing (the model chose the mask token); block left with %d "
                        "masks (the official loop would not end)", where, remaining)
            return True
        self.prev = remaining
        return False


def _transfer_index(logits, temperature, remasking, mask_index, x, counts, threshold, gen):
    """Tokens and which positions to unmask (mirrors ``get_transfer_index`` of Fast-dLLM ``llada/generate.py``)."""
    logits_with_noise = add_gumbel_noise(logits, temperature, gen)
    x0 = torch.argmax(logits_with_noise, dim=-1)
    if remasking == "low_confidence":
        p = F.softmax(logits.to(torch.float64), dim=-1)
        x0_p = torch.squeeze(torch.gather(p, dim=-1, index=torch.unsqueeze(x0, -1)), -1)
    else:
        x0_p = torch.rand((x0.shape[0], x0.shape[1]), device=x0.device, generator=gen)
    x0 = torch.where(mask_index, x0, x)
    confidence = torch.where(mask_index, x0_p, -np.inf)
    transfer = torch.zeros_like(x0, dtype=torch.bool)
    if threshold is not None:
        counts = mask_index.sum(dim=1, keepdim=True)
    for j in range(confidence.shape[0]):
        k = int(counts[j])
        _, select_index = torch.topk(confidence[j], k=k)
        transfer[j, select_index] = True
        if threshold is not None:
            for m in range(1, k):
                if confidence[j, select_index[m]] < threshold:
                    transfer[j, select_index[m]] = False
    return x0, transfer


def _check(cache, threshold, steps_per_block):
    if cache not in CACHES:
        raise ValueError(f"cache must be one of {CACHES}, got {cache!r}")
    if threshold is not None and not 0 < float(threshold) <= 1:
        raise ValueError(f"threshold must be in (0, 1] or None, got {threshold!r}")
    if threshold is None and cache == "none":
        raise ValueError("Fast-dLLM v1 without a cache needs a threshold (without both it is the family's own "
                         "sampler: mode llada / dream)")
    if threshold is None and steps_per_block < 2:
        raise ValueError(f"the cached step schedule needs at least 2 steps per block, got {steps_per_block} "
                         "(the official code indexes a second step)")


@torch.no_grad()
def v1_llada(model, prompts, *, mask_token_id: int, stop_token_ids=None, gen_length: int = 256, steps: int = 8,
             block_length: int = 32, threshold: float | None = 0.9, cache: str = "dual", temperature: float = 0.0,
             remasking: str = "low_confidence", seed: int | None = None, pad_token_id: int | None = None,
             profile: bool = False):
    """Fast-dLLM v1 on LLaDA (see the module docstring)."""
    if remasking not in REMASKING:
        raise ValueError(f"remasking must be one of {REMASKING}, got {remasking!r}")
    spb = check_blocks(gen_length, block_length, steps)
    _check(cache, threshold, spb)
    b = Batch(model, prompts, gen_length, mask_token_id, pad_token_id, profile)
    gen = make_generator(b.device, seed)
    x, P, mask_id, L = b.x, b.P, b.mask_id, block_length
    t_start = start_clock(b.device)
    steps_done, syncs = [], 0
    for nb in range(gen_length // L):
        lo, hi = P + nb * L, P + (nb + 1) * L
        counts = num_transfer_tokens(x[:, lo:hi] == mask_id, spb)
        n_step, progress = 0, _Progress()
        if cache == "none":
            i = 0
            while True:
                mask_index = x == mask_id
                logits = b.forward(kind="step")
                mask_index[:, hi:] = 0
                x0, tr = _transfer_index(logits, temperature, remasking, mask_index, x,
                                         counts[:, i] if threshold is None else None, threshold, gen)
                x[tr] = x0[tr]
                i += 1
                n_step += 1
                syncs += 1
                if progress.done(int((x[:, lo:hi] == mask_id).sum()), threshold, "v1_llada"):
                    break
        else:
            logits = b.forward_fill_cache(kind="block_start")
            mask_index = x == mask_id
            mask_index[:, hi:] = 0
            x0, tr = _transfer_index(logits, temperature, remasking, mask_index, x,
                                     counts[:, 0] if threshold is None else None, threshold, gen)
            x[tr] = x0[tr]
            n_step, i = 1, 1
            end = b.T if cache == "prefix" else hi
            while True:
                mask_index = x[:, lo:end] == mask_id
                mask_index[:, L:] = 0
                logits = b.forward_window(lo, end, kind="cached_step")
                if cache == "prefix":
                    add_gumbel_noise(logits, temperature, gen)  # the official loop draws (and drops) one more noise
                x0, tr = _transfer_index(logits, temperature, remasking, mask_index, x[:, lo:end],
                                         counts[:, i] if threshold is None else None, threshold, gen)
                x[:, lo:end][tr] = x0[tr]
                n_step += 1
                syncs += 1
                if progress.done(int((x[:, lo:hi] == mask_id).sum()), threshold, "v1_llada"):
                    break
                i += 1
        steps_done.append(n_step)
    return b.finish(f"v1_llada_{cache}", stop_token_ids, t_start, steps=steps, steps_per_block=steps_done,
                    host_syncs=syncs)


@torch.no_grad()
def v1_dream(model, prompts, *, mask_token_id: int, stop_token_ids=None, gen_length: int = 256, steps: int = 8,
             block_length: int = 32, threshold: float | None = 0.9, cache: str = "dual", temperature: float = 0.0,
             top_p: float | None = None, alg_temp: float = 0.0, eps: float = 1e-3, seed: int | None = None,
             pad_token_id: int | None = None, profile: bool = False):
    """Fast-dLLM v1 on Dream (see the module docstring); ``block_length`` is not used without a cache."""
    if cache == "none":
        _check(cache, threshold, 2)
        return _dream_threshold_global(model, prompts, mask_token_id, stop_token_ids, gen_length, steps, threshold,
                                       temperature, top_p, seed, pad_token_id, profile)
    spb = check_blocks(gen_length, block_length, steps)
    _check(cache, threshold, spb)
    b = Batch(model, prompts, gen_length, mask_token_id, pad_token_id, profile)
    gen = make_generator(b.device, seed)
    x, P, mask_id, L = b.x, b.P, b.mask_id, block_length
    timesteps = torch.linspace(1, eps, spb + 1, device=x.device)
    t_start = start_clock(b.device)
    steps_done, syncs = [], 0
    for nb in range(gen_length // L):
        lo, hi = P + nb * L, P + (nb + 1) * L
        logits = shift_logits(b.forward_fill_cache(kind="block_start"))
        _, x0 = sample_tokens(logits, gen, temperature, top_p)
        x[:, lo] = x0[:, lo]
        end = b.T if cache == "prefix" else hi
        n_step, i, progress = 1, 1, _Progress()
        while True:
            mask_index = x[:, lo:end] == mask_id
            logits = shift_logits(b.forward_window(lo, end, kind="cached_step"))
            n_step += 1
            syncs += 1
            if threshold is not None:
                _threshold_step(x[:, lo:end], logits, mask_index, x[:, lo:hi], L, threshold, temperature, top_p,
                                mask_id, gen)
            else:
                if i == spb:
                    break
                t, s = timesteps[i], timesteps[i + 1]
                mask_index[:, L:] = False
                confidence, x0 = sample_tokens(logits[mask_index], gen, temperature, top_p, neg_entropy=True)
                num_mask_token = mask_index.sum() / mask_index.shape[0]
                n = int(num_mask_token * (1 - s / t)) if i < spb - 1 else int(num_mask_token)
                full_confidence = torch.full_like(x[:, lo:end], -torch.inf, dtype=logits.dtype)
                full_confidence[mask_index] = confidence
                full_confidence[:, L:] = -torch.inf
                if n > 0:
                    transfer_index = select(full_confidence, n, alg_temp, gen)
                    x_ = torch.zeros_like(x[:, lo:end], dtype=torch.long) + mask_id
                    x_[mask_index] = x0.clone()
                    rows = torch.arange(x.size(0), device=x.device).unsqueeze(1).expand_as(transfer_index)
                    x[:, lo:end][rows, transfer_index] = x_[rows, transfer_index]
                i += 1
            if progress.done(int((x[:, lo:hi] == mask_id).sum()), threshold, "v1_dream"):
                break
        steps_done.append(n_step)
    return b.finish(f"v1_dream_{cache}", stop_token_ids, t_start, steps=steps, steps_per_block=steps_done,
                    host_syncs=syncs)


def _threshold_step(xw, logits, mask_index, block, L, threshold, temperature, top_p, mask_id, gen):
    """One ``confidence_threshold`` step of ``generation_utils_block.py`` on the window ``xw`` (a view of ``x``),
    row by row (the official code decodes row 0 of a batch of one)."""
    confidence, x0 = sample_tokens(logits[mask_index], gen, temperature, top_p)
    x_ = torch.zeros_like(xw, dtype=torch.long) + mask_id
    full_confidence = torch.full_like(xw, -torch.inf, dtype=logits.dtype)
    x_[mask_index] = x0.clone()
    full_confidence[mask_index] = confidence
    full_confidence[:, L:] = -torch.inf
    transfer = torch.zeros_like(x_, dtype=torch.bool)
    for j in range(xw.shape[0]):
        k = int((block[j] == mask_id).sum())
        selected, idx = torch.topk(full_confidence[j], k)
        transfer[j, idx] = True
        for m in range(1, k):
            if selected[m] < threshold:
                transfer[j, idx[m]] = False
    xw[transfer] = x_[transfer]


def _dream_threshold_global(model, prompts, mask_token_id, stop_token_ids, gen_length, steps, threshold,
                            temperature, top_p, seed, pad_token_id, profile):
    """``confidence_threshold`` of Dream's ``generation_utils.py``: over the whole generation, ``masked / steps``
    tokens a step plus those earlier steps left; past the last step one more step per shortfall."""
    if not isinstance(steps, int) or steps <= 0 or gen_length % steps:
        raise ValueError(f"steps={steps!r} must divide gen_length={gen_length} (the official assertion)")
    b = Batch(model, prompts, gen_length, mask_token_id, pad_token_id, profile)
    gen = make_generator(b.device, seed)
    x, mask_id = b.x, b.mask_id
    t_start = start_clock(b.device)
    per_row = []
    for j in range(b.B):  # the official code runs one row (batch size 1); each row on its own schedule
        n_transfer, left, n_steps, i = gen_length // steps, 0, steps, 0
        progress = _Progress()
        while i < n_steps:
            row = x[j:j + 1]
            mask_index = row == mask_id
            logits = shift_logits(b.forward(kind="step") if b.B == 1 else _row_forward(b, j))
            confidence, x0 = sample_tokens(logits[mask_index], gen, temperature, top_p)
            x_ = torch.zeros_like(row, dtype=torch.long) + mask_id
            x_[mask_index] = x0.clone()
            full_confidence = torch.full_like(row, -torch.inf, dtype=logits.dtype)
            full_confidence[mask_index] = confidence
            current, left = n_transfer + left, 0
            selected, idx = torch.topk(full_confidence, current)
            transfer = torch.zeros_like(row, dtype=torch.bool)
            transfer[0, idx[0]] = True
            for k in range(1, current):
                if selected[0, k] < threshold:
                    if i < n_steps - 1:
                        left += 1
                    else:
                        n_transfer, n_steps = 0, n_steps + 1
                        left += 1
                    transfer[0, idx[0, k]] = False
            row[transfer] = x_[transfer]
            i += 1
            if i >= steps and progress.done(int((row == mask_id).sum()), threshold, "v1_dream"):
                break  # past the planned steps, a step that unmasks nothing would repeat for ever
        per_row.append(i)
    out = b.finish("v1_dream_none", stop_token_ids, t_start, steps=steps, steps_per_block=per_row,
                   host_syncs=sum(per_row))
    if b.B > 1:  # rows ran one after the other: each took part in its own forwards only
        out.stats.row_nfe = per_row
    return out


def _row_forward(b: Batch, j: int):
    """Row ``j`` alone (its own pad keys masked)."""
    b._count("step")
    valid = b.key_valid[j:j + 1] if b.key_valid is not None else None
    kw = full_attention_kwargs(b.model, valid, b.T, b.T)
    return b.model(input_ids=b.x[j:j + 1], position_ids=b.positions[j:j + 1], use_cache=False, **kw).logits
