"""The AR baseline on the static path (``ar_generate(..., baseline="static")``): greedy decoding over a static KV
cache with one fixed-shape one-token forward per step, captured as a CUDA graph on a GPU (:mod:`.static`), so that
block diffusion's captured decoder is compared like for like (``baseline="compiled"``: the forward compiled by
torch.compile before its capture, the AR side of ``decode_path="compiled"``).

Layout: every row starts at position 0 (prompts right-padded to the longest); one eager prefill forward of the
padded prompts under the causal mask; row b's first token comes from the logit of its last prompt position, and
step t forwards row b's previous token at position ``len_b + t - 1`` (its own position, written into its own
slot: the pad keys of a shorter prompt are overwritten before they become visible).  Greedy as Hugging Face's
``generate`` with the pinned settings of :data:`~.ar.AR_GENERATION`: float32 logits, suppressed ids at -inf,
argmax; rows stop counting at their first stop id, and the loop ends when every row has one or the budget is
used.  Tokens equal ``ar_generate(baseline="hf")`` (tests/test_static_decoding.py, float64)."""
from __future__ import annotations

import time

import torch

from ..masks import attention_kwargs, inference_spec
from .common import _sync, trim_at_stop
from .outputs import GenerationOutput, GenerationStats
from .static import capacity, static_forwards


def _greedy(logits: torch.Tensor, suppress: torch.Tensor | None) -> torch.Tensor:
    logits = logits.float()
    if suppress is not None:
        logits.index_fill_(-1, suppress, float("-inf"))
    return logits.argmax(dim=-1)


def _prefill(sf, model, prompts: list[list[int]], pad: int) -> torch.Tensor:
    """Logits ``[B, V]`` predicting each row's first new token; the prompts' keys/values in the cache."""
    dev = model.device
    n = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), n), pad, dtype=torch.long, device=dev)
    for i, p in enumerate(prompts):
        ids[i, : len(p)] = torch.tensor(p, device=dev)
    kw = attention_kwargs(model, inference_spec(1, 0), n, n)  # block size 1: causal
    decoder = model.get_decoder()
    pos = torch.arange(n, device=dev)[None].expand(len(prompts), -1)
    kw[sf.cache_kw] = sf.cache.window(0, n)
    hidden = decoder(input_ids=ids, position_ids=pos, use_cache=True, **kw).last_hidden_state
    last = torch.tensor([len(p) - 1 for p in prompts], device=dev)
    return model.get_output_embeddings()(hidden[torch.arange(len(prompts), device=dev), last])


@torch.no_grad()
def ar_generate_static(model, prompts: list[list[int]], stop_ids: list[int], max_new_tokens: int, pad: int,
                       suppress_token_ids=None, profile: bool = False, compiled: bool = False) -> GenerationOutput:
    """Greedy AR decoding on the static path (see the module docstring; ``compiled``: the forward compiled by
    torch.compile first); prompts and budget already checked by :func:`~.ar.ar_generate`."""
    dev, B = model.device, len(prompts)
    sf = static_forwards(model, B, capacity(max(len(p) for p in prompts) + max_new_tokens, 1), compiled=compiled)
    capture0 = sf.capture_time
    stop_t = torch.tensor(stop_ids or [-1], device=dev)
    suppress = torch.tensor(sorted(set(suppress_token_ids)), device=dev) if suppress_token_ids else None
    keep = torch.zeros(1, dtype=torch.long, device=dev)
    out = torch.empty(B, max_new_tokens, dtype=torch.long, device=dev)
    latency, done, fwd_time = [0.0] * B, [False] * B, 0.0
    _sync(dev)
    t_start = time.perf_counter()
    tok = _greedy(_prefill(sf, model, prompts, pad), suppress)
    if profile:
        _sync(dev)
        fwd_time = time.perf_counter() - t_start
    pos = torch.tensor([len(p) for p in prompts], device=dev)
    steps = 0
    while True:
        out[:, steps] = tok
        finished = torch.isin(tok, stop_t)
        steps += 1
        now_done = finished.tolist()  # the step's one device-to-host copy
        now = time.perf_counter()
        for i, d in enumerate(now_done):
            if d and not done[i]:
                done[i], latency[i] = True, now - t_start
        if all(done) or steps == max_new_tokens:
            break
        if profile:
            _sync(dev)
            t0 = time.perf_counter()
        logits = sf.run(tok[:, None], pos[:, None], pos + 1, keep)
        if profile:
            _sync(dev)
            fwd_time += time.perf_counter() - t0
        tok = _greedy(logits[:, 0], suppress)
        pos += 1
    _sync(dev)
    wall = time.perf_counter() - t_start
    sequences = [trim_at_stop(row, stop_ids) for row in out[:, :steps].tolist()]
    stats = GenerationStats(
        mode="ar_compiled" if compiled else "ar_static", batch_size=B, generated_tokens=[len(s) for s in sequences],
        nfe=steps,
        row_nfe=[len(s) for s in sequences], wall_time_s=wall,
        row_latency_s=[latency[i] if done[i] else wall for i in range(B)], nfe_breakdown={"decode": steps},
        host_syncs=steps, forward_time_s=fwd_time, capture_time_s=sf.capture_time - capture0)
    return GenerationOutput(sequences, stats)
