"""The masked-diffusion samplers agree token for token with the official implementations (stored outputs of
``scripts/reference/official_dllm_outputs.py``: ML-GSAI/LLaDA b7e6c35, NVlabs/Fast-dLLM 24cc59e, transformers 4.49.0,
float64) on the same seeded stand-ins loaded through the project's loader."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dllm_cases import CASES, STANDINS, prompt_ids
from fastdllm_core.decode_config import DecodeConfig
from fastdllm_core.decoding import mdm_generate
from fastdllm_core.loading import load_model
from fastdllm_core.modeling import dream, llada

DATA = Path(__file__).parent / "data" / "official_dllm" / "official_outputs.json"


@pytest.fixture(scope="module")
def official():
    doc = json.loads(DATA.read_text())
    assert doc["commits"] == {"ML-GSAI/LLaDA": "b7e6c3565f194352da44b38dd12b6970597309f3",
                              "NVlabs/Fast-dLLM": "24cc59e75f20a6384bae8c905965bb090b96388e"}
    return {s["name"]: s for s in doc["samples"]}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("agree")
    out = {}
    for name, spec in STANDINS.items():
        writer = llada.write_standin if spec["kind"] == "llada" else dream.write_standin
        out[name] = load_model(str(writer(root / name, **spec["args"])), dtype="float64")
    return out


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_sampler_agrees_with_the_official_code(official, models, case):
    lm = models[case["standin"]]
    want = official[case["name"]]
    prompts = prompt_ids(case)
    cfg = DecodeConfig(**case["ours"]).validate(case["mode"])
    # the official EOS options act on LLaDA-8B's ids; no stop ids so that every generated token is compared
    out = mdm_generate(lm, prompts, case["mode"], cfg, stop_token_ids=[], eos_eot_ids=(126081, 126348))
    P = len(prompts[0])
    assert out.sequences == [row[P:] for row in want["sequences"]]
    if "nfe" in want:  # Fast-dLLM's own count of forwards
        assert out.stats.nfe == want["nfe"]
    assert out.stats.generated_tokens == [cfg.max_new_tokens] * len(prompts)
    assert out.stats.gen_length == cfg.max_new_tokens and out.stats.steps == cfg.steps


def test_eos_counting_and_batch_invariance(models):
    """Tokens are counted up to and including the first stop id; a left-padded batch gives every row what it
    gets alone (the official code does not mask pad keys in this commit's LLaDA model; the project does)."""
    lm = models["llada"]
    cfg = DecodeConfig(max_new_tokens=16, steps=8, block_size=8).validate("llada")
    ps = prompt_ids({"prompt_lengths": [5, 9, 12], "prompt_seed": 9})
    free = mdm_generate(lm, ps, "llada", cfg, stop_token_ids=[])
    for p, seq in zip(ps, free.sequences):
        alone = mdm_generate(lm, [p], "llada", cfg, stop_token_ids=[]).sequences[0]
        assert alone == seq
    stop = free.sequences[0][5]
    out = mdm_generate(lm, ps[:1], "llada", cfg, stop_token_ids=[stop])
    k = free.sequences[0].index(stop)
    assert out.sequences[0] == free.sequences[0][:k + 1] and out.stats.generated_tokens == [k + 1]
    assert out.stats.nfe == 8 and out.stats.row_nfe == [8]
    d = models["dream"]
    dcfg = DecodeConfig(max_new_tokens=8, steps=8, alg="entropy").validate("dream")
    ps = prompt_ids({"prompt_lengths": [4, 7], "prompt_seed": 3})
    both = mdm_generate(d, ps, "dream", dcfg, stop_token_ids=[])
    assert both.sequences[1] == mdm_generate(d, ps[1:], "dream", dcfg, stop_token_ids=[]).sequences[0]
    assert both.sequences[0] == mdm_generate(d, ps[:1], "dream", dcfg, stop_token_ids=[]).sequences[0]
    v1 = DecodeConfig(max_new_tokens=16, steps=2, block_size=8, threshold=0.2, cache="dual").validate("v1")
    batch = mdm_generate(lm, ps, "v1", v1, stop_token_ids=[])
    assert batch.sequences[0] == mdm_generate(lm, ps[:1], "v1", v1, stop_token_ids=[]).sequences[0]


def test_samplers_refuse_the_wrong_family(models):
    cfg = DecodeConfig(max_new_tokens=8, steps=8, block_size=8).validate("llada")
    with pytest.raises(ValueError, match="logit shift"):
        mdm_generate(models["dream"], [[7, 8, 9]], "llada", cfg, stop_token_ids=[])
    with pytest.raises(ValueError, match="steps=3 must be a multiple"):
        mdm_generate(models["llada"], [[7, 8, 9]], "llada",
                     DecodeConfig(max_new_tokens=16, steps=3, block_size=8), stop_token_ids=[])
    torch.manual_seed(0)
