"""The DAG trains what its config says (slow: snakemake on config/ci.yaml's smallest model): a changed setting
trains from step 0 with no manual step, a job stopped at its deadline resumes in the next, and the resumed model
is the uninterrupted one bit for bit."""
import os

import pytest

from conftest import smk

pytestmark = pytest.mark.slow
MODEL = "ar_pretrained"


def _train(results, *config, env=None):
    target = f"{results}/ci/models/{MODEL}/run/final"
    return smk("--cores", "2", "--nolock", "--configfile", "config/ci.yaml", "--config", f"results_dir={results}",
               *config, "--", target, env=env, timeout=600)


def _weights(results) -> bytes:
    return (results / "ci" / "models" / MODEL / "run" / "final" / "model.safetensors").read_bytes()


def _log(results) -> str:
    return (results / "ci" / "logs" / "train" / f"{MODEL}.log").read_text()


def test_a_changed_setting_retrains_from_step_0_and_a_stopped_job_resumes(tmp_path):
    r = _train(tmp_path)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    first = _weights(tmp_path)
    lr = f"models={{{MODEL}: {{train: {{optim: {{lr: 0.01}}}}}}}}"
    r = _train(tmp_path, lr)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "(optim.lr (0.003 -> 0.01)): removed, training from step 0" in _log(tmp_path)
    assert "resumed from" not in _log(tmp_path) and _weights(tmp_path) != first
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", FASTDLLM_TRAIN_DEADLINE="1")
    r = _train(tmp_path, env=env)  # back to the first lr, at a deadline already past: one step, a checkpoint
    assert r.returncode != 0 and "training stopped after step 1" in _log(tmp_path), (r.stdout + r.stderr)[-3000:]
    ck = tmp_path / "ci" / "models" / MODEL / "run" / "checkpoints"
    assert [p.name for p in ck.iterdir()] == ["step-1"]
    r = _train(tmp_path)  # the next job: the same run, resumed
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert f"resumed from {ck / 'step-1'}" in _log(tmp_path)
    assert _weights(tmp_path) == first
