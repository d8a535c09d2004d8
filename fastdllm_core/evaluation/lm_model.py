"""The lm-eval model ``fast_dllm_v2``: the project's block-diffusion decoder (or the AR baseline) behind
lm-eval's ``LM`` interface.

Every decoding option is a ``model_args`` key::

    lm_eval --model fast_dllm_v2 --model_args pretrained=PATH,mode=bd,threshold=0.9,sub_block_size=8,...

Keys: ``pretrained`` (Hub id, directory or .gguf file), ``mode`` (``bd`` | ``ar`` | ``llada`` | ``dream`` |
``v1``), ``block_size``, ``sub_block_size``, ``threshold``, ``use_sub_block_cache``, ``max_new_tokens``,
``temperature``, ``top_p``, ``seed``, ``batch_size``, ``device``, ``dtype``, ``attn_implementation``,
``ar_baseline`` (``hf`` | ``hf_static``), ``loglikelihood_method`` (``first_token`` | ``chain``; masked
diffusion: ``mc``), ``max_length`` (the context length to respect; default the model's
``max_position_embeddings``), ``truncate_prompts`` (``false`` | ``left``); the masked-diffusion samplers'
``steps``, ``remasking``, ``alg``, ``alg_temp``, ``eps``, ``cache``, ``logits_eos_inf``,
``confidence_eos_eot_inf`` (:class:`~fastdllm_core.config.DecodeConfig`) and ``mc_num`` (Monte Carlo samples of
the likelihood estimate).

Masked-diffusion modes (``llada`` / ``dream`` / ``v1``, for LLaDA and Dream checkpoints): ``generate_until`` runs
the family's sampler (:func:`~fastdllm_core.decoding.mdm_generate`) at its own generation length
(``max_new_tokens`` = ``gen_length``; ``task`` lengths are refused: the published settings fix it), counted like
the other modes.  ``loglikelihood`` is the Monte Carlo estimate of each family's own evaluation:
LLaDA (ML-GSAI/LLaDA ``get_log_likelihood.py`` / ``eval_llada.py``: ``mc_num`` samples in mini-batches of
``batch_size``, masked counts spread evenly over 1..len(continuation), loss divided by the masked fraction);
Dream (DreamLM/Dream ``eval/eval.py`` ``_eval_target_nll_mc``, ``log_type=ftb``: the continuation plus EOS, masked
with probability ``(1 - eps) t + eps``, first and last positions never masked, logits shifted).  ``is_greedy``
is False (both official evaluators skip the greedy check by default).

Context: a prompt whose length plus ``max_new_tokens`` (or a loglikelihood request) exceeds the context is
refused, naming the request and both lengths, unless ``truncate_prompts=left`` (then it is cut from the left and
counted in :attr:`FastDLLMv2.n_truncated_prompts`).

generate_until
    Requests are grouped by their generation kwargs, sorted by prompt length (longest first) and decoded in
    batches.  Generation stops at the tokenizer's EOS ids (``<|im_end|>``); lm-eval's ``until`` strings are then
    applied to the text (the continuation is cut at the first one).  ``max_new_tokens`` (``model_args``): an
    integer is used for every request (a task's ``max_gen_toks`` is then recorded but not used); ``task`` uses
    each request's own length, the task's ``max_gen_toks`` (or its aliases ``max_new_tokens`` / ``max_tokens`` /
    ``max_completion_tokens``), else lm-eval's default :data:`LM_EVAL_DEFAULT_MAX_GEN_TOKS` (e.g. IFEval 1280,
    GSM8K and MATH 256).  The lengths actually used are in :attr:`FastDLLMv2.used_max_new_tokens`.

loglikelihood (multiple-choice tasks)
    ``first_token`` (the reference implementation's method): the context followed by one ``[MASK]`` is forwarded
    under the block-diffusion inference mask (block-causal, bidirectional inside the last, partial block); the
    log-probability of the *first continuation token* at the mask (read from the previous position's logit, the
    shifted-label convention) is the score, and ``is_greedy`` says whether it is the argmax.  Later continuation
    tokens are ignored.  ``chain`` (default) scores every continuation token ``k`` by forwarding
    ``context + cont[:k] + [MASK]`` (one forward per token) and sums: for a one-token continuation (MMLU/GPQA
    letter answers) it *is* the first-token method, and for a longer one (an option's text) it does not ignore
    the rest.  In ``mode=ar`` the usual causal log-likelihood of the whole continuation (one causal forward) is
    used.

Throughput: :attr:`FastDLLMv2.gen_stats` keeps the decoder's own :class:`GenerationStats` of every batch
(tokens up to and including EOS; synchronised generation wall time, tokenisation excluded).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, replace

import torch
from tqdm import tqdm

from ..config import BLOCK_SIZE, MDM_MODES, MODES, parse_bool
from ..decoding import (ContextError, DecodeConfig, ar_generate, bd_generate, check_family, fit_context, mdm_generate,
                        model_context)
from ..model import LoadedModel, load_model

log = logging.getLogger(__name__)

try:  # lm-eval is a hard dependency of the project, but keep the module importable for docs tooling
    from lm_eval.api.model import TemplateLM
    from lm_eval.api.registry import register_model
except ImportError as exc:  # pragma: no cover
    raise ImportError("lm-eval is required for fastdllm_core.evaluation (pip install lm-eval)") from exc

MODEL_NAME = "fast_dllm_v2"
LL_METHODS = ("first_token", "chain", "mc", "exact")
MDM_LL_METHODS = ("mc", "exact")  # the masked-diffusion modes' likelihoods
EXACT_MAX_TOKENS = 10  # loglikelihood_method=exact: at most 2**10 - 1 mask patterns per request
TASK_LENGTH = "task"  # max_new_tokens=task: each benchmark's own generation length
# lm-eval's default generation length when a task's generation_kwargs set none (lm_eval.models.utils.
# normalize_gen_kwargs / HFLM's max_gen_toks)
LM_EVAL_DEFAULT_MAX_GEN_TOKS = 256
GEN_LENGTH_KEYS = ("max_gen_toks", "max_new_tokens", "max_tokens", "max_completion_tokens")  # lm-eval's priority


def request_max_gen_toks(kw: dict | None) -> int | None:
    """The generation length a request's kwargs ask for (lm-eval's alias priority), or None."""
    for k in GEN_LENGTH_KEYS:
        if (kw or {}).get(k) is not None:
            return int(kw[k])
    return None


def _as_bool(v) -> bool:
    return parse_bool(v, empty_false=True)


def _opt_int(v):
    return None if v is None or str(v).lower() in ("none", "") else int(v)


def _merge_cli_config(args: dict, extra: dict | None) -> None:
    """Take lm-eval's own ``--batch_size``/``--device`` unless model_args set them; lm-eval's default device
    ``cuda`` falls back to ``cpu`` on machines without CUDA."""
    for k, v in (extra or {}).items():
        if v is None or k not in ("batch_size", "device") or k in args:
            continue
        if k == "device" and str(v).startswith("cuda") and not torch.cuda.is_available():
            log.warning("lm-eval asked for device %s but CUDA is not available: using cpu", v)
            v = "cpu"
        args[k] = v


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


def _request_name(i: int, req) -> str:
    """``request <i>`` plus, for lm-eval's Instance, its task and document (where to find the prompt)."""
    task, doc = getattr(req, "task_name", None), getattr(req, "doc_id", None)
    return f"request {i}" + (f" ({task} doc {doc})" if task is not None and doc is not None else "")


@register_model(MODEL_NAME)
class FastDLLMv2(TemplateLM):
    """lm-eval's ``TemplateLM`` does the tokenising of (context, continuation) pairs (trailing spaces moved onto
    the continuation); this class adds the decoders, the context checks and the block-diffusion scores."""

    def __init__(self, pretrained=None, model: LoadedModel | None = None, mode: str = "bd", block_size=None,
                 sub_block_size=8, threshold=0.9, use_sub_block_cache=False, max_new_tokens=256, temperature=0.0,
                 top_p=1.0, seed=None, batch_size=8, device="cpu", dtype="auto", attn_implementation=None,
                 ar_baseline="hf", loglikelihood_method=None, max_length=None, truncate_prompts=False,
                 steps=None, remasking="low_confidence", alg="entropy", alg_temp=0.0, eps=1e-3, cache="none",
                 logits_eos_inf=False, confidence_eos_eot_inf=False, mc_num=128, **unknown):
        super().__init__()
        if unknown:
            import difflib
            import inspect

            valid = [k for k in inspect.signature(FastDLLMv2.__init__).parameters
                     if k not in ("self", "model", "unknown")]
            key = sorted(unknown)[0]
            close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown fast_dllm_v2 model_args key {key!r}{hint} (valid keys: {', '.join(valid)})")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if loglikelihood_method in (None, "", "none"):
            loglikelihood_method = "mc" if mode in MDM_MODES else "chain"
        if loglikelihood_method not in LL_METHODS:
            raise ValueError(f"loglikelihood_method must be one of {LL_METHODS}, got {loglikelihood_method!r}")
        if ar_baseline not in ("hf", "hf_static"):
            raise ValueError(f"ar_baseline must be 'hf' or 'hf_static', got {ar_baseline!r}")
        bs = str(batch_size)
        if bs.startswith("auto"):
            raise ValueError("batch_size=auto is not supported by fast_dllm_v2: give an integer")
        self.batch_size = int(bs)
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be positive, got {batch_size!r}")
        self.mode = mode
        self.ar_baseline = ar_baseline
        self.ll_method = loglikelihood_method
        if (mode in MDM_MODES) != (loglikelihood_method in MDM_LL_METHODS):
            raise ValueError(f"loglikelihood_method={loglikelihood_method!r} does not apply to mode {mode} (mc / exact "
                             "are the masked-diffusion modes' Monte Carlo estimate and its exact expectation; "
                             "first_token / chain the others')")
        self.mc_num = int(mc_num)
        if self.mc_num <= 0:
            raise ValueError(f"mc_num must be a positive integer, got {mc_num!r}")
        # max_new_tokens=task: each request's own length (lm-eval's default when the task sets none)
        self.task_lengths = str(max_new_tokens).strip().lower() == TASK_LENGTH
        if self.task_lengths and mode in MDM_MODES:
            raise ValueError(f"max_new_tokens=task does not apply to mode {mode}: the sampler's generation length is "
                             "part of its setting (give an integer)")
        # validate the decoding options before loading anything
        n_new = LM_EVAL_DEFAULT_MAX_GEN_TOKS if self.task_lengths else int(max_new_tokens)
        if _opt_int(block_size) is None and mode == "llada":
            block_size = n_new  # LLaDA's published settings: block_length = gen_length unless given
        self.decode = DecodeConfig(
            block_size=_opt_int(block_size) or BLOCK_SIZE, sub_block_size=int(sub_block_size),
            threshold=None if str(threshold).strip().lower() == "none" else float(threshold),
            use_sub_block_cache=_as_bool(use_sub_block_cache), max_new_tokens=n_new,
            temperature=float(temperature), top_p=float(top_p), seed=_opt_int(seed), steps=_opt_int(steps),
            remasking=str(remasking), alg=str(alg), alg_temp=float(alg_temp), eps=float(eps), cache=str(cache),
            logits_eos_inf=_as_bool(logits_eos_inf), confidence_eos_eot_inf=_as_bool(confidence_eos_eot_inf),
        ).with_mode_defaults(mode).validate(mode)
        if model is None:
            if not pretrained:
                raise ValueError("fast_dllm_v2 needs model_args pretrained=<hub id | directory | .gguf file>")
            model = load_model(str(pretrained), device=str(device), dtype=dtype,
                               attn_implementation=attn_implementation, block_size=_opt_int(block_size))
        self.lm = model
        check_family(model, mode)
        if _opt_int(block_size) is None and mode == "bd":  # the checkpoint's bd_size is the default block size
            self.decode = self.decode.with_block_size(model.block_size).validate(mode)
        self._mc_gen = torch.Generator(device=model.model.device)
        self._mc_gen.manual_seed(0 if self.decode.seed is None else self.decode.seed)
        self.tokenizer = model.tokenizer
        self._device = model.model.device
        self._max_length = _opt_int(max_length)
        self.truncate_prompts = str(truncate_prompts).strip().lower() == "left" or (
            str(truncate_prompts).strip().lower() != "none" and _as_bool(truncate_prompts))
        self.n_truncated_prompts = 0  # prompts cut from the left to fit the context (only with truncate_prompts)
        self.gen_stats = []  # GenerationStats of every generate batch
        self.requested_max_gen_toks: set = set()
        self.used_max_new_tokens: set = set()  # generation lengths actually used

    @classmethod
    def create_from_arg_string(cls, arg_string, additional_config=None):
        """lm-eval's CLI passes ``batch_size``/``device`` separately; ``model_args`` keys take precedence."""
        from lm_eval.utils import simple_parse_args_string

        args = simple_parse_args_string(arg_string)
        _merge_cli_config(args, additional_config)
        return cls(**args)

    @classmethod
    def create_from_arg_obj(cls, arg_dict, additional_config=None):
        args = dict(arg_dict)
        _merge_cli_config(args, additional_config)
        return cls(**args)

    # ------------------------------------------------------------------------------------------ properties
    @property
    def model_info(self) -> dict:
        info = {"source": self.lm.source, "mode": self.mode, **asdict(self.decode),
                "ar_baseline": self.ar_baseline, "loglikelihood_method": self.ll_method}
        if self.ll_method == "mc":
            info["mc_num"] = self.mc_num
        if self.task_lengths:
            info["max_new_tokens"] = TASK_LENGTH
        return info

    @property
    def tokenizer_name(self) -> str:
        return str(getattr(self.tokenizer, "name_or_path", "") or self.lm.source).replace("/", "__")

    def chat_template(self, chat_template=False):
        return getattr(self.tokenizer, "chat_template", None)

    def apply_chat_template(self, chat_history, add_generation_prompt=True) -> str:
        return self.tokenizer.apply_chat_template(chat_history, tokenize=False,
                                                  add_generation_prompt=add_generation_prompt)

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    def tok_encode(self, string: str, add_special_tokens=None, **kwargs) -> list[int]:
        return list(self.tokenizer.encode(string, add_special_tokens=False))

    # ------------------------------------------------------------------------------------------ generation
    @property
    def context_length(self) -> int | None:
        ctx = model_context(self.lm.model)
        return min(ctx, self._max_length) if ctx and self._max_length else (ctx or self._max_length)

    def generate_texts(self, prompts: list[str], disable_tqdm: bool = False, desc: str = "generate",
                       max_new_tokens: int | None = None, names: list[str] | None = None,
                       encoded: list[list[int]] | None = None) -> list[str]:
        """Decode ``prompts`` (already formatted strings) in batches; returns raw continuation texts (to EOS).
        ``max_new_tokens``: this call's generation length (default: the configured one).  A prompt that does not
        fit the context with it is refused (named by ``names[i]``, else its index) or, with
        ``truncate_prompts``, cut from the left.  ``encoded``: the prompts' token ids, when the caller has them."""
        n_new = int(max_new_tokens) if max_new_tokens is not None else self.decode.max_new_tokens
        decode = self.decode if n_new == self.decode.max_new_tokens else replace(self.decode, max_new_tokens=n_new)
        decode.validate(self.mode)
        self.used_max_new_tokens.add(n_new)
        enc = encoded if encoded is not None else [self.tok_encode(p) for p in prompts]
        for i, e in enumerate(enc):
            if not e:
                raise ValueError(f"prompt {i} encodes to no tokens")
        enc, n_cut = fit_context(enc, n_new, self.context_length, truncate=self.truncate_prompts, names=names)
        self.n_truncated_prompts += n_cut
        order = sorted(range(len(enc)), key=lambda i: -len(enc[i]))
        out: list[str | None] = [None] * len(enc)
        stop = self.lm.eos_token_ids
        bar = tqdm(total=len(enc), disable=disable_tqdm, desc=f"{desc} ({self.mode})")
        for s in range(0, len(order), self.batch_size):
            idx = order[s:s + self.batch_size]
            batch = [enc[i] for i in idx]
            if self.mode == "ar":
                res = ar_generate(self.lm.model, batch, stop_token_ids=stop, max_new_tokens=decode.max_new_tokens,
                                  baseline=self.ar_baseline, pad_token_id=self.tokenizer.pad_token_id)
            elif self.mode in MDM_MODES:
                res = mdm_generate(self.lm, batch, self.mode, decode, stop_token_ids=stop)
            else:
                res = bd_generate(self.lm.model, batch, mask_token_id=self.lm.mask_token_id, stop_token_ids=stop,
                                  config=decode)
            self.gen_stats.append(res.stats)
            for i, seq in zip(idx, res.sequences):
                seq = [t for t in seq if t not in stop]
                out[i] = self.tokenizer.decode(seq, skip_special_tokens=True)
            bar.update(len(idx))
        bar.close()
        return out  # type: ignore[return-value]

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        groups: dict[str, list[int]] = {}
        for i, req in enumerate(requests):
            _, kw = req.args
            groups.setdefault(repr(sorted((kw or {}).items(), key=lambda kv: kv[0])), []).append(i)
        results: list[str | None] = [None] * len(requests)
        plan = []
        for key, idx in groups.items():
            kw = dict(requests[idx[0]].args[1] or {})
            until = kw.get("until") or []
            if isinstance(until, str):
                until = [until]
            asked = request_max_gen_toks(kw)
            n_new = (asked or LM_EVAL_DEFAULT_MAX_GEN_TOKS) if self.task_lengths else None
            names = [_request_name(i, requests[i]) for i in idx]
            enc = [self.tok_encode(requests[i].args[0]) for i in idx]
            if not self.truncate_prompts:  # every group is checked before the first one is generated
                fit_context(enc, self.decode.max_new_tokens if n_new is None else n_new, self.context_length,
                            names=names)
            plan.append((idx, until, asked, n_new, names, enc))
        for idx, until, asked, n_new, names, enc in plan:
            if asked is not None:
                self.requested_max_gen_toks.add(asked)
            texts = self.generate_texts([requests[i].args[0] for i in idx], disable_tqdm=disable_tqdm,
                                        max_new_tokens=n_new, names=names, encoded=enc)
            for i, text in zip(idx, texts):
                for u in until:
                    if u and u in text:
                        text = text[: text.index(u)]
                results[i] = text
                self.cache_hook.add_partial("generate_until", requests[i].args, text)
        return results  # type: ignore[return-value]

    # ------------------------------------------------------------------------------------------ likelihood
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """lm-eval's split of the pair; where tokenisation merged across the boundary (the context's tokens are
        not a prefix of the whole's), the continuation is encoded on its own."""
        ctx, cont = super()._encode_pair(context, continuation)
        whole = self.tok_encode(context + continuation)
        if whole[: len(ctx)] != ctx or not cont:
            cont = self.tok_encode(context[len(context.rstrip()):] + continuation)
        if not ctx:
            raise ValueError("loglikelihood with an empty context is not supported by fast_dllm_v2")
        if not cont:
            raise ValueError(f"continuation {continuation!r} encodes to no tokens")
        return ctx, cont

    @torch.no_grad()
    def _bd_logprobs_at_mask(self, seqs: list[list[int]]) -> torch.Tensor:
        """log-softmax of the prediction for the trailing [MASK] of every sequence ``prefix + [MASK]``."""
        from ..masks import attention_kwargs, inference_spec

        model, D = self.lm.model, self.decode.block_size
        out = []
        for s in seqs:  # one row at a time: sequences differ in length and so in block layout
            ids = torch.tensor([s], device=self._device)
            n = ids.shape[1]
            pos = torch.arange(n, device=self._device)[None]
            kw = attention_kwargs(model, inference_spec(D, 0), n, n)
            logits = model(input_ids=ids, position_ids=pos, use_cache=False, **kw).logits[0, n - 2]
            out.append(torch.log_softmax(logits.float(), dim=-1))
        return torch.stack(out)

    @torch.no_grad()
    def _ar_loglik(self, ctx: list[int], cont: list[int]) -> tuple[float, bool]:
        ids = torch.tensor([ctx + cont], device=self._device)
        logits = self.lm.model(input_ids=ids, use_cache=False).logits[0, len(ctx) - 1: -1].float()
        lp = torch.log_softmax(logits, dim=-1)
        tgt = torch.tensor(cont, device=self._device)
        score = lp.gather(1, tgt[:, None]).sum().item()
        greedy = bool((lp.argmax(-1) == tgt).all().item())
        return score, greedy

    def loglikelihood(self, requests, disable_tqdm: bool = False) -> list[tuple[float, bool]]:
        """``TemplateLM.loglikelihood`` (every request tokenised first), then :meth:`_loglikelihood_tokens`."""
        if any(not req.args[0] for req in requests):
            raise ValueError("loglikelihood with an empty context is not supported by fast_dllm_v2")
        self._request_names = [_request_name(i, req) for i, req in enumerate(requests)]
        return super().loglikelihood(requests, disable_tqdm=disable_tqdm)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        names = getattr(self, "_request_names", None) or [f"request {i}" for i in range(len(requests))]
        # every request is fitted to the context before the first forward pass
        fitted = [self._fit_loglikelihood(i, ctx, cont, names[i]) for i, (_, ctx, cont) in enumerate(requests)]
        if self.ll_method == "exact":  # refused before the first forward pass, naming the request
            for i, (_, _, cont) in enumerate(requests):
                if len(cont) > EXACT_MAX_TOKENS:
                    raise ValueError(f"{names[i]}: loglikelihood_method=exact enumerates the 2**k - 1 mask patterns of "
                                     f"a k-token continuation; this one has {len(cont)} tokens (at most "
                                     f"{EXACT_MAX_TOKENS}): use loglikelihood_method=mc")
        res = []
        for (args, _, cont), ctx in zip(tqdm(requests, disable=disable_tqdm,
                                             desc=f"loglikelihood ({self.mode}, {self.ll_method})"), fitted):
            if self.mode == "ar":
                score, greedy = self._ar_loglik(ctx, cont)
            elif self.ll_method == "exact":
                score, greedy = self._exact_loglik(ctx, cont)
            elif self.mode in MDM_MODES:
                score, greedy = self._mc_loglik(ctx, cont)
            else:
                score, greedy = self._bd_loglik(ctx, cont)
            res.append((score, greedy))
            self.cache_hook.add_partial("loglikelihood", args, (score, greedy))
        return res

    def _bd_loglik(self, ctx: list[int], cont: list[int]) -> tuple[float, bool]:
        """Each scored continuation token read at a trailing [MASK] (the first one only, or the chain)."""
        steps = cont[:1] if self.ll_method == "first_token" else cont
        lps = self._bd_logprobs_at_mask([ctx + cont[:k] + [self.lm.mask_token_id] for k in range(len(steps))])
        tgt = torch.tensor(steps, device=lps.device)
        return lps.gather(1, tgt[:, None]).sum().item(), bool((lps.argmax(-1) == tgt).all().item())

    # ------------------------------------------------------------------------------------------ Monte Carlo
    def _mdm_logits(self, batch: torch.Tensor) -> torch.Tensor:
        from ..decoding.mdm import full_attention_kwargs

        model = self.lm.model
        kw = full_attention_kwargs(model, None, batch.shape[1], batch.shape[1], batch.shape[0])
        logits = model(input_ids=batch, use_cache=False, **kw).logits
        if self.lm.family.logit_shift:  # Dream: the logit at i-1 predicts token i
            logits = torch.cat([logits[:, :1], logits[:, :-1]], dim=1)
        return logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits

    @torch.no_grad()
    def _mc_loglik(self, ctx: list[int], cont: list[int]) -> tuple[float, bool]:
        """The family's Monte Carlo estimate of log p(cont | ctx) with :attr:`mc_num` samples (module docstring)."""
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
            logits = self._mdm_logits(torch.where(is_mask, mask_id, batch))
            ce = F.cross_entropy(logits[is_mask], batch[is_mask], reduction="none")  # masked positions only
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

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("fast_dllm_v2 does not implement loglikelihood_rolling (perplexity tasks); "
                                  "none of the paper's tasks uses it")
