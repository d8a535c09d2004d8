"""What the masked-diffusion samplers share (:mod:`.llada`, :mod:`.dream`, :mod:`.fast_dllm_v1`): the batch layout,
full-attention forwards (uncached, or against a :class:`~.forwards.BlockKVCache` of the whole sequence), the token
rules they mirror, and counting.

Layout: prompts are left-padded to the longest (pad keys are masked out of attention, positions stay absolute,
so an unpadded row is computed exactly as alone), followed by ``gen_length`` mask tokens: ``x [B, P + G]``, the
generation region ``x[:, P:]`` is the same for every row.

Counting (as the block-diffusion decoder): a row's generated tokens are its generation region up to and including
its first stop id (LLaDA's ``<|eot_id|>`` / ``<|endoftext|>``, Dream's ``<|im_end|>`` / ``<|endoftext|>``); these
samplers have no EOS stop, their work follows ``gen_length``, so every row takes part in every forward
(``row_nfe`` = NFE) and finishes at the end (per-row latency = wall time).
"""
from __future__ import annotations

import functools
import time

import torch

from .common import _check_prompts, _sync, cache_kwarg, fit_context, model_context, trim_at_stop
from .forwards import BlockKVCache
from .outputs import GenerationOutput, GenerationStats


def full_attention_kwargs(model, key_valid: torch.Tensor | None, q_len: int, kv_len: int, batch: int = 1,
                          cached: bool = False) -> dict:
    """Keyword arguments for a stock model to attend to every key (``key_valid [B, kv_len]``: only those).

    A 4D mask is handed over as ``attention_mask`` (Llama and Qwen2 both take a prepared 4D mask as it is); with
    no padding and ``config.is_causal`` false (set by :func:`fastdllm_core.loading.load_model` for masked-diffusion
    releases) and no cache, no mask at all, with SDPA told that it is not causal (a cached forward always gets the
    4D mask: transformers would otherwise ask the cache for offsets the project's block cache does not keep)."""
    impl = getattr(model.config, "_attn_implementation", None) or "sdpa"
    device = model.device
    if impl == "flex_attention":
        if key_valid is None:
            if not cached and getattr(model.config, "is_causal", True) is False:
                return {"attention_mask": None}
            return {"attention_mask": _full_block_mask(q_len, kv_len, str(device))}
        from torch.nn.attention.flex_attention import create_block_mask

        valid = key_valid

        def mask_mod(b, h, q_idx, kv_idx):
            return valid[b, kv_idx]

        return {"attention_mask": create_block_mask(mask_mod, B=key_valid.shape[0], H=None, Q_LEN=q_len,
                                                    KV_LEN=kv_len, device=str(device))}
    if key_valid is None and not cached and getattr(model.config, "is_causal", True) is False:
        return {"attention_mask": None, "is_causal": False}
    if key_valid is None:
        key_valid = torch.ones((batch, kv_len), dtype=torch.bool, device=device)
    mask = key_valid[:, None, None, :].expand(key_valid.shape[0], 1, q_len, kv_len)
    if impl == "eager":
        additive = torch.zeros(mask.shape, dtype=model.dtype, device=mask.device)
        additive.masked_fill_(~mask, torch.finfo(model.dtype).min)
        return {"attention_mask": additive, "is_causal": False}
    return {"attention_mask": mask, "is_causal": False}


@functools.lru_cache(maxsize=32)
def _full_block_mask(q_len: int, kv_len: int, device: str):
    """A flex-attention ``BlockMask`` letting every query see every key (built once per shape and device)."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(lambda b, h, q, kv: kv >= 0, B=None, H=None, Q_LEN=q_len, KV_LEN=kv_len, device=device)


class Batch:
    """Left-padded prompts followed by ``gen_length`` mask tokens, and the forwards over them."""

    def __init__(self, model, prompts, gen_length: int, mask_id: int, pad_id: int | None = None,
                 profile: bool = False):
        prompts = _check_prompts(prompts)
        if not isinstance(gen_length, int) or isinstance(gen_length, bool) or gen_length <= 0:
            raise ValueError(f"gen_length must be a positive integer, got {gen_length!r}")
        fit_context(prompts, gen_length, model_context(model))  # refuses a prompt + budget beyond the context
        n = model.get_input_embeddings().num_embeddings
        if not 0 <= int(mask_id) < n:
            raise ValueError(f"mask_token_id={mask_id} is outside the embedding table of size {n}")
        self.model, self.mask_id, self.profile = model, int(mask_id), profile
        self.cache_kw = cache_kwarg(model)
        self.device = device = model.device
        self.B, self.lens = len(prompts), [len(p) for p in prompts]
        self.P = P = max(self.lens)
        self.G = gen_length
        self.T = P + gen_length
        pad = pad_id if pad_id is not None and pad_id != mask_id else (0 if mask_id != 0 else 1)
        self.x = torch.full((self.B, self.T), self.mask_id, dtype=torch.long, device=device)
        self.key_valid = None
        if min(self.lens) < P:
            self.key_valid = torch.ones((self.B, self.T), dtype=torch.bool, device=device)
        for i, p in enumerate(prompts):
            self.x[i, :P - len(p)] = pad
            self.x[i, P - len(p):P] = torch.tensor(p, device=device)
            if self.key_valid is not None:
                self.key_valid[i, :P - len(p)] = False
        self.positions = torch.arange(self.T, device=device)[None].expand(self.B, -1)
        self.nfe: dict = {}
        self.forward_time = 0.0
        self.cache: BlockKVCache | None = None

    def _count(self, kind: str) -> None:
        self.nfe[kind] = self.nfe.get(kind, 0) + 1

    def _model(self, ids, start: int, kv_len: int, cache, rows: torch.Tensor | None = None) -> torch.Tensor:
        valid = self.key_valid if self.key_valid is None or rows is None else self.key_valid[rows]
        kw = full_attention_kwargs(self.model, valid[:, :kv_len] if valid is not None else None,
                                   ids.shape[1], kv_len, ids.shape[0], cached=cache is not None)
        if self.profile:
            _sync(self.device)
            t0 = time.perf_counter()
        kw[self.cache_kw] = cache
        out = self.model(input_ids=ids, position_ids=self.positions[:ids.shape[0], start:start + ids.shape[1]],
                         use_cache=cache is not None, **kw).logits
        if self.profile:
            _sync(self.device)
            self.forward_time += time.perf_counter() - t0
        return out

    def forward(self, x: torch.Tensor | None = None, kind: str = "full", rows: torch.Tensor | None = None):
        """Logits of the whole sequence (no cache), ``[B, T, V]``; ``rows``: ``x`` holds only these rows of the
        batch (their own padding mask)."""
        self._count(kind)
        return self._model(self.x if x is None else x, 0, self.T, None, rows)

    def forward_fill_cache(self, kind: str = "full") -> torch.Tensor:
        """Logits of the whole sequence, keeping every position's keys/values in the cache."""
        self._count(kind)
        if self.cache is None:
            self.cache = BlockKVCache(self.T)
        return self._model(self.x, 0, self.T, self.cache.window(0, self.T))

    def forward_window(self, start: int, end: int, kind: str) -> torch.Tensor:
        """Logits of ``x[:, start:end]`` against the cache: its own keys/values overwrite slots ``[start, end)``,
        every other slot keeps the last full forward's (the prefix; with ``end < T`` also the suffix)."""
        self._count(kind)
        return self._model(self.x[:, start:end], start, self.T, self.cache.window(start, self.T))

    def finish(self, mode: str, stop_ids, t_start: float, *, steps: int, steps_per_block: list[int],
               host_syncs: int, row_nfe: list[int] | None = None,
               row_latency_s: list[float] | None = None) -> GenerationOutput:
        """The rows' tokens up to and including their first stop id, and the call's statistics (``row_nfe`` /
        ``row_latency_s``: per row, when rows left the batch before the end; else every forward and the wall)."""
        _sync(self.device)
        wall = time.perf_counter() - t_start
        stops = sorted({int(s) for s in (stop_ids or [])})
        gen = self.x[:, self.P:].tolist()
        sequences = [trim_at_stop(row, stops) for row in gen]
        nfe = sum(self.nfe.values())
        stats = GenerationStats(
            mode=mode, batch_size=self.B, generated_tokens=[len(s) for s in sequences], nfe=nfe,
            row_nfe=row_nfe or [nfe] * self.B, wall_time_s=wall, row_latency_s=row_latency_s or [wall] * self.B,
            steps_per_block=steps_per_block,
            nfe_breakdown=dict(self.nfe), host_syncs=host_syncs, forward_time_s=self.forward_time,
            gen_length=self.G, steps=steps)
        return GenerationOutput(sequences, stats)


def start_clock(device) -> float:
    _sync(device)
    return time.perf_counter()


def make_generator(device, seed: int | None) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(0 if seed is None else int(seed))
    return g


def num_transfer_tokens(mask_index: torch.Tensor, steps: int) -> torch.Tensor:
    """Tokens to unmask at each of ``steps`` steps, per row: the masked count split evenly, the remainder to the
    first steps (mirrors ``get_num_transfer_tokens`` of ML-GSAI/LLaDA ``generate.py``)."""
    mask_num = mask_index.sum(dim=1, keepdim=True)
    base, remainder = mask_num // steps, mask_num % steps
    out = torch.zeros(mask_num.size(0), steps, device=mask_index.device, dtype=torch.int64) + base
    for i in range(mask_num.size(0)):
        out[i, :remainder[i]] += 1
    return out


def add_gumbel_noise(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    """Gumbel-max perturbation in float64 (mirrors ``add_gumbel_noise`` of ML-GSAI/LLaDA ``generate.py``;
    temperature 0 returns ``logits`` itself)."""
    if temperature == 0:
        return logits
    logits = logits.to(torch.float64)
    noise = torch.rand(logits.shape, dtype=torch.float64, device=logits.device, generator=gen)
    gumbel_noise = (-torch.log(noise)) ** temperature
    return logits.exp() / gumbel_noise


def check_blocks(gen_length: int, block_length: int, steps: int) -> int:
    """Steps per block; the official samplers' divisibility conditions, refused with the values."""
    for name, v in (("gen_length", gen_length), ("block_length", block_length), ("steps", steps)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if gen_length % block_length:
        raise ValueError(f"block_length={block_length} must divide gen_length={gen_length}")
    num_blocks = gen_length // block_length
    if steps % num_blocks:
        raise ValueError(f"steps={steps} must be a multiple of the number of blocks gen_length/block_length="
                         f"{num_blocks}")
    return steps // num_blocks
