"""Block-diffusion decoding (the paper's "Inference Pipeline").

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
   Candidates are the masked decodable positions of the current sub-block (``eos_rule="fill_block"``, the
   official ``batch_sample``: positions after a row's first unmasked EOS stay candidates, and through the
   in-block attention they still change the tokens before it), or only those before the row's first unmasked
   EOS (``eos_rule="stop"``).  A step ends with one device-to-host copy that says which sub-blocks still have
   candidates.
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

import logging
import math
import time
from dataclasses import replace

import torch

from ..decode_config import STATIC_PATHS, DecodeConfig
from .common import _check_mask_token, _check_prompts, _choose, _sync, fit_context, model_context, trim_at_stop
from .forwards import _CachedEngine, _ReferenceEngine, _StaticEngine
from .outputs import GenerationOutput, GenerationStats
from .static import static_unsupported

log = logging.getLogger(__name__)


class _BlockDecoder:
    """One ``generate`` call of the block-diffusion decoder: the batch's state and the steps of the schedule
    above, one method each (prefill, per block: first token, sub-block steps, dropping finished rows, commit)."""

    def __init__(self, model, prompts: list[list[int]], mask_id: int, stop_ids: list[int], cfg: DecodeConfig,
                 engine_kind: str, profile: bool):
        self.model, self.cfg, self.mask_id, self.stop_ids = model, cfg, mask_id, stop_ids
        self.engine_kind, self.profile = engine_kind, profile
        self.device = device = model.device
        self.D, self.S = cfg.block_size, cfg.sub_block_size
        self.n_sub = self.D // self.S
        self.B = len(prompts)
        self.lens = [len(p) for p in prompts]
        self.limits = [n + cfg.max_new_tokens for n in self.lens]
        self.T = math.ceil(max(self.limits) / self.D) * self.D
        self.gen = None
        if cfg.temperature > 0:
            self.gen = torch.Generator(device=device)
            self.gen.manual_seed(0 if cfg.seed is None else cfg.seed)
        self.x_all = torch.full((self.B, self.T), mask_id, dtype=torch.long, device=device)
        for i, p in enumerate(prompts):
            self.x_all[i, : len(p)] = torch.tensor(p, device=device)
        self.stop_t = torch.tensor(stop_ids or [-1], device=device)
        self.idx_D = torch.arange(self.D, device=device)
        self.steps_per_block: list[int] = []
        self.nfe = {"prefill": 0, "block": 0, "sub_block": 0, "commit": 0}
        self.syncs = 0

    # ------------------------------------------------------------------------------------------ the call
    def run(self) -> GenerationOutput:
        _sync(self.device)
        self.t_start = time.perf_counter()
        self.engine = self._engine()
        self._start_rows()
        last_logits, b0 = self._prefill()
        while any(self.live) and b0 < self.T:
            last_logits = self._decode_block(b0, last_logits)
            b0 += self.D
        return self._finish()

    def _engine(self):
        """The engine of this call: the reference, the eager cached engine, or the static one (``decode_path``;
        a model the static path cannot serve falls back to eager with a log line)."""
        if self.engine_kind == "reference":
            return _ReferenceEngine(self.model, self.D, self.profile)
        if self.cfg.decode_path in STATIC_PATHS:
            why = static_unsupported(self.model)
            if why is None:
                return _StaticEngine(self.model, self.T, self.D, self.B, self.profile,
                                     compiled=self.cfg.decode_path == "compiled")
            log.warning("decode_path=%r falls back to the eager path: %s", self.cfg.decode_path, why)
        return _CachedEngine(self.model, self.T, self.D, self.profile)

    def _start_rows(self) -> None:
        device, B = self.device, self.B
        self.rows = list(range(B))  # original indices of the rows in the batch
        # rows still decoding: the eager engines drop finished rows from the batch; the static engine keeps them
        # (its shapes are fixed) with live False, so they take part in no decision and in no count
        self.live = [True] * B
        self.live_t = torch.ones(B, dtype=torch.bool, device=device)
        self.x = self.x_all
        self.lens_t = torch.tensor(self.lens, device=device)
        self.limits_t = torch.tensor(self.limits, device=device)
        self.row_part = torch.zeros(B, dtype=torch.long, device=device)  # forwards each row took part in
        self.rows_t = torch.arange(B, device=device)  # original indices of the active rows, on the device
        self.row_latency = [0.0] * B

    def _count_all(self, kind: str) -> None:  # a forward every active row takes part in (prefill, commit)
        self.nfe[kind] += 1
        self.row_part.index_add_(0, self.rows_t, self.live_t.long())

    def _prefill(self):
        """(last logits or None, first block to decode): the shortest prompt's whole blocks, forwarded at once."""
        prefill_len = (min(self.lens) // self.D) * self.D
        if not prefill_len:
            return None, 0
        last_logits = self.engine.prefill(self.x, prefill_len)
        self._count_all("prefill")
        return last_logits, prefill_len

    # ------------------------------------------------------------------------------------------ one block
    def _decode_block(self, b0: int, last_logits):
        """Decode block ``[b0, b0 + D)``; drop the rows it finished; commit it.  The commit's last logit (None
        when no row is left)."""
        D = self.D
        blk = self.x[:, b0:b0 + D].clone()
        pos = b0 + self.idx_D
        dec = (pos[None] >= self.lens_t[:, None]) & (pos[None] < self.limits_t[:, None])  # decodable [B, D]
        dec &= self.live_t[:, None]
        if last_logits is not None:  # first position: the previous forward's prediction
            tok0, _ = _choose(last_logits, self.cfg, self.gen, self.mask_id)
            fill0 = dec[:, 0] & (blk[:, 0] == self.mask_id)
            blk[:, 0] = torch.where(fill0, tok0, blk[:, 0])
        done_host = self._decode_sub_blocks(blk, dec, b0, last_logits)
        self.x[:, b0:b0 + D] = blk
        blk = self._drop_finished(done_host, blk)
        if not any(self.live):
            return None
        last_logits = self.engine.commit(blk)
        self._count_all("commit")
        return last_logits

    def _decode_sub_blocks(self, blk, dec, b0: int, last_logits) -> list[bool]:
        """Steps until no candidate is left in the block; which rows are finished (from the last host copy)."""
        steps = 0
        self._refresh = (-1, None)  # (sub-block last refreshed by a whole-block forward, its head logit)
        while True:
            cand_all, work, done_host = self._candidates(blk, dec, b0)
            if not any(work):
                break
            w = work.index(True)
            logits = self._forward(blk, w, last_logits)
            steps += 1
            self._unmask(blk, logits, cand_all, w * self.S)
        self.steps_per_block.append(steps)
        return done_host

    def _candidates(self, blk, dec, b0: int):
        """(candidates [B, D], sub-blocks with work, finished rows): masked decodable positions (with
        ``eos_rule="stop"`` only those before a row's first stop id).  One device-to-host copy per step: which
        sub-blocks still have work, and which rows are finished (a stop id and no candidate left, or the budget
        used up by this block)."""
        D, idx_D = self.D, self.idx_D
        masked = blk == self.mask_id
        is_stop = torch.isin(blk, self.stop_t) & dec & ~masked
        first_stop = torch.where(is_stop, idx_D, D).amin(dim=1)
        cand_all = masked & dec
        if self.cfg.eos_rule == "stop":
            cand_all &= idx_D[None] < first_stop[:, None]
        done = ~cand_all.any(dim=1) & ((first_stop < D) | (self.limits_t <= b0 + D)) & self.live_t
        host = torch.cat([cand_all.view(-1, self.n_sub, self.S).any(dim=2).any(dim=0), done]).tolist()
        self.syncs += 1
        return cand_all, host[:self.n_sub], host[self.n_sub:]

    def _forward(self, blk, w: int, last_logits):
        """Logits predicting the positions of sub-block ``w`` (``[B, S, V]``): the sub-block alone against the
        cache of its refresh, or the whole block (a refresh)."""
        S, s0, device = self.S, w * self.S, self.device
        refresh_window, head_logits = self._refresh
        if self.cfg.use_sub_block_cache and refresh_window == w:
            keep = torch.arange(0, S - 1, device=device)  # logits of s0 .. s0+S-2 -> predict s0+1 .. s0+S-1
            logits = self.engine.sub_block(blk, s0, S, keep)
            self.nfe["sub_block"] += 1
            return torch.cat([head_logits[:, None], logits], dim=1)  # s0 keeps the refresh's prediction
        lo = max(s0 - 1, 0)
        keep = torch.arange(lo, s0 + S - 1, device=device)
        logits = self.engine.block(blk, keep)
        if s0 == 0:  # the prediction for the block's first position is the previous forward's
            first = last_logits if last_logits is not None else logits[:, 0]
            logits = torch.cat([first[:, None], logits], dim=1)
        self._refresh = (w, logits[:, 0])
        self.nfe["block"] += 1
        return logits

    def _unmask(self, blk, logits, cand_all, s0: int) -> None:
        """Unmask every candidate of the sub-block above the threshold, and at least the most confident one."""
        S = self.S
        tok, conf = _choose(logits, self.cfg, self.gen, self.mask_id)  # [B, S]
        c = cand_all[:, s0:s0 + S]  # candidates of the current sub-block
        self.row_part.index_add_(0, self.rows_t, c.any(dim=1).long())
        conf = torch.where(c, conf, -1.0)  # _choose already works in fp32 (fp64 for fp64 models)
        best = conf.argmax(dim=1)
        force = torch.zeros_like(c).scatter_(1, best[:, None], True) & c.any(dim=1, keepdim=True)
        unmask = (c & (conf > self.cfg.threshold)) | force
        blk[:, s0:s0 + S] = torch.where(unmask, tok, blk[:, s0:s0 + S])

    def _drop_finished(self, done_host: list[bool], blk):
        """Store the finished rows' results and remove them from the batch (and the engine), or, with an engine
        that keeps its batch (static shapes), retire them; the block of the rows left in the batch."""
        now = time.perf_counter()
        if not any(done_host):
            return blk
        for j, d in enumerate(done_host):
            if d:
                r = self.rows[j]
                self.x_all[r] = self.x[j]
                self.row_latency[r] = now - self.t_start
        if self.engine.keeps_rows:  # static shapes: the finished rows stay in the batch, retired
            self.live = [lv and not d for lv, d in zip(self.live, done_host)]
            self.live_t = torch.tensor(self.live, device=self.device)
            return blk
        keep_rows = [j for j, d in enumerate(done_host) if not d]
        self.rows = [self.rows[j] for j in keep_rows]
        self.live = [True] * len(self.rows)
        if not self.rows:
            return blk
        sel = torch.tensor(keep_rows, device=self.device)
        self.live_t = self.live_t.index_select(0, sel)
        self.rows_t = self.rows_t.index_select(0, sel)
        self.x, blk = self.x.index_select(0, sel), blk.index_select(0, sel)
        self.lens_t, self.limits_t = self.lens_t.index_select(0, sel), self.limits_t.index_select(0, sel)
        self.engine.select_rows(sel)
        return blk

    # ------------------------------------------------------------------------------------------ the result
    def _finish(self) -> GenerationOutput:
        for j, r in enumerate(self.rows):  # rows still active when the loop ran out of blocks
            self.x_all[r] = self.x[j]
        _sync(self.device)
        wall = time.perf_counter() - self.t_start
        for j, r in enumerate(self.rows):
            if self.live[j]:
                self.row_latency[r] = wall
        out_host = self.x_all.tolist()
        sequences = []
        for i in range(self.B):
            seq = trim_at_stop(out_host[i][self.lens[i]:self.limits[i]], self.stop_ids)
            if self.mask_id in seq:  # cannot happen: every decodable position before the first stop is decoded
                raise RuntimeError(f"row {i} still holds mask tokens after decoding")
            sequences.append(seq)
        stats = GenerationStats(
            mode="bd" if self.engine_kind == "cached" else "bd_reference", batch_size=self.B,
            generated_tokens=[len(s) for s in sequences], nfe=sum(self.nfe.values()),
            row_nfe=self.row_part.tolist(), wall_time_s=wall, row_latency_s=self.row_latency,
            steps_per_block=self.steps_per_block, nfe_breakdown=self.nfe, host_syncs=self.syncs,
            forward_time_s=self.engine.forward_time, capture_time_s=self.engine.capture_time,
        )
        return GenerationOutput(sequences, stats)


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
    return _BlockDecoder(model, prompts, mask_id, stop_ids, cfg, engine_kind, profile).run()


def bd_generate(model, prompts, *, mask_token_id=None, stop_token_ids=None, config: DecodeConfig | None = None,
                profile: bool = False, **overrides) -> GenerationOutput:
    """Block-diffusion generation with the block-level KV cache (and optionally the sub-block cache).

    ``prompts`` is a list of token-id lists (different lengths allowed); ``overrides`` set
    :class:`DecodeConfig` fields.  ``profile=True`` synchronises around every forward to measure the time spent
    in the model (``stats.forward_time_s``); leave it off for throughput numbers.
    """
    cfg = replace(config or DecodeConfig(), **overrides)
    return _bd_decode(model, prompts, mask_token_id, stop_token_ids, cfg, "cached", profile)


def bd_generate_reference(model, prompts, *, mask_token_id=None, stop_token_ids=None,
                          config: DecodeConfig | None = None, **overrides) -> GenerationOutput:
    """The same decoding with no cache: each forward recomputes the whole sequence under the inference mask."""
    cfg = replace(config or DecodeConfig(), **overrides)
    return _bd_decode(model, prompts, mask_token_id, stop_token_ids, cfg, "reference")
