"""The arguments the ``fastdllm`` commands share, declared once: the model, the decoding setting (one
:class:`~fastdllm_core.decode_config.DecodeConfig`), prompt files, context truncation."""
from __future__ import annotations

import argparse

from ..decode_config import (
    ALGS,
    AR_BASELINES,
    BLOCK_SIZE,
    CACHES,
    DECODE_PATHS,
    EOS_RULES,
    MODES,
    REMASKING,
    SUB_BLOCK_SIZE,
    DecodeConfig,
    parse_bool,
)

AR_BASELINE_HELP = ("AR baseline: hf (dynamic cache), hf_static (HF static cache + torch.compile on CUDA), static "
                    "(this project's static cache, its one-token forward captured as a CUDA graph on a GPU) or "
                    "compiled (the same, the forward compiled by torch.compile first)")


def arg_bool(s: str) -> bool:
    """argparse type of a boolean word (:func:`~fastdllm_core.decode_config.parse_bool`)."""
    try:
        return parse_bool(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected true/false, got {s!r}") from None


def arg_length(s: str):
    """argparse type of a generation length: a positive integer, or ``task`` (each benchmark's own)."""
    if s.strip().lower() == "task":
        return "task"
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or 'task', got {s!r}") from None


def add_model_args(p: argparse.ArgumentParser, model_help: str, *, dtype_help: str = "auto (bf16 on CUDA, fp32 "
                   "elsewhere), float32, bfloat16, ...") -> None:
    p.add_argument("--model", required=True, help=model_help)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="auto", help=dtype_help)


def arg_threshold(s: str):
    """argparse type of a threshold: a number, or ``none`` (v1's step schedule)."""
    if s.strip().lower() == "none":
        return None
    try:
        return float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1] or 'none', got {s!r}") from None


def add_mode_args(p) -> None:
    p.add_argument("--mode", choices=list(MODES), default="bd",
                   help="bd: block diffusion (default); ar: HF greedy; llada: LLaDA's generate; dream: Dream's "
                        "diffusion_generate; v1: Fast-dLLM v1 threshold decoding (LLaDA / Dream checkpoints)")
    p.add_argument("--ar-baseline", choices=list(AR_BASELINES), default="hf", help=AR_BASELINE_HELP)


def add_block_size_arg(p) -> None:
    p.add_argument("--block-size", type=int, default=None,
                   help=f"default: the checkpoint's bd_size (or {BLOCK_SIZE})")


def add_decode_args(p, *, task_length: bool = False, sampling: bool = True):
    """The decoding setting: block and sub-block size, threshold, sub-block cache, generation length and (with
    ``sampling``) temperature, top-p and seed.  Returns the argument group."""
    d = p.add_argument_group("decoding")
    if task_length:
        d.add_argument("--max-new-tokens", type=arg_length, default=256,
                       help="generation length: an integer, or 'task' for each benchmark's own (lm-eval task "
                            "max_gen_toks, else 256; EvalPlus 768)")
    else:
        d.add_argument("--max-new-tokens", type=int, default=256)
    add_block_size_arg(d)
    d.add_argument("--sub-block-size", type=int, default=SUB_BLOCK_SIZE)
    d.add_argument("--threshold", type=arg_threshold, default=0.9,
                   help="confidence threshold in (0, 1] (v1: or 'none' for the cached step schedule)")
    d.add_argument("--sub-block-cache", "--use-sub-block-cache", dest="sub_block_cache", type=arg_bool, nargs="?",
                   const=True, default=False, metavar="BOOL",
                   help="use the sub-block (DualCache) cache (alone, or followed by true/false, on/off)")
    d.add_argument("--eos-rule", choices=EOS_RULES, default="fill_block",
                   help="bd: fill_block (the official batch_sample: positions after a row's first EOS are still "
                        "unmasked until the block is full) or stop (they are not)")
    d.add_argument("--decode-path", choices=list(DECODE_PATHS), default="eager",
                   help="bd: eager (forwards at each step's exact shapes), static (fixed shapes over a static "
                        "cache, captured as CUDA graphs on a GPU) or compiled (the same, each shape compiled by "
                        "torch.compile first); the same tokens")
    if sampling:
        d.add_argument("--temperature", type=float, default=0.0)
        d.add_argument("--top-p", type=float, default=1.0)
        d.add_argument("--seed", type=int, default=None)
    m = p.add_argument_group("masked-diffusion samplers (--mode llada / dream / v1; --max-new-tokens is gen_length, "
                             "--block-size the block length)")
    m.add_argument("--steps", type=int, default=None,
                   help="diffusion steps over the generation (default: gen_length for llada / dream, one per block "
                        "for v1)")
    m.add_argument("--remasking", choices=list(REMASKING), default="low_confidence", help="llada")
    m.add_argument("--alg", choices=list(ALGS), default="entropy", help="dream")
    m.add_argument("--alg-temp", type=float, default=0.0, help="dream")
    m.add_argument("--eps", type=float, default=1e-3, help="dream: the last timestep")
    m.add_argument("--cache", choices=list(CACHES), default="none", help="v1: no cache, prefix or dual cache")
    m.add_argument("--logits-eos-inf", action="store_true", help="llada: EOS logit -inf (LLaDA Appendix B.4)")
    m.add_argument("--confidence-eos-eot-inf", action="store_true", help="llada: no confidence for EOS / EoT")
    return d


def decode_config(args, *, max_new_tokens: int | None = None, seed=None) -> DecodeConfig:
    """The :class:`DecodeConfig` the arguments of :func:`add_decode_args` ask for, validated for ``args.mode``
    (bd: the block size :data:`BLOCK_SIZE` until the model's is known, :meth:`DecodeConfig.with_block_size`;
    llada: block length = gen_length unless given, LLaDA's published default; ``steps`` resolved by
    :meth:`DecodeConfig.with_mode_defaults`)."""
    mode = getattr(args, "mode", "bd")
    n_new = args.max_new_tokens if max_new_tokens is None else max_new_tokens
    block = args.block_size or (n_new if mode == "llada" and isinstance(n_new, int) else BLOCK_SIZE)
    return DecodeConfig(block_size=block, sub_block_size=args.sub_block_size,
                        threshold=args.threshold, use_sub_block_cache=args.sub_block_cache,
                        eos_rule=getattr(args, "eos_rule", "fill_block"), max_new_tokens=n_new,
                        decode_path=getattr(args, "decode_path", "eager"),
                        temperature=getattr(args, "temperature", 0.0), top_p=getattr(args, "top_p", 1.0),
                        seed=getattr(args, "seed", None) if seed is None else seed, steps=args.steps,
                        remasking=args.remasking, alg=args.alg, alg_temp=args.alg_temp, eps=args.eps, cache=args.cache,
                        logits_eos_inf=args.logits_eos_inf, confidence_eos_eot_inf=args.confidence_eos_eot_inf,
                        ).with_mode_defaults(mode).validate(mode)


def add_prompt_file_args(p, prompts_help: str, *, group=None) -> None:
    """``--prompts FILE`` (in ``group`` when given), ``--prompt-field`` and ``--chat`` / ``--no-chat``."""
    (group or p).add_argument("--prompts", default=None, help=prompts_help)
    p.add_argument("--prompt-field", default=None, help="JSONL field holding the prompt")
    chat = p.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=None,
                      help="apply the chat template (default when the tokenizer has one)")
    chat.add_argument("--no-chat", dest="chat", action="store_false", help="encode prompts as plain text")


def add_ignore_eos_arg(p) -> None:
    p.add_argument("--ignore-eos", action="store_true", help="no stop ids: generate max-new-tokens per prompt")


def add_truncate_arg(p, reported: str = "counted in the truncated_prompts column") -> None:
    p.add_argument("--truncate-prompts", choices=["none", "left"], default="none",
                   help="a prompt that does not fit the model's context with --max-new-tokens: refused (none, the "
                        f"default) or cut from the left (left; {reported})")


def check_device(device: str) -> None:
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available on this machine")
