"""Benchmark harness on the tiny random model (CPU, seconds)."""
from __future__ import annotations

import csv
import json

import pytest
import torch

from fastdllm_core.bench import (
    COLUMNS,
    ForcedAcceptance,
    SweepConfig,
    bd_generate,
    forced_acceptance_forwards,
    random_model,
    run_sweep,
    synthetic_prompts,
    token_agreement,
)
from fastdllm_core.cli import bench as bench_cli
from fastdllm_core.provenance import META_COLUMNS, NOT_AVAILABLE


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return random_model("tiny", seed=0)


def _prompts(lens):
    return [[4 + (i * 7 + n) % 90 for i in range(n)] for n in lens]


@pytest.mark.parametrize("lens", [[24], [24, 24], [5, 40, 70]])
@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_forced_acceptance_gives_the_predicted_tokens_per_forward(tiny, lens, k):
    prompts = _prompts(lens)
    with ForcedAcceptance(tiny.model, k, tiny.mask_token_id, tiny.stop_token_ids) as fa:
        out = bd_generate(tiny.model, prompts, mask_token_id=tiny.mask_token_id, stop_token_ids=tiny.stop_token_ids,
                          max_new_tokens=50, sub_block_size=8, threshold=0.9)
    assert fa.filler not in tiny.stop_token_ids and fa.filler != tiny.mask_token_id
    assert out.stats.generated_tokens == [50] * len(lens)  # filler is never a stop id: full budget
    expected = forced_acceptance_forwards(lens, 50, 32, 8, k)
    assert sum(out.stats.row_nfe) == expected
    assert out.stats.tokens_per_forward == pytest.approx(50 * len(lens) / expected)
    # and the hook is gone afterwards: real decoding is back
    assert not tiny.model._forward_hooks


def test_forced_acceptance_tokens_per_step_is_k_inside_full_sub_blocks(tiny):
    # prompt of 32 tokens: prefill covers block 0; each later block: first position from the commit, then 7 + 8 + 8 + 8
    with ForcedAcceptance(tiny.model, 4, tiny.mask_token_id, tiny.stop_token_ids):
        out = bd_generate(tiny.model, _prompts([32]), mask_token_id=tiny.mask_token_id,
                          stop_token_ids=tiny.stop_token_ids, max_new_tokens=64, sub_block_size=8)
    assert out.stats.steps_per_block == [2 + 2 + 2 + 2] * 2
    assert forced_acceptance_forwards([32], 64, 32, 8, 4) == 1 + 8 + 1 + 8


def test_forced_acceptance_rejects_bad_k(tiny):
    with pytest.raises(ValueError, match="k must be a positive integer"):
        ForcedAcceptance(tiny.model, 0, tiny.mask_token_id)


def test_token_agreement():
    assert token_agreement([[1, 2, 3, 4]], [[1, 9, 3]]) == pytest.approx(2 / 3)
    assert token_agreement([[1, 2], [5]], [[1, 2], [6]]) == pytest.approx(0.5)
    with pytest.raises(ValueError, match="same non-zero number of rows"):
        token_agreement([[1]], [])


def test_synthetic_prompts_avoid_special_ids():
    ps = synthetic_prompts(5, 200, 12, avoid=[2, 3, 7], seed=1, low=0)
    assert len(ps) == 5 and all(len(p) == 200 for p in ps)
    flat = {t for p in ps for t in p}
    assert not flat & {2, 3, 7} and flat <= set(range(12))
    assert ps == synthetic_prompts(5, 200, 12, avoid=[2, 3, 7], seed=1, low=0)


def test_real_shapes_have_the_published_parameter_counts():
    # built on the meta device: no memory, just the Qwen2Config dimensions written in bench.MODEL_SHAPES
    n15 = sum(p.numel() for p in random_model("qwen2.5-1.5b", device="meta").model.parameters())
    n7 = sum(p.numel() for p in random_model("qwen2.5-7b", device="meta").model.parameters())
    assert round(n15 / 1e9, 2) == 1.54  # Qwen2.5-1.5B: 1.54B parameters (tied embeddings)
    assert round(n7 / 1e9, 2) == 7.62  # Qwen2.5-7B: 7.62B parameters
    with pytest.raises(ValueError, match="unknown model shape 'qwen9'"):
        random_model("qwen9")


def test_sweep_rows_columns_speedups_and_agreement(tiny, tmp_path):
    out = tmp_path / "bench.csv"
    cfg = SweepConfig(modes=("ar", "bd"), ar_baselines=("hf", "hf_static"), thresholds=(1.0, 0.5),
                      sub_block_cache=(False, True), batch_sizes=(1, 2), max_new_tokens=24, warmup=0, repeats=1)
    rows = run_sweep(tiny, _prompts([20, 30]), cfg=cfg, prompt_set="t", out=out, progress=False)
    assert len(rows) == 2 * (2 + 2 * 2)
    with open(out) as f:
        header = next(csv.reader(f))
    assert header == COLUMNS and set(META_COLUMNS) <= set(header)
    for r in rows:
        assert r["total_tokens"] > 0 and r["tokens_per_s"] == pytest.approx(r["total_tokens"] / r["wall_time_s"])
        assert 0 < r["decoder_overhead_frac"] < 1 and 0 < r["forward_time_s"] < r["profile_wall_time_s"]
        assert r["energy_j"] == NOT_AVAILABLE and r["peak_mem_mib"] == NOT_AVAILABLE  # CPU: nothing invented
        assert r["device_type"] == "cpu" and r["git_commit"]
        assert ("do_sample=False" in r["ar_generation"]) == (r["mode"] == "ar")  # AR rows: pinned greedy settings
        if r["mode"] == "bd":
            ar = [a for a in rows if a["mode"] == "ar" and a["batch_size"] == r["batch_size"]]
            best = max(ar, key=lambda a: a["tokens_per_s"])
            assert r["speedup_vs_ar"] == pytest.approx(r["tokens_per_s"] / best["tokens_per_s"])
            assert r["speedup_baseline"].startswith(f"ar_{best['baseline']}")
            assert r["host_syncs_per_step"] == pytest.approx(r["host_syncs"] / r["nfe"])
            if r["use_sub_block_cache"]:
                assert 0 <= r["token_agreement"] <= 1
            else:
                assert "token_agreement" not in r
        else:
            assert r["tokens_per_forward"] == 1.0 and "speedup_vs_ar" not in r


def test_cache_agreement_is_measured_against_the_uncached_run(tiny, monkeypatch):
    cfg = SweepConfig(modes=("bd",), thresholds=(0.5,), sub_block_cache=(True,), batch_sizes=(2,),
                      max_new_tokens=40, warmup=0, repeats=1, profile=False)
    prompts = _prompts([20, 33])
    rows = run_sweep(tiny, prompts, cfg=cfg, progress=False)
    ref = bd_generate(tiny.model, prompts, mask_token_id=tiny.mask_token_id, stop_token_ids=tiny.stop_token_ids,
                      max_new_tokens=40, threshold=0.5).sequences
    cached = bd_generate(tiny.model, prompts, mask_token_id=tiny.mask_token_id, stop_token_ids=tiny.stop_token_ids,
                         max_new_tokens=40, threshold=0.5, use_sub_block_cache=True).sequences
    assert rows[0]["token_agreement"] == pytest.approx(token_agreement(cached, ref))


def test_ignore_eos_runs_every_row_to_the_budget(tiny):
    tiny.model.generation_config.eos_token_id = tiny.stop_token_ids
    cfg = SweepConfig(modes=("ar", "bd"), thresholds=(0.9,), batch_sizes=(3,), max_new_tokens=17, warmup=0,
                      repeats=1, profile=False, ignore_eos=True)
    rows = run_sweep(tiny, _prompts([10]), cfg=cfg, progress=False)
    assert [r["total_tokens"] for r in rows] == [51, 51]
    assert tiny.model.generation_config.eos_token_id == tiny.stop_token_ids  # restored


@pytest.mark.parametrize("kw, msg", [
    (dict(thresholds=(1.5,)), "threshold must be in"),
    (dict(sub_block_sizes=(3,)), "sub_block_size=3 must divide block_size=32"),
    (dict(forced_k=(4,), thresholds=(1.0,)), "needs thresholds < 1"),
    (dict(ar_baselines=("vllm",)), "unknown AR baseline 'vllm'"),
    (dict(batch_sizes=(0,)), "batch_sizes: 0"),
    (dict(modes=("xx",)), "unknown mode 'xx'"),
])
def test_sweep_config_validation(kw, msg):
    with pytest.raises(ValueError, match=msg):
        SweepConfig(**kw).validate(32)


def test_axes_grid():
    cfg = SweepConfig(grid="axes", thresholds=(1.0, 0.9, 0.5), sub_block_sizes=(4, 8), sub_block_cache=(False, True))
    assert cfg.bd_configs() == [(1.0, 8, False), (0.9, 8, False), (0.5, 8, False), (0.9, 4, False), (0.9, 8, True)]


def test_cli_errors_before_loading(tmp_path, capsys):
    rc = bench_cli.main(["--model", str(tmp_path / "missing"), "--out", str(tmp_path / "o.csv"), "--thresholds", "2"])
    assert rc == 2 and "threshold must be in (0, 1], got 2.0" in capsys.readouterr().err
    rc = bench_cli.main(["--model", "random:tiny", "--out", str(tmp_path / "o.csv"),
                         "--prompts", str(tmp_path / "no.jsonl")])
    assert rc == 2 and "prompts file not found" in capsys.readouterr().err
    rc = bench_cli.main(["--model", "random:tiny", "--out", str(tmp_path / "o.csv"), "--sub-block-cache", "maybe"])
    assert rc == 2 and "'maybe'" in capsys.readouterr().err
    assert not (tmp_path / "o.csv").exists()


def test_cli_end_to_end_with_chat_prompts(tmp_path, capsys):
    pf = tmp_path / "p.jsonl"
    pf.write_text("\n".join(json.dumps({"question": q}) for q in ["What is 2+2?", "Name a colour."]) + "\n")
    out = tmp_path / "b.csv"
    rc = bench_cli.main(["--model", "random:tiny", "--out", str(out), "--prompts", str(pf), "--batch-sizes", "2",
                     "--thresholds", "0.9", "--sub-block-sizes", "8", "--sub-block-cache", "off",
                     "--ar-baselines", "hf", "--max-new-tokens", "16", "--repeats", "1", "--warmup", "0", "--quiet"])
    assert rc == 0
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert [r["mode"] for r in rows] == ["ar", "bd"] and all(r["prompt_set"] == "p" for r in rows)
    assert float(rows[1]["speedup_vs_hf"]) == pytest.approx(float(rows[1]["tokens_per_s"])
                                                            / float(rows[0]["tokens_per_s"]))
    # chat template applied: the prompt is longer than the question
    assert float(rows[0]["prompt_len_mean"]) > (len("What is 2+2?") + len("Name a colour.")) / 2 + 15


# ----------------------------------------------------------------------------------------------------- roofline
def test_weight_traffic_tied_and_untied():
    from fastdllm_core.bench.roofline import weight_traffic

    m15 = random_model("qwen2.5-1.5b", device="meta", dtype="bfloat16").model
    t = weight_traffic(m15)
    assert t["tied_embeddings"] and t["bytes_per_param"] == 2
    assert t["weight_bytes_per_forward"] == 2 * t["n_params"]  # tied table read whole as lm_head
    m7 = random_model("qwen2.5-7b", device="meta", dtype="bfloat16").model
    t7 = weight_traffic(m7)
    assert not t7["tied_embeddings"]
    assert t7["weight_bytes_per_forward"] == 2 * (t7["n_params"] - 152064 * 3584)  # input table only gathered


def test_roofline_rows_math():
    from types import SimpleNamespace

    from fastdllm_core.bench.roofline import roofline_rows, spec_bandwidth

    traffic = {"weight_bytes_per_forward": 1e9, "bytes_per_param": 2, "n_params": 5e8, "tied_embeddings": True}
    cfg = SimpleNamespace(hidden_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2)
    rows = [{"mode": "ar", "baseline": "hf", "batch_size": "1", "tokens_per_s": "1500", "tokens_per_forward": "1",
             "prompt_len_mean": "100", "max_new_tokens": "200"},
            {"mode": "bd", "baseline": "bd", "batch_size": "1", "tokens_per_s": "6000", "tokens_per_forward": "3"}]
    ar, bd = roofline_rows(rows, traffic, cfg, bandwidth_gbs=2000.0, bandwidth_source="given", spec_gbs=None)
    assert ar["roofline_tokens_per_s"] == pytest.approx(2000.0)  # 2 TB/s / 1 GB per token
    assert ar["fraction_of_roofline"] == pytest.approx(0.75)
    assert bd["roofline_tokens_per_s"] == pytest.approx(6000.0) and bd["fraction_of_roofline"] == pytest.approx(1.0)
    kv = 2 * 2 * 2 * 16 * (100 + 100) * 1 * 2  # 2 (K,V) x layers x kv heads x head_dim x context x batch x bytes
    assert ar["kv_bytes_per_forward_mean"] == kv
    assert ar["fraction_of_roofline_with_kv"] == pytest.approx(1500 / (2000e9 / (1e9 + kv)))
    assert spec_bandwidth("NVIDIA H100 80GB HBM3") == 3350.0 and spec_bandwidth("NVIDIA H200") == 4800.0
    assert spec_bandwidth("NVIDIA H100 PCIe") == 2000.0 and spec_bandwidth("AMD EPYC") is None


def test_roofline_cli_on_a_bench_csv(tmp_path, capsys):
    from fastdllm_core.bench import roofline
    from fastdllm_core.cli import roofline as roofline_cli

    b = tmp_path / "b.csv"
    assert bench_cli.main(["--model", "random:tiny", "--out", str(b), "--batch-sizes", "1", "--thresholds", "0.9",
                       "--sub-block-sizes", "8", "--sub-block-cache", "off", "--ar-baselines", "hf",
                       "--max-new-tokens", "8", "--repeats", "1", "--warmup", "0", "--no-profile", "--quiet",
                       "--synthetic-prompts", "1", "--prompt-len", "8"]) == 0
    r = tmp_path / "r.csv"
    assert roofline_cli.main(["--bench", str(b), "--out", str(r), "--bandwidth-gbs", "10"]) == 0
    with open(r) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 2 and rows[0]["bandwidth_source"] == "given"
    assert float(rows[0]["fraction_of_roofline"]) == pytest.approx(
        float(rows[0]["tokens_per_s"]) * float(rows[0]["weight_bytes_per_forward"]) / 10e9)
    assert roofline_cli.main(["--bench", str(tmp_path / "none.csv"), "--out", str(r)]) == 2
    assert roofline.measure_bandwidth("cpu", nbytes=1 << 22, iters=2) > 0


def test_every_batch_size_decodes_the_same_prompts(tiny64):
    """A row decodes every prompt (in consecutive batches), so batch 1 and batch 4 are measured on the same
    prompts and their token counts agree; the combined statistics add up the batches."""
    from fastdllm_core.bench import batch_of

    prompts = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14], [15, 16]]
    assert batch_of(prompts, 1) == prompts and len(batch_of(prompts, 4)) == 8 and len(batch_of(prompts, 8)) == 8
    bm = random_model("tiny", seed=0)
    rows = run_sweep(bm, prompts, cfg=SweepConfig(modes=("bd",), thresholds=(1.0,), sub_block_sizes=(4,),
                                                   sub_block_cache=(False,), batch_sizes=(1, 5), block_size=8,
                                                   max_new_tokens=6, warmup=0, repeats=1, profile=False,
                                                   ignore_eos=True))
    assert [r["n_prompts"] for r in rows] == [5, 5]
    assert rows[0]["total_tokens"] == rows[1]["total_tokens"] == 5 * 6


def test_rows_say_how_busy_the_host_was_and_warn_when_busy(tiny, monkeypatch, caplog):
    """Every throughput row carries the host-load columns; when other processes took the cores meanwhile the row
    says ``host_busy`` and the bench logs a warning naming the measurement."""
    import logging

    from fastdllm_core import hostload

    cfg = SweepConfig(modes=("bd",), thresholds=(1.0,), batch_sizes=(1,), max_new_tokens=8, warmup=0, repeats=1,
                      profile=False)
    rows = run_sweep(tiny, _prompts([10]), cfg=cfg, progress=False)
    assert all(c in rows[0] for c in hostload.COLUMNS) and all(c in COLUMNS for c in hostload.COLUMNS)
    # a host where, between any two readings, every CPU second went to other processes
    ticks = iter(range(10**6))
    monkeypatch.setattr(hostload, "_proc_stat", lambda: (float(k := next(ticks)) * 2, float(k) * 2))
    monkeypatch.setattr(hostload, "_own_cpu", lambda: 0.0)
    with caplog.at_level(logging.WARNING, logger="fastdllm_core.hostload"):
        rows = run_sweep(tiny, _prompts([10]), cfg=cfg, progress=False)
    assert rows[0]["host_busy"] is True and rows[0]["host_other_cpu_frac"] > 0.1
    assert "bd batch 1 was measured while other processes used" in caplog.text
