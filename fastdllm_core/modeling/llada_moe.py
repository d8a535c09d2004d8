"""LLaDA-MoE (``inclusionAI/LLaDA-MoE-7B-A1B-Base`` / ``-Instruct``): refused, with what is missing.

What the architecture is (read from a third-party copy of its remote code, ``modeling_lladamoe.py`` as vendored by
the ``ZHZisZZ/dllm-trainer`` repository at ``dllm/pipelines/llada/models/``; the official file lives only in the
Hugging Face model repository, which this project cannot reach): an OLMoE-derived decoder run with full attention,
16 layers, 64 experts of width 1024 with top-8 softmax routing, ``norm_topk_prob`` hard-coded False, optional
shared expert and expert bias, per-head q/k RMSNorm (``RMSNorm(head_dim)`` applied to every head), RoPE,
``mask_token_id`` 156895, no logit shift.

Which stock class fits:

* :class:`transformers.OlmoeForCausalLM` does **not**: its q/k norms are RMSNorms over the whole projection
  (``hidden_size`` and ``kv_heads * head_dim``), not per head, so the released ``q_norm.weight`` (``head_dim``
  values) has no place in it.
* :class:`transformers.Qwen3MoeForCausalLM` matches the computation (per-head q/k RMSNorm, softmax top-k routing
  with ``norm_topk_prob`` False, SwiGLU experts, dense layers through ``mlp_only_layers``) as long as the
  checkpoint has no shared expert (``shared_expert_intermediate_size`` null), no expert bias
  (``moe_router_enable_expert_bias`` false), ``routed_scaling_factor`` 1, ``partial_rotary_factor`` 1 and no
  ``clip_qkv``; the expert weights (``experts.E.{gate,up,down}_proj``) must be stacked into Qwen3-MoE's fused
  expert tensors when loading.

What is missing before it can be done the way LLaDA and Dream are (a stand-in in the released format and a
float64 equivalence test against the official modeling code at a pinned commit): the official
``modeling_lladamoe.py`` / ``configuration_lladamoe.py`` at a pinned revision.  Only a vendored copy in a third-party
repository was found (no inclusionAI GitHub repository holds it), so there is nothing official to pin and compare
against; the released ``config.json`` keys could not be checked either.  Loading such a checkpoint raises
:class:`~fastdllm_core.modeling.llada.UnsupportedCheckpoint` with this explanation.
"""
from __future__ import annotations

from .llada import UnsupportedCheckpoint

WHY = ("LLaDA-MoE checkpoints are not supported: Qwen3MoeForCausalLM fits the architecture (per-head q/k norms, "
       "softmax top-k routing) but the official modeling code could not be pinned to prove it equal; see "
       "fastdllm_core/modeling/llada_moe.py")


def hf_config(raw: dict):
    raise UnsupportedCheckpoint(WHY)


def from_pretrained(directory, mkw):  # pragma: no cover - hf_config refuses first
    raise UnsupportedCheckpoint(WHY)
