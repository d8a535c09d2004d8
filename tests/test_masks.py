import pytest
import torch

from fastdllm_core.masks import (
    dense_mask,
    dense_mask_for,
    inference_mask_mod,
    inference_spec,
    training_mask_mod,
    training_spec,
)


def paper_training_mask(L, D):
    """Literal transcription of the paper's case definitions (appendix, Attention Mask Design)."""
    M = torch.zeros(2 * L, 2 * L, dtype=torch.bool)
    for i in range(2 * L):
        for j in range(2 * L):
            qi_xt, kj_xt = i < L, j < L
            bi, bj = (i % L) // D, (j % L) // D
            if qi_xt and kj_xt:
                M[i, j] = bi == bj  # M_BD
            elif qi_xt and not kj_xt:
                M[i, j] = bj < bi  # M_OBC
            elif not qi_xt and not kj_xt:
                M[i, j] = bj <= bi  # M_BC
            else:
                M[i, j] = False  # x_0 never sees x_t
    return M


@pytest.mark.parametrize("L,D", [(4, 1), (8, 2), (12, 4), (16, 16), (32, 8)])
def test_training_mask_matches_paper(L, D):
    assert torch.equal(dense_mask(training_mask_mod(L, D), 2 * L, 2 * L), paper_training_mask(L, D))


@pytest.mark.parametrize("D,C,Q", [(4, 0, 12), (4, 8, 4), (2, 6, 6), (1, 5, 3)])
def test_inference_mask(D, C, Q):
    M = dense_mask(inference_mask_mod(D, C), Q, C + Q)
    for q in range(Q):
        for k in range(C + Q):
            assert bool(M[q, k]) == ((k // D) <= ((C + q) // D))
    if C % D == 0 and Q == D:
        assert M.all()  # one block against its prefix cache sees everything


def test_block_size_one_is_causal():
    M = dense_mask(inference_mask_mod(1), 6, 6)
    assert torch.equal(M, torch.ones(6, 6, dtype=torch.bool).tril())


@pytest.mark.parametrize("bad", [dict(seq_len=10, block_size=4), dict(seq_len=4, block_size=8),
                                 dict(seq_len=0, block_size=1), dict(seq_len=8, block_size=0)])
def test_bad_training_mask_args(bad):
    with pytest.raises(ValueError, match="block_size|seq_len"):
        training_mask_mod(**bad)


def test_dense_builder_is_cached():
    a = dense_mask_for(training_spec(8, 2), 16, 16)
    b = dense_mask_for(training_spec(8, 2), 16, 16)
    assert a is b


def test_flex_equals_dense():
    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    L, D, H, d = 16, 4, 2, 8
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, H, 2 * L, d, generator=g) for _ in range(3))
    spec = training_spec(L, D)
    dense = dense_mask_for(spec, 2 * L, 2 * L)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=dense[None, None])
    try:
        bm = flex.create_block_mask(spec.mask_mod(), None, None, 2 * L, 2 * L, device="cpu")
        out = flex.flex_attention(q, k, v, block_mask=bm)
    except Exception as exc:  # pragma: no cover - depends on the torch build
        pytest.skip(f"flex attention does not run here: {exc}")
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    # inference mask too (block-causal prefill)
    spec_i = inference_spec(D, 0)
    dense_i = dense_mask_for(spec_i, L, L)
    ref_i = torch.nn.functional.scaled_dot_product_attention(q[:, :, :L], k[:, :, :L], v[:, :, :L],
                                                             attn_mask=dense_i[None, None])
    out_i = flex.flex_attention(q[:, :, :L], k[:, :, :L], v[:, :, :L],
                                block_mask=flex.create_block_mask(spec_i.mask_mod(), None, None, L, L, device="cpu"))
    torch.testing.assert_close(out_i, ref_i, atol=1e-5, rtol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_flex_equals_dense_cuda():  # pragma: no cover - GPU only
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    L, D, H, d = 256, 32, 4, 64
    q, k, v = (torch.randn(2, H, 2 * L, d, device="cuda") for _ in range(3))
    spec = training_spec(L, D)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v,
                                                           attn_mask=dense_mask_for(spec, 2 * L, 2 * L, "cuda"))
    out = torch.compile(flex_attention)(q, k, v, block_mask=create_block_mask(spec.mask_mod(), None, None, 2 * L, 2 * L,
                                                                             device="cuda"))
    torch.testing.assert_close(out, ref, atol=2e-3, rtol=2e-3)

