"""What every decoder shares (the AR baseline, the block-diffusion decoder and its forwards, the masked-diffusion
samplers through :mod:`.mdm_common`): prompt and context checks, the token choice, host synchronisation, the KV-cache
keyword."""
from __future__ import annotations

import inspect

import torch

from ..decode_config import DecodeConfig


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# transformers 5.24 renamed the KV-cache keyword of every model forward: ``past_key_values`` is deprecated
# ("`past_key_values` is deprecated and will be removed in version 5.40.0 for `Qwen2ForCausalLM.forward`. Use
# `cache` instead."); earlier 5.x take only ``past_key_values``.  pyproject.toml allows transformers >=5.0,<5.40.
_CACHE_KW: dict[type, str] = {}


def cache_kwarg(model) -> str:
    """The keyword ``model``'s forward takes its KV cache by: ``cache`` where its signature has it (transformers
    >= 5.24), else ``past_key_values`` (read once per model class; the deprecation wrapper keeps the signature)."""
    cls = type(model)
    if cls not in _CACHE_KW:
        params = inspect.signature(model.forward).parameters
        _CACHE_KW[cls] = "cache" if "cache" in params else "past_key_values"
    return _CACHE_KW[cls]


def _check_prompts(prompts) -> list[list[int]]:
    if not prompts:
        raise ValueError("no prompts given")
    out = []
    for i, p in enumerate(prompts):
        p = list(p.tolist() if torch.is_tensor(p) else p)
        if len(p) == 0:
            raise ValueError(f"prompt {i} is empty")
        out.append([int(t) for t in p])
    return out


class ContextError(ValueError):
    """A prompt (with its token budget) does not fit the model's context."""


def model_context(model) -> int | None:
    """The model's context length (``config.max_position_embeddings``), or None when the config has none."""
    n = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def fit_context(prompts, max_new_tokens: int, context: int | None, *, truncate: bool = False,
                names: list[str] | None = None) -> tuple[list[list[int]], int]:
    """(prompts, number truncated): every prompt plus ``max_new_tokens`` must fit ``context`` tokens.

    A prompt that does not fit is refused (:class:`ContextError` naming it, its length, the budget and the
    context) unless ``truncate``: then it loses tokens from the left (its start) until it fits.  The decoders
    themselves always refuse; truncation is the callers' explicit option.
    """
    prompts = [list(p) for p in prompts]
    if context is None:
        return prompts, 0
    if max_new_tokens >= context:
        raise ContextError(f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's context of "
                           f"{context} tokens (config.max_position_embeddings)")
    room, out, n_cut = context - max_new_tokens, [], 0
    for i, p in enumerate(prompts):
        if len(p) > room:
            if not truncate:
                name = names[i] if names else f"prompt {i}"
                what = (f"is {len(p)} tokens, longer than the model's context of {context} tokens"
                        if len(p) > context else
                        f"is {len(p)} tokens; with max_new_tokens={max_new_tokens} that makes "
                        f"{len(p) + max_new_tokens}, more than the model's context of {context} tokens")
                raise ContextError(f"{name} {what} (config.max_position_embeddings); shorten it, lower "
                                   "max_new_tokens, or ask for left truncation (--truncate-prompts left / "
                                   "truncate_prompts=True)")
            p = p[len(p) - room:]
            n_cut += 1
        out.append(p)
    return out, n_cut


def _check_mask_token(model, mask_token_id) -> int:
    if mask_token_id is None:
        mask_token_id = getattr(model.config, "mask_token_id", None)
    if mask_token_id is None:
        raise ValueError("the model has no mask token: load it with fastdllm_core.loading.load_model "
                         "or pass mask_token_id")
    n = model.get_input_embeddings().num_embeddings
    if not 0 <= int(mask_token_id) < n:
        raise ValueError(f"mask_token_id={mask_token_id} is outside the embedding table of size {n}")
    return int(mask_token_id)


def _probs(logits: torch.Tensor) -> torch.Tensor:
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    return torch.softmax(logits, dim=-1)


def _choose(logits: torch.Tensor, cfg: DecodeConfig, gen: torch.Generator | None, mask_id: int):
    """Token and its confidence for every position of ``logits [..., V]`` (greedy or sampled).

    The mask token itself is never a prediction (its logit is set to -inf before the softmax).
    """
    logits = logits.clone()
    logits[..., mask_id] = float("-inf")
    if cfg.temperature == 0:
        conf, tok = _probs(logits).max(dim=-1)
        return tok, conf
    probs = _probs(logits / cfg.temperature)
    if cfg.top_p < 1.0:
        sp, si = probs.sort(dim=-1, descending=True)
        keep = (sp.cumsum(-1) - sp) < cfg.top_p  # smallest prefix with mass >= top_p (first always kept)
        sp = sp * keep
        probs = torch.zeros_like(probs).scatter_(-1, si, sp)
        probs = probs / probs.sum(-1, keepdim=True)
    flat = probs.reshape(-1, probs.shape[-1])
    tok = torch.multinomial(flat, 1, generator=gen).reshape(probs.shape[:-1])
    conf = probs.gather(-1, tok[..., None]).squeeze(-1)
    return tok, conf


def trim_at_stop(seq: list[int], stop_ids) -> list[int]:
    """``seq`` up to and including its first stop id."""
    for k, t in enumerate(seq):
        if t in stop_ids:
            return seq[: k + 1]
    return seq
