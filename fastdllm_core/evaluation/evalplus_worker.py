"""Out-of-process EvalPlus scoring (``python -m fastdllm_core.evaluation.evalplus_worker ...``).

The harness never executes generated code in its own process: :mod:`.codeeval` starts this module as a
subprocess with ``HUMANEVAL_OVERRIDE_PATH`` / ``MBPP_OVERRIDE_PATH`` (read by EvalPlus at import time),
``EVALPLUS_MAX_MEMORY_BYTES`` and ``EVALPLUS_TIMEOUT_PER_TASK`` set, under an overall wall-clock timeout.
EvalPlus' ``check_correctness`` then runs every solution in a further child process with its per-test time
limits (``max(min_time_limit, gt_time_limit_factor * ground-truth time)``) and the memory limit.

Sub-commands:

* ``score --dataset humaneval|mbpp --samples S.jsonl --out R.json [--base-only] [--min-time-limit F]
  [--gt-time-limit-factor F] [--parallel N]``: statuses per sample (base and plus), in sample order.
* ``convert-humaneval --src HumanEval.jsonl.gz --out D.jsonl``: the original HumanEval file (no EvalPlus
  inputs) to EvalPlus form for base-only scoring.  ``base_input`` is recorded by running each problem's own
  ``check`` function against a wrapper of its canonical solution that records the arguments (``random`` seeded
  with 0, so the loops of random inputs some tests use are fixed); ``plus_input`` is empty.
"""
from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import random
import sys


def _read_jsonl(path: str) -> list[dict]:
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _score(args) -> int:
    from concurrent.futures import ProcessPoolExecutor

    from evalplus.eval import PASS
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS
    from evalplus.evaluate import check_correctness, get_groundtruth

    if args.dataset == "humaneval":
        from evalplus.data import get_human_eval_plus as get_problems
        from evalplus.data import get_human_eval_plus_hash as get_hash
        not_none = []
    else:
        from evalplus.data import get_mbpp_plus as get_problems
        from evalplus.data import get_mbpp_plus_hash as get_hash
        not_none = MBPP_OUTPUT_NOT_NONE_TASKS
    samples = _read_jsonl(args.samples)
    problems = get_problems(err_incomplete=False)
    missing = sorted({s["task_id"] for s in samples} - set(problems))
    if missing:
        print(f"samples name task ids not in the dataset: {missing[:5]}", file=sys.stderr)
        return 2
    ids = sorted({s["task_id"] for s in samples})
    subset = {t: problems[t] for t in ids}
    # ground truth is cached by EvalPlus under this hash: include the subset so a --limit run never collides
    key = get_hash() + "-" + hashlib.md5("\n".join(ids).encode()).hexdigest()[:12]
    expected = get_groundtruth(subset, key, not_none)
    jobs = [(args.dataset, i, subset[s["task_id"]], s["solution"], expected[s["task_id"]], args.base_only, True,
             None, args.min_time_limit, args.gt_time_limit_factor) for i, s in enumerate(samples)]
    if args.parallel > 1:
        with ProcessPoolExecutor(max_workers=args.parallel) as ex:
            results = list(ex.map(check_correctness, *zip(*jobs)))
    else:
        results = [check_correctness(*j) for j in jobs]
    out = []
    for s, r in zip(samples, results):
        base = r["base"][0]
        plus = None if args.base_only else r["plus"][0]
        out.append({"task_id": s["task_id"], "base_status": base, "plus_status": plus,
                    "base_pass": base == PASS, "plus_pass": None if args.base_only else (base == plus == PASS)})
    with open(args.out, "w") as fh:
        json.dump({"dataset": args.dataset, "base_only": args.base_only, "results": out}, fh)
    return 0


def _convert_humaneval(args) -> int:
    import signal

    rows = []
    for prob in _read_jsonl(args.src):
        calls = []
        ns: dict = {}
        exec(prob["prompt"] + prob["canonical_solution"], ns)  # noqa: S102 - the dataset's own reference code
        fn = ns[prob["entry_point"]]

        def recorder(*a, _fn=fn):
            calls.append(copy.deepcopy(list(a)))
            return _fn(*a)

        tns = dict(ns)
        exec(prob["test"], tns)  # noqa: S102
        random.seed(0)
        signal.alarm(20)
        try:
            tns["check"](recorder)
        finally:
            signal.alarm(0)
        if not calls:
            print(f"{prob['task_id']}: its test never called the function", file=sys.stderr)
            return 2
        rows.append({"task_id": prob["task_id"], "prompt": prob["prompt"],
                     "canonical_solution": prob["canonical_solution"], "entry_point": prob["entry_point"],
                     "test": prob["test"], "contract": "", "base_input": calls, "plus_input": [],
                     # EvalPlus checks find_zero by |poly(x)| <= atol; 1e-4 is the original HumanEval test's tolerance
                     "atol": 1e-4 if prob["entry_point"] == "find_zero" else 0})
    with open(args.out, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m fastdllm_core.evaluation.evalplus_worker")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("--dataset", choices=["humaneval", "mbpp"], required=True)
    s.add_argument("--samples", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--base-only", action="store_true")
    s.add_argument("--min-time-limit", type=float, default=1.0)
    s.add_argument("--gt-time-limit-factor", type=float, default=4.0)
    s.add_argument("--parallel", type=int, default=1)
    c = sub.add_parser("convert-humaneval")
    c.add_argument("--src", required=True)
    c.add_argument("--out", required=True)
    args = p.parse_args(argv)
    return _score(args) if args.cmd == "score" else _convert_humaneval(args)


if __name__ == "__main__":
    sys.exit(main())
