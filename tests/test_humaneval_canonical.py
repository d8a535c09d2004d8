"""Scoring that can be checked: the 164 canonical HumanEval solutions must all pass (base tests of the original
HumanEval, converted by the EvalPlus worker), and a trivially wrong solution must fail every problem.

Regression test for HumanEval/32 (``find_zero``): EvalPlus 0.3.1 checks it with its ``_poly`` oracle but never
records the passed inputs, so no program could pass it (163/164 before the fix)."""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest

from fastdllm_core.evaluation import codeeval, shared_dir

SRC = Path(os.environ.get("FASTDLLM_HUMANEVAL_PATH") or shared_dir() / "data/humaneval/HumanEval.jsonl.gz")
pytestmark = pytest.mark.skipif(not SRC.is_file(), reason=f"original HumanEval not found at {SRC}")


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    work = tmp_path_factory.mktemp("he")
    out, has_plus, _ = codeeval.resolve_dataset("humaneval", str(SRC), work)
    assert not has_plus
    return out, codeeval.read_jsonl(out), work


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_all_canonical_solutions_pass_and_a_wrong_one_fails_everywhere(converted):
    out, rows, work = converted
    assert len(rows) == 164
    n_cpu = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    good = [{"task_id": r["task_id"], "solution": r["prompt"] + r["canonical_solution"]} for r in rows]
    # a fresh object() equals no expected output, has no type in common with it and is no root of any polynomial
    bad = [{"task_id": r["task_id"], "solution": f"def {r['entry_point']}(*args, **kwargs):\n    return object()\n"}
           for r in rows]
    res = codeeval.score(out, "humaneval", good + bad, work, base_only=True, min_time_limit=1.0,
                         parallel=max(2, min(4, n_cpu)))
    good_res, bad_res = res[:164], res[164:]
    failed = [(r["task_id"], r["base_status"]) for r in good_res if not r["base_pass"]]
    assert failed == [], f"canonical solutions scored as not passing: {failed}"
    assert sum(r["base_pass"] for r in good_res) == 164
    assert next(r for r in good_res if r["task_id"] == "HumanEval/32")["base_status"] == "pass"
    assert sum(r["base_pass"] for r in bad_res) == 0
    assert all(r["base_status"] == "fail" for r in bad_res)


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_find_zero_oracle_is_the_tolerance_of_the_original_test(converted):
    _, rows, _ = converted
    r = next(r for r in rows if r["task_id"] == "HumanEval/32")
    assert r["entry_point"] == "find_zero" and r["atol"] == 1e-4 and len(r["base_input"]) == 100
    assert [json.loads(line) for line in gzip.open(SRC, "rt")][32]["task_id"] == "HumanEval/32"
