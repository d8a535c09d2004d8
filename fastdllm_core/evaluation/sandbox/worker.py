"""Out-of-process EvalPlus scoring (``python -m fastdllm_core.evaluation.sandbox.worker ...``).

The harness never executes generated code in its own process: :mod:`fastdllm_core.evaluation.codeeval` starts
this module as a subprocess with ``HUMANEVAL_OVERRIDE_PATH`` / ``MBPP_OVERRIDE_PATH`` (read by EvalPlus at import
time), ``EVALPLUS_MAX_MEMORY_BYTES`` and ``EVALPLUS_TIMEOUT_PER_TASK`` set, under an overall wall-clock timeout.
Every solution then runs (base and plus separately, as EvalPlus' ``check_correctness`` does) in a sandboxed
child process (:func:`.check.untrusted_check`: EvalPlus' guard, time limits
``max(min_time_limit, gt_time_limit_factor * ground-truth time)`` and memory limit, inside an OS sandbox); the
child sends back its outputs (exact built-in types only) and this process compares them with the expected ones
(:mod:`.verdict`, EvalPlus' rules).
The sandbox in force is printed to stderr and recorded in the output (``sandbox``).

Sub-commands:

* ``score --dataset humaneval|mbpp --samples S.jsonl --out R.json [--base-only] [--min-time-limit F]
  [--gt-time-limit-factor F] [--parallel N] [--verdict-cache DIR]``: statuses per sample (base and plus), in
  sample order; with ``--verdict-cache`` (full sandbox only) a check made before is reused
  (:class:`VerdictCache`).  EvalPlus 0.3.1 cannot pass HumanEval/32 (``find_zero``): its ``_poly`` oracle
  never records a passed input; the scorer's copy of EvalPlus' checks records it (:class:`.verdict.Judge`).
* ``convert-humaneval --src HumanEval.jsonl.gz --out D.jsonl``: the original HumanEval file (no EvalPlus
  inputs) to EvalPlus form for base-only scoring.  ``base_input`` is recorded by running each problem's own
  ``check`` function against a wrapper of its canonical solution that records the arguments (``random`` seeded
  with 0, so the loops of random inputs some tests use are fixed); ``plus_input`` is empty.
"""
from __future__ import annotations

import argparse
import copy
import fcntl
import gzip
import hashlib
import json
import os
import random
import sys


def _read_jsonl(path: str) -> list[dict]:
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _check(job) -> dict:
    """One solution: base (and plus) statuses, each run in its own sandboxed child (:mod:`.check`)."""
    from .check import untrusted_check
    from .verdict import secrets_of_one_check

    dataset, problem, solution, expected, base_only, min_time_limit, gt_factor = job
    out = {"setup_failures": 0}
    flags = -1
    for split in ("base",) if base_only else ("base", "plus"):
        # a process-pool worker holds its own (unpickled) copies of the problem and its expected outputs
        with secrets_of_one_check((problem, 0), (expected, 1)):
            stat, details, rep = untrusted_check(dataset, solution, problem[f"{split}_input"],
                                                 problem["entry_point"], expected[split], problem["atol"],
                                                 expected[f"{split}_time"], fast_check=True,
                                                 min_time_limit=min_time_limit, gt_time_limit_factor=gt_factor)
        out[split] = stat
        flags &= rep["flags"]
        out["setup_failures"] += bool(rep["setup_error"])  # no verdict: the sandbox, not the solution, failed
    out["flags"] = flags
    return out


VERDICT_CACHE_VERSION = 1
CACHED_STATUSES = ("pass", "fail")  # a timeout, or a check whose sandbox failed to set up, is always run again


def _sources_digest() -> str:
    """What a verdict depends on besides its inputs: this worker, the sandbox and the judge (every module of this
    package, by name and contents), and EvalPlus."""
    import evalplus

    here = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256(str(getattr(evalplus, "__version__", "?")).encode())
    for name in sorted(n for n in os.listdir(here) if n.endswith(".py")):
        h.update(name.encode())
        with open(os.path.join(here, name), "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()


class VerdictCache:
    """Verdicts of earlier checks, one JSON file per check under ``root`` (written atomically), keyed by the
    SHA-256 of everything a verdict depends on: the problem set's EvalPlus hash (its file contents), the task, the
    solution's text, base-only, the time-limit settings, the memory limit, and the sources of this worker, the
    sandbox and the judge (plus EvalPlus' version).  Only ``pass``/``fail`` verdicts of checks that ran in the full
    sandbox are kept (the caller enables the cache only then); a timeout is always run again.  The DAG's fine-tunes
    write the same program for the same problem many times (the embedded default scores 9088 solutions, 1672 of
    them distinct), so most of a run's checks are reused verdicts."""

    def __init__(self, root: str, args, data_hash: str):
        self.root = root
        self.base = {"v": VERDICT_CACHE_VERSION, "dataset": args.dataset, "data": data_hash,
                     "base_only": bool(args.base_only), "min_time_limit": float(args.min_time_limit),
                     "gt_time_limit_factor": float(args.gt_time_limit_factor),
                     "memory": os.environ.get("EVALPLUS_MAX_MEMORY_BYTES", ""),
                     "timeout_per_task": os.environ.get("EVALPLUS_TIMEOUT_PER_TASK", ""), "code": _sources_digest()}

    def _keepable(self, r: dict) -> bool:
        """A verdict of a check that ran in the full sandbox (no set-up failure): pass or fail, never a timeout."""
        return r.get("setup_failures") == 0 and r.get("base") in CACHED_STATUSES and (
            self.base["base_only"] or r.get("plus") in CACHED_STATUSES)

    def _path(self, sample: dict) -> str:
        key = hashlib.sha256(json.dumps({**self.base, "task_id": sample["task_id"], "solution": sample["solution"]},
                                        sort_keys=True).encode()).hexdigest()
        return os.path.join(self.root, key[:2], key + ".json")

    def get(self, sample: dict) -> dict | None:
        try:
            with open(self._path(sample)) as fh:
                r = json.load(fh)
        except (OSError, ValueError):
            return None
        return r if self._keepable(r) else None

    def put(self, sample: dict, result: dict) -> None:
        if not self._keepable(result):
            return
        path = self._path(sample)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            json.dump(result, fh)
        os.replace(tmp, path)


def _dataset_api(dataset: str):
    """(problems loader, dataset hash, MBPP tasks whose output only needs to be not None) of EvalPlus."""
    from evalplus.eval._special_oracle import MBPP_OUTPUT_NOT_NONE_TASKS

    if dataset == "humaneval":
        from evalplus.data import get_human_eval_plus as get_problems
        from evalplus.data import get_human_eval_plus_hash as get_hash
        return get_problems, get_hash, []
    from evalplus.data import get_mbpp_plus as get_problems
    from evalplus.data import get_mbpp_plus_hash as get_hash
    return get_problems, get_hash, MBPP_OUTPUT_NOT_NONE_TASKS


def _groundtruth(subset: dict, ids: list[str], get_hash, not_none) -> dict:
    """EvalPlus' expected outputs of ``subset``, computed once per key (cached by EvalPlus)."""
    from evalplus.evaluate import CACHE_DIR, get_groundtruth

    # ground truth is cached by EvalPlus under this hash: include the subset so a --limit run never collides
    key = get_hash() + "-" + hashlib.md5("\n".join(ids).encode()).hexdigest()[:12]
    # EvalPlus writes its cache file in place (open "wb", then pickle) and loads it whenever it exists: a second
    # scoring starting meanwhile (the DAG's parallel evaluation jobs) would load a truncated file. One at a time
    # per key: the others wait here and then load the complete file.
    os.makedirs(CACHE_DIR, exist_ok=True)
    with open(os.path.join(CACHE_DIR, f"{key}.fastdllm.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return get_groundtruth(subset, key, not_none)


def _probe_sandbox(sandbox) -> dict | None:
    """The sandbox this machine gives (logged, a warning when weaker than the full set); None when none works."""
    try:
        probe = sandbox.probe_with_fallback()  # a mode that cannot be set up falls back to a weaker one, logged
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    print(f"sandbox for model-written code: {probe['description']}", file=sys.stderr)
    if probe["fallback_from"] or not probe["full"]:
        print(f"WARNING: weaker sandbox than the full set (mode {probe['mode']}"
              f"{', after ' + probe['fallback_from'] + ' failed' if probe['fallback_from'] else ''}): "
              f"{probe['description']}; see docs/sandbox.md", file=sys.stderr)
    return probe


def _readable_data(dataset: str) -> list[str]:
    """The dataset file and EvalPlus' ground-truth cache when they lie beneath a directory that solutions may read
    (:func:`.kernel.read_roots`, e.g. a dataset kept inside the Python installation): not fenced then."""
    from evalplus.evaluate import CACHE_DIR

    from .kernel import read_roots

    dirs, _ = read_roots()
    paths = [os.environ.get("HUMANEVAL_OVERRIDE_PATH" if dataset == "humaneval" else "MBPP_OVERRIDE_PATH"), CACHE_DIR]
    real = [os.path.realpath(p) for p in paths if p]
    return [p for p in real if any(p == d or p.startswith(d.rstrip(os.sep) + os.sep) for d in dirs)]


def _sandbox_report(sandbox, results: list[dict], probe: dict, dataset: str) -> dict:
    """What the checks really ran with (warnings when less than probed, or when some could not set up)."""
    flags = -1
    for r in results:
        flags &= r["flags"]
    used = sandbox.describe(flags if results else probe["flags"], probe["landlock_abi"])
    if results and flags != probe["flags"]:
        print(f"WARNING: some solutions ran with less than the probed sandbox: {used} (missing: "
              f"{', '.join(sandbox.missing(flags)) or 'nothing of the full set'})", file=sys.stderr)
    setup_failures = sum(r["setup_failures"] for r in results)
    if setup_failures:
        print(f"WARNING: {setup_failures} check(s) could not set up their sandbox and were scored as not passing",
              file=sys.stderr)
    readable = _readable_data(dataset)
    if readable:
        print(f"WARNING: solutions could read {readable}: beneath the Python installation or a system library "
              f"directory that the sandbox leaves readable", file=sys.stderr)
    in_force = flags if results else probe["flags"]
    return {"description": used, "full": sandbox.is_full(in_force), "missing": sandbox.missing(in_force),
            "mode": probe["mode"], "landlock_abi": probe["landlock_abi"],
            "fallback_from": probe["fallback_from"], "setup_failures": setup_failures, "readable_data": readable}


def _run_checks(args, subset: dict, expected: dict, todo: list[tuple[str, str]]) -> list[dict]:
    """:func:`_check` of every (task id, solution) of ``todo``, in order, run by a fresh process (sub-command
    ``checks``) that holds only these problems and their expected outputs, sent through its stdin.  This process
    has EvalPlus' dataset loader imported (with ``datasets``, pandas and pyarrow: about 150 MB resident), and every
    check forks the process it runs from twice: from a small process a check took 32 ms instead of 78 ms."""
    import pickle
    import subprocess

    spec = {"dataset": args.dataset, "subset": subset, "expected": {t: expected[t] for t in subset}, "todo": todo,
            "base_only": args.base_only, "min_time_limit": args.min_time_limit,
            "gt_time_limit_factor": args.gt_time_limit_factor, "parallel": args.parallel}
    out = f"{args.out}.checks.json"
    r = subprocess.run([sys.executable, "-m", "fastdllm_core.evaluation.sandbox.worker", "checks", "--out", out],
                       input=pickle.dumps(spec))
    if r.returncode != 0 or not os.path.isfile(out):
        raise RuntimeError(f"the checks process ended with exit status {r.returncode} and no results")
    with open(out) as fh:
        got = json.load(fh)
    os.remove(out)
    return got


def _checks(args) -> int:
    """Sub-command ``checks``: the checks :func:`_run_checks` sends (a pickle on stdin), results (JSON) to --out."""
    import pickle
    import signal
    from concurrent.futures import ProcessPoolExecutor

    from . import verdict
    from .kernel import PR_SET_PDEATHSIG, _prctl

    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # ends with the scorer (killed at its time limit), its sandboxes too
    spec = pickle.loads(sys.stdin.buffer.read())
    subset, expected = spec["subset"], spec["expected"]
    # every sandboxed child clears these in its copy of memory before the solution runs (verdict.forget_secrets)
    verdict.keep_secret(subset, 1)
    verdict.keep_secret(expected, 2)
    jobs = [(spec["dataset"], subset[t], solution, expected[t], spec["base_only"], spec["min_time_limit"],
             spec["gt_time_limit_factor"]) for t, solution in spec["todo"]]
    if spec["parallel"] > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=spec["parallel"]) as ex:
            fresh = list(ex.map(_check, jobs))
    else:
        fresh = [_check(j) for j in jobs]
    with open(args.out + ".tmp", "w") as fh:
        json.dump(fresh, fh)
    os.replace(args.out + ".tmp", args.out)
    return 0


def _score(args) -> int:
    from evalplus.eval import PASS  # EvalPlus is loaded here once, not in every sandboxed child

    from .. import sandbox
    from . import verdict

    get_problems, get_hash, not_none = _dataset_api(args.dataset)
    samples = _read_jsonl(args.samples)
    problems = get_problems(err_incomplete=False)
    missing = sorted({s["task_id"] for s in samples} - set(problems))
    if missing:
        print(f"samples name task ids not in the dataset: {missing[:5]}", file=sys.stderr)
        return 2
    ids = sorted({s["task_id"] for s in samples})
    subset = {t: problems[t] for t in ids}
    expected = _groundtruth(subset, ids, get_hash, not_none)
    # the solutions run in children of the `checks` process (_run_checks), which registers its own copies; these
    # registrations keep any sandbox forked from here (the probe's) as clean (verdict.forget_secrets)
    verdict.keep_secret(problems, 1)
    verdict.keep_secret(subset, 1)
    verdict.keep_secret(expected, 2)
    probe = _probe_sandbox(sandbox)
    if probe is None:
        return 2
    # verdicts of identical (problem set, task, solution, limits) checks made before, by the full sandbox only
    cache = VerdictCache(args.verdict_cache, args, get_hash()) if args.verdict_cache and probe["full"] else None
    results = [cache.get(s) if cache else None for s in samples]
    todo = [i for i, r in enumerate(results) if r is None]
    fresh = _run_checks(args, {t: subset[t] for t in {samples[i]["task_id"] for i in todo}}, expected,
                        [(samples[i]["task_id"], samples[i]["solution"]) for i in todo]) if todo else []
    for i, r in zip(todo, fresh):
        results[i] = r
        if cache:
            cache.put(samples[i], r)
    out, ran = [], set(todo)
    for i, (s, r) in enumerate(zip(samples, results)):
        base = r["base"]
        plus = None if args.base_only else r["plus"]
        out.append({"task_id": s["task_id"], "base_status": base, "plus_status": plus,
                    "base_pass": base == PASS, "plus_pass": None if args.base_only else (base == plus == PASS),
                    "verdict_reused": i not in ran})
    sandbox_info = _sandbox_report(sandbox, results, probe, args.dataset)
    sandbox_info.update(checks_run=len(todo), verdicts_reused=len(samples) - len(todo))
    with open(args.out, "w") as fh:
        json.dump({"dataset": args.dataset, "base_only": args.base_only, "sandbox": sandbox_info, "results": out},
                  fh)
    return 0


def _convert_humaneval(args) -> int:
    import signal

    rows = []
    for prob in _read_jsonl(args.src):
        calls = []
        ns: dict = {}
        exec(prob["prompt"] + prob["canonical_solution"], ns)  # noqa: S102 - the dataset's own reference code
        fn = ns[prob["entry_point"]]

        def recorder(*a, _fn=fn, _calls=calls):
            _calls.append(copy.deepcopy(list(a)))
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
    p = argparse.ArgumentParser(prog="python -m fastdllm_core.evaluation.sandbox.worker")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("score")
    s.add_argument("--dataset", choices=["humaneval", "mbpp"], required=True)
    s.add_argument("--samples", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--base-only", action="store_true")
    s.add_argument("--min-time-limit", type=float, default=1.0)
    s.add_argument("--gt-time-limit-factor", type=float, default=4.0)
    s.add_argument("--parallel", type=int, default=1)
    s.add_argument("--verdict-cache", default=None, help="directory of earlier verdicts (VerdictCache)")
    k = sub.add_parser("checks", help="internal: the checks of a score run, sent on stdin")
    k.add_argument("--out", required=True)
    c = sub.add_parser("convert-humaneval")
    c.add_argument("--src", required=True)
    c.add_argument("--out", required=True)
    args = p.parse_args(argv)
    return {"score": _score, "checks": _checks, "convert-humaneval": _convert_humaneval}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
