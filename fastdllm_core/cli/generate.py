"""``fastdllm generate``: generate with the block-diffusion decoder (``--mode bd``), the AR baseline (``--mode ar``) or,
on LLaDA / Dream checkpoints, a masked-diffusion sampler (``--mode llada | dream | v1``).

    fastdllm generate --model DIR|HUB_ID|FILE.gguf --prompt "text" [--mode bd|ar] [decoding options] [--json]
    fastdllm generate --model M --prompts FILE           # one prompt per line, or JSONL (prompt/question/text/messages)

Plain output: the generated text of each prompt.  ``--json``: one JSON object with, per prompt, the prompt, the
token ids and the text, plus the run's statistics: generated tokens per row (up to and including EOS), NFE (model
forwards), tokens per forward, synchronised wall time, per-row latency and, for the diffusion decoder, decode
steps per block.  Model load and tokenisation are not timed.

A prompt whose length plus ``--max-new-tokens`` exceeds the model's context (``max_position_embeddings``) is
refused, naming it and both lengths; ``--truncate-prompts left`` cuts it from the left instead (``--json``
reports ``truncated_prompts``).
"""
from __future__ import annotations

import argparse
import json
import sys

from ..decode_config import MDM_MODES
from ..decoding import DecodeConfig, ar_generate, bd_generate, check_family, fit_context, mdm_generate, model_context
from .args import (
    add_decode_args,
    add_ignore_eos_arg,
    add_mode_args,
    add_model_args,
    add_prompt_file_args,
    add_truncate_arg,
    check_device,
    decode_config,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastdllm generate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, "local directory, Hub id, or .gguf file")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="one prompt")
    add_prompt_file_args(p, "file: one prompt per line, or JSONL with prompt/question/text/messages", group=src)
    add_mode_args(p)
    add_ignore_eos_arg(add_decode_args(p))
    p.add_argument("--attn", default=None, choices=["sdpa", "eager", "flex_attention"],
                   help="attention kernel (default: flex_attention on CUDA, sdpa elsewhere)")
    p.add_argument("--json", action="store_true", help="print JSON with token ids, text and statistics")
    add_truncate_arg(p, "the count is reported")
    return p


def _check_args(args) -> DecodeConfig:
    if args.mode == "ar":
        if not isinstance(args.max_new_tokens, int) or args.max_new_tokens <= 0:
            raise ValueError(f"--max-new-tokens must be a positive integer, got {args.max_new_tokens!r}")
        if args.temperature != 0:
            raise ValueError(f"--mode ar is the greedy baseline; --temperature {args.temperature} is not supported")
    cfg = decode_config(args)
    check_device(args.device)
    return cfg


def _load(args, cfg: DecodeConfig):
    """(loaded model, decoding setting with its block size, prompt texts, prompt ids, number truncated)."""
    from ..loading import load_model
    from ..prompts import encode_prompts, read_prompt_texts

    texts = [args.prompt] if args.prompt is not None else read_prompt_texts(args.prompts, args.prompt_field)
    if any(not t for t in texts):
        raise ValueError("empty prompt")
    lm = load_model(args.model, device=args.device, dtype=args.dtype, attn_implementation=args.attn,
                    block_size=args.block_size)
    check_family(lm, args.mode)
    if args.block_size is None and args.mode == "bd":
        cfg = cfg.with_block_size(lm.block_size).validate()
    prompts = encode_prompts(lm.tokenizer, texts, args.chat)
    prompts, n_truncated = fit_context(prompts, args.max_new_tokens, model_context(lm.model),
                                       truncate=args.truncate_prompts == "left")
    return lm, cfg, texts, prompts, n_truncated


def _generate(args, lm, cfg: DecodeConfig, prompts):
    stops = [] if args.ignore_eos else lm.eos_token_ids
    if args.mode == "bd":
        return bd_generate(lm.model, prompts, mask_token_id=lm.mask_token_id, stop_token_ids=stops, config=cfg)
    if args.mode in MDM_MODES:  # no EOS stop: the stop ids only end the counted tokens
        return mdm_generate(lm, prompts, args.mode, cfg, stop_token_ids=stops)
    return ar_generate(lm.model, prompts, stop_token_ids=stops, max_new_tokens=args.max_new_tokens,
                       baseline=args.ar_baseline)


def _print(args, cfg: DecodeConfig, out, texts, prompts, decoded, n_truncated) -> None:
    if args.json:
        doc = {
            "model": args.model, "mode": args.mode,
            "baseline": args.ar_baseline if args.mode == "ar" else "bd",
            "decode_config": cfg.to_dict() if args.mode != "ar" else {"max_new_tokens": args.max_new_tokens},
            "point": cfg.slug(args.mode),
            "outputs": [{"prompt": t, "prompt_ids": p, "token_ids": s, "text": d}
                        for t, p, s, d in zip(texts, prompts, out.sequences, decoded)],
            "stats": out.stats.to_dict(), "truncated_prompts": n_truncated,
        }
        print(json.dumps(doc, indent=2))
        return
    for i, d in enumerate(decoded):
        if len(decoded) > 1:
            print(f"### {i}")
        print(d)
    s = out.stats
    if n_truncated:
        print(f"note: {n_truncated} prompt(s) cut from the left to fit the model's context", file=sys.stderr)
    print(f"[{s.mode}] {s.total_tokens} tokens, {s.nfe} forwards, {s.tokens_per_forward:.2f} tokens/forward, "
          f"{s.wall_time_s:.3f} s, {s.tokens_per_second:.1f} tokens/s", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        lm, cfg, texts, prompts, n_truncated = _load(args, _check_args(args))
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"fastdllm generate: error: {exc}", file=sys.stderr)
        return 2
    out = _generate(args, lm, cfg, prompts)
    decoded = [lm.tokenizer.decode(s, skip_special_tokens=True) for s in out.sequences]
    _print(args, cfg, out, texts, prompts, decoded, n_truncated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
