"""A resume continues only the same run: the identity every checkpoint records, the refusal of another config
or other start weights (fastdllm train exits 2 naming each key), and the extension of a constant schedule."""
import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from fastdllm_core.cli.train import main as train_cli
from fastdllm_core.training.config import TrainConfig
from fastdllm_core.training.loop import train
from fastdllm_core.training.run_identity import (
    ConfigChanged,
    changes,
    config_identity,
    init_digest,
    run_identity,
    start_over_if_changed,
)


def cfg(data_file, recipe="bd_pad_cm", schedule="constant", **optim):
    return {
        "recipe": recipe,
        "model": {"init": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "kv_heads": 1}},
        "data": {"train_files": [data_file], "seq_len": 64},
        "objective": {"block_size": 16},
        "optim": {"lr": 1e-3, "warmup_steps": 1, "max_steps": 4, "batch_size": 4, "micro_batch_size": 2,
                  "schedule": schedule, **optim},
        "train": {"save_every": 2, "log_every": 1, "seed": 0},
    }


def weights(run: Path) -> dict:
    return load_file(str(run / "final" / "model.safetensors"))


def equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_identity_leaves_out_what_cannot_change_the_weights(data_file):
    base = TrainConfig.from_dict(cfg(data_file))
    ident = config_identity(base)
    for key in ("train.save_every", "train.keep_checkpoints", "train.log_every", "train.device", "train.engine",
                "optim.micro_batch_size", "data.train_files", "optim.max_steps"):
        assert key not in ident, key
    for key in ("optim.lr", "recipe", "train.seed", "data.seq_len", "model.tiny", "optim.warmup_steps",
                "train.nonfinite_skips", "train.dtype"):
        assert key in ident, key
    cosine = config_identity(TrainConfig.from_dict(cfg(data_file, schedule="cosine")))
    assert "optim.max_steps" in cosine  # every step's rate depends on it


def test_changes_name_each_key_with_its_old_and_new_value(data_file):
    a = run_identity(TrainConfig.from_dict(cfg(data_file)))
    b = run_identity(TrainConfig.from_dict(cfg(data_file, recipe="ntp", lr=1e-2)))
    assert changes(a, b) == ["optim.lr (0.001 -> 0.01)", "recipe ('bd_pad_cm' -> 'ntp')"]
    assert changes(a, a) == []


def test_init_digest_is_of_the_weights_not_of_the_run_metadata(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"weights")
    (d / "config.json").write_text("{}")
    first = init_digest(str(d))
    (d / "fastdllm_train.json").write_text('{"metadata": {"hostname": "x"}}')
    assert init_digest(str(d)) == first
    (d / "model.safetensors").write_bytes(b"weightz")
    assert init_digest(str(d)) != first
    assert init_digest("tiny") is None
    moved = tmp_path / "moved"
    d.rename(moved)  # the same files elsewhere: the same run
    assert init_digest(str(moved)) == init_digest(str(moved)) and "model.init" not in config_identity(
        TrainConfig.from_dict({"model": {"init": str(moved)}, "data": {"train_files": ["x"]}}, check_files=False))


def test_a_hugging_face_blob_is_named_by_its_hash(tmp_path):
    blob = tmp_path / "blobs" / ("a" * 64)
    blob.parent.mkdir()
    blob.write_bytes(b"x" * 10)
    snap = tmp_path / "snap"
    snap.mkdir()
    os.symlink(blob, snap / "model.safetensors")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "model.safetensors").write_bytes(b"x" * 10)
    assert init_digest(str(snap)) != init_digest(str(copy))  # the blob's name, not its bytes, is read
    assert init_digest(str(snap)) == init_digest(str(snap))


def test_every_checkpoint_records_the_run_identity(tmp_path, data_file):
    run = tmp_path / "run"
    train(cfg(data_file), run, stop_after=2, progress=False)
    state = json.loads((run / "checkpoints" / "step-2" / "state.json").read_text())
    assert state["run"] == run_identity(TrainConfig.from_dict(cfg(data_file)))
    assert state["data"]["data_sha256"]


@pytest.mark.parametrize("change, named", [
    ({"lr": 1e-2}, "optim.lr (0.001 -> 0.01)"),
    ({"recipe": "ntp"}, "recipe ('bd_pad_cm' -> 'ntp')"),
    ({"warmup_steps": 2}, "optim.warmup_steps (1 -> 2)"),
])
def test_a_changed_setting_is_refused_by_name_and_the_checkpoint_kept(tmp_path, data_file, change, named):
    run = tmp_path / "run"
    train(cfg(data_file), run, stop_after=2, progress=False)
    ck = run / "checkpoints" / "step-2"
    before = sorted((p.name, p.read_bytes()) for p in ck.iterdir() if p.is_file())
    recipe = change.pop("recipe", "bd_pad_cm")
    with pytest.raises(ConfigChanged, match="allow-config-change") as ei:
        train(cfg(data_file, recipe=recipe, **change), run, progress=False)
    assert named in str(ei.value) and "step-2" in str(ei.value)
    assert sorted((p.name, p.read_bytes()) for p in ck.iterdir() if p.is_file()) == before
    assert not (run / "final").exists()


def test_the_command_line_refuses_with_exit_2_then_goes_on_when_allowed(tmp_path, data_file, capsys):
    c = tmp_path / "c.yaml"
    c.write_text(json.dumps(cfg(data_file)))
    run = tmp_path / "run"
    assert train_cli(["--config", str(c), "--output-dir", str(run), "--stop-after", "2", "--no-progress"]) == 0
    capsys.readouterr()
    args = ["--config", str(c), "--output-dir", str(run), "--no-progress", "--set", "optim.lr=0.01"]
    assert train_cli(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "optim.lr (0.001 -> 0.01)" in err[0] and "Traceback" not in err[0]
    assert not (run / "final").exists()
    assert train_cli([*args, "--allow-config-change"]) == 0
    assert (run / "final").is_dir()


def test_a_constant_schedule_extends_a_finished_run_as_if_it_had_run_straight(tmp_path, data_file):
    straight = tmp_path / "straight"
    train(cfg(data_file, max_steps=6), straight, progress=False)
    chained = tmp_path / "chained"
    train(cfg(data_file, max_steps=4), chained, progress=False)
    train(cfg(data_file, max_steps=6), chained, progress=False)  # the studies' chains: max_steps extended
    assert equal(weights(straight), weights(chained))


def test_a_checkpoint_past_max_steps_is_refused(tmp_path, data_file):
    run = tmp_path / "run"
    train(cfg(data_file, max_steps=4), run, progress=False)
    with pytest.raises(ConfigChanged, match="past optim.max_steps=2"):
        train(cfg(data_file, max_steps=2), run, progress=False)


def test_the_dag_policy_starts_another_run_from_step_0_and_resumes_its_own(tmp_path, data_file):
    data = tmp_path / "sft.jsonl"
    data.write_text(Path(data_file).read_text())
    run = tmp_path / "run"
    train(cfg(str(data)), run, stop_after=2, progress=False)
    cadence = cfg(str(data))
    cadence["train"].update(save_every=1, log_every=2, keep_checkpoints=5)  # not the weights': the same run
    assert start_over_if_changed(run, TrainConfig.from_dict(cadence)) == []
    assert (run / "checkpoints" / "step-2").is_dir()  # the same run: the job resumes
    assert start_over_if_changed(run, TrainConfig.from_dict(cfg(str(data), lr=1e-2))) == ["optim.lr (0.001 -> 0.01)"]
    assert not (run / "checkpoints").exists() and not (run / "metrics.csv").exists()
    train(cfg(str(data), lr=1e-2), run, progress=False)
    ref = tmp_path / "ref"
    train(cfg(str(data), lr=1e-2), ref, progress=False)
    assert equal(weights(run), weights(ref))
    data.write_text(data.read_text().replace("+", " + "))  # the same files, other content
    assert start_over_if_changed(run, TrainConfig.from_dict(cfg(str(data), lr=1e-2))) == [
        "the content of data.train_files"]
