"""A prompt (plus max_new_tokens) longer than the model's context is refused, naming the prompt and both lengths,
in the decoders, ``fastdllm generate``, ``eval`` (lm-eval model and run_task) and ``bench``; it is cut from the
left only when asked for, and the count is reported."""
from __future__ import annotations

import csv
import json

import pytest
import torch

from fastdllm_core.decoding import ContextError, ar_generate, bd_generate, fit_context, model_context
from fastdllm_core.tiny import tiny_qwen2_config, write_tiny_checkpoint

CTX = 96


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A tiny checkpoint whose context (max_position_embeddings) is 96 tokens."""
    ck = write_tiny_checkpoint(tmp_path_factory.mktemp("ctx") / "ck", tiny_qwen2_config(max_position_embeddings=CTX),
                               seed=1)
    from fastdllm_core.loading import load_model

    return str(ck), load_model(str(ck))


def _ids(n):
    return [5 + i % 50 for i in range(n)]


def test_fit_context_refuses_or_cuts_from_the_left():
    with pytest.raises(ContextError, match=r"prompt 1 is 120 tokens, longer than the model's context of 96"):
        fit_context([_ids(10), _ids(120)], 16, CTX)
    with pytest.raises(ContextError, match=r"prompt 0 is 90 tokens; with max_new_tokens=16 that makes 106, more "
                                           r"than the model's context of 96"):
        fit_context([_ids(90)], 16, CTX)
    with pytest.raises(ContextError, match="leaves no room"):
        fit_context([_ids(1)], 96, CTX)
    p = list(range(200))
    out, n = fit_context([_ids(80), p, _ids(3)], 16, CTX, truncate=True)
    assert n == 1 and out[1] == p[-80:] and out[0] == _ids(80) and out[2] == _ids(3)
    assert fit_context([p], 16, None) == ([p], 0)  # no context in the config: nothing to check


@pytest.mark.parametrize("gen", ["bd", "ar"])
def test_decoders_refuse_prompt_plus_budget_beyond_the_context(small, gen):
    _, lm = small
    assert model_context(lm.model) == CTX

    def run(prompts, m):
        if gen == "bd":
            return bd_generate(lm.model, prompts, mask_token_id=lm.mask_token_id, max_new_tokens=m, block_size=8,
                               sub_block_size=8)
        return ar_generate(lm.model, prompts, max_new_tokens=m)

    with pytest.raises(ContextError, match=r"prompt 1 is 100 tokens, longer than the model's context of 96"):
        run([_ids(5), _ids(100)], 8)
    with pytest.raises(ContextError, match=r"prompt 0 is 90 tokens; with max_new_tokens=8 that makes 98"):
        run([_ids(90)], 8)
    out = run([_ids(88)], 8)  # exactly the context: fine
    assert len(out.sequences[0]) <= 8


def test_generate_cli_refuses_and_truncates_on_request(small, capsys):
    from fastdllm_core.cli import generate as generate_cli

    ck, _ = small
    long_prompt = "x" * 150
    assert generate_cli.main(["--model", ck, "--prompt", long_prompt, "--max-new-tokens", "8"]) == 2
    err = capsys.readouterr().err
    assert "prompt 0 is" in err and "context of 96 tokens" in err and "--truncate-prompts left" in err
    assert generate_cli.main(["--model", ck, "--prompt", long_prompt, "--max-new-tokens", "8", "--block-size", "8",
                              "--sub-block-size", "8", "--truncate-prompts", "left", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["truncated_prompts"] == 1 and len(doc["outputs"][0]["prompt_ids"]) == CTX - 8


def test_lm_eval_model_refuses_and_counts_truncation(small):
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    _, lm = small
    m = FastDLLMv2(model=lm, block_size=8, sub_block_size=8, max_new_tokens=8, batch_size=2)
    with pytest.raises(ContextError, match=r"prompt 1 is \d+ tokens.*context of 96"):
        m.generate_texts(["short", "y" * 120], disable_tqdm=True)
    m = FastDLLMv2(model=lm, block_size=8, sub_block_size=8, max_new_tokens=8, batch_size=2, truncate_prompts="left")
    texts = m.generate_texts(["short", "y" * 120, "z" * 200], disable_tqdm=True)
    assert len(texts) == 3 and m.n_truncated_prompts == 2
    # loglikelihood requests too
    m = FastDLLMv2(model=lm, block_size=8, sub_block_size=8, max_new_tokens=8)

    class Req:
        def __init__(self, *args):
            self.args = args

    with pytest.raises(ContextError, match=r"request 0: context \d+ tokens \+ continuation 2 tokens"):
        m.loglikelihood([Req("q" * 120, " a")], disable_tqdm=True)


def test_lm_eval_requests_are_all_checked_before_any_model_work(small, monkeypatch):
    """A request that does not fit is refused before the first generation / forward pass, even when it comes
    after others (another generation-kwargs group, a later loglikelihood request), naming its task and doc."""
    from lm_eval.api.instance import Instance

    import fastdllm_core.evaluation.lm_model as lm_model
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    _, lm = small
    monkeypatch.setattr(lm_model, "bd_generate", lambda *a, **k: pytest.fail("generated before refusing"))
    m = FastDLLMv2(model=lm, block_size=8, sub_block_size=8, max_new_tokens=8, batch_size=2)
    monkeypatch.setattr(m, "_bd_logprobs_at_mask", lambda *a, **k: pytest.fail("forward pass before refusing"))

    def inst(kind, args, doc_id):
        return Instance(request_type=kind, doc={}, arguments=args, idx=0, metadata=("synth_x", doc_id, 1))

    reqs = [inst("generate_until", ("short", {"until": ["\n"]}), 0),
            inst("generate_until", ("y" * 120, {"until": ["\n"], "temperature": 0}), 7)]  # a second group
    with pytest.raises(ContextError, match=r"request 1 \(synth_x doc 7\) is \d+ tokens, longer than the model's "
                                           r"context of 96"):
        m.generate_until(reqs, disable_tqdm=True)
    reqs = [inst("loglikelihood", ("q", " a"), 0), inst("loglikelihood", ("q" * 120, " a"), 3)]
    with pytest.raises(ContextError, match=r"request 1 \(synth_x doc 3\): context \d+ tokens \+ continuation"):
        m.loglikelihood(reqs, disable_tqdm=True)


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_run_task_refuses_and_records_truncation(small, tmp_path):
    from fastdllm_core import synthetic
    from fastdllm_core.decoding import DecodeConfig
    from fastdllm_core.evaluation import codeeval, run_task

    _, lm = small
    suite = synthetic.write_suite(tmp_path / "suite", n_pretrain=0, n_sft=10, n_adapt=0, n_eval=3)
    rows = codeeval.read_jsonl(suite["synth_code_test"])
    for r in rows:  # prompts far beyond 96 tokens
        r["prompt"] = "# " + "padding " * 30 + "\n" + r["prompt"]
    long_file = tmp_path / "long_code.jsonl"
    long_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    dec = DecodeConfig(block_size=8, sub_block_size=8, max_new_tokens=8)
    with pytest.raises(ContextError, match=r"prompt 0 \(SynthCode/0\) is \d+ tokens, longer than the model's "
                                           r"context of 96"):
        run_task(lm, "synth_code", decode=dec, limit=2, out_dir=tmp_path / "a", data_path=str(long_file),
                 prompt_style="plain")
    out = run_task(lm, "synth_code", decode=dec, limit=2, out_dir=tmp_path / "b", data_path=str(long_file),
                   prompt_style="plain", truncate_prompts=True, code_opts={"min_time_limit": 0.2})
    assert all(r["truncated_prompts"] == 2 for r in out)
    with open(tmp_path / "b" / "accuracy.csv") as fh:
        assert {r["truncated_prompts"] for r in csv.DictReader(fh)} == {"2"}


def test_bench_refuses_and_records_truncation(tmp_path, capsys):
    from fastdllm_core.bench import SweepConfig, random_model, run_sweep
    from fastdllm_core.cli import bench

    bm = random_model("tiny", seed=0)
    bm.model.config.max_position_embeddings = CTX
    cfg = dict(modes=("bd",), thresholds=(0.9,), sub_block_sizes=(8,), batch_sizes=(1,), max_new_tokens=8,
               warmup=0, repeats=1, profile=False, block_size=8)
    with pytest.raises(ContextError, match=r"prompt 1 is 120 tokens, longer than the model's context of 96"):
        run_sweep(bm, [_ids(10), _ids(120)], cfg=SweepConfig(**cfg), progress=False)
    rows = run_sweep(bm, [_ids(10), _ids(120)], cfg=SweepConfig(**cfg, truncate_prompts=True), progress=False,
                     out=tmp_path / "b.csv")
    assert rows[0]["truncated_prompts"] == 1
    with open(tmp_path / "b.csv") as fh:
        assert next(csv.DictReader(fh))["truncated_prompts"] == "1"
    # the CLI: synthetic prompts of 200 tokens on the tiny random model (context 2048) with a 1900-token budget
    rc = bench.main(["--model", "random:tiny", "--out", str(tmp_path / "c.csv"), "--synthetic-prompts", "1",
                     "--prompt-len", "200", "--max-new-tokens", "1900", "--modes", "ar", "--ar-baselines", "hf",
                     "--batch-sizes", "1", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "prompt 0 is 200 tokens; with max_new_tokens=1900 that makes 2100" in err
    assert not (tmp_path / "c.csv").exists()
    torch.set_num_threads(min(2, torch.get_num_threads()))
