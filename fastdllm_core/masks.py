"""Block-diffusion attention masks, defined once.

Every mask in this project comes from one ``mask_mod(b, h, q_idx, kv_idx)`` function (the flex-attention
signature).  The same function is evaluated on broadcast index tensors to build a dense boolean mask for SDPA /
eager attention, and handed to :func:`torch.nn.attention.flex_attention.create_block_mask` for flex attention.
``True`` means "the query may attend to the key".

Training mask (paper, appendix "Attention Mask Design"), over the concatenation ``[x_t | x_0]`` of length 2L with
block size D; for an index i, ``half(i) = i >= L`` (0 = noised x_t, 1 = clean x_0) and ``blk(i) = (i mod L) // D``:

* M_BD  (block-diagonal):        both in x_t and ``blk(q) == blk(kv)``;
* M_OBC (offset block-causal):   q in x_t, kv in x_0 and ``blk(kv) <  blk(q)``;
* M_BC  (block-causal):          both in x_0 and ``blk(kv) <= blk(q)``.

Inference mask: the queries are ``Q`` tokens at absolute positions ``C .. C+Q-1`` after a cache of ``C`` tokens, and
a key is visible iff ``blk(kv) <= blk(q)``: bidirectional inside a block, causal across blocks.  With ``C`` a
multiple of D and ``Q == D`` (one block decoded against its prefix cache) every key is visible.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch

MaskMod = Callable[..., torch.Tensor]


def _check(name: str, value: int, minimum: int = 1) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def training_mask_mod(seq_len: int, block_size: int) -> MaskMod:
    """The 2L x 2L training mask over ``[x_t | x_0]`` as a flex-attention ``mask_mod``."""
    _check("seq_len (L)", seq_len)
    _check("block_size (D)", block_size)
    if seq_len % block_size:
        raise ValueError(f"block_size D={block_size} must divide the sequence length L={seq_len}")
    L, D = seq_len, block_size

    def mask_mod(b, h, q_idx, kv_idx):
        q_clean = q_idx >= L
        kv_clean = kv_idx >= L
        q_blk = (q_idx % L) // D
        kv_blk = (kv_idx % L) // D
        m_bd = ~q_clean & ~kv_clean & (q_blk == kv_blk)
        m_obc = ~q_clean & kv_clean & (kv_blk < q_blk)
        m_bc = q_clean & kv_clean & (kv_blk <= q_blk)
        return m_bd | m_obc | m_bc

    return mask_mod


def inference_mask_mod(block_size: int, cache_len: int = 0) -> MaskMod:
    """Queries at absolute positions ``cache_len + q_idx``; keys at absolute positions ``kv_idx``."""
    _check("block_size (D)", block_size)
    _check("cache_len", cache_len, 0)
    D, C = block_size, cache_len

    def mask_mod(b, h, q_idx, kv_idx):
        return (kv_idx // D) <= ((q_idx + C) // D)

    return mask_mod


def dense_mask(mask_mod: MaskMod, q_len: int, kv_len: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """Evaluate ``mask_mod`` on every (q, kv) pair: a ``[q_len, kv_len]`` boolean tensor."""
    q = torch.arange(q_len, device=device)[:, None]
    kv = torch.arange(kv_len, device=device)[None, :]
    zero = torch.zeros((), dtype=torch.long, device=device)
    return mask_mod(zero, zero, q, kv).expand(q_len, kv_len).contiguous()


@dataclass(frozen=True)
class MaskSpec:
    """A hashable description of a mask, so builders can cache per (spec, shape, device)."""

    kind: str  # "train" or "infer"
    block_size: int
    seq_len: int = 0  # L, for "train"
    cache_len: int = 0  # C, for "infer"

    def mask_mod(self) -> MaskMod:
        if self.kind == "train":
            return training_mask_mod(self.seq_len, self.block_size)
        if self.kind == "infer":
            return inference_mask_mod(self.block_size, self.cache_len)
        raise ValueError(f"unknown mask kind {self.kind!r} (expected 'train' or 'infer')")


def training_spec(seq_len: int, block_size: int) -> MaskSpec:
    training_mask_mod(seq_len, block_size)  # validates
    return MaskSpec("train", block_size, seq_len=seq_len)


def inference_spec(block_size: int, cache_len: int = 0) -> MaskSpec:
    inference_mask_mod(block_size, cache_len)  # validates
    return MaskSpec("infer", block_size, cache_len=cache_len)


@functools.lru_cache(maxsize=64)
def dense_mask_for(spec: MaskSpec, q_len: int, kv_len: int, device: str = "cpu") -> torch.Tensor:
    """Cached dense boolean mask ``[q_len, kv_len]`` for ``spec``."""
    return dense_mask(spec.mask_mod(), q_len, kv_len, device)


@functools.lru_cache(maxsize=64)
def block_mask_for(spec: MaskSpec, q_len: int, kv_len: int, device: str = "cpu"):
    """Cached flex-attention ``BlockMask`` for ``spec`` (built once per spec, shape and device, then reused)."""
    from torch.nn.attention.flex_attention import create_block_mask

    return create_block_mask(spec.mask_mod(), B=None, H=None, Q_LEN=q_len, KV_LEN=kv_len, device=device)


def attention_kwargs(model, spec: MaskSpec | None, q_len: int, kv_len: int) -> dict:
    """Keyword arguments that make a stock ``transformers`` decoder attend with ``spec``.

    ``spec=None`` means every key is visible (a block decoded against its prefix cache).  The mask is handed
    over as ``attention_mask={"full_attention": mask}``, which the Qwen2 / Llama model classes use as-is
    instead of building their own causal mask.
    """
    model = getattr(model, "module", model)  # DDP wrappers keep the HF model in .module
    impl = getattr(model.config, "_attn_implementation", None) or "sdpa"
    device = str(model.device)
    if impl == "flex_attention":
        mask = None if spec is None else block_mask_for(spec, q_len, kv_len, device)
        return {"attention_mask": {"full_attention": mask}}
    if spec is None:
        # no mask at all: sdpa must be told explicitly that it is not causal
        return {"attention_mask": {"full_attention": None}, "is_causal": False}
    mask = dense_mask_for(spec, q_len, kv_len, device)
    if impl == "eager":
        additive = torch.zeros(mask.shape, dtype=model.dtype, device=mask.device)
        additive.masked_fill_(~mask, torch.finfo(model.dtype).min)
        return {"attention_mask": {"full_attention": additive[None, None]}}
    return {"attention_mask": {"full_attention": mask[None, None]}, "is_causal": False}

