"""The static decode path (fastdllm_core/decoding/static.py): the same tokens, forwards and counts as the eager path
(float64 and float32, CPU), the AR baseline on it equal to Hugging Face greedy, the fallbacks, the bad input."""
import logging
import os
import shutil

import pytest
import torch

from conftest import make_tiny
from fastdllm_core.bench import ForcedAcceptance, forced_acceptance_forwards
from fastdllm_core.decoding import DecodeConfig, ar_generate, bd_generate
from fastdllm_core.decoding.static import (
    StaticForwards,
    capacity,
    last_compile_scope,
    static_forwards,
    static_unsupported,
)

# the decoder tests' configurations (here with and without the sub-block cache), prompts and token ids
from test_decoding import CONFIGS, EOS, MASK, prompts


@pytest.fixture(scope="module")
def tiny32():
    return make_tiny(dtype=torch.float32)


def _same(a, b):
    assert a.sequences == b.sequences
    assert (a.stats.nfe, a.stats.row_nfe, a.stats.steps_per_block, a.stats.nfe_breakdown) == (
        b.stats.nfe, b.stats.row_nfe, b.stats.steps_per_block, b.stats.nfe_breakdown)
    assert a.stats.generated_tokens == b.stats.generated_tokens


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("cache", [False, True], ids=["nocache", "subcache"])
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "D{block_size}-S{sub_block_size}-t{threshold}".format(**c))
def test_static_equals_eager_batched_and_single(tiny64, tiny32, cfg, cache, dtype):
    model = tiny64 if dtype == "float64" else tiny32
    ps = prompts([3, 8, 13])
    kw = dict(mask_token_id=MASK, stop_token_ids=[], max_new_tokens=20, use_sub_block_cache=cache, **cfg)
    _same(bd_generate(model, ps, **kw), bd_generate(model, ps, decode_path="static", **kw))
    for p in ps:
        _same(bd_generate(model, [p], **kw), bd_generate(model, [p], decode_path="static", **kw))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("eos_rule", ["fill_block", "stop"])
def test_static_equals_eager_when_rows_stop_at_different_blocks(tiny64, tiny32, eos_rule, dtype):
    """Rows that finish early stay in the static batch, retired: the others' tokens, forwards and row counts are
    those of the eager path, which drops them."""
    model = tiny64 if dtype == "float64" else tiny32
    cfg = dict(block_size=8, sub_block_size=4, threshold=0.2, max_new_tokens=40, eos_rule=eos_rule)
    ps = prompts([3, 8, 13, 5], seed=3)
    free = bd_generate(model, ps, mask_token_id=MASK, stop_token_ids=[], **cfg).sequences
    stops = [free[0][2], free[1][12]]
    for cache in (False, True):
        a = bd_generate(model, ps, mask_token_id=MASK, stop_token_ids=stops, use_sub_block_cache=cache, **cfg)
        b = bd_generate(model, ps, mask_token_id=MASK, stop_token_ids=stops, use_sub_block_cache=cache,
                        decode_path="static", **cfg)
        assert len({len(s) for s in a.sequences}) > 1  # rows end at different places
        _same(a, b)


def test_static_sampling_equals_eager_row_by_row(tiny64):
    """Sampling draws for every row of the batch: once a row finishes the eager path draws for fewer rows than the
    static one (which keeps it), so the random streams part; one row at a time they are the same."""
    kw = dict(mask_token_id=MASK, stop_token_ids=[EOS], max_new_tokens=24, block_size=8, sub_block_size=4,
              threshold=0.5, temperature=0.8, top_p=0.9, seed=5)
    for p in prompts([4, 9]):
        _same(bd_generate(tiny64, [p], **kw), bd_generate(tiny64, [p], decode_path="static", **kw))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("stops", [[], [EOS], [5, 9]])
def test_ar_static_equals_hf_greedy(tiny64, tiny32, dtype, stops):
    model = tiny64 if dtype == "float64" else tiny32
    for lens in ([4, 11, 7], [6], [5, 5, 5, 5]):
        ps = prompts(lens, seed=3)
        a = ar_generate(model, ps, stop_token_ids=stops, max_new_tokens=16, suppress_token_ids=[MASK])
        b = ar_generate(model, ps, stop_token_ids=stops, max_new_tokens=16, suppress_token_ids=[MASK],
                        baseline="static")
        assert a.sequences == b.sequences
        assert (a.stats.nfe, a.stats.row_nfe) == (b.stats.nfe, b.stats.row_nfe)
        assert b.stats.mode == "ar_static"


def test_ar_static_equals_block_size_one(tiny64):
    ps = prompts([4, 11, 7], seed=3)
    a = bd_generate(tiny64, ps, mask_token_id=MASK, stop_token_ids=[EOS], block_size=1, sub_block_size=1,
                    max_new_tokens=16, decode_path="static")
    b = ar_generate(tiny64, ps, stop_token_ids=[EOS], max_new_tokens=16, suppress_token_ids=[MASK],
                    baseline="static")
    assert a.sequences == b.sequences


def test_forced_acceptance_runs_on_the_static_path(tiny32):
    """Forward hooks do not run inside a replayed graph: the static path calls them on its output, so synthetic
    acceptance gives the forwards it predicts."""
    lens, k = [5, 40, 70], 3
    ps = prompts(lens)
    with ForcedAcceptance(tiny32, k, MASK, [EOS]):
        out = bd_generate(tiny32, ps, mask_token_id=MASK, stop_token_ids=[EOS], max_new_tokens=50,
                          sub_block_size=8, threshold=0.9, decode_path="static")
    assert out.stats.generated_tokens == [50] * 3
    assert sum(out.stats.row_nfe) == forced_acceptance_forwards(lens, 50, 32, 8, k)
    assert not tiny32._forward_hooks


def test_static_forwards_are_kept_on_the_model_and_reused(tiny32):
    ps = prompts([5, 9])
    kw = dict(mask_token_id=MASK, stop_token_ids=[], max_new_tokens=12, block_size=8, sub_block_size=4)
    bd_generate(tiny32, ps, decode_path="static", **kw)
    sf = static_forwards(tiny32, 2, capacity(9 + 12, 8))
    shapes = dict(sf.shapes)
    assert {q for q, _ in shapes} == {8, 4} or {q for q, _ in shapes} == {8}  # block, (sub-block) forwards
    out = bd_generate(tiny32, ps, decode_path="static", **kw)
    assert static_forwards(tiny32, 2, capacity(9 + 12, 8)) is sf and sf.shapes == shapes  # no new shape
    assert out.stats.capture_time_s == 0.0 and sf.replays == 0  # nothing is captured on a CPU
    assert isinstance(sf, StaticForwards) and not sf.capture


def test_capacity_is_a_power_of_two_in_whole_blocks():
    assert capacity(20, 4) == 32
    assert capacity(33, 32) == 64
    assert capacity(64, 32) == 64
    assert capacity(100, 48) == 144  # 128 rounded up to whole blocks of 48
    assert capacity(3, 8) == 8


def test_a_model_the_static_path_cannot_serve_falls_back_to_eager_with_a_log_line(tiny64, monkeypatch, caplog):
    assert "flex_attention" in static_unsupported(make_tiny(attn="flex_attention", dtype=torch.float32))
    assert static_unsupported(tiny64) is None
    from fastdllm_core.decoding import ar as ar_mod
    from fastdllm_core.decoding import block_diffusion

    why = "attention implementation 'flex_attention' (test)"
    monkeypatch.setattr(block_diffusion, "static_unsupported", lambda m: why)
    monkeypatch.setattr(ar_mod, "static_unsupported", lambda m: why)
    ps = prompts([5, 9])
    kw = dict(mask_token_id=MASK, stop_token_ids=[], max_new_tokens=12, block_size=8, sub_block_size=4)
    with caplog.at_level(logging.WARNING):
        b = bd_generate(tiny64, ps, decode_path="static", **kw)
        a = ar_generate(tiny64, ps, max_new_tokens=12, baseline="static")
    assert "decode_path='static' falls back to the eager path: " + why in caplog.text
    assert "AR baseline 'static' falls back to 'hf' (eager): " + why in caplog.text
    assert b.sequences == bd_generate(tiny64, ps, **kw).sequences
    assert a.stats.mode == "ar_hf" and a.sequences == ar_generate(tiny64, ps, max_new_tokens=12).sequences


def test_eager_attention_static_equals_eager(tiny64):
    model = make_tiny(attn="eager")
    ps = prompts([3, 8, 13])
    kw = dict(mask_token_id=MASK, stop_token_ids=[], max_new_tokens=20, block_size=8, sub_block_size=4,
              threshold=0.2, use_sub_block_cache=True)
    _same(bd_generate(model, ps, **kw), bd_generate(model, ps, decode_path="static", **kw))


def test_bad_decode_path_is_named():
    with pytest.raises(ValueError, match="decode_path must be one of .*'graph'"):
        DecodeConfig(decode_path="graph").validate()
    assert DecodeConfig(decode_path="static").slug() == DecodeConfig().slug()  # not part of a point name


def test_bench_rows_of_both_paths_side_by_side(tmp_path):
    from fastdllm_core.bench import COLUMNS, SweepConfig, random_model, run_sweep

    bm = random_model("tiny", seed=0)
    cfg = SweepConfig(modes=("ar", "bd"), ar_baselines=("hf", "static"), decode_paths=("eager", "static"),
                      thresholds=(0.9,), sub_block_sizes=(8,), sub_block_cache=(False, True), batch_sizes=(2,),
                      max_new_tokens=12, warmup=1, repeats=1)
    rows = run_sweep(bm, [[5 + i for i in range(n)] for n in (6, 20)], cfg=cfg, out=tmp_path / "b.csv",
                     progress=False)
    got = [(r["mode"], r["baseline"], r["decode_path"], r.get("use_sub_block_cache")) for r in rows]
    assert got == [("ar", "hf", "eager", ""), ("ar", "static", "static", ""),
                   ("bd", "bd", "eager", False), ("bd", "bd", "static", False),
                   ("bd", "bd", "eager", True), ("bd", "bd", "static", True)]
    for r in rows:
        assert r["capture_time_s"] == 0.0  # a CPU captures nothing
        if r["decode_path"] == "static":
            assert r["eager_agreement"] == 1.0  # the same tokens as the eager path
        if r["mode"] == "bd":
            assert r["ar_tokens_per_s_static"] > 0 and r["speedup_vs_static"] > 0
            assert r["speedup_baseline"] in ("ar_hf (fastest AR measured)", "ar_static (fastest AR measured)")
    header = (tmp_path / "b.csv").read_text().splitlines()[0].split(",")
    assert header == COLUMNS and "decode_path" in header and "eager_agreement" in header


def test_bench_refuses_an_unknown_decode_path_before_any_model_load():
    from fastdllm_core.bench import SweepConfig
    from fastdllm_core.cli import bench as bench_cli

    with pytest.raises(ValueError, match="decode_paths: 'graphs' is not one of"):
        SweepConfig(decode_paths=("graphs",)).validate(32)
    with pytest.raises(ValueError, match="unknown AR baseline 'graphs'"):
        SweepConfig(ar_baselines=("graphs",)).validate(32)
    with pytest.raises(SystemExit):  # argparse names the bad choice
        bench_cli.build_parser().parse_args(["--model", "random:tiny", "--out", "x.csv", "--decode-paths", "graph"])


# ------------------------------------------------------------------- the compiled path (torch.compile, Inductor)
needs_cxx = pytest.mark.skipif(shutil.which(os.environ.get("CXX", "g++")) is None,
                               reason="no C++ compiler: Inductor compiles C++ on a CPU")


def _layers_restored(model):
    """After a call on the 'layers' compile scope the model is as it was: no layer keeps a replaced forward, every
    layer its own layer_idx."""
    return all("forward" not in x.__dict__ and x.self_attn.layer_idx == i for i, x in enumerate(model.model.layers))


@pytest.mark.slow(reason="torch.compile runs g++ (seen by the spawn guard of tests/conftest.py)")
@needs_cxx
@pytest.mark.parametrize("scope", ["model", "layers"])
@pytest.mark.parametrize("batched", [True, False], ids=["batched", "single"])
def test_compiled_equals_eager_and_compiles_each_shape_once(tiny64, batched, scope, monkeypatch):
    """decode_path='compiled': every shape compiled by Inductor (C++ on a CPU), the whole forward or each decoder
    layer (the compile scopes), the same tokens and counts as the eager path in float64; the compile time is counted
    on the first call, none on the second."""
    monkeypatch.setenv("FASTDLLM_COMPILE_SCOPE", scope)
    ps = prompts([3, 8, 13]) if batched else prompts([6])
    kw = dict(mask_token_id=MASK, stop_token_ids=[], max_new_tokens=20, block_size=8, sub_block_size=4,
              threshold=0.5, use_sub_block_cache=batched)
    eager = bd_generate(tiny64, ps, **kw)
    first = bd_generate(tiny64, ps, decode_path="compiled", **kw)
    again = bd_generate(tiny64, ps, decode_path="compiled", **kw)
    _same(eager, first)
    _same(eager, again)
    assert first.stats.capture_time_s > 0 and again.stats.capture_time_s == 0.0
    sf = static_forwards(tiny64, len(ps), capacity(max(map(len, ps)) + 20, 8), compiled=True)
    assert sf.compiled and sf is not static_forwards(tiny64, len(ps), capacity(max(map(len, ps)) + 20, 8))
    assert all(s.fn is not StaticForwards._forward for s in sf.shapes.values())  # every shape compiled
    assert sf.compile_scope == scope == last_compile_scope(tiny64) and _layers_restored(tiny64)


@pytest.mark.slow(reason="torch.compile runs g++ (seen by the spawn guard of tests/conftest.py)")
@needs_cxx
def test_the_layers_scope_compiles_one_graph_set_for_every_layer(monkeypatch):
    """The 'layers' compile scope: a model of 6 layers compiles as many graphs as one of 2 (one graph set per shape
    serves every layer), with the eager path's tokens in float64."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("FASTDLLM_COMPILE_SCOPE", "layers")
    kw = dict(mask_token_id=MASK, stop_token_ids=[], max_new_tokens=10, block_size=8, sub_block_size=4,
              threshold=0.5)
    graphs = []
    for layers, ps in ((2, prompts([5, 7, 4, 6])), (6, prompts([4, 6, 9, 5, 3]))):  # batch sizes no other test uses
        model = make_tiny(seed=layers, layers=layers)
        before = counters["stats"]["unique_graphs"]
        _same(bd_generate(model, ps, **kw), bd_generate(model, ps, decode_path="compiled", **kw))
        graphs.append(counters["stats"]["unique_graphs"] - before)
        assert _layers_restored(model)
    assert graphs[0] == graphs[1] > 0


@pytest.mark.slow(reason="torch.compile runs g++ (seen by the spawn guard of tests/conftest.py)")
@needs_cxx
def test_bench_rows_of_the_compiled_path_record_their_compile_scope(tmp_path, monkeypatch):
    from fastdllm_core.bench import SweepConfig, random_model, run_sweep

    monkeypatch.setenv("FASTDLLM_COMPILE_SCOPE", "layers")
    bm = random_model("tiny", seed=0)
    cfg = SweepConfig(modes=("ar", "bd"), ar_baselines=("hf", "compiled"), decode_paths=("eager", "compiled"),
                      thresholds=(0.9,), sub_block_sizes=(8,), batch_sizes=(2,), max_new_tokens=12, warmup=1,
                      repeats=1)
    rows = run_sweep(bm, [[5 + i for i in range(n)] for n in (6, 20)], cfg=cfg, out=tmp_path / "b.csv",
                     progress=False)
    assert [(r["decode_path"], r.get("compile_scope", "")) for r in rows] == [
        ("eager", ""), ("compiled", "layers"), ("eager", ""), ("compiled", "layers")]
    assert all(r["eager_agreement"] == 1.0 for r in rows if r["decode_path"] == "compiled")


def test_compile_scope_bad_value_is_named_and_a_model_without_stock_layers_compiles_whole(tiny32, caplog):
    from fastdllm_core.decoding.static import _scope

    with pytest.raises(ValueError, match="compile scope 'layer': choose from \\['model', 'layers'\\]"):
        StaticForwards(tiny32, 1, 8, compiled=True, compile_scope="layer")
    model = make_tiny(seed=5, dtype=torch.float32)
    model.model.layers[1].forward = model.model.layers[1].forward  # a replaced forward (as accelerate's hooks do)
    with caplog.at_level(logging.WARNING):
        assert _scope(model, "layers", True) == ("model", None)
    assert "no stock decoder layers to compile one by one" in caplog.text
    assert _scope(tiny32, None, True)[0] == "layers" and _scope(tiny32, None, False) == ("model", None)


@pytest.mark.slow(reason="torch.compile runs g++ (seen by the spawn guard of tests/conftest.py)")
@needs_cxx
@pytest.mark.parametrize("scope", ["model", "layers"])
def test_ar_compiled_equals_hf_greedy(tiny64, scope, monkeypatch):
    monkeypatch.setenv("FASTDLLM_COMPILE_SCOPE", scope)
    ps = prompts([4, 11, 7], seed=3)
    a = ar_generate(tiny64, ps, stop_token_ids=[EOS], max_new_tokens=16, suppress_token_ids=[MASK])
    b = ar_generate(tiny64, ps, stop_token_ids=[EOS], max_new_tokens=16, suppress_token_ids=[MASK],
                    baseline="compiled")
    assert a.sequences == b.sequences and (a.stats.nfe, a.stats.row_nfe) == (b.stats.nfe, b.stats.row_nfe)
    assert b.stats.mode == "ar_compiled" and b.stats.capture_time_s > 0


@pytest.mark.parametrize("scope", ["model", "layers"])
def test_a_shape_torch_compile_fails_on_runs_uncompiled_with_a_log_line(tiny32, monkeypatch, caplog, scope):
    from fastdllm_core.decoding import static

    class CompileFailed(torch._dynamo.exc.TorchDynamoException):
        pass

    def broken(*a, **k):
        raise CompileFailed("no C++ compiler (test)")

    monkeypatch.setattr(static, "_compiled_forward", lambda: broken)
    monkeypatch.setattr(static, "_compiled_layer_forward", lambda cls: broken)
    monkeypatch.setenv("FASTDLLM_COMPILE_SCOPE", scope)
    ps = prompts([5, 9])
    kw = dict(mask_token_id=MASK, stop_token_ids=[], max_new_tokens=12, block_size=8, sub_block_size=4)
    with caplog.at_level(logging.WARNING):
        out = bd_generate(tiny32, ps, decode_path="compiled", **kw)
    assert "torch.compile of shape (2, 8, 4) failed (no C++ compiler (test)); running it uncompiled" in caplog.text
    _same(out, bd_generate(tiny32, ps, **kw))
    sf = static_forwards(tiny32, 2, capacity(9 + 12, 8), compiled=True)
    assert all(s.fn is StaticForwards._forward for s in sf.shapes.values()) and _layers_restored(tiny32)


def test_bench_plans_the_compiled_pair():
    from fastdllm_core.bench import SweepConfig, plan_runs

    cfg = SweepConfig(modes=("ar", "bd"), ar_baselines=("static", "compiled"), decode_paths=("static", "compiled"),
                      thresholds=(0.9,), sub_block_sizes=(8,), batch_sizes=(1,))
    cfg.validate(32)
    got = [(r["mode"], r["baseline"], r["decode_path"]) for r in plan_runs(cfg)]
    assert got == [("ar", "static", "static"), ("ar", "compiled", "compiled"),
                   ("bd", "bd", "static"), ("bd", "bd", "compiled")]
