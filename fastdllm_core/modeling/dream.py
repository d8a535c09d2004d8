"""Dream checkpoints (``Dream-org/Dream-v0-Instruct-7B``; ``model_type: Dream``) on a stock Qwen2.

Dream's own modeling code (``modeling_dream.py``: ``DreamModel`` -> ``DreamBaseModel`` -> ``DreamDecoderLayer``)
is Qwen2.5 run with full attention (``is_causal=False``, no mask unless a batch is padded): q/k/v biases, no o
bias, RMSNorm, RoPE (``rope_theta``, optional ``rope_scaling``), SwiGLU MLP.  Its weights already carry Qwen2's
names (``model.embed_tokens``, ``model.layers.N.self_attn.q_proj`` ..., ``model.norm``, ``lm_head``), so only the
config changes: ``model_type`` ``Dream`` -> ``qwen2``, ``architectures`` -> ``Qwen2ForCausalLM``, ``auto_map``
dropped; ``mask_token_id`` (151666, ``<|mask|>``) is kept.

Dream was initialised from Qwen2.5 and keeps its reading of the logits: the logit at position ``i-1`` predicts
token ``i`` (``diffusion_generate`` shifts them: ``cat([logits[:, :1], logits[:, :-1]])``).

What does not fit: ``use_sliding_window: true`` with full attention (refused; the released models set it
false).  Padding: Dream's code gives padded rows positions counted from their first real token and masks pad
keys; the project's left-padded batches do the same (RoPE depends on relative positions only).

Dream on two sides: this module is its weights on a stock class; :mod:`fastdllm_core.decoding.dream` is its
sampler (same model, same name).
"""
from __future__ import annotations

from pathlib import Path

from .llada import UnsupportedCheckpoint
from .standin import char_tokenizer_with, seeded_tensors, write_checkpoint

MASK_ID = 151666  # <|mask|> of the released tokenizer
EOS_TOKENS = ("<|im_end|>", "<|endoftext|>")  # the instruct model ends a turn with <|im_end|>, pads with <|endoftext|>
DROP_KEYS = ("auto_map", "architectures", "model_type", "transformers_version")


def hf_config(raw: dict):
    """The :class:`~transformers.Qwen2Config` of a raw Dream ``config.json`` (``mask_token_id`` kept)."""
    from transformers import Qwen2Config

    if raw.get("use_sliding_window"):
        raise UnsupportedCheckpoint("Dream config use_sliding_window=True: sliding-window attention with full "
                                    "(bidirectional) attention is not reproduced by a stock class")
    d = {k: v for k, v in raw.items() if k not in DROP_KEYS}
    d["architectures"] = ["Qwen2ForCausalLM"]
    d["use_sliding_window"] = False
    d["use_cache"] = False
    cfg = Qwen2Config(**d)
    cfg.mask_token_id = raw.get("mask_token_id", MASK_ID)
    cfg.released_model_type = "Dream"
    return cfg


# ------------------------------------------------------------------------------------------------ stand-in
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|beginoftext|>", "<|mask|>"]
# Qwen2.5's ChatML turn format (Dream-v0-Instruct keeps Qwen2.5-Instruct's template; default system prompt left out)
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tokenizer():
    """A character tokenizer with Dream's special tokens (ids 0-4: ``<|endoftext|>`` ... ``<|mask|>``)."""
    return char_tokenizer_with(SPECIALS, eos="<|endoftext|>", pad="<|endoftext|>", bos="<|beginoftext|>",
                               chat_template=CHAT_TEMPLATE, mask="<|mask|>")


def standin_config(*, vocab_size: int = 128, hidden_size: int = 32, num_hidden_layers: int = 2,
                   num_attention_heads: int = 4, num_key_value_heads: int = 2, intermediate_size: int = 48,
                   max_position_embeddings: int = 512, rope_theta: float = 1000000.0, tie_word_embeddings: bool = False,
                   **overrides) -> dict:
    """The released Dream-v0-Instruct-7B ``config.json`` with tiny dimensions (every key of the release)."""
    tok = {t: i for i, t in enumerate(SPECIALS)}
    cfg = {
        "architectures": ["DreamModel"], "attention_dropout": 0.0,
        "auto_map": {"AutoConfig": "configuration_dream.DreamConfig", "AutoModel": "modeling_dream.DreamModel"},
        "bos_token_id": tok["<|beginoftext|>"], "eos_token_id": tok["<|endoftext|>"], "hidden_act": "silu",
        "hidden_size": hidden_size, "initializer_range": 0.02, "intermediate_size": intermediate_size,
        "mask_token_id": tok["<|mask|>"], "max_position_embeddings": max_position_embeddings,
        "max_window_layers": num_hidden_layers, "model_type": "Dream", "num_attention_heads": num_attention_heads,
        "num_hidden_layers": num_hidden_layers, "num_key_value_heads": num_key_value_heads,
        "pad_token_id": tok["<|endoftext|>"], "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": rope_theta,
        "sliding_window": None, "tie_word_embeddings": tie_word_embeddings, "torch_dtype": "float32",
        "transformers_version": "4.46.2", "use_cache": False, "use_sliding_window": False, "vocab_size": vocab_size,
    }
    cfg.update(overrides)
    return cfg


def standin_tensors(cfg: dict, seed: int = 0, std: float = 0.3) -> dict:
    """Seeded weights under the released (= Qwen2) names (float32)."""
    d, h, inter, V = cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"], cfg["vocab_size"]
    kv = cfg["num_key_value_heads"] * (d // h)
    shapes = {"model.embed_tokens.weight": (V, d)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (d,), p + "self_attn.q_proj.weight": (d, d),
                       p + "self_attn.q_proj.bias": (d,), p + "self_attn.k_proj.weight": (kv, d),
                       p + "self_attn.k_proj.bias": (kv,), p + "self_attn.v_proj.weight": (kv, d),
                       p + "self_attn.v_proj.bias": (kv,), p + "self_attn.o_proj.weight": (d, d),
                       p + "post_attention_layernorm.weight": (d,), p + "mlp.gate_proj.weight": (inter, d),
                       p + "mlp.up_proj.weight": (inter, d), p + "mlp.down_proj.weight": (d, inter)})
    shapes["model.norm.weight"] = (d,)
    if not cfg.get("tie_word_embeddings"):
        shapes["lm_head.weight"] = (V, d)
    return seeded_tensors(shapes, seed, std, ones=("layernorm.weight", "norm.weight"))


def write_standin(path, *, seed: int = 0, std: float = 0.3, **config) -> Path:
    """A tiny random Dream checkpoint in the released format (``model_type: Dream``, ``auto_map``,
    ``DreamModel``; Qwen2 weight names; a tokenizer with ``<|mask|>`` and ChatML).  Deterministic for ``seed``."""
    cfg = standin_config(**config)
    gen = {"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"],
           "pad_token_id": cfg["pad_token_id"], "mask_token_id": cfg["mask_token_id"], "alg": "entropy",
           "steps": 512, "temperature": 0.0, "top_p": None, "transformers_version": "4.46.2"}
    return write_checkpoint(path, cfg, gen, standin_tensors(cfg, seed, std), tokenizer())
