"""The models a throughput sweep runs: a checkpoint (through :func:`fastdllm_core.loading.load_model`) or random
weights with real Qwen2.5 dimensions (``random:SHAPE``, no download), as a :class:`BenchModel`."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..decode_config import BLOCK_SIZE
from ..modeling import FAMILIES, Family

# Real Qwen2.5(-Instruct) dimensions (from the published config.json files); random weights only.
QWEN_COMMON = dict(rope_theta=1_000_000.0, max_position_embeddings=32768, rms_norm_eps=1e-6, hidden_act="silu",
                   bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)
MODEL_SHAPES = {
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, tie_word_embeddings=True, **QWEN_COMMON),
    "qwen2.5-1.5b": dict(vocab_size=151936, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, intermediate_size=8960, tie_word_embeddings=True, **QWEN_COMMON),
    "qwen2.5-7b": dict(vocab_size=152064, hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, intermediate_size=18944, tie_word_embeddings=False, **QWEN_COMMON),
}
QWEN_MASK_ID, QWEN_STOP_IDS = 151665, [151645, 151643]  # |<MASK>| (inside the padded table), <|im_end|>, <|endoftext|>


@dataclass
class BenchModel:
    model: torch.nn.Module
    tokenizer: object | None
    mask_token_id: int
    stop_token_ids: list[int]
    block_size: int
    source: str
    label: str
    weights: str  # "random" or "checkpoint"
    info: dict = field(default_factory=dict)
    family: Family = FAMILIES["qwen2"]  # what load_model found (masked-diffusion points need a LLaDA / Dream one)

    @property
    def eos_token_ids(self) -> list[int]:  # the name LoadedModel uses (mdm_generate takes either)
        return self.stop_token_ids

    @property
    def device(self) -> torch.device:
        return self.model.device


def random_model(shape: str, *, device: str = "cpu", dtype: str | torch.dtype = "auto", attn: str = "sdpa",
                 seed: int = 0) -> BenchModel:
    """A randomly initialised model with real (or tiny) dimensions, built on ``device`` (no download)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from ..loading import resolve_dtype
    from ..tiny import char_tokenizer, tiny_qwen2_config

    torch_dtype = resolve_dtype(dtype, device)
    torch.manual_seed(seed)
    if shape == "tiny":
        cfg, tok = tiny_qwen2_config(), char_tokenizer()
        mask_id, stops = tok.convert_tokens_to_ids("|<MASK>|"), [tok.eos_token_id]
    elif shape in MODEL_SHAPES:
        cfg, tok = Qwen2Config(**MODEL_SHAPES[shape]), None
        mask_id, stops = QWEN_MASK_ID, list(QWEN_STOP_IDS)
    else:
        raise ValueError(f"unknown model shape {shape!r}; choose from {['tiny', *MODEL_SHAPES]}")
    cfg._attn_implementation = attn
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(cfg, dtype=torch_dtype, attn_implementation=attn)
    model.eval()
    model.config.mask_token_id = mask_id
    model.generation_config.eos_token_id = stops
    return BenchModel(model, tok, mask_id, stops, BLOCK_SIZE, f"random:{shape}", shape, "random",
                      {"dtype": str(torch_dtype).replace("torch.", ""), "attn_implementation": attn,
                       "device": str(device)})


def load_bench_model(source: str, *, device: str = "cpu", dtype: str = "auto", attn: str = "sdpa",
                     block_size: int | None = None, label: str | None = None, seed: int = 0) -> BenchModel:
    if source.startswith("random:"):
        bm = random_model(source.split(":", 1)[1], device=device, dtype=dtype, attn=attn, seed=seed)
        if block_size:
            bm.block_size = block_size
    else:
        from ..loading import load_model

        lm = load_model(source, device=device, dtype=dtype, attn_implementation=attn, block_size=block_size)
        bm = BenchModel(lm.model, lm.tokenizer, lm.mask_token_id, lm.eos_token_ids, lm.block_size, source,
                        Path(source.rstrip("/")).name or source, "checkpoint", dict(lm.info), lm.family)
    if label:
        bm.label = label
    return bm
