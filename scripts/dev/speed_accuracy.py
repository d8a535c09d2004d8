"""Dev helper (not part of the DAG): a checkpoint's accuracy at several thresholds on the same items, paired.

    python scripts/dev/speed_accuracy.py --model CKPT --data results/tiny/data/synthetic/arith_test.jsonl \
        --out-dir /tmp/acc/NAME [--task synth_arith] [--limit 256] [--thresholds 1.0 0.9]
    python scripts/dev/speed_accuracy.py --samples REF/samples.jsonl OTHER/samples.jsonl   # compare two runs

Each threshold is one :func:`fastdllm_core.evaluation.run_task` call with the DAG's decoding point
(``bd_b32_s8_t<thr>_c0``, max_new_tokens 64, batch 64, the paper prompt style) into ``OUT_DIR/t<thr>/``.  Printed
per threshold: strict exact match, n, its 95% Wilson interval, tokens per forward (the evaluation's), and against
the first threshold on the same items: the discordant pairs (right only at the first / only at this one) and the
exact two-sided McNemar p-value (a paired test: both runs answer the same items).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
METRIC = ("strict-match", "exact_match")


def correct_by_item(path) -> dict[int, bool]:
    out = {}
    for line in Path(path).read_text().splitlines():
        s = json.loads(line)
        out[int(s["doc_id"])] = bool(s["correct"][METRIC[0]][METRIC[1]])
    return out


def mcnemar_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value for b and c discordant pairs (binomial with p = 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    p = 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, p)


def compare(ref: dict[int, bool], other: dict[int, bool]) -> str:
    from fastdllm_core.intervals import wilson

    items = sorted(set(ref) & set(other))
    if not items:
        raise SystemExit("the two runs share no items (doc_id)")
    k = sum(other[i] for i in items)
    lo, hi = wilson(k, len(items))
    b = sum(ref[i] and not other[i] for i in items)
    c = sum(other[i] and not ref[i] for i in items)
    kr = sum(ref[i] for i in items)
    return (f"n={len(items)} acc={100 * k / len(items):.2f} [{100 * lo:.1f}, {100 * hi:.1f}] "
            f"(ref {100 * kr / len(items):.2f}) right-only-in-ref={b} right-only-here={c} "
            f"mcnemar_p={mcnemar_p(b, c):.3g}")


def evaluate(args) -> None:
    from fastdllm_core.decode_config import DecodeConfig
    from fastdllm_core.evaluation import run_task
    from fastdllm_core.loading import load_model

    loaded = load_model(args.model, device="cpu")
    ref = None
    for t in args.thresholds:
        point = f"bd_b32_s8_t{t:g}_c0"
        out = Path(args.out_dir) / f"t{t:g}"
        rows = run_task(loaded, args.task, mode="bd", decode=DecodeConfig.from_slug(point, max_new_tokens=64),
                        batch_size=64, limit=args.limit, out_dir=out, data_path=args.data, prompt_style="paper")
        row = next(r for r in rows if r["metric"] == "exact_match_strict")
        items = correct_by_item(out / "samples.jsonl")
        ref = ref or items
        print(f"{args.model} {point}: {compare(ref, items)} tokens_per_forward={row['tokens_per_forward']} "
              f"wall_s={float(row['wall_time_s']):.1f}", flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--data")
    ap.add_argument("--out-dir")
    ap.add_argument("--task", default="synth_arith")
    ap.add_argument("--limit", type=int, default=256)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[1.0, 0.9])
    ap.add_argument("--samples", nargs=2, metavar=("REF", "OTHER"), help="compare two samples.jsonl files")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.samples:
        print(compare(correct_by_item(args.samples[0]), correct_by_item(args.samples[1])))
        return
    missing = [k for k in ("model", "data", "out_dir") if not getattr(args, k)]
    if missing:
        ap.error("give --samples, or " + ", ".join(f"--{k.replace('_', '-')}" for k in missing))
    if args.task != "synth_arith":
        ap.error(f"--task {args.task!r}: only synth_arith's strict exact match is read here")
    import torch

    torch.set_num_threads(1)
    evaluate(args)


if __name__ == "__main__":
    main()
