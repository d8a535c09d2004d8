"""Unit tests of the evaluation package: synthetic suite, scorers, loglikelihood method, bad input."""
from __future__ import annotations

import gzip
import json
import math

import pytest
import torch

from fastdllm_core.evaluation import TASKS, TaskUnavailable, run_task
from fastdllm_core.evaluation import codeeval, synthetic


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_suite_is_deterministic_and_disjoint(tmp_path):
    a = synthetic.write_suite(tmp_path / "a", seed=3, n_train=300, n_eval=20)
    b = synthetic.write_suite(tmp_path / "b", seed=3, n_train=300, n_eval=20)
    c = synthetic.write_suite(tmp_path / "c", seed=4, n_train=300, n_eval=20)
    for k in a:
        assert open(a[k], "rb").read() == open(b[k], "rb").read(), k
    assert open(a["arith_test"]).read() != open(c["arith_test"]).read()
    test_q = [json.loads(line)["question"] for line in open(a["arith_test"])]
    train_user = [json.loads(line)["messages"][0]["content"] for line in open(a["arith_train"])]
    assert len(test_q) == 20 and len(train_user) == 300
    assert not {synthetic.ARITH_PROMPT.format(question=q) for q in test_q} & set(train_user)
    code_test = [json.loads(line) for line in gzip.open(a["code_test"], "rt")]
    code_train = [json.loads(line)["messages"][0]["content"] for line in open(a["code_train"])]
    assert not {r["prompt"] for r in code_test} & set(code_train)
    for r in code_test:
        assert {"task_id", "prompt", "canonical_solution", "entry_point", "test", "base_input", "plus_input",
                "atol"} <= set(r) and r["plus_input"]
        ns: dict = {}
        exec(r["prompt"] + r["canonical_solution"] + r["test"], ns)  # the suite's own code
        ns["check"](ns[r["entry_point"]])


def test_suite_sizes_for_tiny_models(tmp_path):
    p = synthetic.write_suite(tmp_path, n_train=200, n_eval=10)
    for line in open(p["arith_train"]):
        m = json.loads(line)["messages"]
        assert len(m[0]["content"]) < 120 and len(m[1]["content"]) < 60
        assert m[1]["content"].split("#### ")[-1].isdigit()
    for line in open(p["code_train"]):
        m = json.loads(line)["messages"]
        assert len(m[0]["content"]) < 120 and len(m[1]["content"]) < 70 and m[1]["content"].startswith("def ")
    steps = [json.loads(line)["steps"] for line in open(p["arith_test"])]
    assert 1 in steps and 2 in steps  # one- and multi-step items


def test_write_suite_bad_input(tmp_path):
    with pytest.raises(ValueError, match="n_eval"):
        synthetic.write_suite(tmp_path, n_eval=10_000)
    with pytest.raises(ValueError, match="n_train"):
        synthetic.write_suite(tmp_path, n_train=0)


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
    p = synthetic.write_suite(tmp_path, n_train=10, n_eval=5)
    rows = codeeval.read_jsonl(p["code_test"])
    return p["code_test"], rows[0]


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
    assert set(TASKS) == {"synth_arith", "synth_code", "gsm8k", "humaneval", "mbpp", "minerva_math", "ifeval",
                          "mmlu", "gpqa"}


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
    from fastdllm_core.model import load_model
    from fastdllm_core.tiny import write_tiny_checkpoint

    d = write_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "ck", seed=1)
    return load_model(str(d), dtype="float64")


class _Req:
    def __init__(self, *args):
        self.args = args


def test_loglikelihood_first_token_method(tiny_loaded):
    from fastdllm_core.evaluation.lm_model import FastDLLMv2
    from fastdllm_core.masks import attention_kwargs, inference_spec

    lm = FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=2)
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
    lm1 = FastDLLMv2(model=tiny_loaded, block_size=1, sub_block_size=1)
    (s1, _), = lm1.loglikelihood([_Req(ctx, cont)], disable_tqdm=True)
    causal = torch.log_softmax(m(input_ids=torch.tensor([c_ids]), use_cache=False).logits[0, -1], -1)
    assert math.isclose(s1, causal[k_ids[0]].item(), rel_tol=1e-6)
    # chain scores every continuation token; ar uses the causal log-likelihood of the whole continuation
    lmc = FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=2, loglikelihood_method="chain")
    (sc, _), = lmc.loglikelihood([_Req(ctx, cont)], disable_tqdm=True)
    assert sc < score
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
    with pytest.raises(ValueError, match="unknown fast_dllm_v2 model_args"):
        FastDLLMv2(model=tiny_loaded, thresh=0.5)
    with pytest.raises(ValueError, match="sub_block_size"):
        FastDLLMv2(model=tiny_loaded, block_size=4, sub_block_size=3)
