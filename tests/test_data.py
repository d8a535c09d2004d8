import pytest
import torch

from fastdllm_core.training.data import IGNORE, build_dataset, encode_example, pack

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


def test_drop_after_answer_removes_the_template_tail(tokenizer):
    row = {"prompt": "2+2?", "response": "4"}
    ids, labels = encode_example(tokenizer, row)
    assert tokenizer.decode(ids).endswith("4<|im_end|>") and labels[-1] == ids[-1]
    kept, kept_labels = encode_example(tokenizer, row, drop_after_answer=False)
    assert tokenizer.decode(kept).endswith("4<|im_end|>\n") and kept_labels[-1] == IGNORE
    text_ids, text_labels = encode_example(tokenizer, {"text": "abc"})
    assert text_ids == text_labels and tokenizer.decode(text_ids) == "abc<|endoftext|>"


def _sample_starts(tokenizer, seqs):
    """Positions (in the concatenated sequences) of every sample start: ``<|im_start|>user``."""
    flat = [t for s in seqs for t in s]
    u = tokenizer.convert_tokens_to_ids("u")
    return [i for i in range(len(flat) - 1) if flat[i] == 1 and flat[i + 1] == u]


@pytest.mark.parametrize("L,D", [(64, 16), (128, 32), (96, 8)])
def test_pad_packing_no_block_spans_two_samples(tokenizer, L, D):
    ex = _examples(tokenizer, [1, 5, 17, 40, 3, 90, 2])
    seqs, labs = pack(ex, L, D, "pad", MASK)
    assert all(len(s) == L for s in seqs)
    starts = _sample_starts(tokenizer, seqs)
    assert len(starts) == len(ex) and all(i % D == 0 for i in starts)  # every sample starts a block
    for s in seqs:  # a block never holds the end of one sample and the start of the next
        for b in range(0, L, D):
            blk = s[b:b + D]
            assert not any(blk[j] == MASK and blk[j + 1] != MASK for j in range(D - 1))
    for s, l in zip(seqs, labs):  # padding is the mask token and never in the loss
        assert all(y == IGNORE for t, y in zip(s, l) if t == MASK)
    n_sup = sum(sum(y != IGNORE for y in e[1]) for e in ex)  # every supervised token survives exactly once
    assert sum(sum(y != IGNORE for y in l) for l in labs) == n_sup


def test_whole_packing_never_cuts_a_sample_that_fits(tokenizer):
    ex = _examples(tokenizer, [1, 5, 17, 40, 3, 20, 2])
    seqs, labs = pack(ex, 128, 32, "whole", MASK)
    for e in ex:  # each sample lies whole inside one sequence
        assert any(e[0] == s[i:i + len(e[0])] for s in seqs for i in range(len(s) - len(e[0]) + 1))
    assert sum(sum(y != IGNORE for y in l) for l in labs) == sum(sum(y != IGNORE for y in e[1]) for e in ex)


def test_pad_packing_is_the_papers_stream_cut_every_L(tokenizer):
    """Pad each sample to a multiple of D, concatenate, cut every L: padding only at sample tails (and the last
    sequence), so the real-token share is that of the padded stream -- unlike bin-packing whole samples."""
    lengths = [3, 20, 7, 41, 12, 30, 5, 60, 9, 25] * 4
    ex = _examples(tokenizer, lengths)
    L, D = 128, 16
    seqs, _ = pack(ex, L, D, "pad", MASK)
    stream = [t for e in ex for t in e[0] + [MASK] * (-len(e[0]) % D)]
    flat = [t for s in seqs for t in s]
    assert flat[:len(stream)] == stream and all(t == MASK for t in flat[len(stream):])
    assert len(seqs) == -(-len(stream) // L)
    real = sum(len(e[0]) for e in ex)
    assert real / len(flat) >= real / len(stream) - L / len(flat)  # only the final sequence's tail is extra
    whole, _ = pack(ex, L, D, "whole", MASK)
    assert len(seqs) < len(whole)  # whole-sample bin packing wastes whole sequence tails


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
