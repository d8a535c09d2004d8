"""Two evaluations writing the same output directory: the second is refused (the lock names the holder), a lock
left by a dead process is taken over, and EvalPlus' scratch files are private to each run (no fixed names)."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fastdllm_core import synthetic
from fastdllm_core.evaluation import codeeval, run_task
from fastdllm_core.provenance import LOCK_NAME, OutDirBusy, out_dir_lock

HOLD = """
import sys, time
from fastdllm_core.provenance import out_dir_lock
with out_dir_lock(sys.argv[1], "evaluation (test holder)"):
    print("held", flush=True)
    time.sleep(120)
"""


@pytest.fixture
def holder(tmp_path):
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    yield out, p
    p.kill()
    p.wait()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_second_writer_is_refused_naming_the_holder(holder, tmp_path):
    out, p = holder
    suite = synthetic.write_suite(tmp_path / "suite", n_pretrain=0, n_sft=10, n_adapt=0, n_eval=3)
    with pytest.raises(OutDirBusy) as ei:  # refused before the (nonexistent) model is loaded
        run_task("/no/such/model", "synth_code", out_dir=out, data_path=suite["synth_code_test"])
    msg = str(ei.value)
    assert f"pid {p.pid}" in msg and socket.gethostname() in msg and "started 20" in msg and str(out) in msg
    assert "test holder" in msg


def test_cli_refuses_a_busy_out_dir(holder, tmp_path, capsys):
    from fastdllm_core.cli import main

    out, p = holder
    suite = synthetic.write_suite(tmp_path / "suite", n_pretrain=0, n_sft=10, n_adapt=0, n_eval=3)
    rc = main(["eval", "--model", "/no/such/model", "--task", "synth_arith", "--data-path", suite["synth_arith_test"],
               "--out-dir", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and f"pid {p.pid}" in err and "being written by another" in err


def test_lock_of_a_killed_holder_is_taken_over(holder, capsys):
    out, p = holder
    p.kill()
    p.wait()
    assert (out / LOCK_NAME).is_file()  # SIGKILL: no cleanup ran
    with out_dir_lock(out, "evaluation"):
        held = json.loads((out / LOCK_NAME).read_text())
    err = capsys.readouterr().err
    assert "taking over the stale lock" in err and f"pid {p.pid}" in err
    assert held["host"] == socket.gethostname() and held["pid"] != p.pid
    assert not (out / LOCK_NAME).exists()


def test_stale_and_foreign_lock_files(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    dead = _dead_pid()
    (out / LOCK_NAME).write_text(json.dumps({"pid": dead, "host": socket.gethostname(),
                                             "started": "2020-01-01T00:00:00", "what": "evaluation"}))
    with out_dir_lock(out):
        pass
    assert f"pid {dead}" in capsys.readouterr().err
    (out / LOCK_NAME).write_text(json.dumps({"pid": 1, "host": "elsewhere.example", "started": "2020-01-01",
                                             "what": "evaluation"}))
    with pytest.raises(OutDirBusy, match="another host.*pid 1 on host elsewhere.example"):
        with out_dir_lock(out):
            pass


def test_lock_is_reentrant_and_leaves_no_empty_out_dir(tmp_path):
    out = tmp_path / "a" / "b"
    with out_dir_lock(out):
        with out_dir_lock(out):
            assert (out / LOCK_NAME).is_file()
        assert (out / LOCK_NAME).is_file()
    assert not (tmp_path / "a").exists()


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_concurrent_scorings_in_one_work_dir_do_not_mix(tmp_path):
    """Before: both wrote work_dir/evalplus_samples.jsonl and evalplus_results.json; one read the other's."""
    suite = synthetic.write_suite(tmp_path / "suite", n_pretrain=0, n_sft=10, n_adapt=0, n_eval=6)
    rows = codeeval.read_jsonl(suite["synth_code_test"])
    good = [{"task_id": r["task_id"], "solution": r["prompt"] + r["canonical_solution"]} for r in rows]
    bad = [{"task_id": r["task_id"], "solution": f"def {r['entry_point']}(*a):\n    return object()\n"}
           for r in rows[:3]]
    work = tmp_path / "shared_work"
    results = {}

    def go(name, sols):
        results[name] = codeeval.score(Path(suite["synth_code_test"]), "synth_code", sols, work, base_only=False,
                                       min_time_limit=0.5)

    threads = [threading.Thread(target=go, args=a) for a in (("good", good), ("bad", bad))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r["task_id"] for r in results["good"]] == [s["task_id"] for s in good]
    assert all(r["base_pass"] and r["plus_pass"] for r in results["good"])
    assert [r["task_id"] for r in results["bad"]] == [s["task_id"] for s in bad]
    assert not any(r["base_pass"] for r in results["bad"])
    assert list(work.iterdir()) == []  # private scratch directories removed


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_data_check_writes_nothing(tmp_path):
    from fastdllm_core.evaluation import shared_dir

    src = shared_dir() / "data/humaneval/HumanEval.jsonl.gz"
    if not src.is_file():
        pytest.skip(f"{src} not present")
    p, has_plus, note = codeeval.resolve_dataset("humaneval", str(src), None, check_only=True)
    assert p == src and not has_plus and "base tests only" in note
    t0 = time.time()
    out, _, _ = codeeval.resolve_dataset("humaneval", str(src), tmp_path / "w")
    assert out.parent == tmp_path / "w" and time.time() - t0 < 60
    assert [x.name for x in (tmp_path / "w").iterdir()] == ["humaneval_base_only.jsonl"]


@pytest.mark.slow(reason="scores code in the sandbox, a process (seen by the spawn guard of tests/conftest.py)")
def test_scorings_wait_for_a_ground_truth_cache_being_written(tmp_path, monkeypatch):
    """EvalPlus writes its ground-truth cache in place and loads it whenever it exists: a scoring that starts
    while another is writing it must wait for the complete file (before: it loaded a truncated pickle and died)."""
    import fcntl

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    suite = synthetic.write_suite(tmp_path / "suite", n_pretrain=0, n_sft=10, n_adapt=0, n_eval=4)
    ds = Path(suite["synth_code_test"])
    good = [{"task_id": r["task_id"], "solution": r["prompt"] + r["canonical_solution"]}
            for r in codeeval.read_jsonl(ds)]
    codeeval.score(ds, "synth_code", good, tmp_path / "w1", base_only=False, min_time_limit=0.5)  # fills the cache
    [pkl] = list((tmp_path / "cache" / "evalplus").glob("*.pkl"))
    whole = pkl.read_bytes()
    results, errors = [], []
    with open(pkl.with_name(pkl.stem + ".fastdllm.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as a scoring that is writing the cache holds it
        pkl.write_bytes(whole[: len(whole) // 2])

        def go():
            try:
                results.append(codeeval.score(ds, "synth_code", good, tmp_path / "w2", base_only=False,
                                              min_time_limit=0.5))
            except Exception as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        t = threading.Thread(target=go)
        t.start()
        t.join(8)
        assert t.is_alive() and not errors, f"the second scoring did not wait for the cache: {errors}"
        pkl.write_bytes(whole)
    t.join(120)
    assert not errors and [r["base_pass"] and r["plus_pass"] for r in results[0]] == [True] * len(good)
