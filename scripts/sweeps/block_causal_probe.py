"""Teacher-forced next-token accuracy of a model's answers under block-causal attention (a diagnostic).

For every answer token of the first N test items of a GSM8K-form file, the model sees the chat prompt and the
gold answer up to that token, the rest of the token's block filled with ``[MASK]`` (``--masks none``: nothing
after it), under the block-diffusion inference mask of block size D, and predicts the token from the previous
position's logit (the shifted-label convention of the decoder).  D = 1 is plain causal attention: for an AR
model this is its ordinary teacher-forced accuracy.  Comparing D = 1 with D = 32 on the AR base measures how much
of the AR model's skill depends on causal attention -- what block-diffusion adaptation has to relearn.

    python scripts/sweeps/block_causal_probe.py --model results/tiny/models/ar_base/run/final \\
        --data results/tiny/data/synthetic/arith_test.jsonl --blocks 1 4 8 32
"""
from __future__ import annotations

import argparse
import json

import torch

from fastdllm_core.synthetic import ARITH_PROMPT
from fastdllm_core.masks import attention_kwargs, inference_spec
from fastdllm_core.loading import load_model


@torch.no_grad()
def probe(lm, items: list[dict], block_size: int, masks: bool = True) -> float:
    tok, model = lm.tokenizer, lm.model
    hits = total = 0
    for it in items:
        prompt = tok.apply_chat_template([{"role": "user", "content": ARITH_PROMPT.format(question=it["question"])}],
                                         add_generation_prompt=True, tokenize=False)
        p = tok.encode(prompt, add_special_tokens=False)
        full = p + tok.encode(it["answer"], add_special_tokens=False) + [lm.eos_token_ids[0]]
        for j in range(len(p), len(full)):
            end = (j // block_size + 1) * block_size  # the end of token j's block
            x = full[:j] + [lm.mask_token_id] * (end - j if masks else 0)
            n = len(x)
            kw = attention_kwargs(model, inference_spec(block_size, 0), n, n)
            logits = model(input_ids=torch.tensor([x]), position_ids=torch.arange(n)[None], use_cache=False,
                           **kw).logits[0, j - 1]
            logits[lm.mask_token_id] = float("-inf")
            hits += int(logits.argmax()) == full[j]
            total += 1
    return hits / total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, help="GSM8K-form JSONL (question, answer)")
    ap.add_argument("--items", type=int, default=40)
    ap.add_argument("--blocks", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--masks", choices=["block", "none"], default="block")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    lm = load_model(args.model, device="cpu", dtype="float32")
    items = [json.loads(line) for line in open(args.data) if line.strip()][: args.items]
    for d in args.blocks:
        acc = probe(lm, items, d, masks=args.masks == "block")
        print(json.dumps({"model": args.model, "block_size": d, "masks": args.masks, "items": len(items),
                          "teacher_forced_token_acc": round(acc, 4)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
