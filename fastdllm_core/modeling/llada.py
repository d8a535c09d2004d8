"""LLaDA checkpoints (``GSAI-ML/LLaDA-8B-Instruct``, LLaDA 1.5; ``model_type: llada``) on a stock Llama.

LLaDA's own modeling code (``modeling_llada.py``: ``LLaDAModelLM`` -> ``LLaDAModel`` -> ``LLaDALlamaBlock``) is a
Llama decoder run with full attention: pre-norm RMSNorm blocks, RoPE, SwiGLU MLP (``act(ff_proj(x)) *
up_proj(x)`` -> ``ff_out``), no biases, untied output projection, no logit shift (the logit at position ``i``
predicts token ``i``), mask token 126336.  So the weights map one to one onto
:class:`transformers.LlamaForCausalLM`:

======================================================  ==============================================
released name (``model.transformer.``...)               stock Llama name
======================================================  ==============================================
``wte.weight``                                          ``model.embed_tokens.weight``
``blocks.N.attn_norm.weight``                           ``model.layers.N.input_layernorm.weight``
``blocks.N.{q,k,v}_proj.weight``                        ``model.layers.N.self_attn.{q,k,v}_proj.weight``
``blocks.N.attn_out.weight``                            ``model.layers.N.self_attn.o_proj.weight``
``blocks.N.ff_norm.weight``                             ``model.layers.N.post_attention_layernorm.weight``
``blocks.N.ff_proj.weight`` (gets the activation)       ``model.layers.N.mlp.gate_proj.weight``
``blocks.N.up_proj.weight``                             ``model.layers.N.mlp.up_proj.weight``
``blocks.N.ff_out.weight``                              ``model.layers.N.mlp.down_proj.weight``
``ln_f.weight``                                         ``model.norm.weight``
``ff_out.weight`` (absent with ``weight_tying``)        ``lm_head.weight``
======================================================  ==============================================

Config: ``d_model`` -> ``hidden_size``, ``n_layers``, ``n_heads``, ``n_kv_heads`` (``multi_query_attention``:
1), ``mlp_hidden_size`` (or ``mlp_ratio * d_model``) -> ``intermediate_size``, ``max_sequence_length`` ->
``max_position_embeddings``, ``rope_theta``, ``rms_norm_eps``, ``embedding_size`` (or ``vocab_size``) ->
``vocab_size``, ``weight_tying`` -> ``tie_word_embeddings``, ``activation_type`` silu/gelu/relu -> ``hidden_act``.

LLaDA features and what happens to each (:func:`check_config` refuses the ones that do not fit, naming them):

* ``include_qkv_bias`` (biases on q/k/v only): mapped onto :class:`~transformers.Qwen2ForCausalLM` instead
  (a Llama decoder with q/k/v biases); ``include_bias`` (biases on every linear layer, the output projection
  and the norms): refused (no stock class has a biased ``lm_head`` and biased RMSNorms).
* ``input_emb_norm`` (embeddings times ``sqrt(d_model)``) and ``scale_logits`` (logits times
  ``1/sqrt(d_model)``): folded into the embedding / output weights when they are untied; refused with
  ``weight_tying`` (one shared matrix cannot carry both scales).
* ``rope_full_precision`` (RoPE applied in float32): HF computes cos/sin in float32 but applies them in the
  model's dtype: equal in float32, a rounding difference in bfloat16 and float64 (the released checkpoints set
  it; no weight or config changes).
* ``rope_theta`` is kept; LLaDA has no RoPE scaling.
* refused: ``block_type`` other than ``llama`` (``sequential`` fuses q/k/v into one ``att_proj``),
  ``block_group_size`` != 1, ``alibi`` or no ``rope``, ``layer_norm_type`` other than ``rms``,
  ``layer_norm_with_affine: false``, ``bias_for_layer_norm``, ``attention_layer_norm`` (q/k norms over the
  full width), ``activation_type: swiglu``.
* ignored (training only): dropouts, ``init_*``, ``flash_attention``, ``precision``.

The official code's attention takes no padding mask (``attn_mask=None``); this project passes a key mask for
left-padded batches, which leaves every unpadded row's result as computed alone.

LLaDA on two sides: this module is its weights on a stock class; :mod:`fastdllm_core.decoding.llada` is its
sampler (same model, same name).
"""
from __future__ import annotations

import math
from pathlib import Path

import torch

from .standin import char_tokenizer_with, seeded_tensors, write_checkpoint

MASK_ID = 126336  # <|mdm_mask|> of the released tokenizer
EOS_ID, EOT_ID = 126081, 126348  # <|endoftext|>, <|eot_id|>
# the instruct models end a turn with <|eot_id|>, then pad with <|endoftext|>
EOS_TOKENS = ("<|endoftext|>", "<|eot_id|>")
ACTIVATIONS = {"silu": "silu", "gelu": "gelu", "relu": "relu"}

# released weight names -> stock Llama names (regular expressions, as transformers' ``key_mapping``)
KEY_MAPPING = {
    r"^model\.transformer\.wte\.": "model.embed_tokens.",
    r"^model\.transformer\.blocks\.(\d+)\.attn_norm\.": r"model.layers.\1.input_layernorm.",
    r"^model\.transformer\.blocks\.(\d+)\.q_proj\.": r"model.layers.\1.self_attn.q_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.k_proj\.": r"model.layers.\1.self_attn.k_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.v_proj\.": r"model.layers.\1.self_attn.v_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.attn_out\.": r"model.layers.\1.self_attn.o_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.ff_norm\.": r"model.layers.\1.post_attention_layernorm.",
    r"^model\.transformer\.blocks\.(\d+)\.ff_proj\.": r"model.layers.\1.mlp.gate_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.up_proj\.": r"model.layers.\1.mlp.up_proj.",
    r"^model\.transformer\.blocks\.(\d+)\.ff_out\.": r"model.layers.\1.mlp.down_proj.",
    r"^model\.transformer\.ln_f\.": "model.norm.",
    r"^model\.transformer\.ff_out\.": "lm_head.",
}


class UnsupportedCheckpoint(ValueError):
    """A released checkpoint uses a feature that no stock transformers class reproduces."""


def _kv_heads(raw: dict) -> int:
    if raw.get("n_kv_heads") is not None:
        return int(raw["n_kv_heads"])
    return 1 if raw.get("multi_query_attention") else int(raw["n_heads"])


def check_config(raw: dict) -> None:
    """Refuse (:class:`UnsupportedCheckpoint`, naming the key and its value) what does not fit a stock class."""
    def bad(key, why):
        raise UnsupportedCheckpoint(f"LLaDA config {key}={raw.get(key)!r}: {why}; no stock transformers class "
                                    "reproduces it (fastdllm_core.modeling.llada)")

    if raw.get("block_type", "llama") != "llama":
        bad("block_type", "only 'llama' blocks (separate q/k/v projections) are mapped")
    if int(raw.get("block_group_size", 1)) != 1:
        bad("block_group_size", "grouped blocks are not mapped")
    if raw.get("alibi"):
        bad("alibi", "ALiBi attention biases")
    if not raw.get("rope", True):
        bad("rope", "learned position embeddings")
    if raw.get("layer_norm_type", "rms") != "rms":
        bad("layer_norm_type", "only RMSNorm is mapped")
    if not raw.get("layer_norm_with_affine", True):
        bad("layer_norm_with_affine", "norms without weights")
    if raw.get("include_bias"):
        bad("include_bias", "biases on every linear layer, the output projection and the norms")
    if raw.get("bias_for_layer_norm"):
        bad("bias_for_layer_norm", "RMSNorm with a bias")
    if raw.get("attention_layer_norm"):
        bad("attention_layer_norm", "q/k layer norms over the full width")
    if raw.get("activation_type", "silu") not in ACTIVATIONS:
        bad("activation_type", f"only {sorted(ACTIVATIONS)} are mapped")
    tied = bool(raw.get("weight_tying", False))
    for key in ("input_emb_norm", "scale_logits"):
        if raw.get(key) and tied:
            bad(key, "a scale on tied embeddings cannot be folded into the one shared matrix")
    if int(raw["d_model"]) % int(raw["n_heads"]):
        bad("d_model", f"not divisible by n_heads={raw['n_heads']}")


def hf_config(raw: dict):
    """The stock config (:class:`~transformers.LlamaConfig`, or :class:`~transformers.Qwen2Config` with q/k/v
    biases) of a raw LLaDA ``config.json``; keeps ``mask_token_id``."""
    from transformers import LlamaConfig, Qwen2Config

    check_config(raw)
    d, heads = int(raw["d_model"]), int(raw["n_heads"])
    inter = raw.get("mlp_hidden_size") or int(raw.get("mlp_ratio", 4)) * d
    common = dict(
        vocab_size=int(raw.get("embedding_size") or raw["vocab_size"]), hidden_size=d, intermediate_size=int(inter),
        num_hidden_layers=int(raw["n_layers"]), num_attention_heads=heads, num_key_value_heads=_kv_heads(raw),
        hidden_act=ACTIVATIONS[raw.get("activation_type", "silu")],
        max_position_embeddings=int(raw.get("max_sequence_length", 4096)),
        rms_norm_eps=float(raw.get("rms_norm_eps", 1e-5)), tie_word_embeddings=bool(raw.get("weight_tying", False)),
        bos_token_id=raw.get("bos_token_id"), eos_token_id=raw.get("eos_token_id"),
        pad_token_id=raw.get("pad_token_id"),
        attention_dropout=0.0, use_cache=False)
    rope = {"rope_type": "default", "rope_theta": float(raw.get("rope_theta", 10000.0))}
    if raw.get("include_qkv_bias"):
        cfg = Qwen2Config(**common, rope_parameters=rope, use_sliding_window=False)
    else:
        cfg = LlamaConfig(**common, rope_parameters=rope, attention_bias=False, mlp_bias=False, head_dim=d // heads)
    cfg.mask_token_id = raw.get("mask_token_id", MASK_ID)
    cfg.released_model_type = "llada"
    return cfg


@torch.no_grad()
def fold_scales(model, raw: dict) -> None:
    """Fold ``input_emb_norm`` and ``scale_logits`` into the (untied) embedding and output weights."""
    d = int(raw["d_model"])
    if raw.get("input_emb_norm"):
        model.get_input_embeddings().weight.mul_(d ** 0.5)
    if raw.get("scale_logits"):
        model.get_output_embeddings().weight.mul_(1.0 / math.sqrt(d))


# ------------------------------------------------------------------------------------------------ stand-in
SPECIALS = ["<|endoftext|>", "<|startoftext|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",
            "<|mdm_mask|>"]
# LLaDA-8B-Instruct's chat template (a Llama-3 turn format with its own BOS)
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n{{ message['content'] | trim }}<|eot_id|>"
    "{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def tokenizer():
    """A character tokenizer with LLaDA-8B-Instruct's special tokens (ids 0-5) and chat template."""
    return char_tokenizer_with(SPECIALS, eos="<|endoftext|>", pad="<|endoftext|>", bos="<|startoftext|>",
                               chat_template=CHAT_TEMPLATE, mask="<|mdm_mask|>")


def standin_config(*, vocab_size: int = 128, d_model: int = 32, n_layers: int = 2, n_heads: int = 4,
                   n_kv_heads: int | None = None, mlp_hidden_size: int = 48, max_sequence_length: int = 512,
                   rope_theta: float = 500000.0, rope_full_precision: bool = True, weight_tying: bool = False,
                   **overrides) -> dict:
    """The released LLaDA-8B-Instruct ``config.json`` with tiny dimensions (every key of the release)."""
    tok = {t: i for i, t in enumerate(SPECIALS)}
    cfg = {
        "activation_type": "silu", "alibi": False, "alibi_bias_max": 8.0, "architectures": ["LLaDAModelLM"],
        "attention_dropout": 0.0, "attention_layer_norm": False, "attention_layer_norm_with_affine": True,
        "auto_map": {"AutoConfig": "configuration_llada.LLaDAConfig",
                     "AutoModelForCausalLM": "modeling_llada.LLaDAModelLM",
                     "AutoModel": "modeling_llada.LLaDAModelLM"},
        "bias_for_layer_norm": False, "block_group_size": 1, "block_type": "llama", "d_model": d_model,
        "embedding_dropout": 0.0, "embedding_size": vocab_size, "eos_token_id": tok["<|endoftext|>"],
        "flash_attention": False, "include_bias": False, "include_qkv_bias": False, "init_cutoff_factor": None,
        "init_device": "meta", "init_fn": "mitchell", "init_std": 0.02, "input_emb_norm": False,
        "layer_norm_type": "rms", "layer_norm_with_affine": True, "mask_token_id": tok["<|mdm_mask|>"],
        "max_sequence_length": max_sequence_length, "mlp_hidden_size": mlp_hidden_size, "mlp_ratio": 4,
        "model_type": "llada", "multi_query_attention": None, "n_heads": n_heads,
        "n_kv_heads": n_heads if n_kv_heads is None else n_kv_heads, "n_layers": n_layers,
        "pad_token_id": tok["<|endoftext|>"], "precision": "amp_bf16", "residual_dropout": 0.0,
        "rms_norm_eps": 1e-05, "rope": True, "rope_full_precision": rope_full_precision, "rope_theta": rope_theta,
        "scale_logits": False, "torch_dtype": "float32", "transformers_version": "4.46.3", "use_cache": False,
        "vocab_size": vocab_size, "weight_tying": weight_tying,
    }
    cfg.update(overrides)
    return cfg


def standin_tensors(cfg: dict, seed: int = 0, std: float = 0.3, boost_tokens=(), boost: float = 1.0) -> dict:
    """Seeded weights under the released names (float32); the output rows of ``boost_tokens`` times ``boost`` (a
    stand-in whose EOS / EoT are likely predictions)."""
    d, h, inter = cfg["d_model"], cfg["n_heads"], cfg["mlp_hidden_size"]
    kv = _kv_heads(cfg) * (d // h)
    V = cfg.get("embedding_size") or cfg["vocab_size"]
    shapes = {"model.transformer.wte.weight": (V, d)}
    bias = cfg.get("include_qkv_bias")
    for i in range(cfg["n_layers"]):
        p = f"model.transformer.blocks.{i}."
        shapes.update({p + "attn_norm.weight": (d,), p + "q_proj.weight": (d, d), p + "k_proj.weight": (kv, d),
                       p + "v_proj.weight": (kv, d)})
        if bias:
            shapes.update({p + "q_proj.bias": (d,), p + "k_proj.bias": (kv,), p + "v_proj.bias": (kv,)})
        shapes.update({p + "attn_out.weight": (d, d), p + "ff_norm.weight": (d,), p + "ff_proj.weight": (inter, d),
                       p + "up_proj.weight": (inter, d), p + "ff_out.weight": (d, inter)})
    shapes["model.transformer.ln_f.weight"] = (d,)
    if not cfg.get("weight_tying"):
        shapes["model.transformer.ff_out.weight"] = (V, d)
    out = seeded_tensors(shapes, seed, std, ones=("norm.weight", "ln_f.weight"))
    head = out.get("model.transformer.ff_out.weight", out["model.transformer.wte.weight"])
    for t in boost_tokens:
        head[int(t)] *= boost
    return out


def write_standin(path, *, seed: int = 0, std: float = 0.3, boost_tokens=(), boost: float = 1.0, **config) -> Path:
    """A tiny random LLaDA checkpoint in the released format: ``config.json`` (``model_type: llada``,
    ``auto_map``, ``LLaDAModelLM``), ``model.safetensors`` with the released weight names, and a tokenizer with
    ``<|mdm_mask|>``, ``<|eot_id|>`` and the instruct chat template.  Deterministic for ``seed`` (and the other
    arguments: ``config`` overrides keys of :func:`standin_config`)."""
    cfg = standin_config(**config)
    gen = {"bos_token_id": cfg.get("bos_token_id"), "eos_token_id": cfg["eos_token_id"],
           "pad_token_id": cfg["pad_token_id"], "transformers_version": "4.46.3"}
    return write_checkpoint(path, cfg, gen, standin_tensors(cfg, seed, std, boost_tokens, boost), tokenizer())
