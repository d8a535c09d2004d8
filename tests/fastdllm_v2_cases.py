"""The EOS-rule agreement cases of the block-diffusion decoder, shared by
``scripts/reference/official_fastdllm_v2_outputs.py`` (which runs the official Fast-dLLM v2 ``batch_sample`` on them)
and ``tests/test_fastdllm_v2_agreement.py`` (which runs the project's decoder on the same stand-in).

The stand-in is the released-format Fast_dLLM_Qwen checkpoint of :func:`fastdllm_core.rehearsal.write_standin_model`
(seed ``STANDIN_SEED``), loaded in float64, with every weight matrix redrawn from a seeded normal(0, ``WEIGHT_STD``)
(:func:`sharpen`): the stock init (std 0.02) makes the tiny model repeat one token forever, which tests nothing.
``STOP_ID`` is the stop token both decoders are given: a character the random stand-in predicts often, so that
rows meet it in the middle of a block.  Prompt lengths are never a multiple of the block size 32 and all exceed it
(the official code's prefill runs only when the shortest prompt exceeds one block, and a longer row whose prompt
ends on a block boundary would take its first token from the wrong logit there: quirks outside this comparison)."""
from __future__ import annotations

import torch

STANDIN_SEED = 0
WEIGHT_STD = 0.4
BLOCK = 32
STOP_ID = 103  # the character the sharpened stand-in predicts most often: rows meet it inside a block
MAX_NEW = 128


def sharpen(model, seed: int = STANDIN_SEED, std: float = WEIGHT_STD):
    """Redraw every weight matrix of ``model`` (in ``named_parameters`` order) from normal(0, ``std``), seeded."""
    g = torch.Generator().manual_seed(int(seed))
    with torch.no_grad():
        for _, w in model.named_parameters():
            if w.dim() == 2:
                w.copy_(torch.randn(w.shape, generator=g, dtype=torch.float64).to(w.dtype) * std)
    return model


def prompt_ids(case: dict, vocab_lo: int = 10, vocab_hi: int = 100) -> list[list[int]]:
    """Seeded prompt rows (ids ``vocab_lo``..``vocab_hi - 1``: printable characters of the stand-in)."""
    g = torch.Generator().manual_seed(int(case["prompt_seed"]))
    return [torch.randint(vocab_lo, vocab_hi, (n,), generator=g).tolist() for n in case["prompt_lengths"]]


def _cases() -> list[dict]:
    out = []
    for s in (8, 32):
        for t in (1.0, 0.9):
            tag = f"s{s}_t{t:g}"
            for k, n in ((0, 37), (1, 53)):
                out.append({"name": f"single{k}_{tag}", "prompt_lengths": [n], "prompt_seed": 100 + k,
                            "sub_block_size": s, "threshold": t})
            out.append({"name": f"batch_{tag}", "prompt_lengths": [37, 45, 53, 70, 41, 66], "prompt_seed": 200,
                        "sub_block_size": s, "threshold": t})
    return out


CASES = _cases()
