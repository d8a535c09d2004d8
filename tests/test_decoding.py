"""Exactness of the block-diffusion decoder (float64, tiny random Qwen2, CPU)."""
import pytest
import torch

from conftest import make_tiny
from fastdllm_core.decoding import DecodeConfig, ar_generate, bd_generate, bd_generate_reference

MASK, EOS = 3, 2


def prompts(lengths, seed=0, vocab=64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(4, vocab, (n,), generator=g).tolist() for n in lengths]


def test_block_size_one_equals_hf_greedy(tiny64):
    ps = prompts([5, 9, 13])
    a = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[], block_size=1, sub_block_size=1,
                    max_new_tokens=24)
    for p, seq in zip(ps, a.sequences):  # one by one, no padding involved
        hf = tiny64.generate(torch.tensor([p]), max_new_tokens=24, do_sample=False, eos_token_id=None,
                             pad_token_id=0)
        assert seq == hf[0, len(p):].tolist()
    assert len(set(a.sequences[0])) > 3  # the random model's outputs are not degenerate
    one = bd_generate(tiny64, ps[:1], mask_token_id=MASK, stop_token_ids=[], block_size=1, sub_block_size=1,
                      max_new_tokens=24)
    assert one.stats.tokens_per_forward == 1.0  # prefill + one commit per token, no decode steps
    assert sum(one.stats.steps_per_block) == 0


def test_block_size_one_equals_ar_generate_batched(tiny64):
    ps = prompts([4, 11, 7], seed=3)
    a = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[EOS], block_size=1, sub_block_size=1,
                    max_new_tokens=16)
    b = ar_generate(tiny64, ps, stop_token_ids=[EOS], max_new_tokens=16, suppress_token_ids=[MASK])
    assert a.sequences == b.sequences


CONFIGS = [
    dict(block_size=4, sub_block_size=2, threshold=0.3),
    dict(block_size=8, sub_block_size=4, threshold=1.0),
    dict(block_size=8, sub_block_size=8, threshold=0.05),
    dict(block_size=16, sub_block_size=4, threshold=0.2),
    dict(block_size=4, sub_block_size=1, threshold=0.9),
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "D{block_size}-S{sub_block_size}-t{threshold}".format(**c))
def test_cached_equals_uncached_reference(tiny64, cfg):
    ps = prompts([3, 8, 13])
    for p in ps:  # one by one
        a = bd_generate(tiny64, [p], mask_token_id=MASK, stop_token_ids=[], max_new_tokens=20, **cfg)
        r = bd_generate_reference(tiny64, [p], mask_token_id=MASK, stop_token_ids=[], max_new_tokens=20, **cfg)
        assert a.sequences == r.sequences
        assert a.stats.nfe == r.stats.nfe
        assert a.stats.steps_per_block == r.stats.steps_per_block


@pytest.mark.parametrize("eos_rule", ["fill_block", "stop"])
def test_cached_equals_uncached_reference_with_stop_ids(tiny64, eos_rule):
    """Both EOS rules: the cached decoder equals the uncached one when rows stop inside blocks; the output ends
    at the first stop id and is counted to it."""
    cfg = dict(block_size=8, sub_block_size=8, threshold=0.2, max_new_tokens=30, eos_rule=eos_rule)
    ps = prompts([3, 8, 13], seed=3)
    free = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[], **cfg).sequences
    stops = [free[0][5], free[1][10]]
    a = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=stops, **cfg)
    r = bd_generate_reference(tiny64, ps, mask_token_id=MASK, stop_token_ids=stops, **cfg)
    assert a.sequences == r.sequences and a.stats.nfe == r.stats.nfe
    assert any(len(s) < 30 for s in a.sequences)
    for s in a.sequences:
        assert not any(t in stops for t in s[:-1])
    assert a.stats.generated_tokens == [len(s) for s in a.sequences]


def test_threshold_one_unmasks_one_token_per_step(tiny64):
    out = bd_generate(tiny64, prompts([5]), mask_token_id=MASK, stop_token_ids=[], block_size=8, sub_block_size=4,
                      threshold=1.0, max_new_tokens=27)
    st = out.stats
    # prompt 5 -> block 0 holds 3 generated positions (steps), then full blocks whose first token comes from the commit
    assert st.generated_tokens == [27]
    assert st.nfe_breakdown["block"] == sum(st.steps_per_block)
    # tokens = decode steps (one each) + commits that produced the next block's first token
    assert sum(st.steps_per_block) + st.nfe_breakdown["commit"] + st.nfe_breakdown["prefill"] == 27
    lower = bd_generate(tiny64, prompts([5]), mask_token_id=MASK, stop_token_ids=[], block_size=8,
                        sub_block_size=4, threshold=0.01, max_new_tokens=27)
    assert lower.stats.nfe < st.nfe


@pytest.mark.parametrize("lengths", [[3, 5, 2], [8, 8, 8], [8, 3, 17], [20, 9, 33, 8]],
                         ids=["shorter-than-block", "exactly-one-block", "mixed", "several-blocks"])
@pytest.mark.parametrize("cache", [False, True])
@pytest.mark.parametrize("eos_rule", ["fill_block", "stop"])
def test_batched_equals_one_by_one(tiny64, lengths, cache, eos_rule):
    cfg = dict(block_size=8, sub_block_size=4, threshold=0.3, use_sub_block_cache=cache, max_new_tokens=19,
               eos_rule=eos_rule)
    ps = prompts(lengths, seed=7)
    batched = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[EOS, 17], **cfg)
    for p, seq in zip(ps, batched.sequences):
        single = bd_generate(tiny64, [p], mask_token_id=MASK, stop_token_ids=[EOS, 17], **cfg)
        assert single.sequences[0] == seq


def test_prompt_exact_multiple_of_block(tiny64):
    """A block-aligned prompt is prefilled whole and attended to; its first token comes from the prefill."""
    p = prompts([16], seed=11)[0]
    cfg = dict(block_size=8, sub_block_size=4, threshold=0.5, max_new_tokens=12)
    a = bd_generate(tiny64, [p], mask_token_id=MASK, stop_token_ids=[], **cfg)
    r = bd_generate_reference(tiny64, [p], mask_token_id=MASK, stop_token_ids=[], **cfg)
    assert a.sequences == r.sequences
    assert a.stats.nfe_breakdown["prefill"] == 1
    # the first token is the greedy next token of the whole (block-causal) prompt
    pos = torch.arange(16)[None]
    blk = (pos[0][:, None] // 8) >= (pos[0][None, :] // 8)
    logits = tiny64(input_ids=torch.tensor([p]), position_ids=pos,
                    attention_mask={"full_attention": blk[None, None]}, is_causal=False).logits
    logits[..., MASK] = float("-inf")  # the mask token is never a prediction
    assert a.sequences[0][0] == int(logits[0, -1].argmax())
    # and it differs from ignoring the prompt's last block (the reference implementation's quirk)
    b1 = bd_generate(tiny64, [p[:8]], mask_token_id=MASK, stop_token_ids=[], **cfg)
    assert b1.sequences[0] != a.sequences[0]


def test_eos_ends_row_and_is_counted(tiny64):
    p = prompts([6], seed=2)
    free = bd_generate(tiny64, p, mask_token_id=MASK, stop_token_ids=[], block_size=4, sub_block_size=2,
                       threshold=1.0, max_new_tokens=20).sequences[0]
    stop = free[9]
    k = free.index(stop)
    out = bd_generate(tiny64, p, mask_token_id=MASK, stop_token_ids=[stop], block_size=4, sub_block_size=2,
                      threshold=1.0, max_new_tokens=20)
    assert out.sequences[0] == free[: k + 1]
    assert out.stats.generated_tokens == [k + 1]
    # the row stops costing forwards: fewer forwards than the free run
    free_stats = bd_generate(tiny64, p, mask_token_id=MASK, stop_token_ids=[], block_size=4, sub_block_size=2,
                             threshold=1.0, max_new_tokens=20).stats
    assert out.stats.nfe < free_stats.nfe


def test_finished_rows_drop_out_of_the_batch(tiny64):
    ps = prompts([6, 6], seed=2)
    free = bd_generate(tiny64, ps[:1], mask_token_id=MASK, stop_token_ids=[], block_size=4, sub_block_size=2,
                       threshold=1.0, max_new_tokens=24).sequences[0]
    out = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[free[1]], block_size=4, sub_block_size=2,
                      threshold=1.0, max_new_tokens=24)
    assert out.stats.row_nfe[0] < out.stats.row_nfe[1] or out.sequences[1][-1] == free[1]
    assert out.stats.row_latency_s[0] <= out.stats.row_latency_s[1] + 1e-9


def test_max_new_tokens_exact(tiny64):
    out = bd_generate(tiny64, prompts([5, 9]), mask_token_id=MASK, stop_token_ids=[], block_size=8,
                      sub_block_size=4, threshold=0.5, max_new_tokens=13)
    assert [len(s) for s in out.sequences] == [13, 13]
    assert MASK not in sum(out.sequences, [])


def test_sub_block_cache_agreement_is_measured(tiny64):
    ps = prompts([5, 12], seed=5)
    cfg = dict(block_size=16, sub_block_size=8, threshold=0.3, max_new_tokens=32)
    a = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[], **cfg)
    c = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[], use_sub_block_cache=True, **cfg)
    assert c.stats.nfe_breakdown["sub_block"] > 0
    assert [len(s) for s in c.sequences] == [len(s) for s in a.sequences]
    agree = sum(x == y for s, t in zip(a.sequences, c.sequences) for x, y in zip(s, t)) / sum(map(len, a.sequences))
    assert 0.0 <= agree <= 1.0
    # sub-block size 1: every step refreshes, so the cache changes nothing
    one = dict(cfg, sub_block_size=1)
    assert (bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[], use_sub_block_cache=True, **one).sequences
            == bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[], **one).sequences)


def test_sampling_is_seeded_and_batch_correct(tiny64):
    ps = prompts([5, 9], seed=1)
    kw = dict(mask_token_id=MASK, stop_token_ids=[], block_size=8, sub_block_size=4, threshold=0.9,
              max_new_tokens=16, temperature=1.0, top_p=0.9)
    a = bd_generate(tiny64, ps, seed=3, **kw)
    b = bd_generate(tiny64, ps, seed=3, **kw)
    c = bd_generate(tiny64, ps, seed=4, **kw)
    assert a.sequences == b.sequences
    assert a.sequences != c.sequences
    assert a.sequences[0] != a.sequences[1]
    assert all(len(s) == 16 for s in a.sequences)


def test_host_syncs_at_most_one_per_step(tiny64):
    out = bd_generate(tiny64, prompts([5, 9]), mask_token_id=MASK, stop_token_ids=[EOS], block_size=8,
                      sub_block_size=4, threshold=0.5, max_new_tokens=24)
    steps = sum(out.stats.steps_per_block)
    blocks = len(out.stats.steps_per_block)
    # one sync per step, plus one per block (the check that finds no work left)
    assert out.stats.host_syncs == steps + blocks


@pytest.mark.parametrize("bad,match", [
    (dict(block_size=8, sub_block_size=3), "sub_block_size=3 must divide block_size=8"),
    (dict(threshold=0.0), "threshold"), (dict(threshold=1.5), "threshold"),
    (dict(max_new_tokens=0), "max_new_tokens"), (dict(block_size=0), "block_size"),
])
def test_bad_parameters(tiny64, bad, match):
    with pytest.raises(ValueError, match=match):
        bd_generate(tiny64, [[5, 6]], mask_token_id=MASK, **bad)


def test_empty_prompt_and_missing_mask_token():
    m = make_tiny()
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        bd_generate(m, [[5], []], mask_token_id=MASK)
    with pytest.raises(ValueError, match="no prompts"):
        bd_generate(m, [], mask_token_id=MASK)
    del m.config.mask_token_id
    with pytest.raises(ValueError, match="no mask token"):
        bd_generate(m, [[5, 6]])
    with pytest.raises(ValueError, match="outside the embedding"):
        bd_generate(m, [[5, 6]], mask_token_id=10_000)


def test_decode_config_validate():
    assert DecodeConfig().validate().sub_block_size == 8
