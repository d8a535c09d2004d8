"""The sweep job's interleaved rounds (workflow/fastdllm_dag/job/bench_run.measure_rounds, ``bench.rounds``): every
model's runs measured in each round, the order reversed every other round, each run's fastest round kept; and rule
bench's script (workflow/scripts/bench.py) measuring two tiny checkpoints that way, an unloadable model's n/a rows in
their place."""
import csv
import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

from fastdllm_dag.job import bench_run

ROOT = Path(__file__).resolve().parents[1]


def _fake(speeds: dict, calls: list):
    """load / measure_one stand-ins: the tokens/s of (model, run id, round) from ``speeds`` (default 100), each
    call recorded; model ``x`` cannot be loaded."""
    rounds = {}

    def load(model):
        calls.append(("load", model))
        return None if model == "x" else {"model": model}

    def measure_one(loaded, model, run):
        r = rounds[(model, run["id"])] = rounds.get((model, run["id"]), -1) + 1
        calls.append((model, run["id"]))
        tps = speeds.get((model, run["id"], r), 100.0)
        return [{"model": loaded["model"], "id": run["id"], "tokens_per_s": tps, "total_tokens": 50,
                 "wall_time_s_min": 50 / tps * 0.9, "wall_time_s_max": 50 / tps * 1.1}]
    return load, measure_one


def test_rounds_alternate_the_order_and_keep_each_runs_fastest_round():
    runs = {"a": [{"id": 0}, {"id": 1}], "b": [{"id": 0}], "x": [{"id": 0}]}
    calls = []
    load, measure_one = _fake({("a", 1, 0): 80.0, ("a", 1, 1): 120.0, ("a", 1, 2): 90.0, ("b", 0, 2): 150.0}, calls)
    rows = bench_run.measure_rounds(runs, load, measure_one, rounds=3)
    assert calls == [("load", "a"), ("a", 0), ("a", 1), ("load", "b"), ("b", 0), ("load", "x"),  # round 0
                     ("load", "x"), ("load", "b"), ("b", 0), ("load", "a"), ("a", 1), ("a", 0),  # round 1: reversed
                     ("load", "a"), ("a", 0), ("a", 1), ("load", "b"), ("b", 0), ("load", "x")]
    assert [(r["model"], r["id"]) for r in rows] == [("a", 0), ("a", 1), ("b", 0)]  # the given order; x left out
    a1, b0 = rows[1], rows[2]
    assert (a1["tokens_per_s"], a1["round_kept"], a1["rounds"]) == (120.0, 1, 3)
    assert a1["tokens_per_s_rounds"] == "80.000;120.000;90.000"
    # the range spans every round's repeats: the slowest round's max, the fastest round's min
    assert (a1["wall_time_s_max"] == pytest.approx(50 / 80 * 1.1)
            and a1["wall_time_s_min"] == pytest.approx(50 / 120 * 0.9))
    assert (b0["tokens_per_s"], b0["round_kept"]) == (150.0, 2)
    assert rows[0]["round_kept"] == 0  # all equal: the first round


def test_one_round_is_the_plain_measurement():
    calls = []
    load, measure_one = _fake({}, calls)
    rows = bench_run.measure_rounds({"a": [{"id": 0}], "b": [{"id": 0}]}, load, measure_one, rounds=1)
    assert calls == [("load", "a"), ("a", 0), ("load", "b"), ("b", 0)]
    assert [(r["rounds"], r["round_kept"], r["tokens_per_s_rounds"]) for r in rows] == [(1, 0, "100.000")] * 2
    with pytest.raises(ValueError, match="bench.rounds must be >= 1, got 0"):
        bench_run.measure_rounds({"a": [{"id": 0}]}, load, measure_one, rounds=0)


def test_bench_script_measures_the_sweep_in_rounds(tmp_path, tiny_bench_inputs):
    """Rule bench's script with a stand-in snakemake object: an AR and a block-diffusion run of one tiny checkpoint
    and a missing checkpoint's n/a row, in 2 rounds; every measured row says so, the rows keep the sweep's order."""
    ck, prompts = tiny_bench_inputs
    decode = dict(block_size=32, sub_block_size=8, threshold=0.9, use_sub_block_cache=True)
    runs = [{"model": "gone", "mode": "ar", "batch_size": 1, "decode": {}},
            {"model": "base", "mode": "ar", "batch_size": 1, "decode": {}},
            {"model": "base", "mode": "bd", "batch_size": 2, "decode": decode}]
    bcfg = dict(num_prompts=2, max_new_tokens=8, warmup=0, repeats=1, rounds=2, threads=1, ar_baseline="static")
    params = SimpleNamespace(runs=runs, sources={"base": str(ck), "gone": str(tmp_path / "nothing")},
                             prompts_task="synth_arith", prompts_path=str(prompts), bench=bcfg)
    config = {"seed": 0, "device": "cpu", "scale": "t", "dtype": "auto", "roles": {"main_ar": "base"},
              "models": {"base": {}, "gone": {}}}
    out = tmp_path / "sweep.csv"
    sm = SimpleNamespace(params=params, config=config, wildcards=SimpleNamespace(sweep="batch"), log=[],
                         output=[str(out)], scriptdir=str(ROOT / "workflow" / "scripts"), rule="bench", threads=1)
    runpy.run_path(str(ROOT / "workflow" / "scripts" / "bench.py"), init_globals={"snakemake": sm})
    rows = list(csv.DictReader(open(out)))
    assert [(r["model"], r["mode"], r["status"]) for r in rows] == [
        ("gone", "ar", "n/a"), ("base", "ar", "ok"), ("base", "bd", "ok")]
    assert "could not be loaded" in rows[0]["note"] and rows[0]["rounds"] == ""
    for r in rows[1:]:
        tps = [float(x) for x in r["tokens_per_s_rounds"].split(";")]
        assert r["rounds"] == "2" and len(tps) == 2 and float(r["tokens_per_s"]) == pytest.approx(max(tps), rel=1e-3)
        assert float(r["wall_time_s_min"]) <= float(r["wall_time_s_max"])
    assert float(rows[1]["speedup_vs_main_ar"]) == pytest.approx(1.0)
