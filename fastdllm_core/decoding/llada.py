"""LLaDA's sampler: :func:`llada_generate` mirrors ``generate`` of ML-GSAI/LLaDA ``generate.py`` (commit b7e6c35).

``gen_length`` mask tokens after the prompt, decoded in ``gen_length / block_length`` blocks left to right
(semi-autoregressive remasking when ``block_length < gen_length``), ``steps / num_blocks`` steps per block.  Each
step forwards the whole sequence (full attention, no cache, no logit shift: the logit at ``i`` predicts token
``i``), takes the argmax of the (Gumbel-perturbed, ``temperature > 0``) logits at every masked position, and
unmasks the ``k`` most confident masked positions of the current block (``low_confidence``: the softmax
probability of the chosen token; ``random``: uniform scores), ``k`` from the even split of the block's masked count
over its steps (the remainder to the first steps).

Options of the published settings (LLaDA paper, Appendix B.4; ``EVAL.md``): ``logits_eos_inf`` sets the EOS
logit to -inf before the choice; ``confidence_eos_eot_inf`` gives EOS and EoT predictions no confidence (kept as
the official code writes it: with temperature 0 both go to -inf; with temperature > 0 the EOS line hits the
perturbed copy only).  Classifier-free guidance (``cfg_scale``) is not implemented: the published instruct
settings use ``cfg_scale=0``; only the base model's likelihood tasks use it.

Counting: :mod:`.mdm_common` (NFE = ``steps``; tokens up to and including the first stop id).

LLaDA on two sides: this module is its sampler; :mod:`fastdllm_core.modeling.llada` loads its weights onto a stock
Llama (same model, same name).
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .mdm_common import Batch, add_gumbel_noise, check_blocks, make_generator, num_transfer_tokens, start_clock

REMASKING = ("low_confidence", "random")


@torch.no_grad()
def llada_generate(model, prompts, *, mask_token_id: int, stop_token_ids=None, gen_length: int = 128,
                   steps: int = 128, block_length: int = 128, temperature: float = 0.0,
                   remasking: str = "low_confidence", logits_eos_inf: bool = False,
                   confidence_eos_eot_inf: bool = False, eos_token_id: int | None = None,
                   eot_token_id: int | None = None, seed: int | None = None, pad_token_id: int | None = None,
                   profile: bool = False):
    """LLaDA's ``generate`` on a stock model loaded by :func:`fastdllm_core.loading.load_model`.

    ``eos_token_id`` / ``eot_token_id``: the ids the two EOS options act on (the official code hard-codes
    LLaDA-8B's 126081 / 126348).  ``seed``: the generator of the Gumbel noise and of ``random`` remasking (drawn in
    the official order, so with ``torch.manual_seed(seed)`` before the official call both draw the same numbers).
    Returns a :class:`~fastdllm_core.decoding.GenerationOutput`."""
    if remasking not in REMASKING:
        raise ValueError(f"remasking must be one of {REMASKING}, got {remasking!r}")
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature!r}")
    if (logits_eos_inf or confidence_eos_eot_inf) and (eos_token_id is None or eot_token_id is None):
        raise ValueError("logits_eos_inf / confidence_eos_eot_inf need eos_token_id and eot_token_id")
    steps_per_block = check_blocks(gen_length, block_length, steps)
    b = Batch(model, prompts, gen_length, mask_token_id, pad_token_id, profile)
    gen = make_generator(b.device, seed)
    x, P, mask_id = b.x, b.P, b.mask_id
    t_start = start_clock(b.device)
    syncs = 0
    for nb in range(gen_length // block_length):
        lo, hi = P + nb * block_length, P + (nb + 1) * block_length
        transfer_counts = num_transfer_tokens(x[:, lo:hi] == mask_id, steps_per_block)
        for i in range(steps_per_block):
            mask_index = x == mask_id
            logits = b.forward(kind="step")
            if logits_eos_inf:
                logits[:, :, eos_token_id] = -torch.inf
            logits_with_noise = add_gumbel_noise(logits, temperature, gen)
            x0 = torch.argmax(logits_with_noise, dim=-1)
            if confidence_eos_eot_inf:  # as written officially: EOS on the (perturbed) copy, EoT on the logits
                logits_with_noise[:, :, eos_token_id] = logits[:, :, eot_token_id] = -torch.inf
            if remasking == "low_confidence":
                p = F.softmax(logits, dim=-1)
                x0_p = torch.squeeze(torch.gather(p, dim=-1, index=torch.unsqueeze(x0, -1)), -1)
            else:
                x0_p = torch.rand((x0.shape[0], x0.shape[1]), device=x0.device, generator=gen)
            x0_p[:, hi:] = -np.inf
            x0 = torch.where(mask_index, x0, x)
            confidence = torch.where(mask_index, x0_p, -np.inf)
            transfer = torch.zeros_like(x0, dtype=torch.bool)
            for j in range(confidence.shape[0]):
                _, select = torch.topk(confidence[j], k=int(transfer_counts[j, i]))
                transfer[j, select] = True
            x[transfer] = x0[transfer]
            syncs += 1
    return b.finish("llada", stop_token_ids, t_start, steps=steps,
                    steps_per_block=[steps_per_block] * (gen_length // block_length), host_syncs=syncs)
