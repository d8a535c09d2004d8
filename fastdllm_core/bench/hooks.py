"""Forward hooks of the benchmark: synthetic acceptance (:class:`ForcedAcceptance`, with the forwards it
predicts), the AR baseline's forward timer, and EOS switched off for full-budget timing runs."""
from __future__ import annotations

import math
import time

import torch


class ForcedAcceptance:
    """Synthetic acceptance: a forward hook that makes the diffusion decoder unmask exactly ``k`` tokens per step.

    For every kept logit the hook works out which input position it predicts (logit ``j`` predicts input position
    ``j + 1``, the decoder's token shift).  Among the positions that are still the mask token, the ``k`` leftmost
    of each row get a confident logit (``filler`` token, logit ``high``: probability ~1 above any threshold < 1);
    every other kept logit becomes nearly uniform (``filler`` ahead by ``low``), far below the threshold.  The
    decoder keeps only candidates of its current sub-block, which are exactly the masked targets of the kept
    logits, so it accepts ``min(k, masked)`` tokens per step.  ``filler`` is never a stop id, so rows run to their
    token budget.  Use as a context manager; it removes its hook on exit.
    """

    def __init__(self, model, k: int, mask_token_id: int, stop_token_ids=(), high: float = 30.0, low: float = 1.0):
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"forced acceptance k must be a positive integer, got {k!r}")
        self.model, self.k, self.mask_id = model, k, int(mask_token_id)
        self.high, self.low = high, low
        bad = {int(s) for s in stop_token_ids} | {self.mask_id}
        self.filler = next(i for i in range(model.get_output_embeddings().out_features) if i not in bad)
        self._handle = None

    def _hook(self, module, args, kwargs, output):
        ids = kwargs.get("input_ids")
        if ids is None:
            ids = args[0] if args else None
        if ids is None:
            return output
        logits = output.logits
        B, Q = ids.shape
        keep = kwargs.get("logits_to_keep", 0)
        n_keep = logits.shape[1]
        if torch.is_tensor(keep):
            kept = keep.to(ids.device).reshape(-1)
        else:
            kept = torch.arange(Q - n_keep, Q, device=ids.device)
        target = kept + 1
        valid = target < Q
        tgt_tok = ids.index_select(1, target.clamp(max=Q - 1))
        masked = (tgt_tok == self.mask_id) & valid[None]
        forced = masked & (masked.cumsum(dim=1) <= self.k)
        logits.zero_()
        logits[..., self.filler] = torch.where(forced,
                                               torch.tensor(self.high, dtype=logits.dtype, device=logits.device),
                                               torch.tensor(self.low, dtype=logits.dtype, device=logits.device))
        return output

    def __enter__(self):
        self._handle = self.model.register_forward_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None


def forced_acceptance_forwards(prompt_lens: list[int], max_new_tokens: int, block_size: int, sub_block_size: int,
                               k: int) -> int:
    """Row-forwards (the sum of ``row_nfe``) the decoder needs for a batch under :class:`ForcedAcceptance`.

    Mirrors the decoder's schedule: one prefill over the shortest prompt's whole blocks; per block, the first
    decodable position filled from the previous forward; per sub-block a row takes part in as many steps as its own
    masked positions need at ``k`` per step (while it waits for the other rows it is not counted); every active row
    takes part in the prefill and the commits; rows whose budget ends in the block are dropped before its commit.
    Expected tokens per forward = tokens / this number.
    """
    D, S = block_size, sub_block_size
    lens = list(prompt_lens)
    limits = [n + max_new_tokens for n in lens]
    T = math.ceil(max(limits) / D) * D
    prefill = (min(lens) // D) * D
    active = list(range(len(lens)))
    total = len(active) if prefill else 0
    have_logit = bool(prefill)
    for b0 in range(prefill, T, D):
        masked = []
        for r in active:
            dec = [lens[r] <= p < limits[r] for p in range(b0, b0 + D)]
            if have_logit and dec[0]:
                dec[0] = False  # filled from the previous forward's last logit
            masked.append(dec)
        for s0 in range(0, D, S):
            total += sum(math.ceil(sum(m[s0:s0 + S]) / k) for m in masked)
        active = [r for r in active if limits[r] > b0 + D]
        if not active:
            break
        total += len(active)  # commit
        have_logit = True
    return total


class ForwardTimer:
    """Synchronised time inside a module's forwards (pre/post hooks), for the AR baseline's profiling run."""

    def __init__(self, model):
        self.model, self.total, self.n, self._t0, self._h = model, 0.0, 0, None, []

    def _sync(self):
        if self.model.device.type == "cuda":
            torch.cuda.synchronize(self.model.device)

    def _pre(self, module, args, kwargs):
        self._sync()
        self._t0 = time.perf_counter()

    def _post(self, module, args, kwargs, output):
        self._sync()
        self.total += time.perf_counter() - self._t0
        self.n += 1

    def __enter__(self):
        self._h = [self.model.register_forward_pre_hook(self._pre, with_kwargs=True),
                   self.model.register_forward_hook(self._post, with_kwargs=True)]
        return self

    def __exit__(self, *exc):
        for h in self._h:
            h.remove()
