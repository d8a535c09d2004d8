"""Decoding: the block-diffusion decoder (:mod:`.block_diffusion`, its forwards in :mod:`.engine`), the AR baseline
(:mod:`.ar`), what a call reports (:mod:`.stats`) and the checks both share (:mod:`.common`).  The settings are
:class:`fastdllm_core.config.DecodeConfig`, re-exported here."""
from ..config import BLOCK_SIZE, DecodeConfig
from .ar import ar_generate
from .block_diffusion import bd_generate, bd_generate_reference
from .common import ContextError, fit_context, model_context, trim_at_stop
from .engine import BlockKVCache
from .stats import GenerationOutput, GenerationStats

__all__ = ["BLOCK_SIZE", "BlockKVCache", "ContextError", "DecodeConfig", "GenerationOutput", "GenerationStats",
           "ar_generate", "bd_generate", "bd_generate_reference", "fit_context", "model_context", "trim_at_stop"]
