"""Decoding: the block-diffusion decoder (:mod:`.block_diffusion`, its forwards in :mod:`.engine`), the AR baseline
(:mod:`.ar`), the masked-diffusion samplers (:mod:`.llada`, :mod:`.dream`, :mod:`.fast_dllm_v1`; shared parts in
:mod:`.mdm`, one entry point :func:`mdm_generate` in :mod:`.masked`), what a call reports (:mod:`.stats`) and the
checks they share (:mod:`.common`).  The settings are :class:`fastdllm_core.config.DecodeConfig`, re-exported here."""
from ..config import BLOCK_SIZE, DecodeConfig
from .ar import ar_generate
from .block_diffusion import bd_generate, bd_generate_reference
from .common import ContextError, fit_context, model_context, trim_at_stop
from .dream import dream_generate
from .engine import BlockKVCache
from .fast_dllm_v1 import v1_dream, v1_llada
from .llada import llada_generate
from .masked import check_family, mdm_generate
from .stats import GenerationOutput, GenerationStats

__all__ = ["BLOCK_SIZE", "BlockKVCache", "ContextError", "DecodeConfig", "GenerationOutput", "GenerationStats",
           "ar_generate", "bd_generate", "bd_generate_reference", "check_family", "dream_generate", "fit_context",
           "llada_generate", "mdm_generate", "model_context", "trim_at_stop", "v1_dream", "v1_llada"]
