"""No collisions (fastdllm_core.training.run_lock): a second training run on a directory in use is refused naming
the holder, a lock left by a dead run (this host, or another host's finished SLURM job) is taken over, the
temporaries of dead runs are removed, and concurrent builds of one token store build it once."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from fastdllm_core.provenance import LOCK_NAME, OutDirBusy
from fastdllm_core.training import loop
from fastdllm_core.training import run_lock as rl

ROOT = Path(__file__).resolve().parents[1]
HOLD = """
import sys, time
from fastdllm_core.training.run_lock import run_lock
with run_lock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(120)
"""


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture
def holder(tmp_path):
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.stdout.readline().strip() == "held"
    yield out, p
    p.kill()
    p.wait()


def _cfg(data_file):
    return {"recipe": "bd_pad", "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2,
                                                                   "kv_heads": 1}},
            "data": {"train_files": [str(data_file)], "seq_len": 64}, "objective": {"block_size": 16},
            "optim": {"lr": 1e-3, "warmup_steps": 0, "max_steps": 2, "batch_size": 2, "micro_batch_size": 2},
            "train": {"save_every": 100, "log_every": 1, "seed": 0, "device": "cpu"}}


def test_a_second_run_on_a_directory_in_use_is_refused_naming_the_holder(holder, data_file, tmp_path, monkeypatch,
                                                                         capsys):
    from fastdllm_core.cli import train as train_cli

    out, p = holder
    monkeypatch.setattr(loop, "build_tokenizer", lambda *a, **k: pytest.fail("the second run went on"))
    with pytest.raises(OutDirBusy, match=rf"{out} is being written by another training: pid {p.pid} on host "
                                         rf"{socket.gethostname()}"):
        loop.train(_cfg(data_file), out, progress=False)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(_cfg(data_file)))
    assert train_cli.main(["--config", str(tmp_path / "c.yaml"), "--output-dir", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fastdllm train: error: ") and f"pid {p.pid}" in err and len(err.splitlines()) == 1, err
    p.kill()
    p.wait()  # the holder is gone (SIGKILL: its lock file stays): the next run takes over and trains
    monkeypatch.undo()
    loop.train(_cfg(data_file), out, progress=False)
    assert (out / "final" / "model.safetensors").is_file() and not (out / LOCK_NAME).exists()


def test_the_temporaries_of_dead_runs_are_removed_and_a_live_ones_kept(tmp_path):
    out, host, dead, live = tmp_path / "run", socket.gethostname(), _dead_pid(), os.getppid()
    stale = [out / f".data.tmp.{host}.{dead}.abc", out / f".data.old.{host}.{dead}.def", out / ".final.tmp",
             out / f".final.tmp.{host}.{dead}.x1", out / "checkpoints" / ".tmp-step-2"]
    kept = [out / f".data.tmp.{host}.{live}.ghi", out / f".data.tmp.elsewhere.example.{dead}.jkl",
            out / "checkpoints" / "step-1"]
    for d in stale + kept:
        d.mkdir(parents=True)
        (d / "examples.u32").write_bytes(b"\0" * 64)
    with rl.run_lock(out):
        assert not any(d.exists() for d in stale)
        assert all(d.is_dir() for d in kept)
        assert json.loads((out / LOCK_NAME).read_text())["what"] == "training"
    old = time.time() - 2 * rl.STALE_S  # another host's directory nobody wrote to for long: stale
    for f in (kept[1], kept[1] / "examples.u32"):
        os.utime(f, (old, old))
    assert rl.remove_stale(out, ".data.tmp.") == [kept[1]]


def test_another_hosts_lock_is_kept_while_it_lives_and_taken_over_when_its_run_is_over(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    lock = out / LOCK_NAME
    lock.write_text(json.dumps({"pid": 1, "host": "elsewhere.example", "started": "2030-01-01", "what": "training",
                                "slurm_job_id": "77"}))
    monkeypatch.setattr(rl, "slurm_job_ended", lambda job: False)  # SLURM says job 77 runs (or cannot be asked)
    with pytest.raises(OutDirBusy, match="another host.*pid 1 on host elsewhere.example"):
        with rl.run_lock(out):
            pass
    monkeypatch.setattr(rl, "slurm_job_ended", lambda job: job == "77")  # the job is over: its lock is stale
    with rl.run_lock(out):
        assert json.loads(lock.read_text())["host"] == socket.gethostname()
    lock.write_text(json.dumps({"pid": 1, "host": "elsewhere.example", "started": "2030-01-01", "what": "training"}))
    old = time.time() - 2 * rl.STALE_S  # no SLURM job recorded: its heartbeat stopped long ago
    os.utime(lock, (old, old))
    with rl.run_lock(out):
        pass
    assert not lock.exists()
    lock.write_bytes(b"\x00garbage{")  # an unreadable lock file: respected while fresh, taken over when stale
    with pytest.raises(OutDirBusy):
        with rl.run_lock(out):
            pass
    os.utime(lock, (old, old))
    with rl.run_lock(out):
        pass


class _Out:
    def __init__(self, stdout, returncode=0, stderr=""):
        self.stdout, self.returncode, self.stderr = stdout, returncode, stderr


INVALID = "slurm_load_jobs error: Invalid job id specified"
DOWN = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)"


@pytest.mark.parametrize("stdout,rc,stderr,ended", [
    ("RUNNING\n", 0, "", False), ("PENDING\n", 0, "", False), ("COMPLETED\n", 0, "", True), ("", 0, "", True),
    ("TIMEOUT\n", 0, "", True), ("", 1, INVALID, True),
    ("", 1, DOWN, False), ("", 1, "", False)])  # squeue failed: the job may run on; the lock is kept
def test_slurm_job_ended(stdout, rc, stderr, ended, caplog):
    assert rl.slurm_job_ended("5", run=lambda *a, **k: _Out(stdout, rc, stderr)) is ended
    if rc and not ended:
        assert "its lock is kept" in caplog.text


def test_a_controller_error_keeps_a_live_jobs_lock(tmp_path, monkeypatch):
    """A lock of another host whose SLURM job squeue cannot be asked about stays, while fresh."""
    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"host": "node07", "pid": 4242, "slurm_job_id": "77"}))
    monkeypatch.setattr(rl.subprocess, "run", lambda *a, **k: _Out("", 1, DOWN))
    with pytest.raises(OutDirBusy):
        with rl.run_lock(out):
            pass
    assert (out / LOCK_NAME).is_file()


def test_one_liveness_check_serves_both_locks():
    from fastdllm_core import provenance

    assert rl.pid_alive is provenance.pid_alive and provenance.pid_alive(os.getpid())
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not provenance.pid_alive(p.pid)


def test_the_heartbeat_touches_the_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(rl, "HEARTBEAT_S", 0.05)
    with rl.run_lock(tmp_path / "run") as lock:
        old = time.time() - 1000
        os.utime(lock, (old, old))
        deadline = time.time() + 30
        while lock.stat().st_mtime < old + 500 and time.time() < deadline:
            time.sleep(0.05)
        assert lock.stat().st_mtime > old + 500


def test_temporary_names_are_unique_and_name_their_owner(tmp_path):
    a, b = rl.unique_dir(tmp_path, ".x."), rl.unique_dir(tmp_path, ".x.")
    assert a != b and a.name.startswith(f".x.{socket.gethostname()}.{os.getpid()}.")
    assert oct(a.stat().st_mode & 0o777) == oct(0o777 & ~__import__("fastdllm_core.provenance",
                                                                     fromlist=["_umask"])._umask())
    assert rl.remove_stale(tmp_path, ".x.") == []  # this process is alive


BUILD = textwrap.dedent("""
    import logging, sys
    logging.basicConfig(level=logging.INFO)
    from fastdllm_core.tiny import char_tokenizer
    from fastdllm_core.training.token_store import build_store
    store = build_store(char_tokenizer(), [sys.argv[1]], sys.argv[2], seq_len=64, block_size=16, packing="pad",
                        pad_id=3, progress=False)
    print("KEY", store.meta["key"], len(store), flush=True)
""")


@pytest.mark.slow
def test_concurrent_builds_of_one_store_build_it_once(tmp_path):
    """Before: both built into temporaries and replaced the store; one removed the other's store between its
    rename and its open.  Now the second waits for the build lock and reuses the first one's store."""
    f = tmp_path / "sft.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"q{i}" * 5, "response": f"a{i}" * 7}) + "\n" for i in range(600)))
    out = tmp_path / "run" / "data"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    (tmp_path / "run").mkdir()
    with rl.file_lock(tmp_path / "run" / ".data.lock"):
        procs = [subprocess.Popen([sys.executable, "-c", BUILD, str(f), str(out)], env=env, cwd=ROOT, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
        time.sleep(1.0)  # both start and wait for the build lock this test holds
    outs = [p.communicate(timeout=240) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    keys = {next(x for x in o.splitlines() if x.startswith("KEY")) for o, _ in outs}
    assert len(keys) == 1
    assert sum(e.count("built:") for _, e in outs) == 1  # one built it, the other reused it
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["data"]
    assert sorted(p.name for p in out.iterdir()) == ["ids.u32", "meta.json", "sup.u8"]
