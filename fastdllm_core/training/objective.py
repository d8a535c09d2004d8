"""The block-diffusion training objective (and the plain next-token baseline).

Per sequence of length L with block size D:

1. per block b, ``t_b ~ U(eps, 1)``; every *label* position i (``labels[i] != -100``) of block b is masked with
   probability ``t_b`` (prompt and padding positions are never masked); ``x_t`` replaces masked tokens with the
   mask token;
2. "+ CM" (complementary masks): the same sequence is added to the batch a second time with the complementary
   mask ``labels & ~m``, so the two views together mask every label position exactly once;
3. the model sees ``[x_t | x_0]`` (length 2L) with position ids ``0..L-1`` for both halves, under the training
   mask of :mod:`fastdllm_core.masks`;
4. shifted labels: the logit of the x_t half at position i-1 predicts token i, for every masked position i >= 1
   (position 0 of a sequence has no logit before it and is never supervised);
5. loss = sum of cross-entropy over those tokens / number of such tokens in the whole *global* batch (all
   micro-batches and processes of the optimiser step); no 1/t weight.  The normaliser is computed before any
   forward, so gradient accumulation and data parallelism give the same gradient as one big batch.

``ntp``: the plain causal next-token loss on x_0 alone (the "NTP fine-tuned" baseline), normalised the same way.

``dream``: full-attention masked diffusion adapted from the AR model (Dream's recipe, the full-attention
counterpart of the paper's comparison): one ``t ~ U(eps, 1)`` per sequence (one "block" of length L), the model sees
``x_t`` alone with every key visible (no block structure, no clean copy), shifted labels as above, the same
normalisation.
"""
from __future__ import annotations

import hashlib

import torch
import torch.nn.functional as F

from ..masks import attention_kwargs, training_spec
from .data import IGNORE


def sample_generator(seed: int, step: int, sample: int) -> torch.Generator:
    """A generator that depends only on (seed, optimiser step, global sample index in the step)."""
    h = hashlib.sha256(f"{seed}/{step}/{sample}".encode()).digest()
    g = torch.Generator()
    g.manual_seed(int.from_bytes(h[:8], "little") & ((1 << 63) - 1))
    return g


def draw_mask(labels: torch.Tensor, block_size: int, eps: float, generator: torch.Generator) -> torch.Tensor:
    """Noise mask for one sequence ``labels [L]``: per block t ~ U(eps, 1), label positions masked w.p. t."""
    L = labels.shape[0]
    nb = L // block_size
    t = eps + (1 - eps) * torch.rand(nb, generator=generator)
    u = torch.rand(L, generator=generator)
    return (u < t.repeat_interleave(block_size)) & (labels != IGNORE)


def noise_batch(input_ids: torch.Tensor, labels: torch.Tensor, *, block_size: int, eps: float, complementary: bool,
                generators: list[torch.Generator]):
    """Masks for a micro-batch; with ``complementary`` the batch doubles: [views m ; views 1-m]."""
    m = torch.stack([draw_mask(labels[i], block_size, eps, generators[i]) for i in range(labels.shape[0])])
    if complementary:
        comp = (labels != IGNORE) & ~m
        input_ids = torch.cat([input_ids, input_ids])
        labels = torch.cat([labels, labels])
        m = torch.cat([m, comp])
    return input_ids, labels, m


def supervised_count(mask_or_labels: torch.Tensor) -> int:
    """Positions i >= 1 that are supervised (masked label positions for bd, label positions for ntp)."""
    x = mask_or_labels if mask_or_labels.dtype == torch.bool else mask_or_labels != IGNORE
    return int(x[:, 1:].sum())


def bd_forward(model, input_ids: torch.Tensor, m: torch.Tensor, mask_token_id: int, block_size: int):
    """Logits of the x_t half, ``[B, L-1, V]`` (positions 0..L-2: the ones that predict tokens 1..L-1)."""
    B, L = input_ids.shape
    x_t = torch.where(m, torch.full_like(input_ids, mask_token_id), input_ids)
    inp = torch.cat([x_t, input_ids], dim=1)
    pos = torch.arange(L, device=input_ids.device).repeat(2)[None].expand(B, -1)
    kw = attention_kwargs(model, training_spec(L, block_size), 2 * L, 2 * L)
    keep = torch.arange(L - 1, device=input_ids.device)
    return model(input_ids=inp, position_ids=pos, use_cache=False, logits_to_keep=keep, **kw).logits


def _ce_sum(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()  # cross-entropy in fp32 under bf16 training
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=IGNORE,
                           reduction="sum")


def bd_loss_sum(model, input_ids, m, mask_token_id: int, block_size: int) -> tuple[torch.Tensor, int]:
    """Sum of CE over masked positions i >= 1 (target token i from the x_t logit at i-1), and their count."""
    logits = bd_forward(model, input_ids, m, mask_token_id, block_size)
    target = torch.where(m, input_ids, torch.full_like(input_ids, IGNORE))[:, 1:]
    return _ce_sum(logits, target), int((target != IGNORE).sum())


def dream_loss_sum(model, input_ids, m, mask_token_id: int) -> tuple[torch.Tensor, int]:
    """Full-attention masked diffusion: sum of CE over masked positions i >= 1 (token i from the logit at i-1 of
    ``x_t``, attended without any mask), and their count."""
    L = input_ids.shape[1]
    x_t = torch.where(m, torch.full_like(input_ids, mask_token_id), input_ids)
    keep = torch.arange(L - 1, device=input_ids.device)
    kw = attention_kwargs(model, None, L, L)
    logits = model(input_ids=x_t, use_cache=False, logits_to_keep=keep, **kw).logits
    target = torch.where(m, input_ids, torch.full_like(input_ids, IGNORE))[:, 1:]
    return _ce_sum(logits, target), int((target != IGNORE).sum())


def ntp_loss_sum(model, input_ids, labels) -> tuple[torch.Tensor, int]:
    """Plain causal next-token CE sum over label positions i >= 1, and their count."""
    logits = model(input_ids=input_ids, use_cache=False).logits[:, :-1]
    target = labels[:, 1:]
    return _ce_sum(logits, target), int((target != IGNORE).sum())
