"""Tiny offline models for the embedded default and the tests: tokenizers with a Qwen2.5-style chat template
(a character tokenizer, or a byte-level BPE trained on the training text with Qwen2.5's pre-tokenizer, which
splits numbers into single digits) and small Qwen2 configs.  Nothing here
downloads anything."""
from __future__ import annotations

from pathlib import Path

import torch

from .decode_config import BLOCK_SIZE
from .vocab import CHARS, SPECIAL_TOKENS

# Qwen2.5's ChatML turn format, without Qwen's default system prompt (it would cost a character-level model
# ~45 tokens per example for nothing).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


# Qwen2.5's pre-tokenizer pattern (tokenizer.json of Qwen/Qwen2.5-*): words with their leading space, single
# digits, punctuation runs, newlines and whitespace runs
QWEN_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")


def _wrap(tok):
    from transformers import PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="<|endoftext|>",
        model_max_length=4096,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def bpe_tokenizer(texts, vocab_size: int = 768):
    """A byte-level BPE (specials 0-3 as in :func:`char_tokenizer`) trained on ``texts`` (deterministic for the
    same texts in the same order); round-trips any text exactly."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    if not isinstance(vocab_size, int) or vocab_size < 300:
        raise ValueError(f"vocab_size must be an integer >= 300 (256 bytes + specials + merges), got {vocab_size!r}")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return _wrap(tok)


def char_tokenizer():
    """A character-level fast tokenizer (ids: specials 0-3, then printable ASCII) with a chat template."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    return _wrap(tok)


def tiny_qwen2_config(vocab_size: int = 128, hidden_size: int = 64, layers: int = 2, heads: int = 4,
                      kv_heads: int = 2, intermediate_size: int | None = None, max_position_embeddings: int = 2048,
                      tie_word_embeddings: bool = True, **extra):
    from transformers import Qwen2Config

    return Qwen2Config(
        vocab_size=vocab_size, hidden_size=hidden_size, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads=kv_heads, intermediate_size=intermediate_size or 4 * hidden_size,
        max_position_embeddings=max_position_embeddings, rope_theta=10000.0, tie_word_embeddings=tie_word_embeddings,
        bos_token_id=None, eos_token_id=2, pad_token_id=0, **extra,
    )


def tiny_model(config=None, seed: int = 0, dtype: torch.dtype = torch.float32, attn_implementation: str = "sdpa"):
    """A randomly initialised Qwen2ForCausalLM (deterministic for ``seed``)."""
    from transformers import Qwen2ForCausalLM

    config = config or tiny_qwen2_config()
    config._attn_implementation = attn_implementation
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(dtype).eval()
    return model


def write_tiny_checkpoint(path: str | Path, config=None, seed: int = 0, fast_dllm_format: bool = False,
                          bd_size: int | None = None) -> Path:
    """Write a random tiny Qwen2 checkpoint and the character tokenizer to ``path``.

    ``fast_dllm_format=True`` writes the config the way the released Fast_dLLM_v2 checkpoints do
    (``model_type: Fast_dLLM_Qwen``, ``architectures: [Fast_dLLM_QwenForCausalLM]``, ``bd_size``).
    """
    import json

    path = Path(path)
    model = tiny_model(config, seed=seed)
    if bd_size is not None:
        model.config.bd_size = bd_size
    model.save_pretrained(path)
    char_tokenizer().save_pretrained(path)
    if fast_dllm_format:
        cfg = json.loads((path / "config.json").read_text())
        cfg.update(model_type="Fast_dLLM_Qwen", architectures=["Fast_dLLM_QwenForCausalLM"],
                   auto_map={"AutoConfig": "configuration.Fast_dLLM_QwenConfig",
                             "AutoModelForCausalLM": "modeling.Fast_dLLM_QwenForCausalLM"},
                   bd_size=bd_size or BLOCK_SIZE)
        (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path
