"""The log-likelihood side of the lm-eval model ``fast_dllm_v2``
(:class:`~fastdllm_core.evaluation.lm_model.FastDLLMv2`): the score of one (context, continuation) pair, by
``loglikelihood_method`` (see :mod:`fastdllm_core.evaluation.lm_model`):

* ``first_token`` / ``chain`` (block diffusion): the continuation's tokens read at a trailing ``[MASK]`` under the
  block-diffusion inference mask;
* ``mode=ar``: the causal log-likelihood of the whole continuation;
* ``mc`` (masked diffusion): the family's own Monte Carlo estimate (LLaDA ``get_log_likelihood.py``, Dream
  ``_eval_target_nll_mc``), ``mc_num`` samples;
* ``exact`` (masked diffusion): the expectation of that estimator, every mask pattern forwarded once and weighted by
  :func:`exact_weights`;
* ``auto`` (masked diffusion): ``exact`` for a request batch whose every continuation needs no more forwards
  exactly than ``mc`` takes (``2**k - 1 <= mc_num``, k at most :data:`EXACT_MAX_TOKENS`: a one-token MMLU letter
  is one forward instead of ``mc_num``), else ``mc`` (:func:`resolve_mdm_method`); the method used is recorded.
"""
from __future__ import annotations

from collections import OrderedDict

import torch

from ..decode_config import MDM_MODES
from ..decoding import ContextError

LL_METHODS = ("first_token", "chain", "mc", "exact", "auto")
MDM_LL_METHODS = ("mc", "exact", "auto")  # the masked-diffusion modes' likelihoods
EXACT_MAX_TOKENS = 10  # loglikelihood_method=exact: at most 2**10 - 1 mask patterns per request


def resolve_mdm_method(method: str, cont_lengths: list[int], mc_num: int) -> str:
    """The masked-diffusion likelihood one request batch is scored with: ``mc`` / ``exact`` as given; ``auto``:
    ``exact`` when every continuation has ``k`` tokens with ``2**k - 1 <= mc_num`` and ``k <= EXACT_MAX_TOKENS``
    (the expectation for no more forwards than the estimate), else ``mc``.  One method for the whole batch, so the
    options of one question are never scored by different methods."""
    if method != "auto":
        return method
    if not cont_lengths:
        return "exact"
    k = max(cont_lengths)
    return "exact" if k <= EXACT_MAX_TOKENS and 2 ** k - 1 <= mc_num else "mc"


def exact_weights(k: int, family: str, eps: float = 1e-3) -> list[float]:
    """``w[m-1]``: the weight of one mask set of size ``m`` among ``k`` continuation tokens in the expectation of
    the family's Monte Carlo likelihood estimator (``E = sum_S w(|S|) sum_{i in S} CE_i(S)``).

    LLaDA (``get_log_likelihood.py``): ``m`` uniform on 1..k, the set uniform among the ``C(k, m)`` of that size,
    loss divided by ``m / k``: ``w(m) = 1 / (m C(k, m))``.  Dream (``_eval_target_nll_mc``): each token masked
    independently with ``p = (1 - eps) t + eps``, ``t ~ U(0, 1)``, loss divided by ``p``:
    ``w(m) = int_0^1 p^(m-1) (1 - p)^(k-m) dt`` (Gauss-Legendre, exact for this degree-(k-1) polynomial)."""
    import math

    import numpy as np

    if k < 1:
        raise ValueError(f"a continuation needs at least one token, got k={k}")
    if family == "llada":
        return [1.0 / (m * math.comb(k, m)) for m in range(1, k + 1)]
    if family != "dream":
        raise ValueError(f"family must be 'llada' or 'dream', got {family!r}")
    x, wq = np.polynomial.legendre.leggauss(k + 1)
    t = (x + 1) / 2
    p = (1 - eps) * t + eps
    return [float(np.sum(wq / 2 * p ** (m - 1) * (1 - p) ** (k - m))) for m in range(1, k + 1)]


class LikelihoodMixin:
    """The scores of :class:`~fastdllm_core.evaluation.lm_model.FastDLLMv2`, one (context ids, continuation ids)
    pair per call, each returning ``(log-likelihood, is_greedy)``.  They read the model's ``lm``
    (:class:`~fastdllm_core.loading.LoadedModel`), ``decode`` (``block_size``, ``eps``), ``ll_method``,
    ``batch_size``, ``mc_num``, ``tokenizer``, ``_device`` and ``_mc_gen`` (the Monte Carlo generator);
    :meth:`_fit_loglikelihood` also ``mode``, ``context_length``, ``truncate_prompts`` and counts
    ``n_truncated_prompts``."""

    MEMO_SIZE = 16  # forwards kept for reuse: lm-eval sends the options of one question one after the other

    def _memo(self, key: tuple, compute):
        """``compute()``, or the result it gave for the same ``key`` (the same input tokens) among the last
        :data:`MEMO_SIZE` calls.  The options of a multiple-choice question share their context, and where the
        option's own tokens are not in the input (the first token read at a trailing [MASK], a masked one-token
        option) they share the whole forward: one forward instead of one per option, bit for bit the same."""
        memo = self.__dict__.setdefault("_forward_memo", OrderedDict())
        if key in memo:
            memo.move_to_end(key)
            return memo[key]
        memo[key] = out = compute()
        if len(memo) > self.MEMO_SIZE:
            memo.popitem(last=False)
        return out

    def _forget_forwards(self) -> None:
        """Empty the memo of :meth:`_memo` (at the start of every request batch: the model may have changed)."""
        self.__dict__.pop("_forward_memo", None)

    def _batch_ll_method(self, cont_lengths: list[int]) -> str:
        """The method this request batch is scored with (``auto`` resolved by :func:`resolve_mdm_method`), noted
        in :attr:`ll_used`."""
        method = resolve_mdm_method(self.ll_method, cont_lengths, self.mc_num) if self.mode in MDM_MODES \
            else self.ll_method
        self.ll_used.add(method)
        return method

    @property
    def ll_method_used(self) -> str:
        """The likelihood method the rows record: the one used (``exact+mc`` if batches differed), else as set."""
        return "+".join(sorted(self.ll_used)) if self.ll_used else self.ll_method

    @torch.no_grad()
    def _bd_logprobs_at_mask(self, seqs: list[list[int]]) -> torch.Tensor:
        """log-softmax of the prediction for the trailing [MASK] of every sequence ``prefix + [MASK]``."""
        from ..masks import attention_kwargs, inference_spec

        model, D = self.lm.model, self.decode.block_size

        def one(s: list[int]) -> torch.Tensor:
            ids = torch.tensor([s], device=self._device)
            n = ids.shape[1]
            pos = torch.arange(n, device=self._device)[None]
            kw = attention_kwargs(model, inference_spec(D, 0), n, n)
            logits = model(input_ids=ids, position_ids=pos, use_cache=False, **kw).logits[0, n - 2]
            return torch.log_softmax(logits.float(), dim=-1)

        # one row at a time: sequences differ in length and so in block layout
        return torch.stack([self._memo(("bd", D, tuple(s)), lambda s=s: one(s)) for s in seqs])

    @torch.no_grad()
    def _ar_loglik(self, ctx: list[int], cont: list[int]) -> tuple[float, bool]:
        ids = torch.tensor([ctx + cont], device=self._device)
        logits = self.lm.model(input_ids=ids, use_cache=False).logits[0, len(ctx) - 1: -1].float()
        lp = torch.log_softmax(logits, dim=-1)
        tgt = torch.tensor(cont, device=self._device)
        score = lp.gather(1, tgt[:, None]).sum().item()
        greedy = bool((lp.argmax(-1) == tgt).all().item())
        return score, greedy

    def _bd_loglik(self, ctx: list[int], cont: list[int]) -> tuple[float, bool]:
        """Each scored continuation token read at a trailing [MASK] (the first one only, or the chain)."""
        steps = cont[:1] if self.ll_method == "first_token" else cont
        lps = self._bd_logprobs_at_mask([ctx + cont[:k] + [self.lm.mask_token_id] for k in range(len(steps))])
        tgt = torch.tensor(steps, device=lps.device)
        return lps.gather(1, tgt[:, None]).sum().item(), bool((lps.argmax(-1) == tgt).all().item())

    def _mdm_logits(self, batch: torch.Tensor) -> torch.Tensor:
        from ..decoding.mdm_common import full_attention_kwargs

        model = self.lm.model
        kw = full_attention_kwargs(model, None, batch.shape[1], batch.shape[1], batch.shape[0])
        logits = model(input_ids=batch, use_cache=False, **kw).logits
        if self.lm.family.logit_shift:  # Dream: the logit at i-1 predicts token i
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits

    @torch.no_grad()
    def _mc_loglik(self, ctx: list[int], cont: list[int]) -> tuple[float, bool]:
        """The family's Monte Carlo estimate of log p(cont | ctx) with :attr:`mc_num` samples (see
        :mod:`fastdllm_core.evaluation.lm_model`)."""
        import torch.nn.functional as F

        dev, g, mask_id = self._device, self._mc_gen, self.lm.mask_token_id
        dream = self.lm.family.logit_shift
        if dream:  # Dream's evaluator scores the continuation followed by EOS (never masked)
            cont = list(cont) + [self.tokenizer.eos_token_id]
        b = max(1, min(self.batch_size, self.mc_num))
        seq = torch.tensor([ctx + cont], device=dev).repeat(b, 1)
        n_ctx, n_cont, L = len(ctx), len(cont), len(ctx) + len(cont)
        losses = []
        for _ in range(max(self.mc_num // b, 1)):
            if dream:  # DreamLM/Dream eval.py _forward_process, log_type ftb
                u0 = torch.rand(1, device=dev, generator=g, dtype=torch.float32)
                t = (u0 + torch.arange(b, device=dev).float() / b) % 1
                p_mask = ((1 - self.decode.eps) * t + self.decode.eps)[:, None].repeat(1, L)
                is_mask = torch.rand((b, L), device=dev, generator=g) < p_mask
                is_mask[:, 0] = is_mask[:, -1] = False
                is_mask[:, :n_ctx] = False
            else:  # ML-GSAI/LLaDA get_log_likelihood.py forward_process
                k = torch.randint(1, n_cont + 1, (), device=dev, generator=g)
                x = torch.round(torch.linspace(float(k), k + (b - 1) * (n_cont / b), steps=b, device=dev)).long()
                x = ((x - 1) % n_cont) + 1
                idx = torch.arange(n_cont, device=dev).repeat(b, 1)
                is_mask = idx < x.unsqueeze(1)
                for i in range(b):
                    is_mask[i] = is_mask[i][torch.randperm(n_cont, device=dev, generator=g)]
                is_mask = torch.cat((torch.zeros(b, n_ctx, dtype=torch.bool, device=dev), is_mask), dim=1)
                p_mask = (x / n_cont).unsqueeze(1).repeat(1, L)
            noisy = torch.where(is_mask, mask_id, seq)
            logits = self._mdm_logits(noisy)
            loss = F.cross_entropy(logits[is_mask], seq[is_mask], reduction="none") / p_mask[is_mask]
            losses.append(loss.sum().item() / b)
        return -sum(losses) / len(losses), False

    @torch.no_grad()
    def _exact_loglik(self, ctx: list[int], cont: list[int]) -> tuple[float, bool]:
        """The expectation of :meth:`_mc_loglik`'s estimator, computed exactly: every non-empty set ``S`` of masked
        continuation positions is forwarded once, and ``sum_{i in S} CE_i(S)`` is weighted by the probability the
        family's sampler gives ``S`` times its loss weight, integrated over the noise level (:func:`exact_weights`).
        Same quantity as ``mc`` with ``mc_num`` -> infinity, without its sampling noise; ``2**k - 1`` rows for a
        ``k``-token continuation (one row for a one-token answer, where ``mc`` runs ``mc_num``)."""
        import torch.nn.functional as F

        dev, mask_id = self._device, self.lm.mask_token_id
        k = len(cont)
        full = list(ctx) + list(cont) + ([self.tokenizer.eos_token_id] if self.lm.family.logit_shift else [])
        seq = torch.tensor(full, device=dev)
        patterns = torch.tensor([[(s >> j) & 1 for j in range(k)] for s in range(1, 2 ** k)], dtype=torch.bool,
                                device=dev)
        weights = torch.tensor(exact_weights(k, "dream" if self.lm.family.logit_shift else "llada",
                                             self.decode.eps), dtype=torch.float64, device=dev)
        total = 0.0
        for lo in range(0, len(patterns), self.batch_size):
            pat = patterns[lo:lo + self.batch_size]
            is_mask = torch.zeros(len(pat), len(full), dtype=torch.bool, device=dev)
            is_mask[:, len(ctx):len(ctx) + k] = pat
            batch = seq.repeat(len(pat), 1)
            noisy = torch.where(is_mask, mask_id, batch)

            def masked_logits(noisy=noisy, is_mask=is_mask):
                return self._mdm_logits(noisy)[is_mask]

            # a one-token option is masked in its only row: the options of a question share that input
            masked = self._memo(("mdm", tuple(noisy[0].tolist())), masked_logits) if k == 1 else masked_logits()
            ce = F.cross_entropy(masked, batch[is_mask], reduction="none")  # masked positions only
            per_row = torch.zeros(len(pat), dtype=torch.float64, device=dev).index_add_(
                0, is_mask.nonzero()[:, 0], ce.double())
            total += (per_row * weights[pat.sum(1) - 1]).sum().item()
        return -total, False

    def _fit_loglikelihood(self, i: int, ctx: list[int], cont: list[int], name: str | None = None) -> list[int]:
        """The context of request ``i`` such that context + continuation (+ the [MASK]) fits the context length."""
        limit = self.context_length
        need = len(cont) + (0 if self.mode == "ar" else 1)  # bd: a trailing [MASK]; masked diffusion: Dream's EOS
        if limit is None or len(ctx) + need <= limit:
            return ctx
        if not self.truncate_prompts or need >= limit:
            raise ContextError(f"{name or f'request {i}'}: context {len(ctx)} tokens + continuation {len(cont)} tokens"
                               f"{'' if self.mode == 'ar' else ' + 1'} = {len(ctx) + need}, more than the "
                               f"model's context of {limit} tokens; shorten it or ask for left truncation "
                               "(truncate_prompts=left)")
        self.n_truncated_prompts += 1
        return ctx[len(ctx) + need - limit:]
