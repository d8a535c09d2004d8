"""The static decode path: a preallocated KV cache and fixed-shape forwards, captured as CUDA graphs on a GPU.

Small-batch decoding on a GPU is bound by kernel launches and Python, not by reading the weights (results/gpu:
every eager forward costs 20-30 ms at the 1.5B and 7B shapes, where the weights take 1-5 ms to read).  Block
diffusion's forwards come in a few fixed shapes: a block (D queries) or a sub-block (S queries) over a cache that
grows by whole blocks.  This module serves them the way gpt-fast serves AR decoding and SGLang / vLLM capture their
decode batches:

* :class:`StaticKVCache`: per-layer key/value buffers ``[B, H_kv, L, d]`` (zeroed once) at a fixed capacity L.
  A *static* forward writes its keys/values at its position ids (a tensor, so a replay can write elsewhere) and
  attends over all L slots under a mask built on the device from ``vis_end``: key j is visible to row b iff
  ``j < vis_end[b]``.  Slots past ``vis_end`` hold zeros or stale values and are never visible.  The prompt's
  prefill is one eager forward of whatever length into the same buffers (:meth:`StaticKVCache.window`).
* :class:`StaticForwards`: one input buffer set per shape (query length, kept logits); :meth:`StaticForwards.run`
  copies the call's ids, positions, ``vis_end`` and kept positions into them and runs the shape's forward.  On CUDA
  the forward is captured once (``torch.cuda.CUDAGraph``, every shape of one model and batch sharing a memory
  pool) and replayed; elsewhere it is called as is, so the CPU tests run exactly the code a replay runs.  The
  capture time is counted apart (``capture_time``).
* :func:`static_forwards`: the object for a model, batch size and capacity, kept on the model between calls (a
  benchmark's warm-up captures, its timed repeats replay).
* The *compiled* path (``decode_path="compiled"``, AR baseline ``compiled``): the same forwards, each shape's
  compiled once by ``torch.compile`` (Inductor, static shapes) before its capture, so a replayed graph runs fused
  kernels (a decoder layer's norms, rotary embedding and activation in a few kernels, not dozens), as vLLM
  compiles then captures its decode graphs.  Compile time is counted with the capture time.  A shape torch.compile
  cannot compile runs uncompiled (same forward) with a log line.  Two *compile scopes*: 'model' compiles the whole
  forward (fewest Python calls per forward: the default where nothing is captured, a CPU) and 'layers' compiles the
  decoder layer's forward once for all layers (the default where graphs are captured, CUDA: a replay runs no Python,
  and a 28-layer model compiles in seconds where the whole forward takes about a minute per shape).  One graph can
  serve every layer because, during the call, each layer's ``self_attn.layer_idx`` reads 0 (Dynamo would guard on it
  and recompile per layer) and the cache writes the layers in call order between the graphs
  (:meth:`StaticKVCache._write_in_order`); both are restored after the call.  ``$FASTDLLM_COMPILE_SCOPE`` overrides.

Forward hooks (the benchmark's :class:`~fastdllm_core.bench.hooks.ForcedAcceptance`) do not run inside a replayed
graph: the captured function is ``model.forward``, and the model's forward hooks are called on the output after
every run (:func:`_run_forward_hooks`).

Exactness: the masked slots contribute exact zeros, but attending over L keys instead of the visible ones can
change float32 round-off (a different reduction length), so the static path equals the eager one token for token
(tests/test_static_decoding.py, float64 and float32 on CPU), not bit for bit.
"""
from __future__ import annotations

import functools
import logging
import os
import time
from collections import OrderedDict

import torch

from .common import cache_kwarg

log = logging.getLogger(__name__)
KEPT = 2  # StaticForwards kept per model (batch size x capacity); older ones are dropped (graph memory freed)
RECOMPILE_LIMIT = 64  # compiled path: every shape, batch size and capacity is one compiled graph of one function
COMPILE_SCOPES = ("model", "layers")  # compiled path: the whole forward, or each decoder layer (module docstring)


class GraphCaptureOOMError(RuntimeError):
    """The GPU ran out of memory while capturing a decode graph (names the shape and the memory in use)."""


def static_unsupported(model) -> str | None:
    """Why ``model`` cannot be served by the static path (the decoders then fall back to the eager path with a log
    line), or None."""
    model = getattr(model, "module", model)
    impl = getattr(model.config, "_attn_implementation", None) or "sdpa"
    if impl not in ("sdpa", "eager"):
        return f"attention implementation {impl!r} (the static path builds dense masks: sdpa or eager)"
    cfg = model.config
    for key in ("num_hidden_layers", "num_key_value_heads", "hidden_size", "num_attention_heads"):
        if not isinstance(getattr(cfg, key, None), int):
            return f"model config has no integer {key!r} (not a stock decoder-only transformers model)"
    if getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", False):
        return "sliding-window attention (the static mask covers full attention only)"
    return None


class StaticKVCache:
    """Per-layer key/value buffers at a fixed capacity, driven either by an eager write window (prefill) or by
    position tensors (static forwards); the cache object a stock transformers model takes by keyword."""

    def __init__(self, model, batch: int, max_len: int):
        cfg = model.config
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        shape = (batch, cfg.num_key_value_heads, max_len, head_dim)
        dev, dt = model.device, model.dtype
        self.k = [torch.zeros(shape, device=dev, dtype=dt) for _ in range(cfg.num_hidden_layers)]
        self.v = [torch.zeros(shape, device=dev, dtype=dt) for _ in range(cfg.num_hidden_layers)]
        self.max_len, self.batch = max_len, batch
        self.write_pos, self.visible_len = 0, 0
        self.positions: torch.Tensor | None = None  # [B, q]: static mode
        self.in_order, self.cursor = False, 0  # static mode, 'layers' compile scope: layers written in call order

    def window(self, write_pos: int, visible_len: int) -> "StaticKVCache":
        """Eager mode: write at ``[write_pos, write_pos + q)``, attend to ``[:visible_len]`` (the prefill)."""
        self.positions, self.write_pos, self.visible_len = None, write_pos, visible_len
        return self

    def static(self, positions: torch.Tensor) -> "StaticKVCache":
        """Static mode: write at ``positions [B, q]``, attend to every slot (the mask hides the invisible ones)."""
        self.positions = positions
        return self

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        if self.positions is None:
            k, v = self.k[layer_idx], self.v[layer_idx]
            w, q = self.write_pos, key_states.shape[2]
            k[:, :, w:w + q] = key_states
            v[:, :, w:w + q] = value_states
            return k[:, :, : self.visible_len], v[:, :, : self.visible_len]
        if self.in_order:
            return self._write_in_order(key_states, value_states)
        return self._write(key_states, value_states, layer_idx)

    def _write(self, key_states, value_states, layer_idx: int):
        """Static mode: the keys/values written at ``positions``; every slot of the layer's buffers returned."""
        k, v = self.k[layer_idx], self.v[layer_idx]
        b, h, q, d = key_states.shape
        idx = self.positions[:, None, :, None].expand(b, h, q, d)
        k.scatter_(2, idx, key_states)
        v.scatter_(2, idx.expand(b, h, q, value_states.shape[-1]), value_states)
        return k, v

    @torch.compiler.disable
    def _write_in_order(self, key_states, value_states):
        """The 'layers' compile scope: the write of the next layer in call order (``cursor``), run between the
        compiled graphs, so that no graph depends on which layer it serves."""
        i, self.cursor = self.cursor, self.cursor + 1
        return self._write(key_states, value_states, i)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.visible_len


class _Shape:
    """The input buffers of one forward shape and, on CUDA, its captured graph."""

    def __init__(self, batch: int, q: int, n_keep: int, device):
        z = dict(dtype=torch.long, device=device)
        self.ids, self.pos = torch.zeros(batch, q, **z), torch.zeros(batch, q, **z)
        self.vis_end, self.keep = torch.ones(batch, **z), torch.zeros(n_keep, **z)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.out: torch.Tensor | None = None
        self.fn = StaticForwards._forward  # the forward run (and captured): compiled on the compiled path


class StaticForwards:
    """The fixed-shape forwards of one model at one batch size over one :class:`StaticKVCache` of capacity
    ``max_len`` (see the module docstring); ``compiled``: each shape's forward compiled by torch.compile first."""

    def __init__(self, model, batch: int, max_len: int, capture: bool | None = None, compiled: bool = False,
                 compile_scope: str | None = None):
        self.model, self.batch, self.max_len, self.compiled = model, batch, max_len, compiled
        self.device = model.device
        self.capture = self.device.type == "cuda" if capture is None else capture
        self.compile_scope, self.layers = _scope(model, compile_scope, self.capture) if compiled else (None, None)
        self.cache = StaticKVCache(model, batch, max_len)
        self.cache_kw = cache_kwarg(model)
        self.kv_pos = torch.arange(max_len, device=self.device)
        self.shapes: dict[tuple[int, int], _Shape] = {}
        self.capture_time = 0.0  # seconds spent compiling and capturing (warm-up forwards included)
        self.replays = 0
        self.pool = None

    def prefill(self, ids: torch.Tensor, attention_kwargs: dict, keep=1):
        """One eager forward of ``ids`` (positions 0..n-1) written into the cache at 0..n-1 (``keep`` as the model's
        ``logits_to_keep``); its output (hooks run)."""
        n = ids.shape[1]
        pos = torch.arange(n, device=ids.device)[None].expand(ids.shape[0], -1)
        kw = dict(attention_kwargs)
        kw[self.cache_kw] = self.cache.window(0, n)
        return self.model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=keep, **kw)

    def run(self, ids: torch.Tensor, pos: torch.Tensor, vis_end: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Logits ``[B, len(keep), V]`` of ``ids [B, q]`` at positions ``pos [B, q]`` (their keys/values written
        there), every row seeing the cache slots below its ``vis_end``; ``keep``: the query positions whose logits
        are computed.  On CUDA the result is the graph's output buffer, overwritten by the shape's next run."""
        key = (ids.shape[1], keep.numel())
        sh = self.shapes.get(key)
        new = sh is None
        if new:
            sh = self.shapes[key] = _Shape(self.batch, *key, self.device)
        sh.ids.copy_(ids)
        sh.pos.copy_(pos)
        sh.vis_end.copy_(vis_end)
        sh.keep.copy_(keep)
        if new and self.compiled:
            self._compile(sh)
        if new and self.capture:
            self._capture(sh)
        if sh.graph is not None:
            sh.graph.replay()
            self.replays += 1
            out = sh.out
        else:
            out = sh.fn(self, sh)
        return _run_forward_hooks(self.model, dict(input_ids=sh.ids, logits_to_keep=sh.keep), out)

    def _forward(self, sh: _Shape) -> torch.Tensor:
        """The captured function: the model's own forward (no hooks) on the shape's buffers."""
        visible = self.kv_pos[None, :] < sh.vis_end[:, None]  # [B, L]
        mask = visible[:, None, None, :].expand(-1, 1, sh.ids.shape[1], -1)
        if getattr(self.model.config, "_attn_implementation", "sdpa") == "eager":
            zero = torch.zeros((), dtype=self.model.dtype, device=self.device)
            mask = torch.where(mask, zero, torch.finfo(self.model.dtype).min)
        kw = {self.cache_kw: self.cache.static(sh.pos), "attention_mask": {"full_attention": mask}}
        if mask.dtype == torch.bool:
            kw["is_causal"] = False
        return self.model.forward(input_ids=sh.ids, position_ids=sh.pos, use_cache=True, logits_to_keep=sh.keep,
                                  **kw).logits

    def _forward_layers(self, sh: _Shape) -> torch.Tensor:
        """The forward with each decoder layer's forward compiled (the 'layers' scope): one compiled graph per shape
        serves every layer, because during the call each layer's ``self_attn.layer_idx`` reads 0 (Dynamo guards on
        it) and the cache writes the layers in call order between the graphs; both are restored afterwards."""
        fn = _compiled_layer_forward(type(self.layers[0]))
        idx = [layer.self_attn.layer_idx for layer in self.layers]
        self.cache.in_order, self.cache.cursor = True, 0
        try:
            for layer in self.layers:
                layer.forward, layer.self_attn.layer_idx = functools.partial(fn, layer), 0
            out = StaticForwards._forward(self, sh)
        finally:
            self.cache.in_order = False
            for layer, i in zip(self.layers, idx):
                layer.__dict__.pop("forward", None)
                layer.self_attn.layer_idx = i
        if self.cache.cursor != len(self.layers):
            raise RuntimeError(f"static decode: {self.cache.cursor} cache writes for {len(self.layers)} layers "
                               "(a model whose layers do not write the cache once each, in order)")
        return out

    def _compile(self, sh: _Shape) -> None:
        """Compile the shape's forward (one run of the compiled function, which writes the keys/values the real run
        writes); a failure of torch.compile leaves the shape on the plain forward (same result) with a log line."""
        t0 = time.perf_counter()
        try:
            compiled = _compiled_forward() if self.compile_scope == "model" else StaticForwards._forward_layers
            compiled(self, sh)
            sh.fn = compiled
        except torch.OutOfMemoryError as e:
            raise self._oom(sh, "compiling") from e
        except torch._dynamo.exc.TorchDynamoException as e:
            log.warning("static decode: torch.compile of shape %s failed (%s); running it uncompiled",
                        (self.batch, sh.ids.shape[1], sh.keep.numel()), e)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.capture_time += time.perf_counter() - t0

    def _oom(self, sh: _Shape, doing: str) -> GraphCaptureOOMError:
        used = torch.cuda.memory_allocated(self.device) / 2 ** 30 if self.device.type == "cuda" else 0.0
        return GraphCaptureOOMError(
            f"out of GPU memory while {doing} the decode graph for batch {self.batch}, {sh.ids.shape[1]} "
            f"queries, {sh.keep.numel()} kept logits, cache capacity {self.max_len} ({used:.1f} GiB allocated): "
            "lower the batch size or max_new_tokens, or use decode_path='eager'")

    def _capture(self, sh: _Shape) -> None:
        """Capture the shape's forward as a CUDA graph (two warm-up runs on a side stream first, as PyTorch asks).
        The warm-up runs write the same keys/values a real run writes, so capturing mid-decode is harmless.  Out
        of memory is :class:`GraphCaptureOOMError`; any other capture failure leaves the shape uncaptured (run as
        a plain call, same result) with a log line."""
        t0 = time.perf_counter()
        torch.cuda.synchronize(self.device)
        try:
            stream = torch.cuda.Stream(self.device)
            stream.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(stream):
                for _ in range(2):
                    sh.fn(self, sh)
            torch.cuda.current_stream(self.device).wait_stream(stream)
            self.pool = self.pool or torch.cuda.graph_pool_handle()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=self.pool):
                sh.out = sh.fn(self, sh)
            sh.graph = graph
        except torch.cuda.OutOfMemoryError as e:
            raise self._oom(sh, "capturing") from e
        except RuntimeError as e:  # an op that cannot be captured: the plain call computes the same
            log.warning("static decode: capture of shape %s failed (%s); running it uncaptured",
                        (self.batch, sh.ids.shape[1], sh.keep.numel()), e)
            sh.graph, sh.out = None, None
        torch.cuda.synchronize(self.device)
        self.capture_time += time.perf_counter() - t0


def _scope(model, scope: str | None, capture: bool) -> tuple[str, list | None]:
    """(compile scope, the decoder layers it compiles one by one or None): ``scope`` (else $FASTDLLM_COMPILE_SCOPE,
    else 'layers' where graphs are captured and 'model' where not; see the module docstring)."""
    scope = scope or os.environ.get("FASTDLLM_COMPILE_SCOPE") or ("layers" if capture else "model")
    if scope not in COMPILE_SCOPES:
        raise ValueError(f"compile scope {scope!r}: choose from {list(COMPILE_SCOPES)}")
    if scope == "model":
        return scope, None
    inner = getattr(getattr(model, "module", model), "model", None)
    layers = list(getattr(inner, "layers", None) or [])
    stock = layers and all(type(x) is type(layers[0]) and "forward" not in x.__dict__
                           and isinstance(getattr(getattr(x, "self_attn", None), "layer_idx", None), int)
                           for x in layers)
    if not stock:
        log.warning("static decode: no stock decoder layers to compile one by one (model.model.layers, each with "
                    "self_attn.layer_idx and its own forward); compiling the whole forward")
        return "model", None
    return scope, layers


@functools.cache
def _compiled_layer_forward(cls):
    """``cls.forward`` (a decoder layer class) under torch.compile (static shapes), made once per class."""
    import torch._dynamo

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    return torch.compile(cls.forward, dynamic=False)


@functools.cache
def _compiled_forward():
    """``StaticForwards._forward`` under torch.compile (static shapes, Inductor), made once: its compiled graphs
    are cached per shape on the function's code, so the recompile limit is raised to :data:`RECOMPILE_LIMIT`
    (past it torch runs the plain forward: slower, the same result)."""
    import torch._dynamo

    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
    return torch.compile(StaticForwards._forward, dynamic=False)


def _run_forward_hooks(model, kwargs: dict, logits: torch.Tensor) -> torch.Tensor:
    """The model's forward hooks called on ``logits`` (as ``model(...)`` would after ``forward``); the logits they
    return or modified in place."""
    hooks = getattr(model, "_forward_hooks", None)
    if not hooks:
        return logits
    from transformers.modeling_outputs import CausalLMOutputWithPast

    out = CausalLMOutputWithPast(logits=logits)
    with_kwargs = getattr(model, "_forward_hooks_with_kwargs", {})
    for hid, hook in list(hooks.items()):
        res = hook(model, (), kwargs, out) if with_kwargs.get(hid) else hook(model, (), out)
        out = res if res is not None else out
    return out.logits


def capacity(total_len: int, block_size: int) -> int:
    """The cache capacity for a decode of ``total_len`` positions: the next power of two (at least one block),
    rounded up to whole blocks, so that calls of similar length share one cache and its graphs."""
    n = max(int(total_len), int(block_size), 1)
    cap = 1 << (n - 1).bit_length()
    return -(-cap // block_size) * block_size


def last_compile_scope(model) -> str:
    """The compile scope of the compiled path's most recent forwards on ``model`` ('' if none ran): what a
    benchmark row records (the scope asked for, or 'model' where 'layers' fell back)."""
    kept = [sf for sf in model.__dict__.get("_fastdllm_static", {}).values() if sf.compiled]
    return kept[-1].compile_scope if kept else ""


def static_forwards(model, batch: int, max_len: int, compiled: bool = False) -> StaticForwards:
    """The :class:`StaticForwards` of ``model`` for ``batch`` rows and capacity ``max_len`` (``compiled``: on the
    compiled path), kept on the model (keyed also by device, dtype and the weights' address: a moved model gets new
    graphs); the :data:`KEPT` most recently used are kept."""
    reg: OrderedDict = model.__dict__.setdefault("_fastdllm_static", OrderedDict())
    first = next(model.parameters())
    scope = os.environ.get("FASTDLLM_COMPILE_SCOPE") if compiled else None
    key = (batch, max_len, compiled, scope, str(model.device), str(model.dtype), first.data_ptr())
    sf = reg.pop(key, None)
    if sf is None:
        while len(reg) >= KEPT:
            reg.popitem(last=False)
        sf = StaticForwards(model, batch, max_len, compiled=compiled)
    reg[key] = sf
    return sf
