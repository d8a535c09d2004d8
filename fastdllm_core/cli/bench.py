"""``fastdllm bench``: a throughput sweep (:func:`fastdllm_core.bench.run_sweep`), one CSV row per configuration."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..decode_config import BLOCK_SIZE, DECODE_PATHS, SUB_BLOCK_SIZE, parse_bool
from .args import add_block_size_arg, add_ignore_eos_arg, add_model_args, add_prompt_file_args, add_truncate_arg


def build_parser() -> argparse.ArgumentParser:
    from ..bench import MODEL_SHAPES, sweep

    p = argparse.ArgumentParser(prog="fastdllm bench", description=sweep.__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_args(p, "Hub id, directory, .gguf, or random:SHAPE " f"(SHAPE in tiny, {', '.join(MODEL_SHAPES)})")
    p.add_argument("--model-label", default=None, help="label for the rows (default: the model's name)")
    p.add_argument("--out", required=True, help="CSV path (rewritten atomically after every row)")
    src = p.add_argument_group("prompts")
    add_prompt_file_args(src, "JSONL (prompt/question/text/messages) or text file, one per line")
    src.add_argument("--n-prompts", type=int, default=None, help="use the first N prompts of the file")
    src.add_argument("--synthetic-prompts", type=int, default=None, metavar="N",
                     help="N random token prompts instead of a file (needed for random models without tokenizer)")
    src.add_argument("--prompt-len", type=int, default=128, help="length of synthetic prompts")
    src.add_argument("--prompt-set", default=None, help="name of the prompt set for the rows")
    _add_grid_args(p.add_argument_group("grid"))
    _add_measurement_args(p.add_argument_group("measurement"))
    return p


def _add_grid_args(g) -> None:
    g.add_argument("--modes", nargs="*", default=["ar", "bd"], help="ar and/or bd (none: only --points)")
    g.add_argument("--points", nargs="+", default=[],
                   help="masked-diffusion settings by point name (LLaDA / Dream checkpoints), e.g. "
                        "llada_g256_s256_b32_lc dream_g256_s256_entropy v1_g256_s8_b32_t0.9_dual")
    g.add_argument("--ar-baselines", nargs="+", default=["hf", "hf_static"],
                   help="hf (dynamic cache), hf_static (HF static cache + torch.compile on CUDA), static (this "
                        "project's static cache + captured one-token forward), compiled (the same, torch.compile "
                        "first)")
    g.add_argument("--decode-paths", nargs="+", default=["eager"], choices=list(DECODE_PATHS),
                   help="bd rows: eager, static (fixed shapes over a static cache, CUDA graphs on a GPU) and/or "
                        "compiled (the same, each shape compiled by torch.compile first)")
    g.add_argument("--thresholds", nargs="+", type=float, default=[1.0, 0.95, 0.9, 0.8, 0.7, 0.5])
    g.add_argument("--sub-block-sizes", nargs="+", type=int, default=[2, 4, 8, 16, 32])
    g.add_argument("--sub-block-cache", nargs="+", default=["off", "on"], help="on, off or both")
    g.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4, 16, 32, 64])
    g.add_argument("--grid", choices=["cross", "axes"], default="axes",
                   help="axes (default): vary one factor at a time around the base configuration; "
                        "cross: all combinations")
    g.add_argument("--base-threshold", type=float, default=0.9)
    g.add_argument("--base-sub-block-size", type=int, default=SUB_BLOCK_SIZE)
    g.add_argument("--base-cache", choices=["off", "on"], default="off")
    g.add_argument("--forced-k", nargs="+", type=int, default=[],
                   help="synthetic acceptance: diffusion rows accept exactly k tokens per step (acceptance=forced_k)")
    add_block_size_arg(g)
    g.add_argument("--max-new-tokens", type=int, default=256)


def _add_measurement_args(m) -> None:
    m.add_argument("--warmup", type=int, default=1)
    m.add_argument("--repeats", type=int, default=3)
    m.add_argument("--no-profile", dest="profile", action="store_false", help="skip the decoder-overhead pass")
    add_ignore_eos_arg(m)
    m.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                   help="torch.compile for the hf_static baseline (auto: on CUDA only)")
    m.add_argument("--nvml-hz", type=float, default=20.0)
    m.add_argument("--attn", default="sdpa", choices=["sdpa", "eager", "flex_attention"],
                   help="attention kernel for both modes (sdpa: the fair fast choice for HF generate)")
    m.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--quiet", action="store_true", help="no progress bar")
    add_truncate_arg(m)


def _bool_list(vals: list[str]) -> tuple:
    try:
        return tuple(dict.fromkeys(parse_bool(v) for v in vals))
    except ValueError as exc:
        raise ValueError(f"--sub-block-cache takes on/off: {exc}") from None


def sweep_config(args):
    """The :class:`~fastdllm_core.bench.SweepConfig` of the arguments (cheap checks before any model load)."""
    from ..bench import SweepConfig

    cfg = SweepConfig(
        modes=tuple(args.modes), ar_baselines=tuple(args.ar_baselines), thresholds=tuple(args.thresholds),
        sub_block_sizes=tuple(args.sub_block_sizes), sub_block_cache=_bool_list(args.sub_block_cache),
        decode_paths=tuple(dict.fromkeys(args.decode_paths)),
        batch_sizes=tuple(args.batch_sizes), forced_k=tuple(args.forced_k), block_size=args.block_size,
        max_new_tokens=args.max_new_tokens, grid=args.grid, base_threshold=args.base_threshold,
        base_sub_block_size=args.base_sub_block_size, base_cache=args.base_cache == "on", warmup=args.warmup,
        repeats=args.repeats, profile=args.profile, ignore_eos=args.ignore_eos,
        compile={"auto": None, "on": True, "off": False}[args.compile], nvml_hz=args.nvml_hz, seed=args.seed,
        truncate_prompts=args.truncate_prompts == "left", points=tuple(args.points))
    return cfg.validate(args.block_size or BLOCK_SIZE)  # re-checked with the model's block size


def _prompt_texts(args) -> list[str] | None:
    from ..prompts import read_prompt_texts

    if args.prompts and args.synthetic_prompts:
        raise ValueError("give either --prompts FILE or --synthetic-prompts N, not both")
    texts = read_prompt_texts(args.prompts, args.prompt_field) if args.prompts else None
    if texts is not None and args.n_prompts is not None:
        if args.n_prompts <= 0:
            raise ValueError(f"--n-prompts must be positive, got {args.n_prompts}")
        texts = texts[: args.n_prompts]
    return texts


def _prompts(args, bm, texts) -> tuple[list[list[int]], str]:
    """(token ids, prompt set name): the file's prompts encoded, or synthetic ones."""
    from ..bench import model_synthetic_prompts
    from ..prompts import encode_prompts

    if texts is not None:
        return encode_prompts(bm.tokenizer, texts, args.chat), args.prompt_set or Path(args.prompts).stem
    n = args.synthetic_prompts or 8
    return (model_synthetic_prompts(bm, n, args.prompt_len, args.seed),
            args.prompt_set or f"synthetic_{n}x{args.prompt_len}_seed{args.seed}")


def main(argv: list[str] | None = None) -> int:
    import torch

    from ..bench import load_bench_model, print_summary, run_sweep
    from ..decoding import fit_context, model_context
    from .args import check_device

    args = build_parser().parse_args(argv)
    try:
        cfg = sweep_config(args)
        texts = _prompt_texts(args)
        if args.threads:
            torch.set_num_threads(args.threads)
        check_device(args.device)
        bm = load_bench_model(args.model, device=args.device, dtype=args.dtype, attn=args.attn,
                              block_size=args.block_size, label=args.model_label, seed=args.seed)
        from ..decode_config import DecodeConfig
        from ..decoding import check_family

        for mode in list(cfg.modes) + [DecodeConfig.slug_mode(p) for p in cfg.points]:
            check_family(bm, mode)  # e.g. bd on a LLaDA checkpoint: refused before any measurement
        prompts, prompt_set = _prompts(args, bm, texts)
        fit_context(prompts, cfg.max_new_tokens, model_context(bm.model), truncate=cfg.truncate_prompts)
    except (ValueError, FileNotFoundError) as exc:
        print(f"fastdllm bench: error: {exc}", file=sys.stderr)
        return 2
    rows = run_sweep(bm, prompts, cfg=cfg, prompt_set=prompt_set, out=args.out, progress=not args.quiet,
                     meta_config={"argv": list(argv) if argv is not None else sys.argv[1:]})
    print_summary(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
