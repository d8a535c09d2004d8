"""scripts/dev/slurm_scenarios.py: the overlays and verdicts of the SLURM rehearsal's time-limit and two-node
scenarios (no SLURM daemon needed; the scenarios themselves run in scripts/dev/slurm_rehearsal.sh)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("slurm_scenarios", ROOT / "scripts/dev/slurm_scenarios.py")
scen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scen)

C = "rule_train_model_wildcards_bd_pad_1.5b"


def test_a_stopped_job_then_a_completed_one_passes():
    text = f"1|rule_standin_models|COMPLETED|0:0|00:05:00\n4|{C}|FAILED|1:0|00:02:00\n5|{C}|COMPLETED|0:0|00:02:00\n"
    jobs, problems = scen.job_problems(text, "bd_pad_1.5b")
    assert jobs == [("4", "FAILED", "1:0", "00:02:00"), ("5", "COMPLETED", "0:0", "00:02:00")] and problems == []
    # SLURM's kill at the limit (TIMEOUT) is a stop too
    assert scen.job_problems(text.replace("FAILED|1:0", "TIMEOUT|0:0"), "bd_pad_1.5b")[1] == []


@pytest.mark.parametrize("text, why", [
    (f"4|{C}|COMPLETED|0:0|00:02:00\n", "1 train_model job(s): the training never went past its time limit"),
    (f"4|{C}|FAILED|1:0|00:02:00\n5|{C}|FAILED|1:0|00:02:00\n", "the last COMPLETED"),
    (f"4|{C}|COMPLETED|0:0|00:02:00\n5|{C}|COMPLETED|0:0|00:02:00\n", "every job but the last stopped"),
    (f"4|rule_train_model_wildcards_ntp|FAILED|1:0|00:02:00\n", "0 train_model job(s)"),
])
def test_a_run_that_never_stopped_or_never_finished_fails(text, why):
    assert why in scen.job_problems(text, "bd_pad_1.5b")[1][0]


def test_the_two_node_overlay_gives_each_process_one_micro_batch(tmp_path):
    scen.nodes_overlay("bd_pad_1.5b", 2, str(tmp_path / "n.yaml"))
    doc = yaml.safe_load((tmp_path / "n.yaml").read_text())
    optim = doc["models"]["bd_pad_1.5b"]["train"]["optim"]
    assert doc["training_plan"] == {"gpus": 4, "nodes": 2} and optim["batch_size"] == 4
    assert optim["micro_batch_size"] == 1 and doc["models"]["bd_pad_1.5b"]["train"]["processes"] == 2
    with pytest.raises(SystemExit, match="give 2 or more"):
        scen.nodes_overlay("bd_pad_1.5b", 1, str(tmp_path / "n1.yaml"))
