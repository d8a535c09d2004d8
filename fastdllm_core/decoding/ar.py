"""The autoregressive baseline (Hugging Face greedy ``generate``), measured like the diffusion decoder."""
from __future__ import annotations

import logging
import time
from contextlib import contextmanager

import torch

from ..decode_config import AR_BASELINES, STATIC_PATHS
from .ar_static import ar_generate_static
from .common import _check_prompts, _sync, fit_context, model_context, trim_at_stop
from .outputs import GenerationOutput, GenerationStats
from .static import static_unsupported

log = logging.getLogger(__name__)


# The AR baseline's generation settings, pinned whatever the checkpoint's generation_config.json says (Qwen2.5-Instruct
# ships repetition_penalty 1.05/1.1, temperature 0.7, top_p 0.8, top_k 20): plain greedy argmax, one beam, no
# penalty, no n-gram ban, no forced or suppressed tokens beyond the harness's own.  The sampling fields hold
# transformers' own neutral defaults (top_k 50: unused without sampling, and 0 fails GenerationConfig's strict
# validation); the config passes strict validation.  Recorded in every AR result row (ar_generation_summary).
AR_GENERATION = {
    "do_sample": False, "num_beams": 1, "temperature": 1.0, "top_k": 50, "top_p": 1.0, "typical_p": 1.0,
    "min_p": None, "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0, "no_repeat_ngram_size": 0,
    "length_penalty": 1.0, "min_length": 0, "min_new_tokens": 0, "bad_words_ids": None, "sequence_bias": None,
    "forced_bos_token_id": None, "forced_eos_token_id": None, "begin_suppress_tokens": None,
    "exponential_decay_length_penalty": None, "renormalize_logits": False, "remove_invalid_values": False,
    "num_return_sequences": 1, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "guidance_scale": None,
}


def ar_generation_summary() -> str:
    """The pinned AR generation settings as one results-row cell (``key=value;...``, sorted)."""
    return ";".join(f"{k}={AR_GENERATION[k]}" for k in sorted(AR_GENERATION))


def pinned_generation_config(max_new_tokens: int, stop_ids: list[int], pad: int, **extra):
    """A fresh ``GenerationConfig`` built from :data:`AR_GENERATION` alone (nothing of the model's), with the
    harness's budget, stop ids (``None`` when there are none: the tokens are counted to the budget) and pad id."""
    from transformers import GenerationConfig

    return GenerationConfig(**AR_GENERATION, max_new_tokens=max_new_tokens, eos_token_id=stop_ids or None,
                            pad_token_id=pad, **extra)


@contextmanager
def _model_config_swapped(model, gc):
    """``model.generation_config`` replaced by ``gc`` while ``generate`` runs: transformers fills every field a
    passed config leaves ``None`` from the model's own, so the checkpoint's settings (a repetition penalty, its
    EOS when there are no stop ids) would otherwise leak into the baseline."""
    old = getattr(model, "generation_config", None)
    model.generation_config = gc
    try:
        yield
    finally:
        model.generation_config = old


class _RowClock:
    """A stopping criterion that never stops: it notes when each row first emits a stop id (its latency)."""

    def __init__(self, batch_size: int, stop_t: torch.Tensor):
        self.B, self.stop_t = batch_size, stop_t
        self.done = [False] * batch_size
        self.latency = [0.0] * batch_size
        self.steps = 0
        self.t_start = 0.0

    def __call__(self, input_ids, scores, **kw):
        self.steps += 1
        hit = torch.isin(input_ids[:, -1], self.stop_t).tolist()
        now = time.perf_counter()
        for i, h in enumerate(hit):
            if h and not self.done[i]:
                self.done[i], self.latency[i] = True, now - self.t_start
        return torch.zeros(self.B, dtype=torch.bool, device=input_ids.device)


def _left_pad(prompts: list[list[int]], pad: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """(input ids, attention mask), left-padded to the longest prompt."""
    B, n = len(prompts), max(len(p) for p in prompts)
    ids = torch.full((B, n), pad, dtype=torch.long, device=device)
    att = torch.zeros((B, n), dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        ids[i, n - len(p):] = torch.tensor(p, device=device)
        att[i, n - len(p):] = 1
    return ids, att


def _generate_kwargs(max_new_tokens: int, stop_ids: list[int], pad: int, clock, baseline: str, device,
                     compile: bool | None, suppress_token_ids) -> dict:
    from transformers import StoppingCriteriaList

    extra = {}
    if suppress_token_ids:
        extra["suppress_tokens"] = [int(t) for t in suppress_token_ids]
    if baseline == "hf_static":
        extra["cache_implementation"] = "static"
        use_compile = device.type == "cuda" if compile is None else compile
        if use_compile:
            from transformers import CompileConfig

            extra["compile_config"] = CompileConfig(fullgraph=False)
        else:
            extra["disable_compile"] = True
    else:
        extra["disable_compile"] = True
    gc = pinned_generation_config(max_new_tokens, stop_ids, pad, **extra)
    return dict(generation_config=gc, stopping_criteria=StoppingCriteriaList([clock]))


@torch.no_grad()
def ar_generate(model, prompts, *, stop_token_ids=None, max_new_tokens: int = 256, pad_token_id: int | None = None,
                baseline: str = "hf", compile: bool | None = None, suppress_token_ids: list[int] | None = None,
                profile: bool = False) -> GenerationOutput:
    """The autoregressive baseline: Hugging Face greedy ``generate`` on the same model, left-padded batches.

    ``baseline="hf"``: dynamic KV cache (the default ``generate``).  ``baseline="hf_static"``: static KV cache and,
    on CUDA (or when ``compile=True``), ``torch.compile`` of the decoding forward: the faster configuration a
    careful engineer would use.  ``baseline="static"``: this project's static path (:mod:`.ar_static`: a static
    KV cache and a one-token forward captured as a CUDA graph on a GPU; ``profile`` times its forwards), the AR
    side of the captured block-diffusion decoder; ``baseline="compiled"``: the same forward compiled by
    ``torch.compile`` before its capture (the AR side of ``decode_path="compiled"``).  Tokens are counted up to
    and including the first stop id.
    ``suppress_token_ids`` (e.g. the mask token) are never generated, as in the diffusion decoder.  Every other
    generation setting is pinned (:data:`AR_GENERATION`: greedy, no repetition penalty), never the checkpoint's.
    """
    prompts = _check_prompts(prompts)
    if not isinstance(max_new_tokens, int) or max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    fit_context(prompts, max_new_tokens, model_context(model))  # refuses a prompt + budget beyond the context
    if baseline not in AR_BASELINES:
        raise ValueError(f"unknown AR baseline {baseline!r} (expected one of {AR_BASELINES})")
    stop_ids = sorted({int(s) for s in (stop_token_ids or [])})
    device = model.device
    B = len(prompts)
    pad = pad_token_id if pad_token_id is not None else (stop_ids[0] if stop_ids else 0)
    if baseline in STATIC_PATHS:
        why = static_unsupported(model)
        if why is None:
            return ar_generate_static(model, prompts, stop_ids, max_new_tokens, pad, suppress_token_ids, profile,
                                      compiled=baseline == "compiled")
        log.warning("AR baseline %r falls back to 'hf' (eager): %s", baseline, why)
        baseline = "hf"
    ids, att = _left_pad(prompts, pad, device)
    n = ids.shape[1]
    clock = _RowClock(B, torch.tensor(stop_ids or [-1], device=device))
    gkw = _generate_kwargs(max_new_tokens, stop_ids, pad, clock, baseline, device, compile, suppress_token_ids)
    _sync(device)
    clock.t_start = time.perf_counter()
    with _model_config_swapped(model, gkw["generation_config"]):
        out = model.generate(input_ids=ids, attention_mask=att, **gkw)
    _sync(device)
    wall = time.perf_counter() - clock.t_start
    sequences = [trim_at_stop(row, stop_ids) for row in out[:, n:].tolist()]
    steps = out.shape[1] - n
    latency = [clock.latency[i] if clock.done[i] else wall for i in range(B)]
    stats = GenerationStats(
        mode=f"ar_{baseline}", batch_size=B, generated_tokens=[len(s) for s in sequences], nfe=steps,
        row_nfe=[len(s) for s in sequences],  # one forward per token up to the row's stop id (prefill included)
        wall_time_s=wall, row_latency_s=latency, nfe_breakdown={"decode": steps},
        host_syncs=2 * steps,
    )
    return GenerationOutput(sequences, stats)
