"""One entry point for the masked-diffusion samplers: :func:`mdm_generate` runs a :class:`DecodeConfig` in mode
``llada`` (:func:`.llada.llada_generate`), ``dream`` (:func:`.dream.dream_generate`) or ``v1``
(:func:`.fast_dllm_v1.v1_llada` / :func:`.fast_dllm_v1.v1_dream`, by the model's logit shift) on a model loaded
by :func:`fastdllm_core.loading.load_model`, refusing a mode the model's family does not have."""
from __future__ import annotations

from ..decode_config import MDM_MODES, DecodeConfig
from .dream import dream_generate
from .fast_dllm_v1 import v1_dream, v1_llada
from .llada import llada_generate


def check_family(loaded, mode: str) -> None:
    """``mode`` must suit the loaded model: the masked-diffusion modes need a masked-diffusion release (llada: no
    logit shift; dream: the shift), bd / ar need a causal model (AR or Fast-dLLM v2)."""
    fam = getattr(loaded, "family", None)
    if fam is None:
        return
    if mode in MDM_MODES and not fam.masked_diffusion:
        raise ValueError(f"mode {mode} is a masked-diffusion sampler; the model is {fam.name} ({fam.release})")
    if mode == "llada" and fam.logit_shift:
        raise ValueError(f"mode llada reads the logit at i for token i; this model ({fam.release}) has the logit "
                         "shift: use mode dream or v1")
    if mode == "dream" and not fam.logit_shift:
        raise ValueError(f"mode dream reads the logit at i-1 for token i (logit shift); this model ({fam.release}) "
                         "has none: use mode llada or v1")
    if mode in ("bd", "ar") and fam.masked_diffusion:
        raise ValueError(f"mode {mode} needs a causal (AR or Fast-dLLM v2) model; {fam.release} is a full-attention "
                         "masked-diffusion model: use mode llada, dream or v1")


def eos_eot(loaded) -> tuple[int | None, int | None]:
    """LLaDA's EOS and EoT ids (``<|endoftext|>``, ``<|eot_id|>``) from the tokenizer, for the EOS options."""
    tok = getattr(loaded, "tokenizer", None)
    vocab = tok.get_vocab() if tok is not None else {}
    return vocab.get("<|endoftext|>"), vocab.get("<|eot_id|>")


def mdm_generate(loaded, prompts, mode: str, config: DecodeConfig, *, stop_token_ids=None, eos_eot_ids=None,
                 profile: bool = False, stop_when_final: bool = False):
    """Decode ``prompts`` (token-id lists) with ``mode``'s sampler at ``config`` (``steps=None`` resolved by
    :meth:`DecodeConfig.with_mode_defaults`).  ``stop_token_ids`` (default: the model's EOS / EoT ids) only
    decide where the counted tokens end; ``eos_eot_ids`` override the ids LLaDA's EOS options act on.
    ``stop_when_final`` (Dream's sampler, greedy): rows leave the batch once their text is final -- the same
    sequences with fewer forwards (:func:`~.dream.dream_generate`); for evaluation, never for throughput."""
    if mode not in MDM_MODES:
        raise ValueError(f"mdm_generate runs the masked-diffusion modes {MDM_MODES}, not {mode!r}")
    check_family(loaded, mode)
    cfg = config.with_mode_defaults(mode).validate(mode)
    model = loaded.model
    stops = loaded.eos_token_ids if stop_token_ids is None else stop_token_ids
    pad = getattr(getattr(loaded, "tokenizer", None), "pad_token_id", None)
    common = dict(mask_token_id=loaded.mask_token_id, stop_token_ids=stops, seed=cfg.seed, pad_token_id=pad,
                  profile=profile)
    if mode == "llada":
        eos, eot = eos_eot_ids or eos_eot(loaded)
        return llada_generate(model, prompts, gen_length=cfg.max_new_tokens, steps=cfg.steps,
                              block_length=cfg.block_size, temperature=cfg.temperature, remasking=cfg.remasking,
                              logits_eos_inf=cfg.logits_eos_inf, confidence_eos_eot_inf=cfg.confidence_eos_eot_inf,
                              eos_token_id=eos, eot_token_id=eot, **common)
    top_p = cfg.top_p if cfg.top_p < 1.0 else None
    if mode == "dream":
        return dream_generate(model, prompts, max_new_tokens=cfg.max_new_tokens, steps=cfg.steps, alg=cfg.alg,
                              alg_temp=cfg.alg_temp, temperature=cfg.temperature, top_p=top_p, eps=cfg.eps,
                              stop_when_final=stop_when_final, **common)
    v1 = dict(gen_length=cfg.max_new_tokens, steps=cfg.steps, block_length=cfg.block_size, threshold=cfg.threshold,
              cache=cfg.cache, temperature=cfg.temperature, **common)
    if getattr(getattr(loaded, "family", None), "logit_shift", False):
        return v1_dream(model, prompts, top_p=top_p, alg_temp=cfg.alg_temp, eps=cfg.eps, **v1)
    return v1_llada(model, prompts, remasking=cfg.remasking, **v1)
