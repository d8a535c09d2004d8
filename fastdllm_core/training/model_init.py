"""The model a training run starts from: a tiny random Qwen2 with its tokenizer, or a checkpoint; the [MASK]
token and, optionally, its embedding row set to zero."""
from __future__ import annotations

import torch

from .config import ModelConfig
from .data import to_messages


def tokenizer_texts(rows: list[dict]):
    """The text a tokenizer is trained on: plain-text rows, and every chat turn as ``role\ncontent``."""
    for r in rows:
        if "text" in r:
            yield r["text"]
        else:
            for m in to_messages(r):
                yield f"{m['role']}\n{m['content']}"


def build_tokenizer(mc: ModelConfig, rows: list[dict] | None = None):
    """(tokenizer, [MASK] id) of ``model.init`` without the model: the tiny model's character tokenizer or a
    byte-level BPE of ``model.vocab_size`` trained on ``rows`` (``model.tokenizer``), else the checkpoint's
    (:func:`~fastdllm_core.loading.load_tokenizer`).  What the token store is encoded with, before any weights load."""
    from ..loading import ensure_mask_token, load_tokenizer

    if mc.init != "tiny":
        return load_tokenizer(mc.init)
    from ..tiny import bpe_tokenizer, char_tokenizer

    if mc.tokenizer == "bpe":
        tok = bpe_tokenizer(tokenizer_texts(rows or []), mc.vocab_size)
    elif mc.tokenizer == "char":
        tok = char_tokenizer()
    else:
        raise ValueError(f"model.tokenizer must be 'char' or 'bpe', got {mc.tokenizer!r}")
    return tok, ensure_mask_token(tok)


def build_model(mc: ModelConfig, *, seed: int, block_size: int, device: str, attn_implementation: str | None = None,
                rows: list[dict] | None = None, tokenizer=None):
    """Model + tokenizer + mask token id from ``model.init``: ``tiny`` = a random tiny Qwen2 (weights from
    ``seed``) with ``tokenizer`` (default: :func:`build_tokenizer`'s, from ``rows``); anything else is loaded with
    :func:`~fastdllm_core.loading.load_model` (``block_size``: its block size when it is a block-diffusion model)."""
    from ..loading import default_attn_implementation, ensure_mask_token, load_model

    attn = attn_implementation or default_attn_implementation(device)
    if mc.init == "tiny":
        from ..tiny import tiny_model, tiny_qwen2_config

        tok = tokenizer if tokenizer is not None else build_tokenizer(mc, rows)[0]
        arch = {"vocab_size": -(-len(tok) // 8) * 8, **mc.tiny}
        model = tiny_model(tiny_qwen2_config(**arch), seed=seed, attn_implementation=attn)
        mask_id = ensure_mask_token(tok, model)
    else:
        lm = load_model(mc.init, device="cpu", dtype=torch.float32, attn_implementation=attn, block_size=block_size)
        model, tok, mask_id = lm.model, lm.tokenizer, lm.mask_token_id
    if mc.mask_init == "zero":
        init_mask_embedding(model, mask_id)
    model.train()
    return model, tok, mask_id


def init_mask_embedding(model, mask_id: int) -> None:
    """Set the [MASK] token's input embedding (and, when tied, its output row) to zero before adaptation.

    An AR checkpoint never saw [MASK] as an input, but its row was trained all the same: as a class that is never
    the target, the output softmax pushed it away from every hidden state, and with tied embeddings that row *is*
    the input embedding.  Decoding then attends to a block of such vectors.  On the embedded default's tiny AR
    model this alone dropped the left-to-right accuracy of computed values under the block-diffusion mask from
    74% (zero row) to 38% before any training, and adaptation started from a loss of 7-10 nats on them
    (docs/embedded_default.md, "The [MASK] embedding").  A zero row makes [MASK] carry no content, only its
    position (RoPE) and the projections' biases; it is learned from there (the paper: "a learned [MASK]
    embedding").  ``model.mask_init: keep`` (the default, as the reference implementation) leaves the row as is.
    """
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        emb[mask_id].zero_()
        out = model.get_output_embeddings()
        if out is not None and out.weight.data_ptr() != emb.data_ptr():
            out.weight[mask_id].zero_()
