"""Block-diffusion decoding (the paper's "Inference Pipeline") and the AR baseline, measured the same way.

Sequence layout: every row starts at position 0; prompts are right-padded with the mask token, so block ``k``
covers absolute positions ``[kD, (k+1)D)`` in every row and the whole batch moves block by block together.

Per block:

1. Positions of the block that are prompt tokens are fixed; positions at or after a row's prompt length and
   before its budget end (prompt length + ``max_new_tokens``) are *decodable* and start as [MASK].
2. If the block's first position is decodable, it is filled at once with the greedy (or sampled) token of the
   previous forward's last logit (the prefill or the previous block's commit).  That forward "yields" the token.
3. Sub-blocks (size S) are decoded left to right.  Each step forwards the block against the prefix cache
   (bidirectional inside the block, every cached key visible), shifts the logits (the prediction for position j
   is the logit at j-1; for j = block start it is the previous forward's last logit) and unmasks, per row, every
   candidate whose confidence exceeds ``threshold`` (strictly), and always at least the most confident one.
   Candidates are masked decodable positions of the current sub-block that lie before the row's first unmasked
   EOS.  A step ends with one device-to-host copy that says which sub-blocks still have candidates.
4. When no candidate is left, rows that are finished (EOS with everything before it decoded, or budget used) are
   dropped from the batch; the remaining rows' block is forwarded once more with a KV-cache write (the commit),
   whose last logit gives the first token of the next block.

Sub-block cache (``use_sub_block_cache``, the paper's DualCache reuse): the first step of every sub-block
forwards the whole block (a *refresh*) and keeps the keys/values of every block position, and the logit that
predicts the sub-block's first position.  Every later step of that sub-block forwards only its S tokens: their
keys/values overwrite the sub-block's own slots, while the other sub-blocks' slots keep the values of the refresh,
which were computed against the sub-block's tokens as they were at the refresh (stale once tokens of the sub-block
have been unmasked since).  Predictions for positions s0+1 .. s0+S-1 come from the sub-block's own shifted
logits; the first position s0, while still masked, keeps the refresh's logit.  Refreshing exactly once per
sub-block (the reference implementation also refreshes while the first position is masked) makes a row's result
independent of the batch it is decoded in.  It is an approximation of the uncached decoder; ``fastdllm bench``
measures its token agreement.

Context: a prompt whose length plus ``max_new_tokens`` exceeds the model's context
(``config.max_position_embeddings``) is refused (:class:`ContextError`, naming the prompt and both lengths);
callers truncate from the left only when asked to (:func:`fit_context`).

Exactness: with ``use_sub_block_cache=False`` the decoder equals :func:`bd_generate_reference`, which recomputes
the whole sequence under the inference mask at every step, and with ``block_size=1`` it equals Hugging Face
greedy ``generate`` (tests/test_decoding.py, float64).
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

import torch

from .masks import attention_kwargs, inference_spec


# ----------------------------------------------------------------------------------------------------- config
@dataclass
class DecodeConfig:
    block_size: int = 32
    sub_block_size: int = 8
    threshold: float = 0.9
    use_sub_block_cache: bool = False
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def validate(self) -> "DecodeConfig":
        for name in ("block_size", "sub_block_size", "max_new_tokens"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.block_size % self.sub_block_size:
            raise ValueError(
                f"sub_block_size={self.sub_block_size} must divide block_size={self.block_size}"
            )
        if not (0.0 < float(self.threshold) <= 1.0):
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        return self


@dataclass
class GenerationStats:
    """Statistics of one ``generate`` call (tokens are counted up to and including EOS, never padding)."""

    mode: str
    batch_size: int
    generated_tokens: list[int]
    nfe: int  # forwards of the model (a batched forward counts once)
    # forwards each row took part in: a row waiting in the batch (its sub-block done, or past its EOS) is not
    # counted, so tokens per forward means the same at every batch size
    row_nfe: list[int]
    wall_time_s: float  # synchronised wall time of the whole call (model load excluded)
    row_latency_s: list[float]  # time from the call's start until the row was finished
    steps_per_block: list[int] = field(default_factory=list)  # decode steps (commit excluded) per block
    nfe_breakdown: dict = field(default_factory=dict)
    host_syncs: int = 0
    forward_time_s: float = 0.0  # time spent inside model forwards (synchronised; only when profile=True)

    @property
    def total_tokens(self) -> int:
        return int(sum(self.generated_tokens))

    @property
    def tokens_per_forward(self) -> float:
        n = sum(self.row_nfe)
        return self.total_tokens / n if n else float("nan")

    @property
    def tokens_per_second(self) -> float:
        return self.total_tokens / self.wall_time_s if self.wall_time_s > 0 else float("nan")

    @classmethod
    def combine(cls, parts: list["GenerationStats"]) -> "GenerationStats":
        """The statistics of consecutive calls (e.g. the batches of a prompt set) as one: rows concatenated,
        forwards and wall times summed."""
        if len(parts) == 1:
            return parts[0]
        breakdown: dict = {}
        for s in parts:
            for k, v in s.nfe_breakdown.items():
                breakdown[k] = breakdown.get(k, 0) + v
        return cls(mode=parts[0].mode, batch_size=parts[0].batch_size,
                   generated_tokens=[t for s in parts for t in s.generated_tokens], nfe=sum(s.nfe for s in parts),
                   row_nfe=[n for s in parts for n in s.row_nfe], wall_time_s=sum(s.wall_time_s for s in parts),
                   row_latency_s=[x for s in parts for x in s.row_latency_s],
                   steps_per_block=[x for s in parts for x in s.steps_per_block], nfe_breakdown=breakdown,
                   host_syncs=sum(s.host_syncs for s in parts),
                   forward_time_s=sum(s.forward_time_s for s in parts))

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(total_tokens=self.total_tokens, tokens_per_forward=self.tokens_per_forward,
                 tokens_per_second=self.tokens_per_second)
        return d


@dataclass
class GenerationOutput:
    sequences: list[list[int]]  # generated ids per row, up to and including the first stop id
    stats: GenerationStats


# ----------------------------------------------------------------------------------------------------- helpers
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


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
        raise ValueError("the model has no mask token: load it with fastdllm_core.model.load_model "
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


# ----------------------------------------------------------------------------------------------------- engines
class _CachedEngine:
    """Forwards against a :class:`BlockKVCache` of the committed prefix."""

    def __init__(self, model, max_len: int, block_size: int, profile: bool):
        self.model, self.D = model, block_size
        self.cache = BlockKVCache(max_len)
        self.profile = profile
        self.forward_time = 0.0

    def _run(self, ids, start, write_pos, visible, spec, keep):
        dev = ids.device
        pos = torch.arange(start, start + ids.shape[1], device=dev)[None].expand(ids.shape[0], -1)
        kw = attention_kwargs(self.model, spec, ids.shape[1], visible)
        if self.profile:
            _sync(dev)
            t0 = time.perf_counter()
        out = self.model(input_ids=ids, position_ids=pos, past_key_values=self.cache.window(write_pos, visible),
                         use_cache=True, logits_to_keep=keep, **kw)
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


class _ReferenceEngine:
    """No cache at all: every forward recomputes the whole sequence so far under the inference mask."""

    def __init__(self, model, block_size: int, profile: bool = False):
        self.model, self.D = model, block_size
        self.context: torch.Tensor | None = None  # committed tokens [B, P]
        self.forward_time = 0.0

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


# ----------------------------------------------------------------------------------------------------- decoder
@torch.no_grad()
def _bd_decode(model, prompts, mask_token_id, stop_token_ids, cfg: DecodeConfig, engine_kind: str,
               profile: bool = False) -> GenerationOutput:
    cfg.validate()
    prompts = _check_prompts(prompts)
    fit_context(prompts, cfg.max_new_tokens, model_context(model))  # refuses a prompt + budget beyond the context
    mask_id = _check_mask_token(model, mask_token_id)
    stop_ids = sorted({int(s) for s in (stop_token_ids or [])})
    if engine_kind == "reference" and cfg.use_sub_block_cache:
        raise ValueError("the uncached reference decoder cannot use the sub-block cache")
    device = model.device
    D, S = cfg.block_size, cfg.sub_block_size
    n_sub = D // S
    B = len(prompts)
    lens = [len(p) for p in prompts]
    limits = [n + cfg.max_new_tokens for n in lens]
    T = math.ceil(max(limits) / D) * D
    gen = None
    if cfg.temperature > 0:
        gen = torch.Generator(device=device)
        gen.manual_seed(0 if cfg.seed is None else cfg.seed)

    x_all = torch.full((B, T), mask_id, dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        x_all[i, : len(p)] = torch.tensor(p, device=device)
    stop_t = torch.tensor(stop_ids or [-1], device=device)
    idx_D = torch.arange(D, device=device)

    _sync(device)
    t_start = time.perf_counter()
    engine = (_CachedEngine(model, T, D, profile) if engine_kind == "cached"
              else _ReferenceEngine(model, D, profile))
    rows = list(range(B))  # original indices of the active rows
    x = x_all
    lens_t = torch.tensor(lens, device=device)
    limits_t = torch.tensor(limits, device=device)
    row_part = torch.zeros(B, dtype=torch.long, device=device)  # forwards each row took part in
    rows_t = torch.arange(B, device=device)  # original indices of the active rows, on the device
    row_latency = [0.0] * B
    steps_per_block: list[int] = []
    nfe = {"prefill": 0, "block": 0, "sub_block": 0, "commit": 0}
    syncs = 0

    def count_all(kind):  # a forward every active row takes part in (prefill, commit)
        nfe[kind] += 1
        row_part.index_add_(0, rows_t, torch.ones_like(rows_t))

    prefill_len = (min(lens) // D) * D
    last_logits = None
    if prefill_len:
        last_logits = engine.prefill(x, prefill_len)
        count_all("prefill")
    b0 = prefill_len
    while rows and b0 < T:
        blk = x[:, b0:b0 + D].clone()
        pos = b0 + idx_D
        dec = (pos[None] >= lens_t[:, None]) & (pos[None] < limits_t[:, None])  # decodable positions [B, D]
        if last_logits is not None:  # first position: the previous forward's prediction
            tok0, _ = _choose(last_logits, cfg, gen, mask_id)
            fill0 = dec[:, 0] & (blk[:, 0] == mask_id)
            blk[:, 0] = torch.where(fill0, tok0, blk[:, 0])
        steps = 0
        refresh_window, head_logits = -1, None  # sub-block last refreshed by a whole-block forward
        while True:
            masked = blk == mask_id
            is_stop = torch.isin(blk, stop_t) & dec & ~masked
            first_stop = torch.where(is_stop, idx_D, D).amin(dim=1)
            cand_all = masked & dec & (idx_D[None] < first_stop[:, None])
            # one device-to-host copy per step: which sub-blocks still have work, and which rows are finished
            # (a stop id with everything before it decoded, or the budget used up by this block)
            done = ~cand_all.any(dim=1) & ((first_stop < D) | (limits_t <= b0 + D))
            host = torch.cat([cand_all.view(-1, n_sub, S).any(dim=2).any(dim=0), done]).tolist()
            syncs += 1
            done_host = host[n_sub:]
            if not any(host[:n_sub]):
                break
            w = host.index(True)
            s0 = w * S
            if cfg.use_sub_block_cache and refresh_window == w:
                keep = torch.arange(0, S - 1, device=device)  # logits of s0 .. s0+S-2 -> predict s0+1 .. s0+S-1
                logits = engine.sub_block(blk, s0, S, keep)
                logits = torch.cat([head_logits[:, None], logits], dim=1)  # s0 keeps the refresh's prediction
                nfe["sub_block"] += 1
            else:
                lo = max(s0 - 1, 0)
                keep = torch.arange(lo, s0 + S - 1, device=device)
                logits = engine.block(blk, keep)
                if s0 == 0:  # the prediction for the block's first position is the previous forward's
                    first = last_logits if last_logits is not None else logits[:, 0]
                    logits = torch.cat([first[:, None], logits], dim=1)
                refresh_window, head_logits = w, logits[:, 0]
                nfe["block"] += 1
            steps += 1
            tok, conf = _choose(logits, cfg, gen, mask_id)  # [B, S]
            c = cand_all[:, s0:s0 + S]  # candidates of the current sub-block
            row_part.index_add_(0, rows_t, c.any(dim=1).long())
            conf = torch.where(c, conf, -1.0)  # _choose already works in fp32 (fp64 for fp64 models)
            best = conf.argmax(dim=1)
            force = torch.zeros_like(c).scatter_(1, best[:, None], True) & c.any(dim=1, keepdim=True)
            unmask = (c & (conf > cfg.threshold)) | force
            blk[:, s0:s0 + S] = torch.where(unmask, tok, blk[:, s0:s0 + S])
        steps_per_block.append(steps)
        x[:, b0:b0 + D] = blk
        now = time.perf_counter()
        if any(done_host):
            for j, d in enumerate(done_host):
                if d:
                    r = rows[j]
                    x_all[r] = x[j]
                    row_latency[r] = now - t_start
            keep_rows = [j for j, d in enumerate(done_host) if not d]
            rows = [rows[j] for j in keep_rows]
            if not rows:
                break
            sel = torch.tensor(keep_rows, device=device)
            rows_t = rows_t.index_select(0, sel)
            x, blk = x.index_select(0, sel), blk.index_select(0, sel)
            lens_t, limits_t = lens_t.index_select(0, sel), limits_t.index_select(0, sel)
            engine.select_rows(sel)
        last_logits = engine.commit(blk)
        count_all("commit")
        b0 += D
    for j, r in enumerate(rows):  # rows still active when the loop ran out of blocks
        x_all[r] = x[j]
    _sync(device)
    wall = time.perf_counter() - t_start
    for j, r in enumerate(rows):
        row_latency[r] = wall

    out_host = x_all.tolist()
    sequences = []
    for i in range(B):
        seq = out_host[i][lens[i]:limits[i]]
        for k, t in enumerate(seq):
            if t in stop_ids:
                seq = seq[: k + 1]
                break
        if mask_id in seq:  # cannot happen: every decodable position before the first stop is decoded
            raise RuntimeError(f"row {i} still holds mask tokens after decoding")
        sequences.append(seq)
    stats = GenerationStats(
        mode="bd" if engine_kind == "cached" else "bd_reference", batch_size=B,
        generated_tokens=[len(s) for s in sequences], nfe=sum(nfe.values()), row_nfe=row_part.tolist(),
        wall_time_s=wall,
        row_latency_s=row_latency, steps_per_block=steps_per_block, nfe_breakdown=nfe, host_syncs=syncs,
        forward_time_s=engine.forward_time,
    )
    return GenerationOutput(sequences, stats)


def bd_generate(model, prompts, *, mask_token_id=None, stop_token_ids=None, config: DecodeConfig | None = None,
                profile: bool = False, **overrides) -> GenerationOutput:
    """Block-diffusion generation with the block-level KV cache (and optionally the sub-block cache).

    ``prompts`` is a list of token-id lists (different lengths allowed); ``overrides`` set
    :class:`DecodeConfig` fields.  ``profile=True`` synchronises around every forward to measure the time spent
    in the model (``stats.forward_time_s``); leave it off for throughput numbers.
    """
    cfg = DecodeConfig(**{**asdict(config or DecodeConfig()), **overrides})
    return _bd_decode(model, prompts, mask_token_id, stop_token_ids, cfg, "cached", profile)


def bd_generate_reference(model, prompts, *, mask_token_id=None, stop_token_ids=None,
                          config: DecodeConfig | None = None, **overrides) -> GenerationOutput:
    """The same decoding with no cache: each forward recomputes the whole sequence under the inference mask."""
    cfg = DecodeConfig(**{**asdict(config or DecodeConfig()), **overrides})
    return _bd_decode(model, prompts, mask_token_id, stop_token_ids, cfg, "reference")


# ----------------------------------------------------------------------------------------------------- AR
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
    from transformers import StoppingCriteria, StoppingCriteriaList

    prompts = _check_prompts(prompts)
    if not isinstance(max_new_tokens, int) or max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    fit_context(prompts, max_new_tokens, model_context(model))  # refuses a prompt + budget beyond the context
    if baseline not in ("hf", "hf_static"):
        raise ValueError(f"unknown AR baseline {baseline!r} (expected 'hf' or 'hf_static')")
    stop_ids = sorted({int(s) for s in (stop_token_ids or [])})
    device = model.device
    B = len(prompts)
    n = max(len(p) for p in prompts)
    pad = pad_token_id if pad_token_id is not None else (stop_ids[0] if stop_ids else 0)
    ids = torch.full((B, n), pad, dtype=torch.long, device=device)
    att = torch.zeros((B, n), dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        ids[i, n - len(p):] = torch.tensor(p, device=device)
        att[i, n - len(p):] = 1
    stop_t = torch.tensor(stop_ids or [-1], device=device)

    class _RowClock(StoppingCriteria):
        def __init__(self):
            self.done = [False] * B
            self.latency = [0.0] * B
            self.steps = 0

        def __call__(self, input_ids, scores, **kw):
            self.steps += 1
            hit = torch.isin(input_ids[:, -1], stop_t).tolist()
            now = time.perf_counter()
            for i, h in enumerate(hit):
                if h and not self.done[i]:
                    self.done[i], self.latency[i] = True, now - t_start
            return torch.zeros(B, dtype=torch.bool, device=input_ids.device)

    clock = _RowClock()
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
    _sync(device)
    t_start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=att, **gkw)
    _sync(device)
    wall = time.perf_counter() - t_start
    gen_host = out[:, n:].tolist()
    sequences = []
    for row in gen_host:
        for k, t in enumerate(row):
            if t in stop_ids:
                row = row[: k + 1]
                break
        sequences.append(row)
    steps = out.shape[1] - n
    latency = [clock.latency[i] if clock.done[i] else wall for i in range(B)]
    stats = GenerationStats(
        mode=f"ar_{baseline}", batch_size=B, generated_tokens=[len(s) for s in sequences], nfe=steps,
        row_nfe=[len(s) for s in sequences],  # one forward per token up to the row's stop id (prefill included)
        wall_time_s=wall, row_latency_s=latency, nfe_breakdown={"decode": steps},
        host_syncs=2 * steps,
    )
    return GenerationOutput(sequences, stats)
