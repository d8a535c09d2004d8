"""Token strings shared by the model loader (:mod:`fastdllm_core.loading`), the tiny tokenizers
(:mod:`fastdllm_core.tiny`) and the stand-in checkpoint writers (:mod:`fastdllm_core.modeling.standin`).

A leaf module (it imports nothing of the package), so that those can share them without importing each other.
"""
from __future__ import annotations

import string

MASK_TOKEN = "|<MASK>|"  # the mask token added to (or found in) a block-diffusion model's tokenizer
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", MASK_TOKEN]  # ids 0-3 of the tiny tokenizers
CHARS = list(string.printable.replace("\x0b", "").replace("\x0c", "").replace("\r", ""))  # the character vocab
