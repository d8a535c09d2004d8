"""The synthetic suite: deterministic, test problems never trained on, answers that are right by construction."""
from __future__ import annotations

import re

import pytest

from fastdllm_core import synthetic as S
from fastdllm_core.synthetic import arith, instruct, lm_eval_tasks


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return S.write_suite(tmp_path_factory.mktemp("suite"), seed=3, n_eval=256, n_pretrain=60, n_sft=40, n_adapt=40)


def _jsonl(path):
    return S.read_rows(path)


def test_every_task_has_256_test_problems_and_at_least_as_many_for_training():
    for task in S.TASKS.values():
        test, train = S.split_keys(task, 256, seed=0)
        n_train = sum(len(v) for v in train.values())
        assert len(test) == len(set(test)) == 256, task.name
        assert n_train >= 256 and not set(test) & {k for ks in train.values() for k in ks}, task.name
        assert {S._kind(k) for k in test} == set(train), f"{task.name}: the test set covers every problem kind"


def test_deterministic_for_seed(tmp_path, suite):
    again = S.write_suite(tmp_path / "b", seed=3, n_eval=256, n_pretrain=60, n_sft=40, n_adapt=40)
    other = S.write_suite(tmp_path / "c", seed=4, n_eval=256, n_pretrain=60, n_sft=40, n_adapt=40)
    for k in suite:
        assert open(suite[k], "rb").read() == open(again[k], "rb").read(), k
    assert open(suite["synth_arith_test"]).read() != open(other["synth_arith_test"]).read()


def test_test_prompts_never_appear_in_training(suite):
    train_users, train_text = set(), ""
    for key in ("sft", "adapt"):
        for r in _jsonl(suite[key]):
            train_users |= {m["content"] for m in r["messages"] if m["role"] == "user"}
    train_text = "\n".join(r["text"] for r in _jsonl(suite["pretrain"]))
    for name in S.TASKS:
        prompts = S.user_prompts(name, suite[f"{name}_test"])
        assert len(prompts) == 256
        assert not set(prompts) & train_users, name
        if name not in ("synth_mc",):  # an MC question text recurs with other options: compare whole prompts
            assert not any(p in train_text for p in prompts[:64]), name


def test_training_files_have_every_task_and_some_conversations(suite):
    rows = _jsonl(suite["sft"])
    assert len(rows) == 40 * len(S.TASKS)
    turns = [len(r["messages"]) // 2 for r in rows]
    assert set(turns) <= {1, 2, 3} and any(t > 1 for t in turns)
    assert all(r["messages"][-1]["role"] == "assistant" for r in rows)
    assert sum(1 for r in _jsonl(suite["pretrain"]) if " is a fruit." in r["text"] or " is an animal." in r["text"])


def _running_total(text: str) -> tuple[list[int], list[int]]:
    """(every value the worked steps compute, the values they write) of ``a+b=r1, then -c gives r2, then +d.``"""
    m = re.match(r"(\d+)([-+*])(\d+)(?:=(\d+))?((?:, then [-+*]\d+(?: gives \d+)?)*)\.", text)
    assert m, text
    cur = eval(f"{m[1]}{m[2]}{m[3]}")
    computed, written = [cur], [int(m[4])] if m[4] else []
    for op, y, r in re.findall(r", then ([-+*])(\d+)(?: gives (\d+))?", m[5]):
        cur = eval(f"{cur}{op}{y}")
        computed.append(cur)
        written += [int(r)] if r else []
    return computed, written


def test_arithmetic_answers_are_right_and_follow_gsm8k_and_math_forms(suite):
    for r in _jsonl(suite["synth_arith_test"]):
        computed, written = _running_total(r["answer"])
        assert len(computed) == r["steps"] >= 2
        assert all(0 <= v <= arith.ARITH_MAX for v in computed)
        # every intermediate value is written once, in order; the last one only after ####
        assert written == computed[:-1]
        assert r["answer"].endswith(f". #### {computed[-1]}")
        assert r["answer"].split("+")[0].split("-")[0].split("*")[0] in r["question"]  # copied from the question
    for r in _jsonl(suite["synth_math_test"]):
        expr = r["problem"].removeprefix("Compute ").rstrip(".")
        assert eval(expr) == int(r["answer"])
        computed, written = _running_total(r["solution"])
        assert computed[-1] == int(r["answer"]) and written == computed[:-1] and len(computed) == 3
        assert r["solution"].endswith(f". The answer is \\boxed{{{r['answer']}}}.")
        assert lm_eval_tasks.math_process_results(r, [r["solution"]]) == {"exact_match": 1}
        assert lm_eval_tasks.math_process_results(r, ["The answer is \\boxed{999}."]) == {"exact_match": 0}


def test_code_items_pass_their_own_tests(suite):
    for key, first_id in (("synth_code_test", 0), ("synth_mbpp_test", 10000)):
        rows = _jsonl(suite[key])
        # EvalPlus special-cases MBPP task numbers below 1000: the stand-in's numbers start above them
        assert int(rows[0]["task_id"].split("/")[-1]) == first_id
        for r in rows[:80]:
            assert {"prompt", "canonical_solution", "entry_point", "test", "base_input", "plus_input"} <= set(r)
            code = r["canonical_solution"] if key == "synth_mbpp_test" else r["prompt"] + r["canonical_solution"]
            ns: dict = {}
            exec(code + "\n" + r["test"], ns)  # the suite's own trusted code
            ns["check"](ns[r["entry_point"]])
            assert r["entry_point"] in r["prompt"]


def test_multiple_choice_answers_point_at_the_right_option(suite):
    rows = _jsonl(suite["synth_mc_test"])
    cats = S.choice.CATEGORIES
    for r in rows:
        assert len(r["choices"]) == len(set(r["choices"])) == 4
        right = r["choices"][r["answer"]]
        if r["subject"] == "sum":
            a, b = map(int, re.findall(r"\d+", r["question"]))
            assert int(right) == a + b < 10
        else:
            cat = next(c for c in cats if S.choice._ARTICLE[c] in r["question"])
            assert right in cats[cat] and not set(r["choices"]) - {right} & set(cats[cat])
    cfg = lm_eval_tasks.config("synth_mc", suite["synth_mc_test"])
    assert cfg["output_type"] == "multiple_choice" and cfg["doc_to_choice"] == "{{choices}}"


def test_ifeval_checkers_accept_the_reference_and_reject_violations(suite):
    task = S.TASKS["synth_ifeval"]
    test, _ = S.split_keys(task, 256, seed=3)
    rows = _jsonl(suite["synth_ifeval_test"])
    for key, row in zip(test, rows):
        it = task.item(key, None)
        assert it["prompt"] == row["prompt"] and it["constraints"] == row["constraints"]
        res = lm_eval_tasks.ifeval_process_results(row, [it["response"]])
        assert res["prompt_level_strict_acc"] and all(res["inst_level_strict_acc"]), row["prompt"]
    c = [["numbers", [3, 4, 5]], ["format", "sep:commas", 3]]
    assert instruct.score(c, "3, 4, 5")["prompt_level_strict_acc"]
    assert instruct.score(c, "3 - 4 - 5")["inst_level_strict_acc"] == [True, False]
    assert instruct.score(c, "3, 5, 4")["inst_level_strict_acc"] == [False, True]
    b = [["numbers", [7, 7]], ["format", "brackets", 2]]
    assert (instruct.score(b, "[7] [7]")["prompt_level_strict_acc"]
            and not instruct.score(b, "[7] 7")["inst_level_strict_acc"][1])
    u = [["numbers", [9, 2, 1]], ["format", "bullets", 3]]
    assert instruct.score(u, "* 9\n* 2\n* 1")["prompt_level_strict_acc"]
    assert instruct.score(u, "* 9 * 2 * 1")["inst_level_strict_acc"] == [True, False]
    assert lm_eval_tasks.agg_inst_level([[True, False], [True]]) == pytest.approx(2 / 3)


def test_bad_input(tmp_path):
    with pytest.raises(ValueError, match="n_eval=100000 is too large for synth_arith"):
        S.write_suite(tmp_path, n_eval=100_000, tasks=["synth_arith"])
    with pytest.raises(ValueError, match="n_eval must be an integer >= 1"):
        S.write_suite(tmp_path, n_eval=0)
    with pytest.raises(ValueError, match="unknown synthetic task"):
        S.write_suite(tmp_path, tasks=["synth_nope"])
    with pytest.raises(ValueError, match="unknown synthetic task"):
        S.user_prompts("synth_nope", tmp_path / "x.jsonl")
