"""The KV-cache keyword of the model calls (issue 30): transformers 5.24 deprecates ``past_key_values`` for
``cache`` (removed in 5.40); the decoders pass whichever the installed forward takes, and pyproject stops below
the removal."""
import tomllib
import warnings
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement
from packaging.version import Version

from fastdllm_core.decoding import DecodeConfig, bd_generate
from fastdllm_core.decoding.common import cache_kwarg

ROOT = Path(__file__).resolve().parents[1]
MASK = 3


def _strict():
    """Every warning an error, the deprecation of past_key_values among them."""
    w = warnings.catch_warnings()
    w.__enter__()
    warnings.simplefilter("error")
    return w


@pytest.mark.parametrize("cache", [False, True])
def test_bd_decoder_uses_the_supported_cache_keyword(tiny64, cache):
    import transformers

    want = "cache" if Version(transformers.__version__) >= Version("5.24") else "past_key_values"
    assert cache_kwarg(tiny64) == want
    cfg = DecodeConfig(block_size=8, sub_block_size=4, threshold=0.9, use_sub_block_cache=cache, max_new_tokens=16)
    w = _strict()
    try:
        out = bd_generate(tiny64, [[5, 6, 7, 8, 9]], mask_token_id=MASK, stop_token_ids=[], config=cfg)
    finally:
        w.__exit__(None, None, None)
    assert len(out.sequences[0]) == 16


def test_masked_diffusion_batch_uses_the_supported_cache_keyword(tiny64):
    """The LLaDA / Dream / Fast-dLLM v1 samplers' forwards (mdm.Batch): with and without the cache."""
    from fastdllm_core.decoding.mdm_common import Batch

    b = Batch(tiny64, [[5, 6, 7, 8]], 8, MASK)
    w = _strict()
    try:
        full = b.forward()
        filled = b.forward_fill_cache()
        window = b.forward_window(4, 12, "block")
    finally:
        w.__exit__(None, None, None)
    assert full.shape == filled.shape and window.shape[1] == 8
    torch.testing.assert_close(window, full[:, 4:12])


def test_older_forward_signature_gets_past_key_values():
    class Old(torch.nn.Module):
        def forward(self, input_ids=None, past_key_values=None, use_cache=None):
            return input_ids

    class New(torch.nn.Module):
        def forward(self, input_ids=None, cache=None, use_cache=None):
            return input_ids

    assert cache_kwarg(Old()) == "past_key_values" and cache_kwarg(New()) == "cache"


def test_transformers_upper_bound_is_the_removal():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    req = next(Requirement(d) for d in deps if Requirement(d).name == "transformers")
    assert "5.39.9" in req.specifier and "5.40.0" not in req.specifier and "5.0.0" in req.specifier
