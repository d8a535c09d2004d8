"""The lm-eval model ``fast_dllm_v2``: the project's block-diffusion decoder (or the AR baseline) behind
lm-eval's ``LM`` interface.

Every decoding option is a ``model_args`` key::

    lm_eval --model fast_dllm_v2 --model_args pretrained=PATH,mode=bd,threshold=0.9,sub_block_size=8,...

Keys: ``pretrained`` (Hub id, directory or .gguf file), ``mode`` (``bd`` | ``ar`` | ``llada`` | ``dream`` | ``v1``),
``block_size``, ``sub_block_size``, ``threshold``, ``use_sub_block_cache``, ``max_new_tokens``, ``temperature``,
``top_p``, ``seed``, ``batch_size``, ``device``, ``dtype``, ``attn_implementation``, ``ar_baseline`` (``hf`` |
``hf_static`` | ``static`` | ``compiled``), ``decode_path`` (bd: ``eager`` | ``static`` | ``compiled``),
``loglikelihood_method``
(``first_token`` | ``chain``; masked diffusion: ``mc`` | ``exact`` | ``auto``, see :mod:`.likelihood`),
``max_length`` (the context length to respect; default the model's ``max_position_embeddings``),
``truncate_prompts`` (``false`` | ``left``); the masked-diffusion samplers' ``steps``, ``remasking``, ``alg``,
``alg_temp``, ``eps``, ``cache``, ``logits_eos_inf``, ``confidence_eos_eot_inf`` (DecodeConfig); ``mc_num``.

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
    used.  The scores: :mod:`fastdllm_core.evaluation.likelihood`.

Throughput: :attr:`FastDLLMv2.gen_stats` keeps the decoder's own :class:`GenerationStats` of every batch
(tokens up to and including EOS; synchronised generation wall time, tokenisation excluded).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, replace

import torch
from tqdm import tqdm

from ..decode_config import AR_BASELINES, BLOCK_SIZE, MDM_MODES, MODES, parse_bool
from ..decoding import DecodeConfig, ar_generate, bd_generate, check_family, fit_context, mdm_generate, model_context
from ..loading import LoadedModel, load_model
from .likelihood import EXACT_MAX_TOKENS, LL_METHODS, MDM_LL_METHODS, LikelihoodMixin
from .task_common import encode_pair

log = logging.getLogger(__name__)

try:  # lm-eval is a hard dependency of the project, but keep the module importable for docs tooling
    from lm_eval.api.model import TemplateLM
    from lm_eval.api.registry import register_model
except ImportError as exc:  # pragma: no cover
    raise ImportError("lm-eval is required for fastdllm_core.evaluation (pip install lm-eval)") from exc

MODEL_NAME = "fast_dllm_v2"
TASK_LENGTH = "task"  # max_new_tokens=task: each benchmark's own generation length
# lm-eval's default generation length for a task that sets none (normalize_gen_kwargs / HFLM max_gen_toks)
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


def _refuse_unknown_keys(unknown: dict) -> None:
    """A ``model_args`` key :class:`FastDLLMv2` does not take: refused, naming the closest valid key."""
    import difflib
    import inspect

    valid = [k for k in inspect.signature(FastDLLMv2.__init__).parameters if k not in ("self", "model", "unknown")]
    key = sorted(unknown)[0]
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ValueError(f"unknown fast_dllm_v2 model_args key {key!r}{hint} (valid keys: {', '.join(valid)})")


def _batch_size(batch_size) -> int:
    """``batch_size`` as a positive integer (lm-eval's ``auto`` is refused)."""
    bs = str(batch_size)
    if bs.startswith("auto"):
        raise ValueError("batch_size=auto is not supported by fast_dllm_v2: give an integer")
    if int(bs) <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size!r}")
    return int(bs)


def _load(pretrained, device, dtype, attn_implementation, block_size) -> LoadedModel:
    """The model of ``model_args pretrained=`` (:func:`~fastdllm_core.loading.load_model`)."""
    if not pretrained:
        raise ValueError("fast_dllm_v2 needs model_args pretrained=<hub id | directory | .gguf file>")
    return load_model(str(pretrained), device=str(device), dtype=dtype, attn_implementation=attn_implementation,
                      block_size=_opt_int(block_size))


def _request_name(i: int, req) -> str:
    """``request <i>`` plus, for lm-eval's Instance, its task and document (where to find the prompt)."""
    task, doc = getattr(req, "task_name", None), getattr(req, "doc_id", None)
    return f"request {i}" + (f" ({task} doc {doc})" if task is not None and doc is not None else "")


@register_model(MODEL_NAME)
class FastDLLMv2(LikelihoodMixin, TemplateLM):
    """lm-eval's ``TemplateLM`` with its (context, continuation) split (:func:`~.task_common.encode_pair`: trailing
    spaces onto the continuation, a line break kept); this class adds the decoders, the context checks and the
    block-diffusion scores."""

    def __init__(self, pretrained=None, model: LoadedModel | None = None, mode: str = "bd", block_size=None,
                 sub_block_size=8, threshold=0.9, use_sub_block_cache=False, eos_rule="fill_block",
                 max_new_tokens=256, temperature=0.0,
                 top_p=1.0, seed=None, batch_size=8, device="cpu", dtype="auto", attn_implementation=None,
                 ar_baseline="hf", loglikelihood_method=None, max_length=None, truncate_prompts=False,
                 steps=None, remasking="low_confidence", alg="entropy", alg_temp=0.0, eps=1e-3, cache="none",
                 logits_eos_inf=False, confidence_eos_eot_inf=False, mc_num=128, decode_path="eager", **unknown):
        super().__init__()
        if unknown:
            _refuse_unknown_keys(unknown)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if loglikelihood_method in (None, "", "none"):
            loglikelihood_method = "mc" if mode in MDM_MODES else "chain"
        if loglikelihood_method not in LL_METHODS:
            raise ValueError(f"loglikelihood_method must be one of {LL_METHODS}, got {loglikelihood_method!r}")
        if ar_baseline not in AR_BASELINES:
            raise ValueError(f"ar_baseline must be one of {AR_BASELINES}, got {ar_baseline!r}")
        self.batch_size = _batch_size(batch_size)
        self.mode = mode
        self.ar_baseline = ar_baseline
        self.ll_method = loglikelihood_method
        if (mode in MDM_MODES) != (loglikelihood_method in MDM_LL_METHODS):
            raise ValueError(f"loglikelihood_method={loglikelihood_method!r} does not apply to mode {mode} (mc / exact "
                             "are the masked-diffusion modes' Monte Carlo estimate and its exact expectation; "
                             "first_token / chain the others')")
        self.mc_num = int(mc_num)
        self.ll_used: set = set()  # the likelihood methods the request batches were scored with (auto: resolved)
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
            use_sub_block_cache=_as_bool(use_sub_block_cache), eos_rule=str(eos_rule), max_new_tokens=n_new,
            temperature=float(temperature), top_p=float(top_p), seed=_opt_int(seed), steps=_opt_int(steps),
            remasking=str(remasking), alg=str(alg), alg_temp=float(alg_temp), eps=float(eps), cache=str(cache),
            logits_eos_inf=_as_bool(logits_eos_inf), confidence_eos_eot_inf=_as_bool(confidence_eos_eot_inf),
            decode_path=str(decode_path)).with_mode_defaults(mode).validate(mode)
        if model is None:
            model = _load(pretrained, device, dtype, attn_implementation, block_size)
        self._attach(model, block_size)
        self._max_length = _opt_int(max_length)
        self.truncate_prompts = str(truncate_prompts).strip().lower() == "left" or (
            str(truncate_prompts).strip().lower() != "none" and _as_bool(truncate_prompts))
        self.n_truncated_prompts = 0  # prompts cut from the left to fit the context (only with truncate_prompts)
        self.gen_stats = []  # GenerationStats of every generate batch
        self.requested_max_gen_toks: set = set()
        self.used_max_new_tokens: set = set()  # generation lengths actually used

    def _attach(self, model: LoadedModel, block_size) -> None:
        """Use ``model`` (its family checked against the mode; with no ``block_size`` given, a ``bd`` model's own
        ``bd_size`` becomes the block size) and seed the Monte Carlo likelihood's generator."""
        self.lm = model
        check_family(model, self.mode)
        if _opt_int(block_size) is None and self.mode == "bd":  # the checkpoint's bd_size is the default block size
            self.decode = self.decode.with_block_size(model.block_size).validate(self.mode)
        self._mc_gen = torch.Generator(device=model.model.device)
        self._mc_gen.manual_seed(0 if self.decode.seed is None else self.decode.seed)
        self.tokenizer = model.tokenizer
        self._device = model.model.device

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
        if self.ll_method in ("mc", "auto"):
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
                       encoded: list[list[int]] | None = None, on_done=None) -> list[str]:
        """Decode ``prompts`` (already formatted strings) in batches; returns raw continuation texts (to EOS),
        each also passed to ``on_done(i, text)`` as soon as its batch is decoded (progress kept per item).
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
                # Dream's sampler: a row leaves the batch once its text is final (same outputs, fewer forwards)
                res = mdm_generate(self.lm, batch, self.mode, decode, stop_token_ids=stop,
                                   stop_when_final=self.mode == "dream")
            else:
                res = bd_generate(self.lm.model, batch, mask_token_id=self.lm.mask_token_id, stop_token_ids=stop,
                                  config=decode)
            self.gen_stats.append(res.stats)
            for i, seq in zip(idx, res.sequences):
                seq = [t for t in seq if t not in stop]
                out[i] = self.tokenizer.decode(seq, skip_special_tokens=True)
                if on_done is not None:
                    on_done(i, out[i])
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
        for _key, idx in groups.items():
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
            def done(j, text, idx=idx, until=until):  # kept as each batch ends (lm-eval's use_cache: resumable)
                for u in (u for u in until if u and u in text):
                    text = text[: text.index(u)]
                results[idx[j]] = text
                self.cache_hook.add_partial("generate_until", requests[idx[j]].args, text)

            self.generate_texts([requests[i].args[0] for i in idx], disable_tqdm=disable_tqdm,
                                max_new_tokens=n_new, names=names, encoded=enc, on_done=done)
        return results  # type: ignore[return-value]

    # ------------------------------------------------------------------------------------------ likelihood
    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """The pair's ids (:func:`~.task_common.encode_pair`: a chat template's trailing line break stays in the
        context)."""
        ctx, cont = encode_pair(self.tok_encode, context, continuation)
        if not ctx:
            raise ValueError("loglikelihood with an empty context is not supported by fast_dllm_v2")
        if not cont:
            raise ValueError(f"continuation {continuation!r} encodes to no tokens")
        return ctx, cont

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
        method = self._batch_ll_method([len(cont) for _, _, cont in requests])
        self._forget_forwards()
        if method == "exact":  # refused before the first forward pass, naming the request
            for i, (_, _, cont) in enumerate(requests):
                if len(cont) > EXACT_MAX_TOKENS:
                    raise ValueError(f"{names[i]}: loglikelihood_method=exact enumerates the 2**k - 1 mask patterns of "
                                     f"a k-token continuation; this one has {len(cont)} tokens (at most "
                                     f"{EXACT_MAX_TOKENS}): use loglikelihood_method=mc")
        res = []
        for (args, _, cont), ctx in zip(tqdm(requests, disable=disable_tqdm,
                                             desc=f"loglikelihood ({self.mode}, {method})"), fitted):
            if self.mode == "ar":
                score, greedy = self._ar_loglik(ctx, cont)
            elif method == "exact":
                score, greedy = self._exact_loglik(ctx, cont)
            elif self.mode in MDM_MODES:
                score, greedy = self._mc_loglik(ctx, cont)
            else:
                score, greedy = self._bd_loglik(ctx, cont)
            res.append((score, greedy))
            self.cache_hook.add_partial("loglikelihood", args, (score, greedy))
        return res

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False):
        raise NotImplementedError("fast_dllm_v2 does not implement loglikelihood_rolling (perplexity tasks); "
                                  "none of the paper's tasks uses it")
