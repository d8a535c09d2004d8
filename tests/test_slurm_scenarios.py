"""scripts/cluster/slurm_scenarios.py, run as the SLURM rehearsal runs it: the overlays and verdicts of the
rehearsal's time-limit and two-node scenarios (no SLURM daemon needed; the scenarios themselves run in
scripts/cluster/slurm_rehearsal.sh)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "cluster" / "slurm_scenarios.py"
C = "rule_train_model_wildcards_bd_pad_1.5b"


def scenario(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def jobs_check(tmp_path: Path, sacct: str) -> subprocess.CompletedProcess:
    (tmp_path / "sacct.txt").write_text(sacct)
    return scenario("timelimit-jobs", "bd_pad_1.5b", tmp_path / "sacct.txt")


def test_a_stopped_job_then_a_completed_one_passes(tmp_path):
    text = f"1|rule_standin_models|COMPLETED|0:0|00:05:00\n4|{C}|FAILED|1:0|00:02:00\n5|{C}|COMPLETED|0:0|00:02:00\n"
    r = jobs_check(tmp_path, text)
    assert r.returncode == 0 and "\n  4 FAILED 1:0 00:02:00\n  5 COMPLETED 0:0 00:02:00\n" in r.stdout
    assert "FAILED:" not in r.stdout
    # SLURM's kill at the limit (TIMEOUT) is a stop too
    assert jobs_check(tmp_path, text.replace("FAILED|1:0", "TIMEOUT|0:0")).returncode == 0


@pytest.mark.parametrize("text, why", [
    (f"4|{C}|COMPLETED|0:0|00:02:00\n", "1 train_model job(s): the training never went past its time limit"),
    (f"4|{C}|FAILED|1:0|00:02:00\n5|{C}|FAILED|1:0|00:02:00\n", "the last COMPLETED"),
    (f"4|{C}|COMPLETED|0:0|00:02:00\n5|{C}|COMPLETED|0:0|00:02:00\n", "every job but the last stopped"),
    ("4|rule_train_model_wildcards_ntp|FAILED|1:0|00:02:00\n", "0 train_model job(s)"),
])
def test_a_run_that_never_stopped_or_never_finished_fails(tmp_path, text, why):
    r = jobs_check(tmp_path, text)
    assert r.returncode == 1 and "TIME-LIMIT CHECK FAILED: " in r.stdout and why in r.stdout


def test_the_two_node_overlay_gives_each_process_one_micro_batch(tmp_path):
    assert scenario("nodes-overlay", "bd_pad_1.5b", 2, tmp_path / "n.yaml").returncode == 0
    doc = yaml.safe_load((tmp_path / "n.yaml").read_text())
    optim = doc["models"]["bd_pad_1.5b"]["train"]["optim"]
    assert doc["training_plan"] == {"gpus": 4, "nodes": 2} and optim["batch_size"] == 4
    assert optim["micro_batch_size"] == 1 and doc["models"]["bd_pad_1.5b"]["train"]["processes"] == 2
    r = scenario("nodes-overlay", "bd_pad_1.5b", 1, tmp_path / "n1.yaml")
    assert r.returncode == 1 and "give 2 or more" in r.stderr and not (tmp_path / "n1.yaml").exists()


def test_an_unknown_scenario_prints_the_usage():
    r = scenario("nope")
    assert r.returncode == 1 and "timelimit-jobs MODEL SACCT_PARSABLE" in r.stderr
