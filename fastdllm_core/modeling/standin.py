"""What the stand-in writers of :mod:`.llada` and :mod:`.dream` share: a character tokenizer with a release's
special tokens and chat template, seeded random tensors, and the checkpoint directory itself (``config.json``,
``generation_config.json``, ``model.safetensors``, the tokenizer).  Nothing here downloads anything."""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..vocab import CHARS


def char_tokenizer_with(specials: list[str], *, eos: str, pad: str, bos: str | None, chat_template: str,
                        mask: str):
    """A character-level fast tokenizer whose ids are ``specials`` (in order, from 0) then printable ASCII."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(list(specials) + CHARS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=pad))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=eos, pad_token=pad, unk_token=pad, bos_token=bos,
                                   mask_token=mask, model_max_length=4096)
    fast.chat_template = chat_template
    return fast


def seeded_tensors(shapes: dict[str, tuple], seed: int, std: float, *, ones: tuple = (), zeros_ok: bool = False):
    """Deterministic float32 tensors for ``shapes`` (in the order given): normal(0, ``std``); names ending in one
    of ``ones`` (norm weights) are 1 + 0.1 * normal, so that a mix-up of two norms shows in the outputs."""
    g = torch.Generator().manual_seed(int(seed))
    out = {}
    for name, shape in shapes.items():
        t = torch.randn(shape, generator=g, dtype=torch.float32)
        out[name] = (1.0 + 0.1 * t) if name.endswith(ones) else t * std
    return out


def write_checkpoint(path, config: dict, generation_config: dict, tensors: dict, tokenizer) -> Path:
    """Write ``config.json``, ``generation_config.json``, ``model.safetensors`` (names as given) and the tokenizer."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    (path / "generation_config.json").write_text(json.dumps(generation_config, indent=2, sort_keys=True) + "\n")
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path / "model.safetensors"),
              metadata={"format": "pt"})
    tokenizer.save_pretrained(str(path))
    return path
