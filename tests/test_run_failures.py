"""Every stop is a stop: a diverged run stops by name and keeps its last finite checkpoint, Ctrl-C checkpoints
like SIGTERM, a full disk is one line and loses nothing (tiny model, CPU)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from fastdllm_core.cli.train import main as train_cli
from fastdllm_core.training import loop
from fastdllm_core.training.failures import EXIT_DIVERGED, TrainingDiverged, WriteFailed, weights_finite, writing
from fastdllm_core.training.loop import train
from fastdllm_core.training.stopping import EXIT_AT_ONCE, EXIT_INTERRUPTED
from test_run_identity import cfg

ROOT = Path(__file__).resolve().parents[1]


def every_step(c: dict, **train_keys) -> dict:
    c["train"].update(save_every=1, keep_checkpoints=100, **train_keys)
    return c


def files_of(ck: Path) -> list:
    return sorted((str(p.relative_to(ck)), p.read_bytes()) for p in ck.rglob("*") if p.is_file())


def test_a_diverged_run_stops_at_that_step_keeps_its_last_finite_checkpoint_and_a_retry_stops_at_once(
        tmp_path, data_file):
    run = tmp_path / "run"
    c = every_step(cfg(data_file, lr=1e8, max_steps=8))
    with pytest.raises(TrainingDiverged, match=r"diverged at step 2: loss [\d.]+, gradient norm nan") as ei:
        train(c, run, progress=False)
    assert ei.value.checkpoint == run / "checkpoints" / "step-1" and not (run / "final").exists()
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["step-1"]  # never a non-finite state
    state = torch.load(run / "checkpoints" / "step-1" / "optimizer.bin", weights_only=False)
    assert all(torch.isfinite(v).all() for s in state["state"].values() for v in s.values() if torch.is_tensor(v))
    kept = files_of(run / "checkpoints" / "step-1")
    note = json.loads((run / "diverged.json").read_text())
    assert note["step"] == 2 and note["checkpoint"].endswith("step-1")
    t0 = time.perf_counter()
    with pytest.raises(TrainingDiverged, match="diverged earlier, under this same config, at step 2"):
        train(c, run, progress=False)  # a DAG's retry: no step computed again
    assert time.perf_counter() - t0 < 30 and files_of(run / "checkpoints" / "step-1") == kept
    shutil.rmtree(run / "checkpoints")  # start over at another lr: the marker is of another run, and goes
    c["optim"]["lr"] = 1e-3
    train(c, run, progress=False)
    assert (run / "final").is_dir() and not (run / "diverged.json").exists()


def test_the_command_line_exits_3_with_one_line(tmp_path, data_file, capsys):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(every_step(cfg(data_file, lr=1e8, max_steps=8))))
    rc = train_cli(["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "run"), "--no-progress"])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("fastdllm train")]
    assert rc == EXIT_DIVERGED and len(err) == 1 and "diverged at step 2" in err[0], err


def _nan_at(monkeypatch, bad_steps):
    """accumulate returns a NaN loss at the optimiser steps ``bad_steps`` (1-based), its gradients untouched."""
    real, calls = loop.accumulate, []

    def fake(*a, **k):
        out = real(*a, **k)
        calls.append(1)
        return out * float("nan") if len(calls) in bad_steps else out

    monkeypatch.setattr(loop, "accumulate", fake)


def test_the_skip_policy_skips_up_to_n_steps_without_an_update_then_stops(tmp_path, data_file, monkeypatch):
    _nan_at(monkeypatch, {2, 4})
    c = every_step(cfg(data_file, max_steps=5), nonfinite_skips=1)
    with pytest.raises(TrainingDiverged, match=r"at step 4: loss nan.*after 1 skipped non-finite steps"):
        train(c, tmp_path / "one", progress=False)
    monkeypatch.undo()
    _nan_at(monkeypatch, {2})
    train(c, tmp_path / "skipped", progress=False)
    w = load_file(str(tmp_path / "skipped" / "final" / "model.safetensors"))
    assert all(torch.isfinite(v).all() for v in w.values())
    step1 = load_file(str(tmp_path / "one" / "checkpoints" / "step-1" / "model.safetensors"))
    step2 = load_file(str(tmp_path / "one" / "checkpoints" / "step-2" / "model.safetensors"))
    assert all(torch.equal(step1[k], step2[k]) for k in step1)  # the skipped step made no update


def test_weights_that_stop_being_finite_are_never_checkpointed(tmp_path, data_file, monkeypatch):
    real = torch.optim.AdamW.step
    seen = []

    def step(self, *a, **k):
        out = real(self, *a, **k)
        seen.append(1)
        if len(seen) == 3:
            with torch.no_grad():
                self.param_groups[0]["params"][0].fill_(float("inf"))
        return out

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    run = tmp_path / "run"
    with pytest.raises(TrainingDiverged, match="at step 3: the weights are no longer finite"):
        train(every_step(cfg(data_file, max_steps=5)), run, progress=False)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-1", "step-2"]


def test_weights_finite():
    m = torch.nn.Linear(2, 2)
    assert weights_finite(m, "cpu")
    with torch.no_grad():
        m.bias[0] = float("nan")
    assert not weights_finite(m, "cpu")


def test_writing_names_the_path_and_the_cause(tmp_path):
    import errno

    cleaned = []
    with pytest.raises(WriteFailed, match=r"the checkpoint /x/step-3 could not be written: no space left"):
        with writing("/x/step-3", "the checkpoint", cleanup=lambda: cleaned.append(1)):
            raise OSError(errno.ENOSPC, "No space left on device")
    assert cleaned == [1]
    with pytest.raises(WriteFailed, match="RuntimeError: .*PytorchStreamWriter failed"):
        with writing(tmp_path / "f", "the final model"):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . PytorchStreamWriter failed writing file")
    with pytest.raises(ValueError):  # not a write: as it was
        with writing(tmp_path / "f", "the final model"):
            raise ValueError("a bug")


def test_a_final_model_or_metrics_the_disk_refuses_is_one_named_error_and_the_rerun_finishes(
        tmp_path, data_file, monkeypatch):
    import errno

    from fastdllm_core.training import checkpoints, run_book

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    c = every_step(cfg(data_file, max_steps=2))
    run = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr(checkpoints, "_write_final", full)
        with pytest.raises(WriteFailed, match=r"the final model .*/run/final could not be written: no space left"):
            train(c, run, progress=False)
    assert not (run / "final").exists() and not list(run.glob(".final.tmp*"))
    kept = files_of(run / "checkpoints" / "step-2")
    train(c, run, progress=False)  # space again: the final model from the last checkpoint
    assert (run / "final" / "model.safetensors").is_file() and files_of(run / "checkpoints" / "step-2") == kept
    with monkeypatch.context() as m:
        m.setattr(run_book, "write_csv_atomic", full)
        with pytest.raises(WriteFailed, match=r"the metrics .*/other/metrics.csv could not be written"):
            train(c, tmp_path / "other", progress=False)


@pytest.mark.slow
def test_kill_9_at_any_moment_then_a_rerun_gives_the_uninterrupted_weights(tmp_path, data_file):
    c = every_step(cfg(data_file, max_steps=40))
    straight = tmp_path / "straight"
    train(c, straight, progress=False)
    for after in (3, 17):  # killed mid-run, twice, wherever the process is (a step, a checkpoint write)
        proc = _cli(tmp_path, c)
        _after_steps(proc, tmp_path / "run", after)
        proc.kill()
        proc.communicate()
    assert not (tmp_path / "run" / "final").exists()
    assert train_cli(["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "run"),
                      "--no-progress"]) == 0
    a = load_file(str(tmp_path / "run" / "final" / "model.safetensors"))
    b = load_file(str(straight / "final" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


FULL_DISK = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), int(sys.argv[1])))
from fastdllm_core.cli.train import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.slow
def test_a_full_disk_at_a_checkpoint_is_one_line_exit_2_and_the_rerun_resumes(tmp_path, data_file):
    c = every_step(cfg(data_file, max_steps=4))
    c["train"]["save_every"] = 2
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    args = ["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "run"), "--no-progress"]
    assert train_cli([*args, "--stop-after", "2"]) == 0
    kept = files_of(tmp_path / "run" / "checkpoints" / "step-2")
    limit = max(p.stat().st_size for p in (tmp_path / "run" / "checkpoints").rglob("*.bin")) // 2
    r = subprocess.run([sys.executable, "-c", FULL_DISK, str(limit), *args], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("fastdllm train")]
    assert r.returncode == 2 and len(lines) == 1, r.stderr[-3000:]
    assert "the checkpoint" in lines[0] and "step-4 could not be written" in lines[0] and "Traceback" not in r.stderr
    assert files_of(tmp_path / "run" / "checkpoints" / "step-2") == kept
    assert not list((tmp_path / "run" / "checkpoints").glob(".tmp-*")) and not (tmp_path / "run" / "final").exists()
    assert train_cli(args) == 0  # space again: resumes from step 2
    train(c, tmp_path / "straight", progress=False)
    a = load_file(str(tmp_path / "run" / "final" / "model.safetensors"))
    b = load_file(str(tmp_path / "straight" / "final" / "model.safetensors"))
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_a_full_disk_while_building_the_token_store_is_one_line_and_leaves_no_store(tmp_path, data_file):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cfg(data_file)))
    args = ["--config", str(tmp_path / "c.yaml"), "--output-dir", str(tmp_path / "run"), "--no-progress"]
    r = subprocess.run([sys.executable, "-c", FULL_DISK, "1000", *args], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("fastdllm train")]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert "the token store" in lines[0] and "/run/data could not be written" in lines[0]
    assert not (tmp_path / "run" / "data").exists() and not list((tmp_path / "run").glob(".data.tmp*"))
    assert train_cli(args) == 0  # space again: built and trained


def _cli(tmp_path, c):
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    return subprocess.Popen([sys.executable, "-m", "fastdllm_core.cli", "train", "--config", str(tmp_path / "c.yaml"),
                             "--output-dir", str(tmp_path / "run"), "--no-progress"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"))


def _after_steps(proc, run: Path, n: int):
    t0 = time.time()
    while not ((run / "metrics.csv").is_file() and len((run / "metrics.csv").read_text().splitlines()) > n):
        assert proc.poll() is None and time.time() - t0 < 240, proc.communicate()[1][-3000:]
        time.sleep(0.05)


def test_a_second_ctrl_c_during_the_steps_stops_at_once():
    from fastdllm_core.training.stopping import Stopper, StopRequested

    s = Stopper(True, env={}, deadline=False)
    try:
        s.at_steps()
        os.kill(os.getpid(), signal.SIGINT)  # the first: recorded, the run stops after its step
        time.sleep(0.01)
        assert s.local_reason() == "received SIGINT"
        os.kill(os.getpid(), signal.SIGTERM)  # another signal is only recorded
        time.sleep(0.01)
        with pytest.raises(StopRequested, match="SIGINT a second time"):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
    finally:
        s.close()


@pytest.mark.slow
def test_ctrl_c_checkpoints_after_the_step_and_a_second_ends_at_once(tmp_path, data_file):
    c = cfg(data_file, max_steps=100_000, batch_size=8, micro_batch_size=8)
    c["model"]["tiny"].update(hidden_size=256, layers=4, heads=4, kv_heads=2)  # steps long enough to signal within
    c["train"]["save_every"] = 100_000
    proc = _cli(tmp_path, c)
    _after_steps(proc, tmp_path / "run", 2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_INTERRUPTED and "received SIGINT" in err and "Traceback" not in err, err[-3000:]
    cks = list((tmp_path / "run" / "checkpoints").iterdir())
    assert len(cks) == 1 and (cks[0] / "state.json").is_file()
    proc = _cli(tmp_path, c)  # resumes; then Ctrl-C twice within a step
    _after_steps(proc, tmp_path / "run", int(cks[0].name.split("-")[1]) + 1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_AT_ONCE and "Traceback" not in err, err[-3000:]
    assert "stopped at once" in err and f"resumes from {cks[0]}" in err.splitlines()[-1]
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == [cks[0].name]


@pytest.mark.slow
def test_every_process_stops_at_the_same_diverged_step(tmp_path, data_file):
    c = every_step(cfg(data_file, lr=1e8, max_steps=8))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29541",
           "-m", "fastdllm_core.cli", "train", "--config", str(tmp_path / "c.yaml"), "--output-dir",
           str(tmp_path / "ddp"), "--no-progress"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode != 0 and r.stderr.count("fastdllm train: error: training diverged at step 2") == 2, \
        r.stderr[-3000:]
    assert [p.name for p in (tmp_path / "ddp" / "checkpoints").iterdir()] == ["step-1"]
    assert not (tmp_path / "ddp" / "final").exists()
