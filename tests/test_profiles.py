"""Snakemake profiles: the paper config's one-GPU command limits the model jobs to one GPU at a time (issue 24)."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
COMMAND = "snakemake --profile profiles/local-gpu --configfile config/paper.yaml"


def _resources(monkeypatch, *argv):
    from snakemake.cli import parse_args

    monkeypatch.chdir(ROOT)  # the workflow profile (profiles/default) is found beside the Snakefile
    _, args = parse_args(["-n", *argv])
    return {k: v.value for k, v in (args.resources or {}).items()}


def test_local_gpu_profile_sets_a_global_gpu_limit(monkeypatch):
    assert _resources(monkeypatch, "--profile", "profiles/local-gpu") == {"gpu": 1}
    assert _resources(monkeypatch, "--profile", "profiles/local-gpu", "--resources", "gpu=2") == {"gpu": 2}
    assert "gpu" not in _resources(monkeypatch, "--profile", "profiles/slurm")  # the cluster schedules GPUs


@pytest.mark.parametrize("doc", ["README.md", "config/paper.yaml"])
def test_documented_one_gpu_command_uses_the_profile(doc):
    text = (ROOT / doc).read_text()
    assert COMMAND in text
    # no documented local paper-scale run without the GPU limit
    assert not re.search(r"snakemake --cores all --configfile config/paper\.yaml", text)
