"""Context probe (exploration, not part of the DAG): how well a model predicts the *computed* values of the
arithmetic stand-in's answers (every number right after ``=``, ``gives`` or ``####``) in three contexts under the
block-diffusion inference mask, teacher-forced:

* ``l2r``     -- the answer before the value is clean, the value and the rest of its block are [MASK]: what
                 left-to-right decoding of the block sees;
* ``allmask`` -- the whole answer is [MASK]: what the first step of a block sees;
* ``half``    -- each other answer token is clean with probability 0.5, the value itself masked: training-like.

Prints, per context, the mean NLL (nats, [MASK] excluded from the softmax) and the argmax accuracy.  This is the
probe behind docs/embedded_default.md ("Why arithmetic stays below the AR base"): the AR base's [MASK] row, the
future-copy shortcut and the interference of block-diffusion training with left-to-right computation.

    python scripts/sweeps/context_probe.py results/tiny/models/bd_pad_cm/run/final \\
        --data results/tiny/data/synthetic/arith_test.jsonl --items 40 [--zero-mask-row]
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch

VALUE_AFTER = ("=", "gives", "####")


def value_positions(pieces: list[str]) -> list[int]:
    """Indices of the answer tokens that are computed values: digits right after ``=`` / ``gives`` / ``####``."""
    out = []
    for k, s in enumerate(pieces):
        prev = "".join(pieces[max(0, k - 2):k])
        if s.strip().isdigit() and prev.rstrip().endswith(VALUE_AFTER):
            out.append(k)
    return out


def contexts(prompt: list[int], answer: list[int], j: int, block: int, mask: int, rng: random.Random) -> dict:
    """The three input sequences for predicting the token at absolute position ``j``."""
    full = prompt + answer
    end = -(-len(full) // block) * block
    padded = full + [mask] * (end - len(full))
    block_end = (j // block + 1) * block
    half = [t if (len(prompt) + i != j and rng.random() < 0.5) else mask for i, t in enumerate(padded[len(prompt):])]
    return {"l2r": full[:j] + [mask] * (block_end - j), "allmask": prompt + [mask] * (end - len(prompt)),
            "half": prompt + half}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="checkpoint directory")
    ap.add_argument("--data", required=True, help="arithmetic stand-in JSONL (question / answer rows)")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--block-size", type=int, default=32)
    ap.add_argument("--zero-mask-row", action="store_true", help="zero the [MASK] embedding row first")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if args.items <= 0 or args.block_size <= 0:
        ap.error(f"--items and --block-size must be positive, got {args.items} and {args.block_size}")
    if not Path(args.data).is_file():
        ap.error(f"--data: file not found: {args.data}")

    from fastdllm_core.synthetic import ARITH_PROMPT
    from fastdllm_core.masks import attention_kwargs, inference_spec
    from fastdllm_core.loading import load_model
    from fastdllm_core.training.model_init import init_mask_embedding

    torch.set_num_threads(args.threads)
    lm = load_model(args.model, device="cpu", dtype="float32")
    tok, model, mask = lm.tokenizer, lm.model, lm.mask_token_id
    if args.zero_mask_row:
        init_mask_embedding(model, mask)
    items = [json.loads(line) for line in open(args.data)][:args.items]
    rng = random.Random(0)
    nll: dict[str, list[float]] = {"l2r": [], "allmask": [], "half": []}
    hit: dict[str, list[bool]] = {k: [] for k in nll}
    with torch.no_grad():
        for it in items:
            text = tok.apply_chat_template([{"role": "user", "content": ARITH_PROMPT.format(question=it["question"])}],
                                           add_generation_prompt=True, tokenize=False)
            prompt = tok.encode(text, add_special_tokens=False)
            answer = tok.encode(it["answer"], add_special_tokens=False) + [lm.eos_token_ids[0]]
            for k in value_positions([tok.decode([t]) for t in answer]):
                j = len(prompt) + k
                for name, x in contexts(prompt, answer, j, args.block_size, mask, rng).items():
                    n = len(x)
                    kw = attention_kwargs(model, inference_spec(args.block_size, 0), n, n)
                    logits = model(input_ids=torch.tensor([x]), position_ids=torch.arange(n)[None], use_cache=False,
                                   **kw).logits[0, j - 1]
                    logits[mask] = float("-inf")
                    nll[name].append(-torch.log_softmax(logits, -1)[answer[k]].item())
                    hit[name].append(int(logits.argmax()) == answer[k])
    for name in nll:
        n = len(nll[name])
        if n:
            print(f"{name:8s} values {n:4d}  NLL {sum(nll[name]) / n:.2f}  accuracy {100 * sum(hit[name]) / n:.1f}%")


if __name__ == "__main__":
    main()
