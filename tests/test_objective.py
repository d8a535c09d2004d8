"""The training objective (float64, tiny random Qwen2, CPU)."""
import pytest
import torch

from conftest import make_tiny
from fastdllm_core.decoding.forwards import _CachedEngine
from fastdllm_core.training import objective as obj
from fastdllm_core.training.data import IGNORE

MASK = 3


@pytest.mark.parametrize("L,D", [(12, 4), (16, 8), (8, 1)])
def test_xt_half_equals_inference_on_clean_prefix_cache(L, D):
    model = make_tiny(seed=1)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 64, (2, L), generator=g)
    m = torch.rand(2, L, generator=g) < 0.5
    train_logits = obj.bd_forward(model, ids, m, MASK, D)  # [B, L-1, V]
    x_t = torch.where(m, torch.full_like(ids, MASK), ids)
    with torch.no_grad():
        for k in range(L // D):
            eng = _CachedEngine(model, L, D, profile=False)
            if k:
                eng.prefill(ids, k * D)  # KV cache of the clean prefix (block-causal)
            blk_logits = eng.block(x_t[:, k * D:(k + 1) * D], 0)
            n = min(D, L - 1 - k * D)
            torch.testing.assert_close(train_logits[:, k * D:k * D + n], blk_logits[:, :n], atol=1e-6, rtol=0)


def test_complementary_masks_cover_each_label_once():
    g = [torch.Generator().manual_seed(i) for i in range(3)]
    labels = torch.full((3, 16), IGNORE)
    labels[:, 5:14] = 7
    ids = torch.full((3, 16), 9)
    ids2, labels2, m = obj.noise_batch(ids, labels, block_size=4, eps=1e-3, complementary=True, generators=g)
    assert ids2.shape == (6, 16) and labels2.shape == (6, 16)
    covered = m[:3].int() + m[3:].int()
    assert torch.equal(covered, (labels != IGNORE).int())  # every label exactly once, nothing else
    one = obj.noise_batch(ids, labels, block_size=4, eps=1e-3, complementary=False, generators=g)
    assert one[2].shape == (3, 16)


def test_masks_only_label_positions_and_depend_on_seed():
    labels = torch.full((64,), IGNORE)
    labels[10:60] = 1
    a = obj.draw_mask(labels, 8, 1e-3, obj.sample_generator(0, 5, 1))
    b = obj.draw_mask(labels, 8, 1e-3, obj.sample_generator(0, 5, 1))
    c = obj.draw_mask(labels, 8, 1e-3, obj.sample_generator(0, 5, 2))
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert not a[:10].any() and not a[60:].any()


def test_mask_rate_follows_uniform_t():
    labels = torch.ones(4096 * 8, dtype=torch.long)
    m = obj.draw_mask(labels, 8, 1e-3, obj.sample_generator(1, 0, 0))
    assert abs(m.float().mean().item() - 0.5) < 0.03  # E[t] = (1 + eps) / 2


def test_loss_finite_short_and_all_prompt():
    model = make_tiny(seed=2, dtype=torch.float32)
    ids = torch.randint(4, 64, (2, 8))
    labels = torch.full((2, 8), IGNORE)
    labels[0, 2:5] = ids[0, 2:5]  # a sample shorter than a block (rest is padding)
    # row 1: all prompt, nothing to learn
    g = [obj.sample_generator(0, 0, i) for i in range(2)]
    ids2, labels2, m = obj.noise_batch(ids, labels, block_size=8, eps=1e-3, complementary=True, generators=g)
    loss, n = obj.bd_loss_sum(model, ids2, m, MASK, 8)
    assert torch.isfinite(loss) and n == 3  # every label exactly once over the two views
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    # an all-prompt batch: zero supervised tokens, zero (finite) loss
    loss0, n0 = obj.bd_loss_sum(model, ids[1:], torch.zeros(1, 8, dtype=torch.bool), MASK, 8)
    assert n0 == 0 and loss0.item() == 0.0
    l_ntp, n_ntp = obj.ntp_loss_sum(model, ids[1:], labels[1:])
    assert n_ntp == 0 and torch.isfinite(l_ntp)


def test_shifted_labels_target_token_i_from_logit_i_minus_1():
    model = make_tiny(seed=3)
    ids = torch.randint(4, 64, (1, 8))
    m = torch.zeros(1, 8, dtype=torch.bool)
    m[0, 5] = True
    loss, n = obj.bd_loss_sum(model, ids, m, MASK, 4)
    logits = obj.bd_forward(model, ids, m, MASK, 4)
    expect = torch.nn.functional.cross_entropy(logits[0, 4:5], ids[0, 5:6], reduction="sum")
    assert n == 1
    torch.testing.assert_close(loss, expect)


def test_dream_objective_is_full_attention_masked_diffusion_with_shifted_labels():
    """Dream's recipe: x_t alone, every key visible (a later token changes an earlier logit, unlike a causal
    model), the masked token i predicted by the logit at i-1, one noise level per sequence."""
    model = make_tiny(seed=4)
    ids = torch.randint(4, 64, (1, 8))
    m = torch.zeros(1, 8, dtype=torch.bool)
    m[0, [2, 6]] = True
    loss, n = obj.dream_loss_sum(model, ids, m, MASK)
    x_t = torch.where(m, torch.full_like(ids, MASK), ids)
    full = torch.ones(1, 1, 8, 8, dtype=torch.bool)
    logits = model(input_ids=x_t, attention_mask={"full_attention": full}, use_cache=False).logits
    expect = torch.nn.functional.cross_entropy(logits[0, [1, 5]], ids[0, [2, 6]], reduction="sum")
    assert n == 2
    torch.testing.assert_close(loss, expect)
    later = x_t.clone()
    later[0, 7] = (later[0, 7] + 1) % 60 + 4
    changed = model(input_ids=later, attention_mask={"full_attention": full}, use_cache=False).logits
    assert not torch.allclose(changed[0, 1], logits[0, 1])  # bidirectional: position 7 reaches position 1
    # one t per sequence: with block_size = L the mask rate is shared by the whole row
    labels = torch.arange(4, 260).reshape(1, 256)
    rates = [obj.draw_mask(labels[0], 256, 1e-3, obj.sample_generator(0, s, 0)).float().mean().item()
             for s in range(20)]
    assert max(rates) - min(rates) > 0.3
