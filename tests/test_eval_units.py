"""Unit tests of the evaluation package: synthetic suite, scorers, loglikelihood method, bad input."""
from __future__ import annotations

import gzip
import json
import math

import pytest
import torch

from fastdllm_core import synthetic
from fastdllm_core.evaluation import TASKS, TaskUnavailable, codeeval, run_task

pytestmark = pytest.mark.usefixtures("hub_offline")  # conftest: the Hub and datasets offline


def test_extract_code():
    code, ok = codeeval.extract_code("Here:\n```python\ndef f(x):\n    return x + 1\n```\nDone.", "f")
    assert ok and "return x + 1" in code
    code, ok = codeeval.extract_code("def f(x):\n    return x + 1\n```\ntrailing text", "f")
    assert ok and "trailing" not in code
    _, ok = codeeval.extract_code("I cannot write this function.", "f")
    assert not ok
    _, ok = codeeval.extract_code("def g(x):\n    return 1\n", "f")
    assert not ok


def _synth_problem(tmp_path):
    p = synthetic.write_suite(tmp_path, n_pretrain=0, n_sft=10, n_adapt=0, n_eval=5)
    rows = codeeval.read_jsonl(p["synth_code_test"])
    return p["synth_code_test"], rows[0]


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_evalplus_scoring_statuses(tmp_path):
    """Correct, wrong, no-code and infinite-loop solutions, scored out of process with a time limit."""
    path, prob = _synth_problem(tmp_path)
    ep, tid = prob["entry_point"], prob["task_id"]
    good = prob["prompt"] + prob["canonical_solution"]
    wrong = f"def {ep}(*a):\n    return None\n"
    loop = f"def {ep}(*a):\n    while True:\n        pass\n"
    # swallows EvalPlus' in-process TimeoutException: only the killed child process stops it
    stubborn = f"def {ep}(*a):\n    while True:\n        try:\n            while True:\n                pass\n" \
               f"        except BaseException:\n            pass\n"
    sols = [{"task_id": tid, "solution": s} for s in (good, wrong, "", loop, stubborn)]
    import time
    from pathlib import Path
    t0 = time.perf_counter()
    res = codeeval.score(Path(path), "synth_code", sols, tmp_path / "w", base_only=False, min_time_limit=0.2)
    assert time.perf_counter() - t0 < 60
    st = [(r["base_status"], r["plus_status"]) for r in res]
    assert st[0] == ("pass", "pass") and res[0]["plus_pass"]
    assert st[1][0] == "fail" and st[2][0] == "fail"
    assert st[3][0] == "fail"  # EvalPlus 0.3.1 reports a per-test time-limit hit as a failure
    assert st[4][0] == "timeout"
    assert [r["base_pass"] for r in res] == [True, False, False, False, False]


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_humaneval_original_converts_base_only(tmp_path, monkeypatch):
    from fastdllm_core.evaluation import shared_dir

    src = shared_dir() / "data/humaneval/HumanEval.jsonl.gz"
    if not src.is_file():
        pytest.skip(f"{src} not present")
    rows = [json.loads(line) for line in gzip.open(src, "rt")]
    small = tmp_path / "he.jsonl"
    pick = [r for r in rows if r["task_id"] in ("HumanEval/0", "HumanEval/38", "HumanEval/53")]
    small.write_text("".join(json.dumps(r) + "\n" for r in pick))
    out, has_plus, note = codeeval.resolve_dataset("humaneval", str(small), tmp_path / "w")
    assert not has_plus and "base tests only" in note
    conv = {r["task_id"]: r for r in codeeval.read_jsonl(out)}
    assert all(r["base_input"] and r["plus_input"] == [] for r in conv.values())
    sols = [{"task_id": t, "solution": r["prompt"] + r["canonical_solution"]} for t, r in conv.items()]
    res = codeeval.score(out, "humaneval", sols, tmp_path / "w", base_only=True, min_time_limit=0.5)
    assert all(r["base_status"] == "pass" and r["plus_status"] is None for r in res)


def test_unknown_task_and_bad_args(tmp_path):
    with pytest.raises(ValueError, match="unknown task 'nope'.*synth_arith"):
        run_task("/does/not/matter", "nope", out_dir=tmp_path)
    with pytest.raises(ValueError, match="prompt_style"):
        run_task("/x", "gsm8k", prompt_style="fancy", out_dir=tmp_path)
    with pytest.raises(ValueError, match="threshold"):
        from fastdllm_core.decoding import DecodeConfig
        run_task("/x", "gsm8k", decode=DecodeConfig(threshold=1.5), out_dir=tmp_path)
    assert set(TASKS) == {"synth_arith", "synth_math", "synth_code", "synth_mbpp", "synth_mc", "synth_ifeval",
                          "gsm8k", "humaneval", "mbpp", "minerva_math", "ifeval", "mmlu", "gpqa"}


def test_task_unavailable_names_the_fix(tmp_path, monkeypatch):
    with pytest.raises(TaskUnavailable, match="/missing/gsm8k.jsonl.*FASTDLLM_GSM8K_PATH"):
        run_task("/x", "gsm8k", data_path="/missing/gsm8k.jsonl", out_dir=tmp_path)
    monkeypatch.delenv("MBPP_OVERRIDE_PATH", raising=False)
    with pytest.raises(TaskUnavailable, match="MBPP_OVERRIDE_PATH"):
        run_task("/x", "mbpp", out_dir=tmp_path)
    with pytest.raises(TaskUnavailable, match="FASTDLLM_SYNTH_ARITH_PATH"):
        run_task("/x", "synth_arith", out_dir=tmp_path)
    monkeypatch.setenv("FASTDLLM_SHARED_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(TaskUnavailable, match="FASTDLLM_GSM8K_PATH"):
        run_task("/x", "gsm8k", out_dir=tmp_path)
    with pytest.raises(TaskUnavailable, match="HUMANEVAL_OVERRIDE_PATH"):
        run_task("/x", "humaneval", out_dir=tmp_path)


def test_hub_tasks_offline_unavailable(tmp_path):
    from fastdllm_core.evaluation.tasks import build_lm_eval_tasks

    for task in ("mmlu", "gpqa", "ifeval", "minerva_math"):
        with pytest.raises(TaskUnavailable, match="data_path"):
            build_lm_eval_tasks(task)


# ------------------------------------------------------------------------------------------------ loglikelihood
@pytest.fixture(scope="module")
def tiny_loaded(tmp_path_factory):
    from fastdllm_core.loading import load_model
    from fastdllm_core.tiny import write_tiny_checkpoint

    d = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ck", seed=1)
    return load_model(str(d), dtype="float64")


class _Req:
    def __init__(self, *args):
        self.args = args


def test_loglikelihood_first_token_method(tiny_loaded):
    from fastdllm_core.evaluation.lm_model import FastDLLMv2
    from fastdllm_core.masks import attention_kwargs, inference_spec

    lm = FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=2, loglikelihood_method="first_token")
    ctx, cont = "Q: 2+2?\nA:", " 4x"
    (score, greedy), = lm.loglikelihood([_Req(ctx, cont)], disable_tqdm=True)
    tok = tiny_loaded.tokenizer
    c_ids = tok.encode("Q: 2+2?\nA:", add_special_tokens=False)
    k_ids = tok.encode(" 4x", add_special_tokens=False)
    seq = torch.tensor([c_ids + [tiny_loaded.mask_token_id]])
    n = seq.shape[1]
    m = tiny_loaded.model
    logits = m(input_ids=seq, position_ids=torch.arange(n)[None], use_cache=False,
               **attention_kwargs(m, inference_spec(4, 0), n, n)).logits[0, n - 2]
    lp = torch.log_softmax(logits, -1)
    assert math.isclose(score, lp[k_ids[0]].item(), rel_tol=1e-6)  # only the first continuation token
    assert greedy == (lp.argmax().item() == k_ids[0])
    # the mask token sits in the same block as the last context token and is visible to it: the result
    # differs from a plain causal forward unless the block size is 1
    lm1 = FastDLLMv2(model=tiny_loaded, block_size=1, sub_block_size=1, loglikelihood_method="first_token")
    (s1, _), = lm1.loglikelihood([_Req(ctx, cont)], disable_tqdm=True)
    causal = torch.log_softmax(m(input_ids=torch.tensor([c_ids]), use_cache=False).logits[0, -1], -1)
    assert math.isclose(s1, causal[k_ids[0]].item(), rel_tol=1e-6)
    # chain scores every continuation token; ar uses the causal log-likelihood of the whole continuation
    lmc = FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=2)  # chain, the default
    (sc, _), = lmc.loglikelihood([_Req(ctx, cont)], disable_tqdm=True)
    assert sc < score
    (one, _), = lmc.loglikelihood([_Req(ctx, " ")], disable_tqdm=True)  # one token: chain == first token
    (one_ft, _), = lm.loglikelihood([_Req(ctx, " ")], disable_tqdm=True)
    assert math.isclose(one, one_ft, rel_tol=1e-9)
    lma = FastDLLMv2(model=tiny_loaded, mode="ar")
    (sa, _), = lma.loglikelihood([_Req(ctx, cont)], disable_tqdm=True)
    full = torch.log_softmax(m(input_ids=torch.tensor([c_ids + k_ids]), use_cache=False).logits[0], -1)
    want = sum(full[len(c_ids) - 1 + i, t].item() for i, t in enumerate(k_ids))
    assert math.isclose(sa, want, rel_tol=1e-6)


def test_generate_until_stop_strings_and_bad_args(tiny_loaded):
    from fastdllm_core.evaluation.lm_model import FastDLLMv2

    lm = FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=2, max_new_tokens=12, batch_size=2)
    prompts = ["abc", "hello there", "x"]
    raw = lm.generate_texts(prompts, disable_tqdm=True)
    assert len(lm.gen_stats) == 2 and all(len(r) <= 12 for r in raw)
    stop = raw[0][3:5] if len(raw[0]) >= 5 else raw[0][:1]
    out = lm.generate_until([_Req(p, {"until": [stop]}) for p in prompts], disable_tqdm=True)
    assert out[0] == raw[0][: raw[0].index(stop)]
    assert all(stop not in o for o in out)
    chat = lm.apply_chat_template([{"role": "user", "content": "hi"}])
    assert chat.endswith("<|im_start|>assistant\n")
    with pytest.raises(ValueError, match=r"unknown fast_dllm_v2 model_args key 'thresh'; did you mean 'threshold'\?"):
        FastDLLMv2(model=tiny_loaded, thresh=0.5)
    with pytest.raises(ValueError, match="sub_block_size"):
        FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=3)


def test_max_new_tokens_task_uses_each_requests_own_length(tiny_loaded):
    from fastdllm_core.evaluation.lm_model import LM_EVAL_DEFAULT_MAX_GEN_TOKS, FastDLLMv2

    # "task": the request's max_gen_toks (lm-eval's alias priority), else lm-eval's default 256
    lm = FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=2, max_new_tokens="task", batch_size=2)
    assert lm.task_lengths and lm.model_info["max_new_tokens"] == "task"
    out = lm.generate_until([_Req("abc", {"until": [], "max_gen_toks": 6}),
                             _Req("x", {"until": [], "max_gen_toks": 6})],
                            disable_tqdm=True)
    assert len(out) == 2 and lm.used_max_new_tokens == {6} and lm.requested_max_gen_toks == {6}
    assert all(n <= 6 for st in lm.gen_stats for n in st.generated_tokens)
    seen = []
    lm.generate_texts = lambda prompts, max_new_tokens=None, **kw: seen.append(max_new_tokens) or [""] * len(prompts)
    lm.generate_until([_Req("abc", {"until": []}), _Req("d", {"until": [], "max_new_tokens": 9})], disable_tqdm=True)
    assert sorted(seen) == [9, LM_EVAL_DEFAULT_MAX_GEN_TOKS] and LM_EVAL_DEFAULT_MAX_GEN_TOKS == 256
    # an integer: used for every request, a task's max_gen_toks only recorded
    fixed = FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=2, max_new_tokens=5, batch_size=2)
    fixed.generate_until([_Req("abc", {"until": [], "max_gen_toks": 1280})], disable_tqdm=True)
    assert fixed.used_max_new_tokens == {5} and fixed.requested_max_gen_toks == {1280}
    with pytest.raises(ValueError):
        FastDLLMv2(model=tiny_loaded, max_new_tokens="many")


@pytest.mark.slow(reason="lm-eval's environment report runs pip (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("task,want,source", [("synth_arith", 256, "task: lm-eval default"),
                                              ("synth_code", 768, "task: EvalPlus default")])
def test_run_task_records_the_length_used(tiny_loaded, tmp_path, monkeypatch, task, want, source):
    from fastdllm_core import synthetic
    from fastdllm_core.decoding import DecodeConfig
    from fastdllm_core.evaluation import run_task
    from fastdllm_core.evaluation.lm_model import FastDLLMv2
    from fastdllm_core.evaluation.runner import EVALPLUS_MAX_NEW_TOKENS

    assert EVALPLUS_MAX_NEW_TOKENS == 768  # evalplus.provider.base.DecoderBase's default
    suite = synthetic.write_suite(tmp_path / "suite", n_pretrain=0, n_sft=4, n_adapt=0, n_eval=2)
    calls = []

    def fake(self, prompts, disable_tqdm=False, desc="generate", max_new_tokens=None, names=None,
             encoded=None, on_done=None):
        n = max_new_tokens if max_new_tokens is not None else self.decode.max_new_tokens
        calls.append(n)
        self.used_max_new_tokens.add(n)
        for i in range(len(prompts)):  # each answer handed over as its batch ends, as the real one does
            if on_done is not None:
                on_done(i, "")
        return ["" for _ in prompts]

    monkeypatch.setattr(FastDLLMv2, "generate_texts", fake)
    data = suite["synth_arith_test"] if task == "synth_arith" else suite["synth_code_test"]
    dec = DecodeConfig(block_size=4, sub_block_size=2, max_new_tokens=16)
    kw = dict(decode=dec, limit=1, data_path=data, code_opts={"min_time_limit": 0.2})
    rows = run_task(tiny_loaded, task, out_dir=tmp_path / "task", max_new_tokens="task", **kw)
    assert set(calls) == {want} and {r["max_new_tokens"] for r in rows} == {want}
    assert {r["max_new_tokens_source"] for r in rows} == {source}
    calls.clear()
    rows = run_task(tiny_loaded, task, out_dir=tmp_path / "fixed", **kw)  # the decode config's length
    assert set(calls) == {16} and {r["max_new_tokens"] for r in rows} == {16}
    assert {r["max_new_tokens_source"] for r in rows} == {"fixed (config)"}
    with pytest.raises(ValueError, match="max_new_tokens"):
        run_task(tiny_loaded, task, out_dir=tmp_path / "bad", max_new_tokens=0, **kw)


def test_humaneval_prefers_humaneval_plus_and_falls_back_to_the_original(tmp_path, monkeypatch):
    """Issue 24, fault 6: with no data_path and no $HUMANEVAL_OVERRIDE_PATH, HumanEval is HumanEval+ (EvalPlus'
    download, plus tests scored) whenever that works, and the original HumanEval (base tests only, the reason in
    the source note) only when it does not; with neither, the download's reason is the n/a reason."""
    from fastdllm_core.evaluation import TaskUnavailable

    plus = tmp_path / "HumanEvalPlus.jsonl"
    row = {"task_id": "HumanEval/0", "prompt": "def f(x):\n", "canonical_solution": "    return x\n",
           "entry_point": "f", "base_input": [[1]], "plus_input": [[2]], "atol": 0, "contract": "", "test": ""}
    plus.write_text(json.dumps(row) + "\n")
    original = tmp_path / "HumanEval.jsonl"
    original.write_text(json.dumps({k: row[k] for k in ("task_id", "prompt", "canonical_solution", "entry_point")}
                                   | {"test": "def check(candidate):\n    assert candidate(1) == 1\n"}) + "\n")
    monkeypatch.delenv("HUMANEVAL_OVERRIDE_PATH", raising=False)
    monkeypatch.setenv("FASTDLLM_HUMANEVAL_PATH", str(original))
    monkeypatch.setattr(codeeval, "_evalplus_download", lambda task, env: (plus, True, f"EvalPlus download {plus}"))
    assert codeeval.resolve_dataset("humaneval", None, tmp_path / "w", check_only=True) == (
        plus, True, f"EvalPlus download {plus}")

    def unavailable(task, env):
        raise TaskUnavailable("humaneval: offline and no local dataset; set HUMANEVAL_OVERRIDE_PATH")

    monkeypatch.setattr(codeeval, "_evalplus_download", unavailable)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    p, has_plus, note = codeeval.resolve_dataset("humaneval", None, tmp_path / "w", check_only=True)
    assert p == original and not has_plus and "original HumanEval" in note and "offline" in note
    monkeypatch.setenv("FASTDLLM_HUMANEVAL_PATH", str(tmp_path / "absent.jsonl"))
    with pytest.raises(TaskUnavailable, match="HUMANEVAL_OVERRIDE_PATH"):
        codeeval.resolve_dataset("humaneval", None, tmp_path / "w", check_only=True)
