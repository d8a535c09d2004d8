"""The verdict is written by the scorer (issue 22 section 3): the sandboxed solution only sends back its outputs
(exact built-in types), and the scoring process compares them with EvalPlus' rules.  Before, EvalPlus' comparison
ran inside the solution's process, so an object equal to everything scored ``pass``.

Direct :func:`sandbox.untrusted_check` calls (one sandboxed child each, well under a second), plus one run through
the real scoring path (worker subprocess) and the read fence around the dataset and EvalPlus' ground truth."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fastdllm_core.evaluation import codeeval, sandbox
from fastdllm_core.evaluation.sandbox import verdict

ALWAYS_EQUAL = ("class Eq:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
                "        return False\n    __hash__ = object.__hash__\n")


def _check(code, inputs, expected, atol=0, entry_point="f", dataset="humaneval", fast_check=True):
    stat, details, _ = sandbox.untrusted_check(dataset, code, inputs, entry_point, expected, atol,
                                               [0.01] * len(inputs), fast_check=fast_check, min_time_limit=1.0)
    return stat, details


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_a_correct_solution_passes():
    assert _check("def f(x):\n    return [x, str(x), (x, None)]\n", [[1], [2]],
                  [[1, "1", (1, None)], [2, "2", (2, None)]]) == ("pass", [True, True])


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("ret", ["Eq()", "[Eq(), Eq()]", "(Eq(),)"])
def test_an_object_equal_to_everything_fails(ret):
    code = ALWAYS_EQUAL + f"def f(x):\n    return {ret}\n"
    assert _check(code, [[1], [2]], [[1, 2], [3, 4]])[0] == "fail"


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_an_int_subclass_whose_eq_lies_fails():
    code = "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n" \
           "def f(x):\n    return I(0)\n"
    assert _check(code, [[1]], [2])[0] == "fail"
    # an honest int subclass is no int either: exact types only
    assert _check("class I(int):\n    pass\ndef f(x):\n    return I(x + 1)\n", [[1]], [2])[0] == "fail"


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_a_str_subclass_fails():
    code = "class S(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n" \
           "def f(x):\n    return S('nope')\n"
    assert _check(code, [["a"]], ["a!"])[0] == "fail"
    assert _check("def f(x):\n    return x + '!'\n", [["a"]], ["a!"])[0] == "pass"


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_a_forged_status_page_fails():
    """The solution writes "success, every input passed" into its shared page: the scorer judges the records."""
    code = ("import gc, mmap, posix, struct\ndef f(x):\n    for o in gc.get_objects():\n"
            "        if type(o) is mmap.mmap:\n            struct.pack_into('ii', o, 0, 0, 1)\n"
            "            o[32] = 1\n    posix._exit(0)\n")
    stat, details = _check(code, [[1]], [2])
    assert stat == "fail" and details == [False]


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_an_output_too_large_to_send_back_fails():
    big = "def f(x):\n    return 'x' * (40 << 20)\n"
    assert _check(big, [[1]], ["x" * 8])[0] == "fail"
    assert _check("def f(x):\n    return 'x' * (1 << 20)\n", [[1]], ["x" * (1 << 20)])[0] == "pass"


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_float_answers_within_atol_pass_and_outside_fail():
    inputs, expected = [[1.0], [2.0]], [1 / 3, 2 / 3]
    # atol 0 with float outputs: EvalPlus' 1e-6 (np.allclose, rtol 1e-7)
    assert _check("def f(x):\n    return x / 3 + 5e-7\n", inputs, expected)[0] == "pass"
    assert _check("def f(x):\n    return x / 3 + 5e-6\n", inputs, expected)[0] == "fail"
    assert _check("def f(x):\n    return x / 3 + 5e-4\n", inputs, expected, atol=1e-3)[0] == "pass"
    assert _check("def f(x):\n    return x / 3 + 5e-3\n", inputs, expected, atol=1e-3)[0] == "fail"
    # EvalPlus' type check on the tolerance path: an int where a float is expected fails unless exactly equal
    assert _check("def f(x):\n    return 0\n", [[1.0]], [1e-9])[0] == "fail"
    # numpy scalars compare as EvalPlus compares them (decoded as numpy scalars, never the solution's object)
    assert _check("import numpy as np\ndef f(x):\n    return np.float64(x / 3)\n", inputs, expected)[0] == "pass"


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_find_zero_oracle():
    """HumanEval/32: |poly(xs, x)| <= atol on the scorer's own copy of the inputs."""
    code = ("def find_zero(xs):\n    lo, hi = -100.0, 100.0\n"
            "    p = lambda x: sum(c * x ** i for i, c in enumerate(xs))\n    for _ in range(200):\n"
            "        mid = (lo + hi) / 2\n"
            "        if (p(lo) > 0) == (p(mid) > 0):\n            lo = mid\n        else:\n            hi = mid\n"
            "    return lo\n")
    inputs = [[[1.0, 2.0]], [[-6.0, 11.0, -6.0, 1.0]]]
    expected = [-0.5, 1.0]
    assert _check(code, inputs, expected, atol=1e-4, entry_point="find_zero") == ("pass", [True, True])
    wrong = "def find_zero(xs):\n    return 0.3\n"
    assert _check(wrong, inputs, expected, atol=1e-4, entry_point="find_zero")[0] == "fail"
    cheat = ALWAYS_EQUAL + "def find_zero(xs):\n    xs[:] = [0.0]\n    return Eq()\n"
    assert _check(cheat, inputs, expected, atol=1e-4, entry_point="find_zero")[0] == "fail"


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_mbpp_special_oracles():
    # "not None" tasks: any non-None object (a re.Match, sent as an opaque marker) is True
    code = "import re\ndef check_str(s):\n    return re.match('a', s)\n"
    assert _check(code, [["abc"], ["xbc"]], [True, False], entry_point="check_str", dataset="mbpp")[0] == "pass"
    assert _check(code, [["xbc"]], [True], entry_point="check_str", dataset="mbpp")[0] == "fail"
    # set-equality tasks: order does not matter, but the elements must be real built-in values
    se = "similar_elements"
    assert _check(f"def {se}(a, b):\n    return [3, 2]\n", [[[1, 2, 3], [2, 3]]], [[2, 3]], entry_point=se,
                  dataset="mbpp")[0] == "pass"
    assert _check(ALWAYS_EQUAL + f"def {se}(a, b):\n    return [Eq(), Eq()]\n", [[[1, 2, 3], [2, 3]]], [[2, 3]],
                  entry_point=se, dataset="mbpp")[0] == "fail"


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_fast_check_stops_at_the_first_failure_and_errors_fail():
    slow_after_wrong = "import time\ndef f(x):\n    if x == 2:\n        time.sleep(30)\n    return x\n"
    stat, details = _check(slow_after_wrong, [[1], [2]], [2, 2])
    assert stat == "fail" and details == [False]  # the child was stopped, not left to run input 2
    assert _check("def f(x):\n    raise ValueError\n", [[1]], [1]) == ("fail", [False])
    stat, details = _check("def f(x):\n    return x\n", [[1], [5], [3]], [1, 2, 3], fast_check=False)
    assert stat == "fail" and details == [True, False, True]


@pytest.mark.slow(reason="the sandbox forks (seen by the spawn guard of tests/conftest.py)")
def test_collections_types_compare_by_contents_as_in_evalplus():
    """MBPP's freq_count reference returns a Counter: the real collections classes are sent as data and rebuilt."""
    counter = "import collections\ndef f(x):\n    return collections.Counter(x)\n"
    expected = [__import__("collections").Counter("abca")]
    assert _check(counter, [["abca"]], expected)[0] == "pass"
    assert _check("def f(x):\n    return {'a': 2, 'b': 1, 'c': 1}\n", [["abca"]], expected)[0] == "pass"
    sub = "import collections\nclass C(collections.Counter):\n    pass\ndef f(x):\n    return C(x)\n"
    assert _check(sub, [["abca"]], expected)[0] == "fail"


def test_the_codec_takes_exact_builtin_types_only():
    class I(int):
        pass

    for v in (None, True, -3, 10 ** 5000, 1.5, float("inf"), 1 - 2j, "a\udc80", b"\x00", [1, (2, {3})],
              {1: [frozenset({2})]}, set()):
        out = verdict.decode(verdict.encode(v))
        assert out == v and type(out) is type(v)
    for v in (I(3), [I(3)], {"k": I(3)}, object(), type):
        assert type(verdict.decode(verdict.encode(v))) is verdict.Opaque
    deep = []
    for _ in range(200):
        deep = [deep]
    assert type(verdict.decode(verdict.encode(deep))) is verdict.Opaque
    for bad in (b"not json", b'["X"]', b'["I", 3]', b'["L", [["I", "zz"]]]', b'["P", "object_", ["N"]]'):
        with pytest.raises((ValueError, TypeError)):
            verdict.decode(bad)


# ------------------------------------------------------------------------------------------------ end to end
EP = "add_one"


def _dataset(tmp_path: Path) -> Path:
    row = {"task_id": "Sandbox/0", "prompt": f"def {EP}(x):\n", "canonical_solution": "    return x + 1\n",
           "entry_point": EP, "base_input": [[1], [2]], "plus_input": [[3]], "atol": 0, "contract": "", "test": ""}
    p = tmp_path / "data" / "verdict_problems.jsonl"
    p.parent.mkdir()
    p.write_text(json.dumps(row) + "\n")
    return p


def _probe() -> dict:
    out = subprocess.run([sys.executable, "-m", "fastdllm_core.evaluation.sandbox"], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "FASTDLLM_SANDBOX": "auto"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_scoring_path_fails_always_equal_and_passes_a_correct_solution(tmp_path):
    sols = [{"task_id": "Sandbox/0", "solution": ALWAYS_EQUAL + f"def {EP}(x):\n    return Eq()\n"},
            {"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n    return x + 1\n"}]
    res = codeeval.score(_dataset(tmp_path), "humaneval", sols, tmp_path / "work", base_only=False,
                         min_time_limit=0.5)
    assert [(r["base_status"], r["plus_status"]) for r in res] == [("fail", "fail"), ("pass", "pass")]


def test_the_dataset_and_the_ground_truth_cannot_be_read(tmp_path, monkeypatch):
    """Landlock read rules: the Python installation, system libraries and the check's own directory only."""
    probe = _probe()
    if probe["landlock_abi"] < 1:
        pytest.skip(f"Landlock is not available on this kernel ({probe['description']}): reads are not fenced")
    from evalplus.evaluate import CACHE_DIR

    data = _dataset(tmp_path)
    monkeypatch.setenv("FASTDLLM_SANDBOX", "auto")
    reads = {"dataset": str(data), "data_dir": str(data.parent), "cache": CACHE_DIR, "home": os.path.expanduser("~"),
             "repo": str(Path(__file__).resolve().parent)}
    sols = []
    for path in reads.values():
        # read the file (or list the directory); a denied read raises, and the answer is only right after it
        body = (f"    import os\n    p = {path!r}\n    if os.path.isdir(p):\n        os.listdir(p)\n"
                f"    else:\n        open(p, 'rb').read()\n    return x + 1\n")
        sols.append({"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n{body}"})
    sols.append({"task_id": "Sandbox/0", "solution": f"import fractions\ndef {EP}(x):\n"
                 "    import decimal, sqlite3, numpy\n    return int(fractions.Fraction(x + 1))\n"})
    res = codeeval.score(data, "humaneval", sols, tmp_path / "work", base_only=False, min_time_limit=0.5)
    readable = [name for name, r in zip(reads, res) if r["base_pass"]]
    assert readable == [], f"the solution could read: {readable}"
    assert res[-1]["base_pass"] and res[-1]["plus_pass"], "modules of the Python installation must still import"
    assert "landlock-read" in res[-1]["sandbox"]


def test_a_dataset_inside_a_readable_directory_is_reported(tmp_path, monkeypatch):
    from fastdllm_core.evaluation.sandbox import worker

    monkeypatch.setenv("HUMANEVAL_OVERRIDE_PATH", str(tmp_path / "HumanEvalPlus.jsonl"))
    assert worker._readable_data("humaneval") == []
    inside = os.path.join(os.path.realpath(sys.prefix), "HumanEvalPlus.jsonl")
    monkeypatch.setenv("HUMANEVAL_OVERRIDE_PATH", inside)
    assert worker._readable_data("humaneval") == [inside]


# looks up the expected output in its own memory (the solution's process is a fork of the scorer): the frames on
# its stack and every object the garbage collector knows; reports what it found through its return value
MEMORY_CHEAT = f"""import gc, sys
def {EP}(x):
    seen = []
    fr = sys._getframe()
    while fr is not None:
        seen.append(fr.f_locals)
        fr = fr.f_back
    for o in seen + gc.get_objects():
        if type(o) is dict and o.get("base_time") and o.get("base"):
            return o["base"][x - 1]
        if type(o) is dict and "expected" in o and "inputs" in o and o["expected"]:
            return o["expected"][o["inputs"].index([x])]
        if type(o) is dict and o.get("canonical_solution"):
            return x + 1
    return None
"""


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
@pytest.mark.parametrize("parallel", [1, 2])
def test_the_expected_outputs_are_not_in_the_solutions_memory(tmp_path, parallel):
    sols = [{"task_id": "Sandbox/0", "solution": MEMORY_CHEAT}] * 2
    sols.append({"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n    return x + 1\n"})
    res = codeeval.score(_dataset(tmp_path), "humaneval", sols, tmp_path / "work", base_only=True,
                         min_time_limit=0.5, parallel=parallel)
    assert [r["base_status"] for r in res] == ["fail", "fail", "pass"]
    stat, _ = _check(MEMORY_CHEAT.replace(EP, "f"), [[1], [2]], [2, 3])
    assert stat == "fail"


def test_a_record_still_being_written_is_waited_for_not_failed():
    """The scorer judges the shared page while the child writes it: a record counted but not yet complete within
    the bytes read (a race; it scored HumanEval/32's canonical solution ``timeout`` now and then) must not fail."""
    buf = bytearray(64)
    end = verdict.write_record(buf, 0, verdict.REC_OUTPUT, verdict.encode(2))
    live = verdict.Judge("humaneval", "f", [[1], [2]], [2, 3], 0, True)
    live.feed(buf, 0, end, 2, live=True)  # two records counted, only one within `end`
    assert live.details == [True]
    end = verdict.write_record(buf, end, verdict.REC_OUTPUT, verdict.encode(3))
    live.feed(buf, 0, end, 2, live=True)
    assert live.details == [True, True]
    final = verdict.Judge("humaneval", "f", [[1], [2]], [2, 3], 0, True)
    final.feed(buf, 0, 5, 2)  # after the child ended, a truncated record is a failed input
    assert final.details == [False, False]


# ------------------------------------------------------------------------------------------------ verdict cache
def test_verdicts_are_reused_only_for_identical_checks_in_the_full_sandbox(tmp_path, monkeypatch):
    """A second scoring of the same solutions reuses every pass/fail verdict (same statuses); a timeout is run
    again; another solution text or another problem file is a new check; a weaker sandbox neither reads nor
    writes the cache."""
    monkeypatch.setenv("FASTDLLM_SANDBOX", "auto")
    if not _probe()["full"]:
        pytest.skip("the verdict cache is used only with the full sandbox, which this machine does not give")
    data, cache = _dataset(tmp_path), tmp_path / "verdicts"
    sols = [{"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n    return x + 1\n"},
            {"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n    return x + 2\n"},
            # blocks the per-input timer: only the sandbox's wall-clock limit ends it (status timeout)
            {"task_id": "Sandbox/0", "solution": f"import signal\ndef {EP}(x):\n"
             "    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\n    while True:\n        pass\n"}]

    def score(d, s, **kw):
        return codeeval.score(d, "humaneval", s, tmp_path / "work", base_only=False, min_time_limit=0.2,
                              verdict_cache=cache, **kw)

    first = score(data, sols)
    assert [(r["base_status"], r["plus_status"], r["verdict_reused"]) for r in first] == [
        ("pass", "pass", False), ("fail", "fail", False), ("timeout", "timeout", False)]
    assert len(list(cache.rglob("*.json"))) == 2  # the timeout is not kept
    second = score(data, sols)
    assert [(r["base_status"], r["plus_status"]) for r in second] == [(r["base_status"], r["plus_status"])
                                                                      for r in first]
    assert [r["verdict_reused"] for r in second] == [True, True, False]
    assert second[0]["sandbox"] == first[0]["sandbox"]
    other = score(data, [{"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n    return 1 + x\n"}])
    assert other[0]["verdict_reused"] is False and other[0]["base_status"] == "pass"
    moved = tmp_path / "data2" / data.name  # another problem set (its expected outputs differ)
    moved.parent.mkdir()
    moved.write_text(data.read_text().replace("return x + 1", "return x + 2"))
    m1, m2 = score(moved, sols[:2]), score(moved, sols[:2])
    assert [(r["base_status"], r["verdict_reused"]) for r in m1] == [("fail", False), ("pass", False)]
    assert [(r["base_status"], r["verdict_reused"]) for r in m2] == [("fail", True), ("pass", True)]
    monkeypatch.setenv("FASTDLLM_SANDBOX", "weak")
    n = len(list(cache.rglob("*.json")))
    weak = score(data, [{"task_id": "Sandbox/0", "solution": f"def {EP}(x):\n    return x - 1 + 2\n"}] + sols[:1])
    assert [r["verdict_reused"] for r in weak] == [False, False] and len(list(cache.rglob("*.json"))) == n


def _stat(pid) -> list[str]:
    """The fields of /proc/<pid>/stat after the command name (state, parent pid, ...); [] when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return []


def _dead(pid: int) -> bool:
    state = _stat(pid)[:1]
    return not state or state[0] in ("Z", "X")


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # ended meanwhile
        return b""


def _children(pid: int) -> list[int]:
    return [int(d.name) for d in Path("/proc").iterdir() if d.name.isdigit() and _stat(d.name)[1:2] == [str(pid)]]


def test_a_killed_scorer_takes_its_checks_process_and_sandboxes_with_it(tmp_path):
    """codeeval kills the EvalPlus worker at its time limit; the process that runs its checks (and through it every
    sandbox) must not outlive it."""
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "Sandbox/0",
                                   "solution": f"import time\ndef {EP}(x):\n    time.sleep(60)\n"}) + "\n")
    env = {**os.environ, "HUMANEVAL_OVERRIDE_PATH": str(_dataset(tmp_path)), "FASTDLLM_SANDBOX_DIR": str(tmp_path)}
    worker = subprocess.Popen([sys.executable, "-m", "fastdllm_core.evaluation.sandbox.worker", "score", "--dataset",
                               "humaneval", "--samples", str(samples), "--out", str(tmp_path / "out.json"),
                               "--base-only", "--min-time-limit", "50"], env=env, stderr=subprocess.DEVNULL)
    try:
        end, checks = time.monotonic() + 120, []
        while not checks and time.monotonic() < end:
            time.sleep(0.2)
            checks = [c for c in _children(worker.pid) if b"checks" in _cmdline(c)]
        assert checks, "no checks process started"
        family = checks
        while len(family) < 2 and time.monotonic() < end:  # until its sandbox runs the solution
            time.sleep(0.2)
            family = checks + [g for c in checks for g in _children(c)]
        assert len(family) >= 2
    finally:
        worker.kill()
        worker.wait()
    end = time.monotonic() + 20
    while not all(_dead(p) for p in family) and time.monotonic() < end:
        time.sleep(0.2)
    assert all(_dead(p) for p in family), [p for p in family if not _dead(p)]
