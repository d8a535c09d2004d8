"""A training job stopped by a signal or by its deadline (fastdllm_core.training.stopping): a checkpoint after the
step it is in, every process stopping after the same step, status 75 from ``fastdllm train``, and a rerun whose
losses and weights equal an uninterrupted run's."""
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from fastdllm_core.training import loop
from fastdllm_core.training.stopping import (
    DEADLINE_VAR,
    EXIT_INTERRUPTED,
    Stopper,
    TrainingInterrupted,
    job_deadline,
    slurm_time_left,
)

ROOT = Path(__file__).resolve().parents[1]


def cfg(data_file, steps=6):
    return {"recipe": "bd_pad_cm", "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 2, "heads": 2,
                                                                      "kv_heads": 1}},
            "data": {"train_files": [data_file], "seq_len": 64}, "objective": {"block_size": 16},
            "optim": {"lr": 1e-3, "warmup_steps": 2, "max_steps": steps, "batch_size": 4, "micro_batch_size": 2,
                      "schedule": "cosine"},
            "train": {"save_every": 100, "log_every": 1, "seed": 0, "device": "cpu"}}


def losses(run: Path) -> list[str]:
    return [r["loss"] for r in csv.DictReader(open(run / "metrics.csv"))]


def same_weights(a: Path, b: Path) -> bool:
    wa, wb = (load_file(str(p / "final" / "model.safetensors")) for p in (a, b))
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


@pytest.fixture(scope="module")
def full(data_file, tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "run"
    loop.train(cfg(data_file), out, progress=False)
    return out


def test_sigterm_mid_run_checkpoints_that_step_and_the_rerun_equals_an_uninterrupted_run(
        tmp_path, data_file, full, monkeypatch):
    views = loop.step_views

    def signalled(ds, c, step, n_micro):  # SIGTERM arrives during step 3 (index 2)
        if step == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return views(ds, c, step, n_micro)

    before = signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as mp:
        mp.setattr(loop, "step_views", signalled)
        with pytest.raises(TrainingInterrupted, match="after step 3 .received SIGTERM") as ei:
            loop.train(cfg(data_file), tmp_path / "run", progress=False)
    assert signal.getsignal(signal.SIGTERM) == before  # the handlers are restored
    assert ei.value.step == 3 and (tmp_path / "run" / "checkpoints" / "step-3" / "state.json").is_file()
    assert not (tmp_path / "run" / "final").exists()
    loop.train(cfg(data_file), tmp_path / "run", progress=False)  # the next attempt
    assert losses(tmp_path / "run") == losses(full) and same_weights(tmp_path / "run", full)


def test_a_deadline_too_near_for_another_step_stops_with_a_checkpoint(tmp_path, data_file, full, monkeypatch):
    monkeypatch.setenv(DEADLINE_VAR, str(time.time() + 3600))
    monkeypatch.setenv("FASTDLLM_STOP_MARGIN_S", "7200")  # an hour left, two needed: stop after the first step
    with pytest.raises(TrainingInterrupted, match=r"after step 1 \(\d+ s left to the job's deadline, 7200 s needed"):
        loop.train(cfg(data_file), tmp_path / "run", progress=False)
    monkeypatch.delenv(DEADLINE_VAR)
    loop.train(cfg(data_file), tmp_path / "run", progress=False)
    assert losses(tmp_path / "run") == losses(full) and same_weights(tmp_path / "run", full)


def _torchrun(tmp_path, c, out, env_extra=None, port=29531):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    env = dict(os.environ, OMP_NUM_THREADS="1", **(env_extra or {}))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
           "-m", "fastdllm_core.cli", "train", "--config", str(tmp_path / "c.yaml"), "--output-dir", str(out),
           "--no-progress"]
    return cmd, env


@pytest.mark.slow
def test_two_processes_stop_after_the_same_step_and_resume(tmp_path, data_file, full):
    """Only the main process knows the deadline; the flag's all-reduce stops both after step 1."""
    c = cfg(data_file)
    cmd, env = _torchrun(tmp_path, c, tmp_path / "ddp", {DEADLINE_VAR: str(time.time() - 1)})
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert r.returncode != 0 and r.stderr.count("training stopped after step 1") == 2, r.stderr[-3000:]
    assert "another process stopped" in r.stderr
    assert [p.name for p in (tmp_path / "ddp" / "checkpoints").iterdir()] == ["step-1"]
    cmd, env = _torchrun(tmp_path, c, tmp_path / "ddp")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    for x, y in zip(losses(tmp_path / "ddp"), losses(full), strict=True):  # 2 processes: to reduction order
        assert float(x) == pytest.approx(float(y), rel=1e-4, abs=1e-5)


@pytest.mark.slow
def test_sigterm_to_torchrun_reaches_the_training_processes(tmp_path, data_file):
    """The scheduler signals the launcher; torchrun passes SIGTERM on and both processes checkpoint and stop."""
    c = cfg(data_file, steps=100_000)
    cmd, env = _torchrun(tmp_path, c, tmp_path / "ddp", port=29533)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    metrics, t0 = tmp_path / "ddp" / "metrics.csv", time.time()
    while not (metrics.is_file() and len(metrics.read_text().splitlines()) > 3):
        assert proc.poll() is None and time.time() - t0 < 240, proc.communicate()[1][-3000:]
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and err.count("received SIGTERM") >= 1, err[-3000:]
    cks = [p.name for p in (tmp_path / "ddp" / "checkpoints").iterdir()]
    assert len(cks) == 1 and cks[0].startswith("step-") and (tmp_path / "ddp" / "checkpoints" / cks[0] /
                                                            "state.json").is_file()


def test_cli_exits_75_when_stopped(tmp_path, data_file):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg(data_file)))
    env = dict(os.environ, **{DEADLINE_VAR: str(time.time() - 1)})
    r = subprocess.run([sys.executable, "-m", "fastdllm_core.cli", "train", "--config", str(tmp_path / "c.yaml"),
                        "--output-dir", str(tmp_path / "run"), "--no-progress"], capture_output=True, text=True,
                       env=env, timeout=300, cwd=ROOT)
    assert r.returncode == EXIT_INTERRUPTED, r.stderr[-2000:]
    assert "fastdllm train: training stopped after step 1" in r.stderr and "resumes" in r.stderr


class _Out:
    def __init__(self, stdout, returncode=0):
        self.stdout, self.returncode = stdout, returncode


@pytest.mark.parametrize("text,seconds", [("1-02:03:04", 93784.0), ("59:30", 3570.0), ("0:05", 5.0),
                                          ("3:00:00", 10800.0), ("UNLIMITED", None), ("", None)])
def test_slurm_time_left(text, seconds):
    assert slurm_time_left("7", run=lambda *a, **k: _Out(text + "\n")) == seconds


def test_deadline_sources_and_bad_values():
    assert job_deadline({DEADLINE_VAR: "1000.5"}, now=0) == 1000.5
    assert job_deadline({"SLURM_JOB_ID": "9"}, now=100, run=lambda *a, **k: _Out("10:00")) == 700.0
    assert job_deadline({}, now=100) is None
    with pytest.raises(ValueError, match=f"{DEADLINE_VAR}='tomorrow'"):
        job_deadline({DEADLINE_VAR: "tomorrow"}, now=0)
    with pytest.raises(ValueError, match="FASTDLLM_STOP_MARGIN_S='soon'"):
        Stopper(True, env={"FASTDLLM_STOP_MARGIN_S": "soon"})


def test_margin_grows_with_the_step_and_checkpoint_times():
    now = [0.0]
    s = Stopper(True, env={DEADLINE_VAR: "1000", "SLURM_JOB_ID": ""}, clock=lambda: now[0])
    try:
        assert s.local_reason() is None
        s.timed(step_s=100.0, save_s=300.0)  # 2 x 100 + 1.5 x 300 = 650 s needed
        now[0] = 340.0
        assert s.local_reason() is None
        now[0] = 360.0
        assert "650 s needed" in s.local_reason()
    finally:
        s.close()


# ------------------------------------------------------------------------------------------------ before the first step
def test_before_the_steps_a_signal_stops_where_the_process_is_and_once():
    from fastdllm_core.training.stopping import StopRequested, deferred

    s = Stopper(True, env={}, immediate=True)
    try:
        with pytest.raises(StopRequested) as ei:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs at the next bytecode
                time.sleep(0.001)
        assert ei.value.signame == "SIGTERM"
        os.kill(os.getpid(), signal.SIGUSR1)  # a second signal is only recorded
        time.sleep(0.01)
        assert s.signal == "SIGUSR1"
    finally:
        s.close()
    s = Stopper(True, env={}, immediate=True)
    try:
        held = []
        with pytest.raises(StopRequested):
            with deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
                held.append("the block ran to its end")
        assert held == ["the block ran to its end"]
        s.at_steps()  # in the steps: only recorded, the loop stops after its step
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        assert s.local_reason() == "received SIGTERM"
    finally:
        s.close()


SLOW = """
import sys, time
from pathlib import Path
import importlib
mod = importlib.import_module(sys.argv[1])
name, marker = sys.argv[2], Path(sys.argv[3])
original = getattr(mod, name)

def slow(*a, **k):  # a large data set: each row takes a while
    marker.touch()
    time.sleep(0.05)
    return original(*a, **k)

setattr(mod, name, slow)
from fastdllm_core.cli import main
sys.exit(main(sys.argv[4:]))
"""


def _big_data(tmp_path, n=600):
    p = tmp_path / "big.jsonl"
    p.write_text("".join(json.dumps({"prompt": f"{i}+1=?", "response": f"{i + 1}"}) + "\n" for i in range(n)))
    return str(p)


@pytest.mark.parametrize("module,name,phase", [
    ("fastdllm_core.training.data", "parse_json", "during the data check"),
    ("fastdllm_core.training.token_store", "encode_example", "while preparing the token store")])
def test_a_signal_before_the_first_step_exits_75_and_leaves_nothing(tmp_path, module, name, phase):
    """SIGTERM during the data check or the token store's build (hours at 1B tokens): a message, status 75, no
    temporary directory, no lock, no store; the next attempt trains."""
    data = _big_data(tmp_path)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg(data, steps=2)))
    run, marker = tmp_path / "run", tmp_path / "started"
    argv = ["train", "--config", str(tmp_path / "c.yaml"), "--output-dir", str(run), "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    p = subprocess.Popen([sys.executable, "-c", SLOW, module, name, str(marker), *argv], env=env, cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not marker.exists():
        assert p.poll() is None and time.time() - t0 < 240, p.communicate()[1][-3000:]
        time.sleep(0.05)
    if name == "encode_example":  # the build has begun: its temporary directory is there
        assert list(run.glob(".data.tmp.*/examples.u32"))
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == EXIT_INTERRUPTED, err[-3000:]
    assert f"training stopped before its first step (received SIGTERM {phase}); nothing was left half-written: " \
           "the next attempt starts from step 0" in err and "Traceback" not in err, err[-3000:]
    assert not run.exists(), sorted(str(x) for x in run.rglob("*"))  # nothing left, not even the directory
    if name == "encode_example":
        loop.train(cfg(data, steps=2), run, progress=False)  # the next attempt
        assert (run / "final" / "model.safetensors").is_file()


@pytest.mark.slow
def test_sigterm_to_torchrun_during_the_build_stops_both_processes(tmp_path):
    """The main process builds, the other waits for the store: both stop with the message, nothing is left."""
    data = _big_data(tmp_path)
    c = cfg(data, steps=2)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    (tmp_path / "slow.py").write_text(SLOW)
    run, marker = tmp_path / "run", tmp_path / "started"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29537",
           str(tmp_path / "slow.py"), "fastdllm_core.training.token_store", "encode_example", str(marker),
           "train", "--config", str(tmp_path / "c.yaml"), "--output-dir", str(run), "--no-progress"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    p = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    while not marker.exists():
        assert p.poll() is None and time.time() - t0 < 240, p.communicate()[1][-3000:]
        time.sleep(0.05)
    time.sleep(1.0)  # the other process is waiting for the store
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0
    assert err.count("training stopped before its first step (received SIGTERM while preparing the token store)") \
        == 2, err[-4000:]
    # no store, no temporary; the main process' note for the waiting one (removed by the next run) says why
    assert [x.name for x in run.glob(".data*")] == [".data.failed"] and not (run / "data").exists()
    assert "StopRequested: SIGTERM" in (run / ".data.failed").read_text()
    loop.train(c, run, progress=False)
    assert not list(run.glob(".data*")) and (run / "final" / "model.safetensors").is_file()
