"""The autoregressive baseline (Hugging Face greedy ``generate``), measured like the diffusion decoder."""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch

from .common import _check_prompts, _sync, fit_context, model_context, trim_at_stop
from .stats import GenerationOutput, GenerationStats


@contextmanager
def _eos_off(model, on: bool):
    """Clear the generation config's EOS while ``on``: with no stop ids (timing runs, --ignore-eos) ``generate``
    would otherwise fall back to the config's EOS and stop early, while the tokens are counted to the budget."""
    gc = getattr(model, "generation_config", None)
    old = getattr(gc, "eos_token_id", None)
    if on and gc is not None:
        gc.eos_token_id = None
    try:
        yield
    finally:
        if on and gc is not None:
            gc.eos_token_id = old


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

    gkw = dict(max_new_tokens=max_new_tokens, do_sample=False, temperature=None, top_p=None, top_k=None,
               eos_token_id=stop_ids or None, pad_token_id=pad, stopping_criteria=StoppingCriteriaList([clock]))
    if suppress_token_ids:
        gkw["suppress_tokens"] = [int(t) for t in suppress_token_ids]
    if baseline == "hf_static":
        gkw["cache_implementation"] = "static"
        use_compile = device.type == "cuda" if compile is None else compile
        if use_compile:
            from transformers import CompileConfig

            gkw["compile_config"] = CompileConfig(fullgraph=False)
        else:
            gkw["disable_compile"] = True
    else:
        gkw["disable_compile"] = True
    return gkw


@torch.no_grad()
def ar_generate(model, prompts, *, stop_token_ids=None, max_new_tokens: int = 256, pad_token_id: int | None = None,
                baseline: str = "hf", compile: bool | None = None,
                suppress_token_ids: list[int] | None = None) -> GenerationOutput:
    """The autoregressive baseline: Hugging Face greedy ``generate`` on the same model, left-padded batches.

    ``baseline="hf"``: dynamic KV cache (the default ``generate``).  ``baseline="hf_static"``: static KV cache and,
    on CUDA (or when ``compile=True``), ``torch.compile`` of the decoding forward: the faster configuration a
    careful engineer would use.  Tokens are counted up to and including the first stop id.
    ``suppress_token_ids`` (e.g. the mask token) are never generated, as in the diffusion decoder.
    """
    prompts = _check_prompts(prompts)
    if not isinstance(max_new_tokens, int) or max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    fit_context(prompts, max_new_tokens, model_context(model))  # refuses a prompt + budget beyond the context
    if baseline not in ("hf", "hf_static"):
        raise ValueError(f"unknown AR baseline {baseline!r} (expected 'hf' or 'hf_static')")
    stop_ids = sorted({int(s) for s in (stop_token_ids or [])})
    device = model.device
    B = len(prompts)
    pad = pad_token_id if pad_token_id is not None else (stop_ids[0] if stop_ids else 0)
    ids, att = _left_pad(prompts, pad, device)
    n = ids.shape[1]
    clock = _RowClock(B, torch.tensor(stop_ids or [-1], device=device))
    gkw = _generate_kwargs(max_new_tokens, stop_ids, pad, clock, baseline, device, compile, suppress_token_ids)
    _sync(device)
    clock.t_start = time.perf_counter()
    with _eos_off(model, not stop_ids):
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
