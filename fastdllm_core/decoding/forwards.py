"""The forwards of the block-diffusion decoder: a preallocated block KV cache and the engines over it.

:class:`_CachedEngine` forwards against the cache of the committed prefix (the decoder); :class:`_StaticEngine` does
the same with fixed shapes over a static cache, captured as CUDA graphs on a GPU (:mod:`.static`, the decoder's
``decode_path="static"``); :class:`_ReferenceEngine` recomputes the whole sequence under the inference mask at every
forward (the exact reference)."""
from __future__ import annotations

import time

import torch

from ..masks import attention_kwargs, inference_spec
from .common import _sync, cache_kwarg
from .static import capacity, static_forwards


class BlockKVCache:
    """Preallocated per-layer key/value buffers ``[B, H_kv, T, d]`` driven by a write window.

    ``update`` (called by every attention layer) writes the new keys/values at ``[write_pos, write_pos + q)``
    and returns the view ``[:visible_len]``: no concatenation and no copy of the prefix.  Forwarding a block at
    ``write_pos = P`` without advancing ``length`` is a forward "without cache update": the next forward writes
    over the same slots.
    """

    def __init__(self, max_len: int):
        self.max_len = max_len
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.length = 0
        self.write_pos = 0
        self.visible_len = 0

    def window(self, write_pos: int, visible_len: int) -> "BlockKVCache":
        self.write_pos, self.visible_len = write_pos, visible_len
        return self

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        if layer_idx == len(self.k):
            b, h, _, d = key_states.shape
            self.k.append(key_states.new_empty(b, h, self.max_len, d))
            self.v.append(value_states.new_empty(b, h, self.max_len, value_states.shape[-1]))
        q = key_states.shape[2]
        w = self.write_pos
        self.k[layer_idx][:, :, w:w + q] = key_states
        self.v[layer_idx][:, :, w:w + q] = value_states
        return self.k[layer_idx][:, :, : self.visible_len], self.v[layer_idx][:, :, : self.visible_len]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.length

    def select_rows(self, rows: torch.Tensor) -> None:
        self.k = [t.index_select(0, rows) for t in self.k]
        self.v = [t.index_select(0, rows) for t in self.v]


class _CachedEngine:
    """Forwards against a :class:`BlockKVCache` of the committed prefix."""

    keeps_rows = False  # finished rows are dropped from the batch (select_rows)

    def __init__(self, model, max_len: int, block_size: int, profile: bool):
        self.model, self.D = model, block_size
        self.cache = BlockKVCache(max_len)
        self.cache_kw = cache_kwarg(model)
        self.profile = profile
        self.forward_time = 0.0
        self.capture_time = 0.0  # seconds capturing CUDA graphs: none on the eager path

    def _run(self, ids, start, write_pos, visible, spec, keep):
        dev = ids.device
        pos = torch.arange(start, start + ids.shape[1], device=dev)[None].expand(ids.shape[0], -1)
        kw = attention_kwargs(self.model, spec, ids.shape[1], visible)
        if self.profile:
            _sync(dev)
            t0 = time.perf_counter()
        kw[self.cache_kw] = self.cache.window(write_pos, visible)
        out = self.model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=keep, **kw)
        if self.profile:
            _sync(dev)
            self.forward_time += time.perf_counter() - t0
        return out.logits

    def prefill(self, x: torch.Tensor, n: int) -> torch.Tensor:
        logits = self._run(x[:, :n], 0, 0, n, inference_spec(self.D, 0), 1)
        self.cache.length = n
        return logits[:, -1]

    def block(self, blk: torch.Tensor, keep) -> torch.Tensor:
        P = self.cache.length
        return self._run(blk, P, P, P + self.D, None, keep)

    def sub_block(self, blk: torch.Tensor, s0: int, S: int, keep) -> torch.Tensor:
        P = self.cache.length
        return self._run(blk[:, s0:s0 + S], P + s0, P + s0, P + self.D, None, keep)

    def commit(self, blk: torch.Tensor) -> torch.Tensor:
        logits = self.block(blk, 1)
        self.cache.length += self.D
        return logits[:, -1]

    def select_rows(self, rows: torch.Tensor) -> None:
        self.cache.select_rows(rows)


class _StaticEngine:
    """The cached engine's forwards with fixed shapes (:class:`~.static.StaticForwards`): every block, sub-block
    and commit forward writes its keys/values at its positions and sees the cache below the end of the current
    block, in a buffer of fixed capacity; on CUDA each shape is captured once and replayed.  The batch never shrinks
    (``keeps_rows``): the decoder retires finished rows instead of dropping them."""

    keeps_rows = True

    def __init__(self, model, max_len: int, block_size: int, batch: int, profile: bool, compiled: bool = False):
        self.model, self.D, self.profile = model, block_size, profile
        self.sf = static_forwards(model, batch, capacity(max_len, block_size), compiled=compiled)
        self.length = 0
        self.forward_time = 0.0
        self._capture0 = self.sf.capture_time
        self._last = torch.tensor([block_size - 1], device=model.device)  # the commit keeps the last logit

    @property
    def capture_time(self) -> float:
        """Seconds this call spent capturing graphs (0 once every shape is captured)."""
        return self.sf.capture_time - self._capture0

    def _timed(self, fn, *args):
        if not self.profile:
            return fn(*args)
        _sync(self.model.device)
        t0 = time.perf_counter()
        out = fn(*args)
        _sync(self.model.device)
        self.forward_time += time.perf_counter() - t0
        return out

    def _run(self, ids: torch.Tensor, start: int, keep: torch.Tensor) -> torch.Tensor:
        B, q = ids.shape
        dev = ids.device
        pos = torch.arange(start, start + q, device=dev)[None].expand(B, q)
        vis_end = torch.full((B,), self.length + self.D, dtype=torch.long, device=dev)
        return self._timed(self.sf.run, ids, pos, vis_end, keep)

    def prefill(self, x: torch.Tensor, n: int) -> torch.Tensor:
        kw = attention_kwargs(self.model, inference_spec(self.D, 0), n, n)
        logits = self._timed(lambda: self.sf.prefill(x[:, :n], kw, 1).logits)
        self.length = n
        return logits[:, -1]

    def block(self, blk: torch.Tensor, keep) -> torch.Tensor:
        return self._run(blk, self.length, keep)

    def sub_block(self, blk: torch.Tensor, s0: int, S: int, keep) -> torch.Tensor:
        return self._run(blk[:, s0:s0 + S], self.length + s0, keep)

    def commit(self, blk: torch.Tensor) -> torch.Tensor:
        logits = self._run(blk, self.length, self._last)[:, -1].clone()  # outlives the next replays
        self.length += self.D
        return logits

    def select_rows(self, rows: torch.Tensor) -> None:  # pragma: no cover - keeps_rows: never called
        raise RuntimeError("the static engine keeps its batch; retire rows instead")


class _ReferenceEngine:
    """No cache at all: every forward recomputes the whole sequence so far under the inference mask."""

    keeps_rows = False

    def __init__(self, model, block_size: int, profile: bool = False):
        self.model, self.D = model, block_size
        self.context: torch.Tensor | None = None  # committed tokens [B, P]
        self.forward_time = 0.0
        self.capture_time = 0.0

    def _full(self, blk: torch.Tensor) -> torch.Tensor:
        seq = blk if self.context is None else torch.cat([self.context, blk], dim=1)
        n = seq.shape[1]
        pos = torch.arange(n, device=seq.device)[None].expand(seq.shape[0], -1)
        kw = attention_kwargs(self.model, inference_spec(self.D, 0), n, n)
        return self.model(input_ids=seq, position_ids=pos, use_cache=False, **kw).logits[:, n - blk.shape[1]:]

    def prefill(self, x, n):
        logits = self._full(x[:, :n])
        self.context = x[:, :n]
        return logits[:, -1]

    def block(self, blk, keep):
        logits = self._full(blk)
        return logits[:, keep] if torch.is_tensor(keep) else logits

    def sub_block(self, blk, s0, S, keep):  # pragma: no cover - the reference has no sub-block cache
        raise RuntimeError("the uncached reference decoder has no sub-block cache")

    def commit(self, blk):
        logits = self._full(blk)
        self.context = blk if self.context is None else torch.cat([self.context, blk], dim=1)
        return logits[:, -1]

    def select_rows(self, rows):
        self.context = None if self.context is None else self.context.index_select(0, rows)
