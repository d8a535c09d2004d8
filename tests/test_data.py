import pytest
import torch

from fastdllm_core.data import IGNORE, build_dataset, encode_example, pack

MASK = 3


def test_prompt_tokens_never_in_loss(tokenizer):
    ids, labels = encode_example(tokenizer, {"prompt": "2+2?", "response": "4"})
    supervised = tokenizer.decode([t for t, l in zip(ids, labels) if l != IGNORE])
    assert supervised == "4<|im_end|>"
    multi = {"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
                          {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]}
    ids, labels = encode_example(tokenizer, multi)
    assert tokenizer.decode([t for t, l in zip(ids, labels) if l != IGNORE]) == "b<|im_end|>d<|im_end|>"


def _examples(tokenizer, lengths):
    return [encode_example(tokenizer, {"prompt": "q" * n, "response": "r" * n}) for n in lengths]


@pytest.mark.parametrize("L,D", [(64, 16), (128, 32), (96, 8)])
def test_pad_packing_no_block_spans_two_samples(tokenizer, L, D):
    ex = _examples(tokenizer, [1, 5, 17, 40, 3, 90, 2])
    seqs, labs = pack(ex, L, D, "pad", MASK)
    assert all(len(s) == L for s in seqs)
    # reconstruct sample ids per position: each sample starts with <|im_start|> (id 1) at a block boundary
    n_samples = 0
    for s in seqs:
        # a sample begins with <|im_start|> (id 1) right after padding or at the sequence start
        for i in range(len(s)):
            if s[i] == 1 and (i == 0 or s[i - 1] == MASK):
                assert i % D == 0, f"sample starts inside a block at {i}"
                n_samples += 1
        # and a block never holds the end of one sample and the start of the next
        for b in range(0, L, D):
            blk = s[b:b + D]
            assert not any(blk[j] == MASK and blk[j + 1] != MASK for j in range(D - 1))
    assert n_samples >= len(ex)
    # padding is the mask token and never in the loss
    for s, l in zip(seqs, labs):
        for t, y in zip(s, l):
            if t == MASK:
                assert y == IGNORE
    # every supervised token survives packing exactly once
    n_sup = sum(sum(y != IGNORE for y in e[1]) for e in ex)
    assert sum(sum(y != IGNORE for y in l) for l in labs) == n_sup


def test_naive_packing_spans_blocks(tokenizer):
    ex = _examples(tokenizer, [1, 5, 17])
    seqs, labs = pack(ex, 64, 16, "naive", MASK)
    flat = [t for s in seqs for t in s]
    total = sum(len(e[0]) for e in ex)
    assert flat[:total] == [t for e in ex for t in e[0]]
    assert all(t == MASK for t in flat[total:])


def test_deterministic_for_seed(tokenizer):
    rows = [{"prompt": f"p{i}", "response": f"r{i}"} for i in range(30)]
    a = build_dataset(tokenizer, rows, seq_len=64, block_size=16, packing="pad", pad_id=MASK, seed=1)
    b = build_dataset(tokenizer, rows, seq_len=64, block_size=16, packing="pad", pad_id=MASK, seed=1)
    c = build_dataset(tokenizer, rows, seq_len=64, block_size=16, packing="pad", pad_id=MASK, seed=2)
    assert torch.equal(a.input_ids, b.input_ids) and not torch.equal(a.input_ids, c.input_ids)


@pytest.mark.parametrize("kw,match", [
    (dict(seq_len=60, block_size=16), "must divide"), (dict(seq_len=8, block_size=16), "smaller than"),
    (dict(seq_len=64, block_size=16, packing="zip"), "packing"),
])
def test_bad_input(tokenizer, kw, match):
    kw = {"packing": "pad", **kw}
    with pytest.raises(ValueError, match=match):
        build_dataset(tokenizer, [{"prompt": "a", "response": "b"}], pad_id=MASK, **kw)


def test_empty_dataset(tokenizer):
    with pytest.raises(ValueError, match="empty"):
        build_dataset(tokenizer, [], seq_len=64, block_size=16, packing="pad", pad_id=MASK)
