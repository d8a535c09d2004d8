"""End to end on a tiny random model: lm-eval (synth_arith) and EvalPlus (synth_code), Python and CLI, plus the
real-model smoke test that skips when the Qwen2.5-Coder GGUF is absent."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from conftest import tiny_eval_setup
from fastdllm_core import synthetic
from fastdllm_core.decoding import DecodeConfig
from fastdllm_core.evaluation import run_task

pytestmark = pytest.mark.usefixtures("hub_offline")  # conftest: the Hub and datasets offline


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    return tiny_eval_setup(tmp_path_factory, "e2e", n_eval=4)


def _rows(path):
    with open(path) as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_synth_arith_through_lm_eval(setup, tmp_path):
    model, suite, _ = setup
    rows = run_task(model, "synth_arith", decode=DecodeConfig(block_size=8, sub_block_size=4, max_new_tokens=16),
                    batch_size=4, limit=3, out_dir=tmp_path, data_path=suite["synth_arith_test"], model_label="tiny",
                    extra={"run": "ci"})
    metrics = {r["metric"]: r for r in rows}
    assert {"exact_match_strict", "exact_match_flexible"} <= set(metrics)
    for r in rows:
        assert r["n"] == 3 and r["status"] == "ok" and 0.0 <= r["value"] <= 100.0
        assert r["total_tokens"] > 0 and r["tokens_per_s"] > 0 and r["nfe"] > 0 and r["run"] == "ci"
        assert r["git_commit"] and r["block_size"] == 8 and r["threshold"] == 0.9
    csv_rows = _rows(tmp_path / "accuracy.csv")
    assert [r["metric"] for r in csv_rows] == [r["metric"] for r in rows]
    samples = [json.loads(line) for line in open(tmp_path / "samples.jsonl")]
    assert len(samples) == 3
    tests = [json.loads(line) for line in open(suite["synth_arith_test"])]
    for s in samples:  # exactly what the SFT rows train: GSM8K's doc_to_text as the user turn of the chat template
        q = tests[s["doc_id"]]["question"]
        want = model.tokenizer.apply_chat_template(
            [{"role": "user", "content": synthetic.ARITH_PROMPT.format(question=q)}], tokenize=False,
            add_generation_prompt=True)
        assert s["prompt"] == want
    assert all({"strict-match", "flexible-extract"} <= set(s["extracted"]) for s in samples)
    res = json.loads((tmp_path / "results.json").read_text())
    assert res["config"]["task"] == "synth_arith" and res["info"]["prompt_template"]["synth_arith"].startswith(
        "Question:")
    # boxed variant adds its own filter
    rows_b = run_task(model, "synth_arith", decode=DecodeConfig(block_size=8, sub_block_size=4, max_new_tokens=8),
                      limit=2, out_dir=tmp_path / "boxed", data_path=suite["synth_arith_test"], prompt_style="boxed")
    assert "exact_match_boxed" in {r["metric"] for r in rows_b}
    s = json.loads(open(tmp_path / "boxed/samples.jsonl").readline())
    assert "\\boxed{}" in s["prompt"]


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("task,metrics", [
    ("synth_math", {"exact_match"}),
    ("synth_ifeval", {"prompt_level_strict_acc", "inst_level_strict_acc"}),
    ("synth_mc", {"acc"}),
    ("synth_mbpp", {"pass@1_base", "pass@1_plus"}),
])
@pytest.mark.parametrize("mode", ["bd", "ar"])
def test_new_stand_ins_run_the_benchmark_code_paths(setup, tmp_path, task, metrics, mode):
    """MATH / IFEval / MMLU / MBPP stand-ins through lm-eval (generate_until, multiple choice by log-likelihood)
    and EvalPlus: every row has n and a 95% interval (none for IFEval's instruction level)."""
    model, suite, _ = setup
    rows = run_task(model, task, mode=mode, decode=DecodeConfig(block_size=8, sub_block_size=4, max_new_tokens=12),
                    batch_size=4, limit=3, out_dir=tmp_path, data_path=suite[f"{task}_test"],
                    code_opts={"min_time_limit": 0.2})
    by = {r["metric"]: r for r in rows}
    assert metrics <= set(by)
    for name in metrics:
        r = by[name]
        assert r["status"] == "ok" and r["n"] == 3 and 0.0 <= r["value"] <= 100.0, r
        if name == "inst_level_strict_acc":
            assert r["ci_low"] == r["ci_high"] == ""
        else:
            assert 0.0 <= r["ci_low"] <= r["value"] <= r["ci_high"] <= 100.0
    if task == "synth_mc":  # nothing is generated: no throughput, no generation length
        assert by["acc"]["total_tokens"] == "" and by["acc"]["max_new_tokens"] == ""


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_synth_code_through_evalplus(setup, tmp_path):
    model, suite, _ = setup
    rows = run_task(model, "synth_code", mode="bd", decode=DecodeConfig(block_size=8, sub_block_size=8,
                                                                         max_new_tokens=16),
                    limit=3, out_dir=tmp_path, data_path=suite["synth_code_test"], code_opts={"min_time_limit": 0.2})
    m = {r["metric"]: r for r in rows}
    assert set(m) == {"pass@1_base", "pass@1_plus"}
    assert all(r["status"] == "ok" and r["n"] == 3 for r in rows)
    samples = [json.loads(line) for line in open(tmp_path / "samples.jsonl")]
    assert all(s["base_status"] in ("pass", "fail", "timeout") for s in samples)
    # a random model writes no function: scored wrong and said so, not a crash
    assert m["pass@1_base"]["value"] == 100.0 * sum(s["correct"] for s in samples) / 3
    if not any(s["has_entry_point"] for s in samples):
        assert "no function" in m["pass@1_base"]["note"]
    # EvalPlus' scratch files lived in a private directory that is gone; the sandbox used is recorded
    assert sorted(p.name for p in tmp_path.iterdir()) == ["accuracy.csv", "results.json", "samples.jsonl"]
    assert "session" in json.loads((tmp_path / "results.json").read_text())["info"]["sandbox"]


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_cli_eval_ar_and_errors(setup, tmp_path, capsys):
    from fastdllm_core.cli import main

    _, suite, root = setup
    rc = main(["eval", "--model", str(root / "ck"), "--task", "synth_arith", "--mode", "ar", "--limit", "2",
               "--max-new-tokens", "8", "--data-path", suite["synth_arith_test"], "--out-dir", str(tmp_path / "a")])
    assert rc == 0
    rows = _rows(tmp_path / "a/accuracy.csv")
    assert rows and all(r["mode"] == "ar" and r["block_size"] == "" for r in rows)
    assert all("repetition_penalty=1.0" in r["ar_generation"] for r in rows)  # the pinned greedy settings
    assert main(["eval", "--model", str(root / "ck"), "--task", "bogus", "--out-dir", str(tmp_path / "b")]) == 2
    assert "unknown task 'bogus'" in capsys.readouterr().err
    rc = main(["eval", "--model", str(root / "ck"), "--task", "gsm8k", "--data-path", str(tmp_path / "none.jsonl"),
               "--out-dir", str(tmp_path / "c")])
    assert rc == 3 and "none.jsonl" in capsys.readouterr().err


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
def test_lm_eval_cli_entry_point(setup, tmp_path):
    from fastdllm_core.cli.lm_eval import main

    _, suite, root = setup
    rc = main(["--model", "fast_dllm_v2", "--model_args",
               f"pretrained={root / 'ck'},block_size=8,sub_block_size=4,max_new_tokens=8,batch_size=2",
               "--tasks", "synth_arith", "--fastdllm-synth-arith", suite["synth_arith_test"], "--limit", "2",
               "--apply_chat_template", "--output_path", str(tmp_path / "out")])
    assert rc == 0
    assert list((tmp_path / "out").rglob("results_*.json"))


GGUF = Path(os.environ.get("FASTDLLM_QWEN_GGUF",
                           Path.home() / ".cache/fastdllm/models/qwen2.5-coder-0.5b-instruct.gguf"))


@pytest.mark.realmodel
@pytest.mark.skipif(not GGUF.is_file(), reason=f"real model GGUF not found at {GGUF} "
                    "(run ../shared/tools/get-qwen2.5-coder-0.5b or set FASTDLLM_QWEN_GGUF)")
@pytest.mark.skipif(os.environ.get("FASTDLLM_REAL_MODEL_TESTS") != "1",
                    reason="slow on CPU (minutes): set FASTDLLM_REAL_MODEL_TESTS=1")
def test_real_model_humaneval_two_items(tmp_path):
    rows = run_task(str(GGUF), "humaneval", mode="ar", decode=DecodeConfig(max_new_tokens=384), limit=2,
                    batch_size=2, out_dir=tmp_path)
    base = {r["metric"]: r for r in rows}
    assert base["pass@1_base"]["value"] >= 50.0  # HumanEval/0 and /1 are easy for this model
    assert base["pass@1_plus"]["status"] == "n/a"
