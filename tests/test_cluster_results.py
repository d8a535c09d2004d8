"""The committed SLURM rehearsal results (results/cluster/slurm_timelimit, results/cluster/slurm_two_nodes): what
their READMEs say is what their sacct output, checks and metrics hold."""
from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "results" / "cluster"


def test_time_limit_run_stopped_once_and_the_retry_finished_it():
    d = CLUSTER / "slurm_timelimit"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "cluster" / "slurm_scenarios.py"), "timelimit-jobs",
                        "bd_pad_1.5b", str(d / "timelimit_sacct.txt")], capture_output=True, text=True)
    jobs = [ln.split() for ln in r.stdout.splitlines() if ln.startswith("  ")]
    assert r.returncode == 0 and [j[1] for j in jobs] == ["FAILED", "COMPLETED"] and jobs[0][3] == "00:02:00"
    check = (d / "timelimit_check.txt").read_text()
    assert "losses equal the uninterrupted run's at all 1660 steps" in check
    assert "final weights equal the uninterrupted run's" in check and check.rstrip().endswith(
        "time-limit check: passed (2 jobs, the last COMPLETED)")
    assert "resumes from results/rehearsal/rehearsal/models/bd_pad_1.5b/run/checkpoints/step-1301" in check
    readme = (d / "README.md").read_text()
    sacct = (d / "sacct.txt").read_text()
    assert "00:01:45" in sacct and "00:00:56" in sacct and "1:45" in readme and "56 s" in readme
    assert "max_steps: 1660" in (d / "timelimit.yaml").read_text() and "1660 steps" in readme


def test_two_node_run_used_both_nodes_and_matched_one_process():
    d = CLUSTER / "slurm_two_nodes"
    steps = [ln.split() for ln in (d / "train_sacct.txt").read_text().splitlines()[2:]]
    launch = [s for s in steps if s[0].endswith(".1")]
    assert launch and launch[0][2:4] == ["2", "2"] and all(s[-3] == "COMPLETED" for s in steps)
    world = {r["world_size"] for r in csv.DictReader(open(d / "training_metrics.csv"))}
    assert world == {"4"} and "TRAIN CHECK OK" in (d / "train_check.txt").read_text()
    assert "nodes check: passed (largest loss difference to the 1-process run 0.0e+00)" in (
        d / "nodes_check.txt").read_text()
    assert "rh-node1" in (d / "sinfo.txt").read_text() and "rh-node2" in (d / "sinfo.txt").read_text()
