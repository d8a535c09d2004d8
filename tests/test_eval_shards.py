"""Evaluation shards (fastdllm_core.evaluation.shards): shards of a task merged give the unsharded run's rows
(value, n, 95% interval), and a killed shard resumes from its per-request progress without recomputing."""
from __future__ import annotations

import pytest

from fastdllm_core.decoding import DecodeConfig
from fastdllm_core.evaluation import run_task

from conftest import tiny_eval_setup
from fastdllm_core.evaluation.shards import merge_shards

DECODE = DecodeConfig(block_size=8, sub_block_size=4, max_new_tokens=8)


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model, suite, _ = tiny_eval_setup(tmp_path_factory, "shards", n_eval=8)
    return model, suite


def _samples(path):
    import json

    return [json.loads(line) for line in open(path / "samples.jsonl")]


KEEP = ("metric", "value", "n", "ci_low", "ci_high", "note", "filter")


@pytest.mark.parametrize("task,n", [("synth_mc", 2), ("synth_ifeval", 2)])
def test_shards_merge_to_the_unsharded_rows(setup, tmp_path, task, n):
    model, suite = setup
    kw = dict(mode="bd", decode=DECODE, batch_size=4, limit=5, data_path=suite[f"{task}_test"])
    whole = run_task(model, task, out_dir=tmp_path / "whole", **kw)
    parts = []
    for k in range(1, n + 1):
        rows = run_task(model, task, out_dir=tmp_path / f"s{k}", shard=(k, n), **kw)
        parts.append({"rows": rows, "samples": _samples(tmp_path / f"s{k}")})
    sizes = [len(p["samples"]) for p in parts]
    assert sum(sizes) == 5 and all(s > 0 for s in sizes)
    ids = sorted(s["doc_id"] for p in parts for s in p["samples"])
    assert ids == list(range(5))  # contiguous ranges covering the unsharded items once
    merged = merge_shards(parts)
    assert [{k: r[k] for k in KEEP} for r in merged] == [{k: r[k] for k in KEEP} for r in whole]
    if task == "synth_mc":  # (the tiny random model scores 0 on synth_ifeval: there the check is of n and intervals)
        assert any(0 < r["value"] < 100 for r in whole), "the check needs a value that is neither 0 nor 100"
        assert any(r["value"] != whole[0]["value"] for p in parts for r in p["rows"])  # the shards differ


def test_merge_refuses_a_value_that_is_not_a_per_item_mean(setup, tmp_path):
    model, suite = setup
    rows = run_task(model, "synth_mc", decode=DECODE, limit=4, out_dir=tmp_path, data_path=suite["synth_mc_test"],
                    shard=(1, 2))
    bad = [dict(r, value=r["value"] + 1.0) for r in rows]
    with pytest.raises(ValueError, match="not the mean of its per-item results"):
        merge_shards([{"rows": bad, "samples": _samples(tmp_path)}])


def test_code_tasks_are_not_sharded(setup, tmp_path):
    model, suite = setup
    with pytest.raises(ValueError, match="EvalPlus task 'synth_code'"):
        run_task(model, "synth_code", decode=DECODE, out_dir=tmp_path, data_path=suite["synth_code_test"],
                 shard=(1, 2))


def test_a_killed_shard_resumes_from_its_progress(setup, tmp_path, monkeypatch):
    """The first run dies after its first batch of 2 prompts; the rerun decodes only the 3 others and gives the
    rows of an uninterrupted run."""
    from fastdllm_core.evaluation import lm_model

    model, suite = setup
    kw = dict(mode="bd", decode=DECODE, batch_size=2, limit=5, data_path=suite["synth_ifeval_test"])
    clean = run_task(model, "synth_ifeval", out_dir=tmp_path / "clean", **kw)
    real, rows_decoded = lm_model.bd_generate, []

    def dying(m, batch, **k):
        if rows_decoded:
            raise KeyboardInterrupt("killed")
        rows_decoded.append(len(batch))
        return real(m, batch, **k)

    progress = str(tmp_path / "progress" / "db")
    monkeypatch.setattr(lm_model, "bd_generate", dying)
    with pytest.raises(KeyboardInterrupt):
        run_task(model, "synth_ifeval", out_dir=tmp_path / "run", progress=progress, **kw)
    assert rows_decoded == [2]

    def counting(m, batch, **k):
        rows_decoded.append(len(batch))
        return real(m, batch, **k)

    rows_decoded.clear()
    monkeypatch.setattr(lm_model, "bd_generate", counting)
    rows = run_task(model, "synth_ifeval", out_dir=tmp_path / "run", progress=progress, **kw)
    assert sum(rows_decoded) == 3
    assert [{k: r[k] for k in KEEP} for r in rows] == [{k: r[k] for k in KEEP} for r in clean]


def test_dag_scripts_merge_shards_into_the_points_rows(setup, tmp_path, monkeypatch):
    """workflow/scripts/evaluate_shard.py (two shards) then evaluate.py (the merge) give the point's row of an
    unsharded evaluate.py: the same value, n and interval in the job's accuracy CSV."""
    import csv
    import runpy
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root / "workflow" / "lib"))
    import eval_cost

    model, suite = setup
    src = str(Path(model.source))
    point = "bd_b8_s4_t0.9_c0"
    config = {"seed": 0, "device": "cpu", "scale": "t", "models": {"m": {"mode": "bd"}}}

    def params(cache, **more):
        return SimpleNamespace(source=src, points={"synth_mc": [point]}, data_paths={"synth_mc": suite["synth_mc_test"]},
                               data_path=suite["synth_mc_test"], mode="bd", max_new_tokens=8, batch_size=4, limit=4,
                               cache_dir=str(tmp_path / cache), model="m", label="m",
                               verdict_cache=str(tmp_path / "verdicts"), mdm_loglikelihood="mc", mc_num=128, **more)

    def run(script, p, out, inputs, wildcards=None):
        sm = SimpleNamespace(params=p, config=config, input=SimpleNamespace(model=[], **inputs), log=[], threads=1,
                             output=[str(out)], scriptdir=str(root / "workflow" / "scripts"), rule=script,
                             wildcards=SimpleNamespace(**(wildcards or {})))
        runpy.run_path(str(root / "workflow" / "scripts" / f"{script}.py"), init_globals={"snakemake": sm})

    names = [eval_cost.shard_name("m", "synth_mc", point, k, 2) for k in (1, 2)]
    for k, name in enumerate(names, 1):
        sj = {"model": "m", "task": "synth_mc", "point": point, "k": k, "n": 2}
        run("evaluate_shard", params("sharded", shard=sj), tmp_path / f"{name}.json", {}, {"shard": name})
    assert not list((tmp_path / "sharded").rglob("*.progress"))  # a finished shard removes its progress
    monkeypatch.setattr(eval_cost, "job_shards", lambda config, job: {("synth_mc", point): names})
    run("evaluate", params("sharded"), tmp_path / "sharded.csv",
        {"shards": [str(tmp_path / f"{n}.json") for n in names]})
    monkeypatch.setattr(eval_cost, "job_shards", lambda config, job: {})
    run("evaluate", params("whole"), tmp_path / "whole.csv", {})
    rows = {n: list(csv.DictReader(open(tmp_path / f"{n}.csv"))) for n in ("sharded", "whole")}
    assert [{k: r[k] for k in KEEP} for r in rows["sharded"]] == [{k: r[k] for k in KEEP} for r in rows["whole"]]
    assert rows["whole"][0]["n"] == "4" and rows["whole"][0]["point"] == point
