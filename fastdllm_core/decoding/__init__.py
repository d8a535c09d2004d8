"""Decoding: the block-diffusion decoder (:mod:`.block_diffusion`, its forwards in :mod:`.forwards`), the AR baseline
(:mod:`.ar`), the masked-diffusion samplers (:mod:`.llada`, :mod:`.dream`, :mod:`.fast_dllm_v1`; shared parts in
:mod:`.mdm_common`, one entry point :func:`mdm_generate` in :mod:`.mdm_dispatch`), what a call reports
(:mod:`.outputs`) and the checks every decoder shares (:mod:`.common`).  The settings are
:class:`fastdllm_core.decode_config.DecodeConfig`, re-exported here."""
from ..decode_config import BLOCK_SIZE, DecodeConfig
from .ar import ar_generate
from .block_diffusion import bd_generate, bd_generate_reference
from .common import ContextError, fit_context, model_context, trim_at_stop
from .dream import dream_generate
from .fast_dllm_v1 import v1_dream, v1_llada
from .forwards import BlockKVCache
from .llada import llada_generate
from .mdm_dispatch import check_family, mdm_generate
from .outputs import GenerationOutput, GenerationStats

__all__ = ["BLOCK_SIZE", "BlockKVCache", "ContextError", "DecodeConfig", "GenerationOutput", "GenerationStats",
           "ar_generate", "bd_generate", "bd_generate_reference", "check_family", "dream_generate", "fit_context",
           "llada_generate", "mdm_generate", "model_context", "trim_at_stop", "v1_dream", "v1_llada"]
