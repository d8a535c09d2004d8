"""CUDA paths (run on a GPU machine: `pytest -m cuda`); skipped without CUDA."""
import json

import pytest
import torch

from conftest import make_tiny
from fastdllm_core.decoding import bd_generate, bd_generate_reference

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_bf16_training_step_with_flex_attention(tmp_path):
    from fastdllm_core.training.loop import train

    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": f"{a}+{b}=?", "response": str(a + b)})
                              for a in range(6) for b in range(6)))
    cfg = {"recipe": "bd_pad_cm", "model": {"init": "tiny", "tiny": {"hidden_size": 64, "layers": 2}},
           "data": {"train_files": [str(data)], "seq_len": 64}, "objective": {"block_size": 16},
           "optim": {"lr": 1e-3, "warmup_steps": 1, "max_steps": 3, "batch_size": 4, "micro_batch_size": 2},
           "train": {"device": "cuda", "dtype": "bf16", "save_every": 10, "log_every": 1}}
    train(cfg, tmp_path / "run", progress=False)
    import csv

    rows = list(csv.DictReader(open(tmp_path / "run" / "metrics.csv")))
    assert len(rows) == 3 and all(0 < float(r["loss"]) < 50 for r in rows)
    assert rows[0]["device_type"] == "cuda"
    cfgj = json.loads((tmp_path / "run" / "final" / "config.json").read_text())
    assert cfgj["bd_size"] == 16


@pytest.mark.parametrize("attn", ["sdpa", "flex_attention"])
def test_bf16_decoding(attn):
    model = make_tiny(seed=0, dtype=torch.bfloat16, attn=attn).cuda()
    ps = [[5, 6, 7, 8, 9], list(range(10, 30))]
    kw = dict(mask_token_id=3, stop_token_ids=[], block_size=8, sub_block_size=4, threshold=0.5, max_new_tokens=24)
    a = bd_generate(model, ps, **kw)
    assert [len(s) for s in a.sequences] == [24, 24]
    r = bd_generate_reference(model, ps, **kw)
    agree = sum(x == y for s, t in zip(a.sequences, r.sequences) for x, y in zip(s, t)) / 48
    assert agree >= 0.8  # bf16: cached and uncached differ only by rounding
    c = bd_generate(model, ps, use_sub_block_cache=True, **kw)
    assert [len(s) for s in c.sequences] == [24, 24]


def test_flex_and_sdpa_agree_in_fp32():
    ps = [[5, 6, 7, 8, 9, 10, 11]]
    kw = dict(mask_token_id=3, stop_token_ids=[], block_size=8, sub_block_size=4, threshold=0.5, max_new_tokens=16)
    a = bd_generate(make_tiny(seed=0, dtype=torch.float32, attn="sdpa").cuda(), ps, **kw)
    b = bd_generate(make_tiny(seed=0, dtype=torch.float32, attn="flex_attention").cuda(), ps, **kw)
    assert a.sequences == b.sequences


# ------------------------------------------------------------------------------------ the static path, captured
@pytest.mark.parametrize("path,scope", [("static", ""), ("compiled", "layers"), ("compiled", "model")])
def test_static_paths_capture_once_and_equal_eager_in_fp32(path, scope, monkeypatch):
    """decode_path / AR baseline 'static' (captured) and 'compiled' (each shape compiled by Inductor, Triton
    kernels, then captured; both compile scopes): the eager path's tokens in fp32, nothing compiled or captured on
    the second call."""
    from fastdllm_core.decoding import ar_generate
    from fastdllm_core.decoding.static import StaticForwards, capacity, static_forwards

    monkeypatch.setenv("FASTDLLM_COMPILE_SCOPE", scope)
    model = make_tiny(seed=0, dtype=torch.float32).cuda()
    ps = [[5, 6, 7, 8, 9], list(range(10, 30)), [4, 5, 6]]
    for cache in (False, True):
        kw = dict(mask_token_id=3, stop_token_ids=[2], block_size=8, sub_block_size=4, threshold=0.5,
                  max_new_tokens=24, use_sub_block_cache=cache)
        a = bd_generate(model, ps, **kw)
        first = bd_generate(model, ps, decode_path=path, **kw)
        again = bd_generate(model, ps, decode_path=path, **kw)
        assert first.sequences == a.sequences == again.sequences
        assert first.stats.capture_time_s > 0 and again.stats.capture_time_s == 0  # captured once, replayed
    sf = static_forwards(model, 3, capacity(20 + 24, 8), compiled=path == "compiled")
    assert sf.capture and sf.replays > 0 and all(s.graph is not None for s in sf.shapes.values())
    assert all((s.fn is not StaticForwards._forward) == (path == "compiled") for s in sf.shapes.values())
    assert sf.compile_scope == (scope or None)
    assert all("forward" not in x.__dict__ and x.self_attn.layer_idx == i for i, x in enumerate(model.model.layers))
    h = ar_generate(model, ps, stop_token_ids=[2], max_new_tokens=24, suppress_token_ids=[3])
    s = ar_generate(model, ps, stop_token_ids=[2], max_new_tokens=24, suppress_token_ids=[3], baseline=path)
    assert s.sequences == h.sequences and s.stats.mode == f"ar_{path}"


def test_out_of_memory_while_capturing_is_a_named_error(monkeypatch):
    from fastdllm_core.decoding.static import GraphCaptureOOMError

    model = make_tiny(seed=1, dtype=torch.float32).cuda()

    def oom(*a, **k):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory (test)")

    monkeypatch.setattr(torch.cuda, "CUDAGraph", oom)
    with pytest.raises(GraphCaptureOOMError, match="out of GPU memory while capturing the decode graph for batch 1"):
        bd_generate(model, [[5, 6, 7]], mask_token_id=3, stop_token_ids=[], block_size=8, sub_block_size=4,
                    max_new_tokens=8, decode_path="static")
