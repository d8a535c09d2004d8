"""Released LLaDA / Dream checkpoints on stock transformers classes: the stand-ins in the released formats, the
weight mapping, what is refused, and the full-attention logits against the official modeling code (float64)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from dllm_cases import LOGIT_CASES, STANDINS, prompt_ids
from fastdllm_core.decoding.mdm_common import full_attention_kwargs
from fastdllm_core.loading import load_model
from fastdllm_core.modeling import FAMILIES, dream, llada, release_of
from fastdllm_core.modeling.llada import UnsupportedCheckpoint

DATA = Path(__file__).parent / "data" / "official_dllm" / "official_outputs.json"
COMMITS = {"ML-GSAI/LLaDA": "b7e6c3565f194352da44b38dd12b6970597309f3",
           "NVlabs/Fast-dLLM": "24cc59e75f20a6384bae8c905965bb090b96388e"}


@pytest.fixture(scope="module")
def official():
    doc = json.loads(DATA.read_text())
    assert doc["commits"] == COMMITS and doc["dtype"] == "float64"
    return doc


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    root = tmp_path_factory.mktemp("standins")
    out = {}
    for name, spec in STANDINS.items():
        if name == "llada_big":
            continue  # only the agreement test needs the 126k-token stand-in
        writer = llada.write_standin if spec["kind"] == "llada" else dream.write_standin
        out[name] = writer(root / name, **spec["args"])
    return out


def test_standins_are_in_the_released_formats(standins):
    ll = json.loads((standins["llada"] / "config.json").read_text())
    assert ll["model_type"] == "llada" and ll["architectures"] == ["LLaDAModelLM"] and "auto_map" in ll
    dr = json.loads((standins["dream"] / "config.json").read_text())
    assert dr["model_type"] == "Dream" and dr["architectures"] == ["DreamModel"] and "auto_map" in dr
    from safetensors.torch import load_file

    names = set(load_file(str(standins["llada"] / "model.safetensors")))
    assert "model.transformer.blocks.1.ff_out.weight" in names and "model.transformer.ff_out.weight" in names
    assert release_of(ll) == "llada" and release_of(dr) == "dream"
    assert release_of({"model_type": "qwen2"}) is None
    # deterministic from the seed
    again = llada.standin_tensors(llada.standin_config(n_kv_heads=2, rope_full_precision=False), seed=1)
    torch.testing.assert_close(again["model.transformer.wte.weight"],
                               load_file(str(standins["llada"] / "model.safetensors"))["model.transformer.wte.weight"])


def test_llada_loads_as_stock_llama_with_its_weights(standins):
    lm = load_model(str(standins["llada"]), dtype="float64")
    assert type(lm.model).__name__ == "LlamaForCausalLM"
    assert lm.family == FAMILIES["llada"] and not lm.family.logit_shift and lm.family.masked_diffusion
    tok = lm.tokenizer
    assert lm.mask_token_id == tok.convert_tokens_to_ids("<|mdm_mask|>") == 5
    assert set(lm.eos_token_ids) == {tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|eot_id|>")}
    assert lm.info["family"] == "masked_diffusion" and lm.model.config.is_causal is False
    from safetensors.torch import load_file

    w = load_file(str(standins["llada"] / "model.safetensors"))
    m = lm.model.model
    pairs = {"blocks.1.ff_proj.weight": m.layers[1].mlp.gate_proj.weight,
             "blocks.1.up_proj.weight": m.layers[1].mlp.up_proj.weight,
             "blocks.1.ff_out.weight": m.layers[1].mlp.down_proj.weight,
             "blocks.0.attn_out.weight": m.layers[0].self_attn.o_proj.weight,
             "blocks.0.k_proj.weight": m.layers[0].self_attn.k_proj.weight,
             "blocks.0.attn_norm.weight": m.layers[0].input_layernorm.weight,
             "blocks.0.ff_norm.weight": m.layers[0].post_attention_layernorm.weight,
             "ln_f.weight": m.norm.weight, "ff_out.weight": lm.model.lm_head.weight,
             "wte.weight": m.embed_tokens.weight}
    for name, param in pairs.items():
        torch.testing.assert_close(param, w["model.transformer." + name].double(), rtol=0, atol=0)
    assert lm.model.config.num_key_value_heads == 2 and lm.model.config.rope_parameters["rope_theta"] == 500000.0


def test_dream_loads_as_stock_qwen2(standins):
    lm = load_model(str(standins["dream"]), dtype="float64")
    assert type(lm.model).__name__ == "Qwen2ForCausalLM"
    assert lm.family == FAMILIES["dream"] and lm.family.logit_shift and lm.family.masked_diffusion
    tok = lm.tokenizer
    assert lm.mask_token_id == tok.convert_tokens_to_ids("<|mask|>") == 4
    assert set(lm.eos_token_ids) == {tok.convert_tokens_to_ids(t) for t in ("<|endoftext|>", "<|im_end|>")}
    assert "<|im_start|>assistant" in tok.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                                              add_generation_prompt=True)


@pytest.mark.parametrize("case", LOGIT_CASES, ids=lambda c: c["name"])
def test_full_attention_logits_equal_the_official_model(official, standins, case):
    """float64: the stock class under a full mask computes what the official modeling code computes.  The
    release's ``rope_full_precision: true`` rounds q/k to float32 inside RoPE in the official code, hence the looser
    tolerance for that stand-in."""
    rec = next(r for r in official["logits"] if r["name"] == case["name"])
    lm = load_model(str(standins[case["standin"]]), dtype="float64")
    ids = torch.tensor(prompt_ids(case))
    with torch.no_grad():
        out = lm.model(input_ids=ids, **full_attention_kwargs(lm.model, None, ids.shape[1], ids.shape[1],
                                                               ids.shape[0])).logits
    tol = dict(rtol=1e-5, atol=1e-4) if "fp32rope" in case["name"] else dict(rtol=1e-9, atol=1e-8)
    for i, row in enumerate(rec["rows"]):
        assert out[i].argmax(-1).tolist() == row["argmax"]
        torch.testing.assert_close(out[i].sum(-1), torch.tensor(row["sum"], dtype=torch.float64), **tol)
        torch.testing.assert_close(out[i].max(-1).values, torch.tensor(row["max"], dtype=torch.float64), **tol)
        torch.testing.assert_close(out[i][:, :8], torch.tensor(row["slice_first8"], dtype=torch.float64), **tol)


@pytest.mark.parametrize("override,what", [
    ({"block_type": "sequential"}, "block_type"), ({"layer_norm_type": "default"}, "layer_norm_type"),
    ({"include_bias": True}, "include_bias"), ({"attention_layer_norm": True}, "attention_layer_norm"),
    ({"activation_type": "swiglu"}, "activation_type"), ({"alibi": True, "rope": False}, "alibi"),
    ({"weight_tying": True, "scale_logits": True}, "scale_logits"), ({"block_group_size": 2}, "block_group_size"),
])
def test_llada_features_without_a_stock_equivalent_are_refused(override, what):
    with pytest.raises(UnsupportedCheckpoint, match=what):
        llada.hf_config(llada.standin_config(**override))


def test_llada_qkv_bias_maps_onto_qwen2_and_scales_fold(tmp_path):
    lm = load_model(str(llada.write_standin(tmp_path / "b", seed=4, include_qkv_bias=True)), dtype="float64")
    assert type(lm.model).__name__ == "Qwen2ForCausalLM" and lm.model.model.layers[0].self_attn.q_proj.bias is not None
    plain = load_model(str(llada.write_standin(tmp_path / "p", seed=4)), dtype="float64")
    scaled = load_model(str(llada.write_standin(tmp_path / "s", seed=4, input_emb_norm=True, scale_logits=True)),
                        dtype="float64")
    d = plain.model.config.hidden_size
    torch.testing.assert_close(scaled.model.model.embed_tokens.weight, plain.model.model.embed_tokens.weight * d ** 0.5)
    torch.testing.assert_close(scaled.model.lm_head.weight, plain.model.lm_head.weight / d ** 0.5)


def test_dream_sliding_window_and_llada_moe_are_refused(tmp_path):
    with pytest.raises(UnsupportedCheckpoint, match="use_sliding_window"):
        dream.hf_config(dream.standin_config(use_sliding_window=True))
    assert release_of({"model_type": "lladamoe", "architectures": ["LLaDAMoEModelLM"]}) == "llada_moe"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "lladamoe", "architectures": ["LLaDAMoEModelLM"]}))
    with pytest.raises(UnsupportedCheckpoint, match="Qwen3MoeForCausalLM"):
        load_model(str(tmp_path))


@pytest.mark.parametrize("alg", ["entropy", "maskgit_plus", "topk_margin"])
def test_dream_rows_leaving_when_final_give_the_same_sequences(standins, alg):
    """``stop_when_final`` (the evaluation's shortcut): rows of different prompt lengths (left padding) leave the
    batch as soon as their text up to the first stop is decoded, with fewer row forwards and the very sequences of
    Dream's full sampler (float64); with sampling (temperature > 0) it is not applied."""
    from fastdllm_core.decoding.dream import dream_generate

    lm = load_model(str(standins["dream"]), dtype="float64")
    prompts = prompt_ids({"prompt_lengths": [5, 9, 7, 12, 9, 3], "prompt_seed": 4})
    kw = dict(mask_token_id=lm.mask_token_id, max_new_tokens=16, steps=16, alg=alg)
    raw = dream_generate(lm.model, prompts, **kw)  # no stop ids: the whole generation region
    stops = sorted({row[k] for row, k in zip(raw.sequences, [1, 3, 0, 6, 2, 4])})  # a stop early in every row
    full = dream_generate(lm.model, prompts, stop_token_ids=stops, **kw)
    early = dream_generate(lm.model, prompts, stop_token_ids=stops, stop_when_final=True, **kw)
    assert early.sequences == full.sequences
    assert all(len(s) < 16 for s in full.sequences)
    assert sum(early.stats.row_nfe) < sum(full.stats.row_nfe) == 6 * 16
    assert early.stats.nfe <= 16 and max(early.stats.row_nfe) == early.stats.nfe
    sampled = dream_generate(lm.model, prompts, stop_token_ids=stops, stop_when_final=True, temperature=0.5, seed=1,
                             **kw)
    assert sampled.stats.row_nfe == [16] * 6
