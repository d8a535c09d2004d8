"""Dream's sampler: :func:`dream_generate` mirrors ``DreamGenerationMixin.diffusion_generate`` / ``_sample``
(Dream's ``generation_utils.py``, as vendored by NVlabs/Fast-dLLM ``dream/model/generation_utils.py`` at commit
24cc59e) for the algorithms ``origin``, ``maskgit_plus``, ``topk_margin`` and ``entropy``.

``max_new_tokens`` mask tokens after the prompt; ``steps`` full-attention forwards of the whole sequence.  Dream
keeps Qwen2.5's reading of the logits: the prediction for position ``i`` is the logit at ``i-1``
(``cat([logits[:, :1], logits[:, :-1]])``).  With timesteps ``linspace(1, eps, steps + 1)``, step ``i`` (``t``
-> ``s``):

* ``origin``: every masked position is unmasked with probability ``1 - s/t`` (all at the last step), its token
  sampled (greedy at temperature 0);
* ``maskgit_plus`` / ``topk_margin`` / ``entropy``: the confidence of each masked position is the chosen token's
  probability / the top-1 minus top-2 probability / the negative entropy; ``int(masked * (1 - s/t))`` positions
  (all at the last step) with the highest confidence are unmasked, or, with ``alg_temp > 0``, drawn from
  ``softmax(confidence / alg_temp)``.

Tokens: ``temperature`` (0 = greedy), ``top_p`` (nucleus filtering also at temperature 0: it changes the
confidences), drawn from ``seed``'s generator in the official order.  Counting: :mod:`.mdm_common` (NFE = ``steps``).

Dream on two sides: this module is its sampler; :mod:`fastdllm_core.modeling.dream` loads its weights onto a stock
Qwen2 (same model, same name).
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F

from .mdm_common import Batch, make_generator, start_clock

ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")


def top_p_logits(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """Nucleus filtering (mirrors ``top_p_logits`` of Dream's ``generation_utils.py``)."""
    sorted_logits, sorted_indices = torch.sort(logits, descending=True)
    cumulative_probs = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)
    remove = cumulative_probs > top_p
    remove[..., 1:] = remove[..., :-1].clone()
    remove[..., 0] = 0
    mask = torch.zeros_like(logits, dtype=torch.bool).scatter_(-1, sorted_indices, remove)
    return logits.masked_fill(mask, torch.finfo(logits.dtype).min)


def sample_tokens(logits: torch.Tensor, gen: torch.Generator, temperature: float = 0.0, top_p: float | None = None,
                  margin_confidence: bool = False, neg_entropy: bool = False):
    """(confidence, token) per row of ``logits [N, V]`` (mirrors ``sample_tokens`` of Dream's
    ``generation_utils.py``; the categorical draw is ``torch.distributions.Categorical(probs).sample()``'s, on
    ``gen``)."""
    if temperature > 0:
        logits = logits / temperature
    if top_p is not None and top_p < 1:
        logits = top_p_logits(logits, top_p)
    probs = torch.softmax(logits, dim=-1)
    if temperature > 0:
        norm = probs / probs.sum(-1, keepdim=True)  # what Categorical(probs=...) samples from
        x0 = torch.multinomial(norm.reshape(-1, norm.shape[-1]), 1, True, generator=gen).T.reshape(norm.shape[:-1])
        confidence = torch.gather(probs, -1, x0.unsqueeze(-1)).squeeze(-1)
    else:
        confidence, x0 = probs.max(dim=-1)
    if margin_confidence:
        sorted_probs, _ = torch.sort(probs, dim=-1, descending=True)
        confidence = sorted_probs[:, 0] - sorted_probs[:, 1]
    if neg_entropy:
        confidence = torch.sum(probs * torch.log(probs + 1e-10), dim=-1)
    return confidence, x0


def shift_logits(logits: torch.Tensor) -> torch.Tensor:
    """Dream's reading: the prediction for position ``i`` is the logit at ``i-1`` (position 0 keeps its own)."""
    return torch.cat([logits[:, :1], logits[:, :-1]], dim=1)


def check_dream(steps: int, max_new_tokens: int, alg: str, alg_temp: float, temperature: float, top_p, eps: float):
    if alg not in ALGS:
        raise ValueError(f"alg must be one of {ALGS}, got {alg!r}")
    for name, v in (("steps", steps), ("max_new_tokens", max_new_tokens)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if temperature < 0 or (alg_temp or 0) < 0:
        raise ValueError(f"temperature and alg_temp must be >= 0, got {temperature!r}, {alg_temp!r}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p!r}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps!r}")


@torch.no_grad()
def dream_generate(model, prompts, *, mask_token_id: int, stop_token_ids=None, max_new_tokens: int = 256,
                   steps: int = 256, alg: str = "entropy", alg_temp: float = 0.0, temperature: float = 0.0,
                   top_p: float | None = None, eps: float = 1e-3, seed: int | None = None,
                   pad_token_id: int | None = None, profile: bool = False, stop_when_final: bool = False):
    """Dream's ``diffusion_generate`` on a stock model (see the module docstring).

    ``stop_when_final`` (deterministic settings only: greedy tokens, ``alg_temp`` 0, not ``origin``; ignored
    otherwise): a row leaves the batch once its text up to its first stop id is final -- every position up to and
    including that stop decoded (Dream never re-masks a token, so later steps only fill positions after it).  The
    returned sequences are those of the full ``steps``; the other rows' arithmetic is unchanged (each row unmasks
    the same count per step, so the batch mean that sets it is the same).  Fewer forwards: an evaluation shortcut,
    never a throughput measurement of Dream (the official sampler runs every step)."""
    check_dream(steps, max_new_tokens, alg, alg_temp, temperature, top_p, eps)
    b = Batch(model, prompts, max_new_tokens, mask_token_id, pad_token_id, profile)
    gen = make_generator(b.device, seed)
    mask_id, full_x = b.mask_id, b.x
    early = _Early(b, stop_token_ids) if (stop_when_final and temperature == 0 and not alg_temp
                                          and alg != "origin") else None
    timesteps = torch.linspace(1, eps, steps + 1, device=full_x.device)
    t_start = start_clock(b.device)
    for i in range(steps):
        x = full_x if early is None else full_x[early.active]
        mask_index = x == mask_id
        logits = shift_logits(b.forward(x, kind="step", rows=None if early is None else early.active))
        mask_logits = logits[mask_index]
        t, s = timesteps[i], timesteps[i + 1]
        if alg == "origin":
            p_transfer = 1 - s / t if i < steps - 1 else 1
            x0 = torch.zeros_like(x[mask_index], dtype=torch.long) + mask_id
            transfer = torch.rand(*x0.shape, device=x.device, generator=gen) < p_transfer
            _, x0[transfer] = sample_tokens(mask_logits[transfer], gen, temperature, top_p)
            x[mask_index] = x0.clone()
            continue
        confidence, x0 = sample_tokens(mask_logits, gen, temperature, top_p, margin_confidence=alg == "topk_margin",
                                       neg_entropy=alg == "entropy")
        num_mask_token = mask_index.sum() / mask_index.shape[0]
        n = int(num_mask_token * (1 - s / t)) if i < steps - 1 else int(num_mask_token)
        full_confidence = torch.full_like(x, -torch.inf, dtype=logits.dtype)
        full_confidence[mask_index] = confidence
        if n > 0:
            transfer_index = select(full_confidence, n, alg_temp, gen)
            x_ = torch.zeros_like(x, dtype=torch.long) + mask_id
            x_[mask_index] = x0.clone()
            rows = torch.arange(x.size(0), device=x.device).unsqueeze(1).expand_as(transfer_index)
            x[rows, transfer_index] = x_[rows, transfer_index]
        if early is not None:
            full_x[early.active] = x
            if not early.step(t_start):
                break
    if early is None:
        return b.finish(f"dream_{alg}", stop_token_ids, t_start, steps=steps, steps_per_block=[steps],
                        host_syncs=steps)
    return b.finish(f"dream_{alg}", stop_token_ids, t_start, steps=steps, steps_per_block=[steps],
                    host_syncs=early.steps, row_nfe=early.row_nfe, row_latency_s=early.row_latency)


class _Early:
    """The rows still decoding (``stop_when_final``): each step, a row whose generation region has no mask up to
    its first stop id (or none at all) leaves, with its forwards and latency recorded."""

    def __init__(self, b: Batch, stop_token_ids):
        self.b, self.steps = b, 0
        self.stops = torch.tensor(sorted({int(t) for t in (stop_token_ids or [])}), dtype=torch.long,
                                  device=b.x.device)
        self.active = torch.arange(b.B, device=b.x.device)
        self.row_nfe, self.row_latency = [0] * b.B, [0.0] * b.B

    def step(self, t_start: float) -> bool:
        """Count a step for the active rows and drop the finished ones; False when none is left."""
        self.steps += 1
        g = self.b.x[self.active, self.b.P:]
        masked, stop = g == self.b.mask_id, torch.isin(g, self.stops)
        n = g.shape[1]
        first_mask = torch.where(masked.any(1), masked.int().argmax(1), n)
        first_stop = torch.where(stop.any(1), stop.int().argmax(1), n)
        done = (first_mask > first_stop) | ~masked.any(1)
        if done.any():
            now = time.perf_counter() - t_start
            for r in self.active[done].tolist():
                self.row_latency[r] = now
        for r in self.active.tolist():
            self.row_nfe[r] += 1
        self.active = self.active[~done]
        return bool(len(self.active))


def select(full_confidence: torch.Tensor, n: int, alg_temp: float | None, gen: torch.Generator) -> torch.Tensor:
    """The ``n`` positions to unmask per row: top-``n`` confidence, or drawn from ``softmax(conf / alg_temp)``."""
    if not alg_temp:
        return torch.topk(full_confidence, n).indices
    probs = F.softmax(full_confidence / alg_temp, dim=-1)
    return torch.multinomial(probs, num_samples=n, generator=gen)
