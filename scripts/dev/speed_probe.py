"""Dev probe (not part of the DAG): where the block-diffusion decoder's forwards go at batch 1, per threshold.

    python scripts/dev/speed_probe.py --model results/tiny/models/bd_pad_cm/run/final \
        --ar results/released/tiny_ar_base --prompts-path results/tiny/data/synthetic/arith_test.jsonl \
        [--n 16] [--thresholds 1.0 0.9 0.8 0.7 0.5] [--rules fill_block stop ignore_eos] [--out probe.csv]

The prompts are the user turns the evaluation sends for ``--task`` (default ``synth_arith``, the bench's
``prompts_from``), the first ``--n`` of them, encoded as the bench encodes them.  Every prompt is decoded alone
(batch 1) with :func:`fastdllm_core.decoding.bd_generate`'s own decoder, instrumented (a subclass that records
which positions every forward unmasks; the numerics are the library's).  Per (model, rule, threshold) one row:

* ``answer_tokens``: tokens up to and including EOS (what the bench counts); ``forwards``: the row's forwards
  (prefill, block refreshes, sub-block steps, commits: the bench's ``nfe`` at batch 1);
  ``tokens_per_forward`` = answer_tokens / forwards (the bench's column).
* ``fwd_to_answer``: forwards until every answer position (EOS included) is unmasked; ``fwd_after_answer``:
  the forwards spent after that completing the EOS's block (``eos_rule: fill_block``); their sum is ``forwards``.
* ``answer_tokens_per_answer_fwd`` = answer_tokens / fwd_to_answer: the speed an EOS rule that stops at once
  would give.  ``answer_pos_per_step``: answer positions unmasked per decode step (the first token of a block,
  taken free from the previous forward's logit, is not a step's); ``pos_per_step``: every position a step
  unmasks, post-EOS ones included.
* rule ``stop``: the decoder's ``eos_rule: stop``; rule ``ignore_eos``: no stop id (every row decodes
  ``--max-new-tokens`` tokens, the bench's ``ignore_eos``: the parallelism of a long answer).

The AR base (``--ar``, HF greedy ``generate``, one forward per token) gives one row per rule it can follow
(``fill_block``/``stop`` read the same for it: it stops at EOS).  Wall times are measured with one torch thread
and are only indicative on a shared machine.
"""
from __future__ import annotations

import argparse
import csv
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
RULES = ("fill_block", "stop", "ignore_eos")


def make_probe_decoder():
    """A subclass of the library's block decoder that records, in order, every forward (kind) and the
    positions each unmasks (absolute indices), and the free first-token fills of the blocks."""
    from fastdllm_core.decoding.block_diffusion import _BlockDecoder

    class ProbeDecoder(_BlockDecoder):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.events: list[tuple[str, list[int]]] = []
            self._b0 = 0

        def _count_all(self, kind):
            super()._count_all(kind)
            self.events.append((kind, []))

        def _decode_sub_blocks(self, blk, dec, b0, last_logits):
            self._b0 = b0
            if b0 >= self.lens[0] and bool(dec[0, 0]) and int(blk[0, 0]) != self.mask_id:
                self.events.append(("first_fill", [b0]))  # the previous forward's prediction, no forward
            return super()._decode_sub_blocks(blk, dec, b0, last_logits)

        def _unmask(self, blk, logits, cand_all, s0):
            before = blk[0] == self.mask_id
            super()._unmask(blk, logits, cand_all, s0)
            new = (before & (blk[0] != self.mask_id)).nonzero().flatten().tolist()
            self.events.append(("step", [self._b0 + j for j in new]))

    return ProbeDecoder


def decode_one(model, prompt, mask_id, stops, cfg):
    """(answer tokens, events, wall seconds) of one prompt at batch 1 through the instrumented decoder."""
    from fastdllm_core.decoding.common import _check_mask_token

    mask_id = _check_mask_token(model, mask_id)
    dec = make_probe_decoder()(model, [list(prompt)], mask_id, sorted(stops), cfg.validate(), "cached", False)
    t0 = time.perf_counter()
    out = dec.run()
    wall = time.perf_counter() - t0
    if out.stats.nfe != sum(1 for k, _ in dec.events if k != "first_fill"):
        raise RuntimeError(f"probe lost forwards: nfe {out.stats.nfe}, recorded {len(dec.events)} events")
    return out.sequences[0], dec.events, wall, out.stats.nfe


def split_forwards(events, start: int, n_answer: int) -> dict:
    """Forwards until positions [start, start + n_answer) are all unmasked, the ones after, and per-step counts."""
    answer = set(range(start, start + n_answer))
    left, fwd, to_answer = set(answer), 0, None
    steps_in, pos_in, steps, pos = 0, 0, 0, 0
    for kind, new in events:
        if kind != "first_fill":
            fwd += 1
        if kind == "step":
            steps, pos = steps + 1, pos + len(new)
            if to_answer is None:
                steps_in, pos_in = steps_in + 1, pos_in + len(answer.intersection(new))
        left.difference_update(new)
        if to_answer is None and not left:
            to_answer = fwd
    to_answer = fwd if to_answer is None else to_answer
    return dict(fwd_to_answer=to_answer, fwd_after_answer=fwd - to_answer, steps=steps, pos=pos,
                steps_in=steps_in, pos_in=pos_in)


def bd_row(model, prompts, mask_id, stops, rule, threshold, args) -> dict:
    from fastdllm_core.decode_config import DecodeConfig

    cfg = DecodeConfig(block_size=args.block_size, sub_block_size=args.sub_block_size, threshold=threshold,
                       use_sub_block_cache=args.cache, max_new_tokens=args.max_new_tokens,
                       eos_rule="stop" if rule == "stop" else "fill_block")
    acc = dict(answer_tokens=0, forwards=0, fwd_to_answer=0, fwd_after_answer=0, steps=0, pos=0, steps_in=0,
               pos_in=0, wall_s=0.0)
    for p in prompts:
        seq, events, wall, nfe = decode_one(model, p, mask_id, [] if rule == "ignore_eos" else stops, cfg)
        for k, v in split_forwards(events, len(p), len(seq)).items():
            acc[k] += v
        acc["answer_tokens"] += len(seq)
        acc["forwards"] += nfe
        acc["wall_s"] += wall
    return finish_row(acc, "bd", rule, threshold)


def finish_row(acc: dict, mode: str, rule: str, threshold) -> dict:
    def ratio(a, b):
        return round(a / b, 4) if b else ""

    return dict(mode=mode, rule=rule, threshold=threshold, answer_tokens=acc["answer_tokens"],
                forwards=acc["forwards"], fwd_to_answer=acc["fwd_to_answer"],
                fwd_after_answer=acc["fwd_after_answer"],
                tokens_per_forward=ratio(acc["answer_tokens"], acc["forwards"]),
                answer_tokens_per_answer_fwd=ratio(acc["answer_tokens"], acc["fwd_to_answer"]),
                answer_pos_per_step=ratio(acc["pos_in"], acc["steps_in"]), pos_per_step=ratio(acc["pos"], acc["steps"]),
                wall_s=round(acc["wall_s"], 3), ms_per_forward=ratio(1000 * acc["wall_s"], acc["forwards"]))


def ar_row(model, prompts, stops, rule, args) -> dict:
    from fastdllm_core.decoding import ar_generate

    acc = dict(answer_tokens=0, forwards=0, wall_s=0.0)
    for p in prompts:
        t0 = time.perf_counter()
        out = ar_generate(model, [p], stop_token_ids=[] if rule == "ignore_eos" else stops,
                          max_new_tokens=args.max_new_tokens, baseline="hf")
        acc["wall_s"] += time.perf_counter() - t0
        acc["answer_tokens"] += out.stats.total_tokens
        acc["forwards"] += out.stats.nfe
    acc.update(fwd_to_answer=acc["forwards"], fwd_after_answer=0, steps=0, pos=0, steps_in=0, pos_in=0)
    return finish_row(acc, "ar", rule, "")


def load_prompts(bm, args) -> list[list[int]]:
    from fastdllm_core.prompts import encode_prompts
    from fastdllm_core.synthetic import user_prompts

    texts = user_prompts(args.task, args.prompts_path)[: args.n]
    if len(texts) < args.n:
        raise SystemExit(f"--n {args.n}: {args.prompts_path} has only {len(texts)} items")
    return encode_prompts(bm.tokenizer, texts)


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", action="append", default=[], help="block-diffusion checkpoint (repeatable)")
    ap.add_argument("--ar", help="the AR base checkpoint (one forward per token)")
    ap.add_argument("--task", default="synth_arith")
    ap.add_argument("--prompts-path", required=True, help="the task's test file (JSONL)")
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--thresholds", type=float, nargs="+", default=[1.0, 0.9, 0.8, 0.7, 0.5])
    ap.add_argument("--rules", nargs="+", default=list(RULES), choices=RULES)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--sub-block-size", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--no-cache", dest="cache", action="store_false", help="without the sub-block cache")
    ap.add_argument("--out", help="CSV to write (atomically)")
    args = ap.parse_args(argv)
    if not args.model and not args.ar:
        ap.error("give --model and/or --ar")
    for m in args.model + ([args.ar] if args.ar else []):
        if not Path(m).is_dir():
            ap.error(f"checkpoint directory not found: {m}")
    if not Path(args.prompts_path).is_file():
        ap.error(f"--prompts-path not found: {args.prompts_path}")
    if args.n <= 0 or any(not 0 < t <= 1 for t in args.thresholds):
        ap.error(f"--n must be > 0 and thresholds in (0, 1]: n={args.n}, thresholds={args.thresholds}")
    return args


def main(argv=None) -> None:
    args = parse(argv)
    sys.path.insert(0, str(REPO))
    import torch

    from fastdllm_core.bench import load_bench_model

    torch.set_num_threads(1)
    rows = []
    for source, is_ar in [(m, False) for m in args.model] + ([(args.ar, True)] if args.ar else []):
        bm = load_bench_model(source, device="cpu", block_size=args.block_size)
        prompts = load_prompts(bm, args)
        for rule in args.rules:
            if is_ar:
                if rule == "stop":  # AR stops at EOS under either rule: one row for both
                    continue
                rows.append(dict(model=source, **ar_row(bm.model, prompts, bm.stop_token_ids, rule, args)))
            else:
                for t in args.thresholds:
                    rows.append(dict(model=source, **bd_row(bm.model, prompts, bm.mask_token_id,
                                                            bm.stop_token_ids, rule, t, args)))
            print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    meta = dict(task=args.task, n_prompts=args.n, block_size=args.block_size, sub_block_size=args.sub_block_size,
                max_new_tokens=args.max_new_tokens, sub_block_cache=args.cache, batch_size=1)
    rows = [dict(r, **meta) for r in rows]
    if args.out:
        from fastdllm_core.provenance import write_csv_atomic

        write_csv_atomic(args.out, rows)


if __name__ == "__main__":
    main()
