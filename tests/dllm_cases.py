"""The agreement cases, shared by ``scripts/reference/official_dllm_outputs.py`` (which runs the official code on
them) and ``tests/test_dllm_agreement.py`` (which runs the project's loader and samplers on the same stand-ins).

Each sampler case names a stand-in, the official function and its keyword arguments (``params``), and the
project's mode and :class:`~fastdllm_core.decode_config.DecodeConfig` fields (``ours``) that mirror it.  Prompts are
seeded token ids above the stand-ins' special tokens."""
from __future__ import annotations

import torch

BIG_VOCAB = 126464  # LLaDA-8B's embedding size: the official EOS/EoT options hard-code ids 126081 / 126348

STANDINS = {
    # float64 end to end: rope_full_precision=false (the release's true rounds q/k to float32 inside RoPE)
    "llada": {"kind": "llada", "args": {"seed": 1, "n_kv_heads": 2, "rope_full_precision": False}},
    "llada_fp32rope": {"kind": "llada", "args": {"seed": 1, "n_kv_heads": 2}},
    "llada_big": {"kind": "llada", "args": {
        "seed": 2, "vocab_size": BIG_VOCAB, "d_model": 16, "n_heads": 2, "mlp_hidden_size": 24,
        "rope_full_precision": False, "eos_token_id": 126081, "pad_token_id": 126081, "mask_token_id": 126336,
        "boost_tokens": (126081, 126348), "boost": 6.0}},
    "dream": {"kind": "dream", "args": {"seed": 3}},
}
MASK = {"llada": 5, "llada_fp32rope": 5, "llada_big": 126336, "dream": 4}


def prompt_ids(case: dict) -> list[list[int]]:
    """Seeded prompt rows (ids 6..99: never a stand-in's special token)."""
    g = torch.Generator().manual_seed(int(case.get("prompt_seed", 0)))
    return [torch.randint(6, 100, (n,), generator=g).tolist() for n in case["prompt_lengths"]]


LOGIT_CASES = [
    {"name": "llada_full", "standin": "llada", "prompt_lengths": [13, 13], "prompt_seed": 21},
    {"name": "llada_fp32rope_full", "standin": "llada_fp32rope", "prompt_lengths": [13], "prompt_seed": 21},
    {"name": "dream_full", "standin": "dream", "prompt_lengths": [13, 13], "prompt_seed": 22},
]


def _llada(name, standin="llada", lengths=(11,), pseed=1, seed=0, **p):
    p.setdefault("mask_id", MASK[standin])
    ours = {"max_new_tokens": p["gen_length"], "steps": p["steps"], "block_size": p["block_length"],
            "remasking": p.get("remasking", "low_confidence"), "temperature": p.get("temperature", 0.0),
            "logits_eos_inf": p.get("logits_eos_inf", False),
            "confidence_eos_eot_inf": p.get("confidence_eos_eot_inf", False), "seed": seed}
    return {"name": name, "standin": standin, "official": "llada.generate", "params": p,
            "prompt_lengths": list(lengths), "prompt_seed": pseed, "seed": seed, "mask_id": MASK[standin],
            "mode": "llada", "ours": ours}


def _v1_llada(name, fn, cache, lengths=(11,), pseed=2, **p):
    p.setdefault("mask_id", MASK["llada"])
    ours = {"max_new_tokens": p["gen_length"], "steps": p["steps"], "block_size": p["block_length"],
            "threshold": p.get("threshold"), "cache": cache}
    return {"name": name, "standin": "llada", "official": f"fastdllm.llada.{fn}", "params": p,
            "prompt_lengths": list(lengths), "prompt_seed": pseed, "seed": 0, "mask_id": MASK["llada"], "mode": "v1",
            "ours": ours}


def _dream(name, official="dream.generate", mode="dream", lengths=(10,), pseed=3, seed=0, cache="none", **p):
    # explicit: a DreamModel built without its generation_config.json would take PretrainedConfig's legacy
    # defaults (temperature 1.0, top_k 50)
    p.setdefault("temperature", 0.0)
    p.setdefault("top_p", None)
    p.setdefault("top_k", None)
    ours = {"max_new_tokens": p["max_new_tokens"], "steps": p["steps"], "alg": p.get("alg", "origin"),
            "alg_temp": p.get("alg_temp") or 0.0, "temperature": p.get("temperature", 0.0),
            "top_p": p.get("top_p") or 1.0, "seed": seed}
    if mode == "v1":
        ours.update(threshold=p.get("threshold") if p.get("alg") == "confidence_threshold" else None, cache=cache,
                    block_size=p.get("block_length", p["max_new_tokens"]))
        ours.pop("alg")
    return {"name": name, "standin": "dream", "official": official, "params": p, "prompt_lengths": list(lengths),
            "prompt_seed": pseed, "seed": seed, "mask_id": MASK["dream"], "mode": mode, "ours": ours}


CASES = [
    # LLaDA's generate (ML-GSAI/LLaDA generate.py)
    _llada("llada_g16_s16_b8", gen_length=16, steps=16, block_length=8),
    _llada("llada_g16_s8_b4", lengths=(7,), pseed=4, gen_length=16, steps=8, block_length=4),
    _llada("llada_g16_s8_b16_random", seed=3, gen_length=16, steps=8, block_length=16, remasking="random"),
    _llada("llada_g12_s8_b12_remainder", lengths=(8,), pseed=7, gen_length=12, steps=8, block_length=12),
    _llada("llada_batch2_g16_s8_b8", lengths=(9, 9), pseed=5, gen_length=16, steps=8, block_length=8),
    _llada("llada_temperature", seed=5, gen_length=8, steps=8, block_length=8, temperature=0.5),
    _llada("llada_big_confidence_eos_eot_inf", standin="llada_big", lengths=(6,), gen_length=12, steps=12,
           block_length=6, confidence_eos_eot_inf=True),
    _llada("llada_big_logits_eos_inf", standin="llada_big", lengths=(6,), gen_length=12, steps=6, block_length=12,
           logits_eos_inf=True),
    _llada("llada_big_plain", standin="llada_big", lengths=(6,), gen_length=12, steps=12, block_length=6),
    # Fast-dLLM v1 on LLaDA (NVlabs/Fast-dLLM llada/generate.py)
    _v1_llada("v1_llada_none_t0.3", "generate", "none", gen_length=16, steps=2, block_length=8, threshold=0.3),
    _v1_llada("v1_llada_prefix_t0.3", "generate_with_prefix_cache", "prefix", gen_length=16, steps=2,
              block_length=8, threshold=0.3),
    _v1_llada("v1_llada_prefix_t0.1", "generate_with_prefix_cache", "prefix", gen_length=16, steps=2,
              block_length=8, threshold=0.1),
    _v1_llada("v1_llada_dual_t0.3", "generate_with_dual_cache", "dual", gen_length=16, steps=2, block_length=8,
              threshold=0.3),
    _v1_llada("v1_llada_dual_t0.1", "generate_with_dual_cache", "dual", lengths=(5,), gen_length=24, steps=3,
              block_length=8, threshold=0.1),
    _v1_llada("v1_llada_prefix_steps", "generate_with_prefix_cache", "prefix", gen_length=16, steps=16,
              block_length=8, threshold=None),
    _v1_llada("v1_llada_prefix_steps_remainder", "generate_with_prefix_cache", "prefix", gen_length=16, steps=6,
              block_length=8, threshold=None),
    _v1_llada("v1_llada_dual_steps", "generate_with_dual_cache", "dual", gen_length=16, steps=8, block_length=8,
              threshold=None),
    # Dream's diffusion_generate (NVlabs/Fast-dLLM dream/model/generation_utils.py)
    _dream("dream_entropy_s16", max_new_tokens=16, steps=16, alg="entropy"),
    _dream("dream_maskgit_plus_s8", max_new_tokens=16, steps=8, alg="maskgit_plus"),
    _dream("dream_topk_margin_s8", max_new_tokens=16, steps=8, alg="topk_margin"),
    _dream("dream_origin_s8", seed=7, max_new_tokens=16, steps=8, alg="origin"),
    _dream("dream_entropy_top_p", max_new_tokens=16, steps=8, alg="entropy", top_p=0.9),
    _dream("dream_maskgit_alg_temp", seed=11, max_new_tokens=16, steps=8, alg="maskgit_plus", alg_temp=0.5),
    _dream("dream_entropy_temperature", seed=13, max_new_tokens=16, steps=8, alg="entropy", temperature=0.7,
           top_p=0.95),
    _dream("dream_batch2_entropy", lengths=(8, 8), pseed=6, max_new_tokens=16, steps=8, alg="entropy"),
    # Fast-dLLM v1 on Dream (generation_utils.py confidence_threshold; generation_utils_block.py prefix / dual)
    _dream("v1_dream_none_t0.3", mode="v1", max_new_tokens=16, steps=2, alg="confidence_threshold", threshold=0.3),
    _dream("v1_dream_prefix_t0.3", official="dream.block", mode="v1", cache="prefix", max_new_tokens=16, steps=2,
           alg="confidence_threshold", threshold=0.3, block_length=8, dual_cache=False),
    _dream("v1_dream_dual_t0.3", official="dream.block", mode="v1", cache="dual", max_new_tokens=16, steps=2,
           alg="confidence_threshold", threshold=0.3, block_length=8, dual_cache=True),
    _dream("v1_dream_dual_t0.1", official="dream.block", mode="v1", cache="dual", lengths=(6,), max_new_tokens=24,
           steps=3, alg="confidence_threshold", threshold=0.1, block_length=8, dual_cache=True),
    _dream("v1_dream_prefix_steps", official="dream.block", mode="v1", cache="prefix", max_new_tokens=16, steps=16,
           alg="entropy", block_length=8, dual_cache=False),
    _dream("v1_dream_dual_steps", official="dream.block", mode="v1", cache="dual", max_new_tokens=16, steps=8,
           alg="entropy", block_length=8, dual_cache=True),
]
