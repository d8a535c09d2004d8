"""Released diffusion LLM checkpoints on stock ``transformers`` classes (no vendored modeling code, no
``trust_remote_code``), and tiny stand-ins written in each release's format.

* **LLaDA** (``GSAI-ML/LLaDA-8B-Instruct``, LLaDA 1.5; ``model_type: llada``): :mod:`.llada`, onto
  :class:`transformers.LlamaForCausalLM` (or :class:`~transformers.Qwen2ForCausalLM` when only the q/k/v
  projections have biases).
* **Dream** (``Dream-org/Dream-v0-Instruct-7B``; ``model_type: Dream``): :mod:`.dream`, onto
  :class:`transformers.Qwen2ForCausalLM` (the weight names are already Qwen2's).
* **LLaDA-MoE** (``inclusionAI/LLaDA-MoE-7B-A1B-*``): :mod:`.llada_moe` says what fits and what is missing.

Both run with a full (non-causal) attention mask (:func:`fastdllm_core.masks.attention_kwargs` with
``spec=None``).  What a loaded model is, is recorded as a :class:`Family`: autoregressive, block diffusion
(Fast-dLLM v2: the logit at ``i-1`` predicts token ``i``) or full-attention masked diffusion, with the logit
shift (Dream) or without (LLaDA).
"""
from __future__ import annotations

from dataclasses import dataclass

AR, BLOCK_DIFFUSION, MASKED_DIFFUSION = "ar", "block_diffusion", "masked_diffusion"


@dataclass(frozen=True)
class Family:
    """What kind of model a checkpoint is and how its logits are read."""

    name: str  # AR, BLOCK_DIFFUSION or MASKED_DIFFUSION
    release: str  # "qwen2", "fast_dllm_v2", "llada", "dream"
    logit_shift: bool  # the logit at position i-1 predicts token i (AR, Fast-dLLM v2, Dream); False: LLaDA

    @property
    def masked_diffusion(self) -> bool:
        return self.name == MASKED_DIFFUSION


FAMILIES = {
    "qwen2": Family(AR, "qwen2", True),
    "fast_dllm_v2": Family(BLOCK_DIFFUSION, "fast_dllm_v2", True),
    "llada": Family(MASKED_DIFFUSION, "llada", False),
    "dream": Family(MASKED_DIFFUSION, "dream", True),
}


def release_of(raw: dict | None) -> str | None:
    """The released format of a raw ``config.json`` (``llada``, ``dream``, ``llada_moe``, ``fast_dllm_v2``) from its
    ``model_type`` and ``architectures``; None for anything else (loaded as stock transformers)."""
    if not raw:
        return None
    mt = str(raw.get("model_type", "")).lower()
    arch = [str(a) for a in raw.get("architectures") or []]
    if mt == "fast_dllm_qwen" or "Fast_dLLM_QwenForCausalLM" in arch:
        return "fast_dllm_v2"
    if mt in ("lladamoe", "llada_moe") or any(a.startswith("LLaDAMoE") for a in arch):
        return "llada_moe"
    if mt == "llada" or "LLaDAModelLM" in arch:
        return "llada"
    if mt == "dream" or "DreamModel" in arch:
        return "dream"
    return None


__all__ = ["AR", "BLOCK_DIFFUSION", "FAMILIES", "Family", "MASKED_DIFFUSION", "release_of"]
