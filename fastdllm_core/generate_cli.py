"""``fastdllm generate``: generate with the block-diffusion decoder (``--mode bd``) or the AR baseline (``--mode ar``).

    fastdllm generate --model DIR|HUB_ID|FILE.gguf --prompt "text" [--mode bd|ar] [decoding options] [--json]
    fastdllm generate --model M --prompts FILE            # one prompt per line, or JSONL (prompt/question/text/messages)

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

import torch

from .decoding import DecodeConfig, ar_generate, bd_generate, fit_context, model_context


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastdllm generate", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="local directory, Hub id, or .gguf file")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--prompt", help="one prompt")
    src.add_argument("--prompts", help="file: one prompt per line, or JSONL with prompt/question/text/messages")
    p.add_argument("--prompt-field", default=None, help="JSONL field holding the prompt")
    p.add_argument("--mode", choices=["bd", "ar"], default="bd", help="bd: block diffusion (default); ar: HF greedy")
    p.add_argument("--ar-baseline", choices=["hf", "hf_static"], default="hf",
                   help="AR baseline: hf (dynamic cache) or hf_static (static cache + torch.compile on CUDA)")
    d = p.add_argument_group("decoding")
    d.add_argument("--max-new-tokens", type=int, default=256)
    d.add_argument("--block-size", type=int, default=None, help="default: the checkpoint's bd_size (or 32)")
    d.add_argument("--sub-block-size", type=int, default=8)
    d.add_argument("--threshold", type=float, default=0.9, help="confidence threshold in (0, 1]")
    d.add_argument("--sub-block-cache", action="store_true", help="use the sub-block (DualCache) cache")
    d.add_argument("--temperature", type=float, default=0.0)
    d.add_argument("--top-p", type=float, default=1.0)
    d.add_argument("--seed", type=int, default=None)
    d.add_argument("--ignore-eos", action="store_true", help="no stop ids: generate max-new-tokens per prompt")
    chat = p.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=None,
                      help="apply the chat template (default when the tokenizer has one)")
    chat.add_argument("--no-chat", dest="chat", action="store_false", help="encode the prompt as plain text")
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="auto", help="auto (bf16 on CUDA, fp32 elsewhere), float32, bfloat16, ...")
    p.add_argument("--attn", default=None, choices=["sdpa", "eager", "flex_attention"],
                   help="attention kernel (default: flex_attention on CUDA, sdpa elsewhere)")
    p.add_argument("--json", action="store_true", help="print JSON with token ids, text and statistics")
    p.add_argument("--truncate-prompts", choices=["none", "left"], default="none",
                   help="a prompt that does not fit the model's context with --max-new-tokens: refused (none, the "
                        "default) or cut from the left (left; the count is reported)")
    return p


def _check_args(args) -> DecodeConfig:
    if args.mode == "ar":
        if not isinstance(args.max_new_tokens, int) or args.max_new_tokens <= 0:
            raise ValueError(f"--max-new-tokens must be a positive integer, got {args.max_new_tokens!r}")
        if args.temperature != 0:
            raise ValueError(f"--mode ar is the greedy baseline; --temperature {args.temperature} is not supported")
    cfg = DecodeConfig(block_size=args.block_size or 32, sub_block_size=args.sub_block_size, threshold=args.threshold,
                       use_sub_block_cache=args.sub_block_cache, max_new_tokens=args.max_new_tokens,
                       temperature=args.temperature, top_p=args.top_p, seed=args.seed)
    cfg.validate()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: CUDA is not available on this machine")
    return cfg


def main(argv: list[str] | None = None) -> int:
    from .bench import encode_prompts, read_prompt_texts

    args = build_parser().parse_args(argv)
    try:
        cfg = _check_args(args)
        texts = [args.prompt] if args.prompt is not None else read_prompt_texts(args.prompts, args.prompt_field)
        if any(not t for t in texts):
            raise ValueError("empty prompt")
        from .model import load_model

        lm = load_model(args.model, device=args.device, dtype=args.dtype, attn_implementation=args.attn,
                        block_size=args.block_size)
        if args.block_size is None:
            cfg = cfg.with_block_size(lm.block_size).validate()
        prompts = encode_prompts(lm.tokenizer, texts, args.chat)
        prompts, n_truncated = fit_context(prompts, args.max_new_tokens, model_context(lm.model),
                                           truncate=args.truncate_prompts == "left")
    except (ValueError, FileNotFoundError, OSError) as exc:
        print(f"fastdllm generate: error: {exc}", file=sys.stderr)
        return 2
    stops = [] if args.ignore_eos else lm.eos_token_ids
    if args.mode == "bd":
        out = bd_generate(lm.model, prompts, mask_token_id=lm.mask_token_id, stop_token_ids=stops, config=cfg)
    else:
        gc = lm.model.generation_config
        old = gc.eos_token_id
        if args.ignore_eos:
            gc.eos_token_id = None
        try:
            out = ar_generate(lm.model, prompts, stop_token_ids=stops, max_new_tokens=args.max_new_tokens,
                              baseline=args.ar_baseline)
        finally:
            gc.eos_token_id = old
    decoded = [lm.tokenizer.decode(s, skip_special_tokens=True) for s in out.sequences]
    if args.json:
        stats = out.stats.to_dict()
        doc = {
            "model": args.model, "mode": args.mode,
            "baseline": args.ar_baseline if args.mode == "ar" else "bd",
            "decode_config": {**cfg.__dict__} if args.mode == "bd" else {"max_new_tokens": args.max_new_tokens},
            "outputs": [{"prompt": t, "prompt_ids": p, "token_ids": s, "text": d}
                        for t, p, s, d in zip(texts, prompts, out.sequences, decoded)],
            "stats": stats, "truncated_prompts": n_truncated,
        }
        print(json.dumps(doc, indent=2))
    else:
        for i, d in enumerate(decoded):
            if len(decoded) > 1:
                print(f"### {i}")
            print(d)
        s = out.stats
        if n_truncated:
            print(f"note: {n_truncated} prompt(s) cut from the left to fit the model's context", file=sys.stderr)
        print(f"[{s.mode}] {s.total_tokens} tokens, {s.nfe} forwards, {s.tokens_per_forward:.2f} tokens/forward, "
              f"{s.wall_time_s:.3f} s, {s.tokens_per_second:.1f} tokens/s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
