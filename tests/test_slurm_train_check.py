"""scripts/cluster/slurm_train_check.py, run as the SLURM rehearsal runs it: the sacct check of the rehearsal's
training job (no SLURM daemon needed)."""
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "cluster" / "slurm_train_check.py"
REHEARSAL = ROOT / "profiles" / "slurm-rehearsal" / "config.yaml"

# sacct -j 7 -n -P --format=JobID,JobName,NNodes,NTasks,AllocCPUS,State of a one-node job (snakemake's job step 0)
ONE_NODE = "7|uuid|1||2|COMPLETED\n7.batch|batch|1|1|2|COMPLETED\n7.0|python3.11|1|1|2|COMPLETED\n"
# two nodes: the job step, then launch_command's srun --nodes=2 --ntasks-per-node=1 (one torchrun per node)
TWO_NODES = ("8|uuid|2||4|COMPLETED\n8.batch|batch|1|1|2|COMPLETED\n8.0|python3.11|1|1|2|COMPLETED\n"
             "8.1|python3.11|2|2|4|COMPLETED\n")


def train_check(tmp_path: Path, sacct: str, world: list[int], per_node: int | None = None, nodes: int | None = None,
                profile: Path = REHEARSAL) -> tuple[int, str]:
    """(exit status, output) of the check on ``sacct`` and a metrics CSV of ``world`` sizes; ``per_node``: a
    profile asking for that many processes per node instead of ``profile``; ``nodes``: the NODES argument."""
    (tmp_path / "sacct.txt").write_text(sacct)
    (tmp_path / "metrics.csv").write_text("step,world_size\n" + "".join(f"{i},{w}\n" for i, w in enumerate(world)))
    if per_node is not None:
        profile = tmp_path / "profile.yaml"
        profile.write_text(yaml.safe_dump({"set-resources": {"train_model": {"cpus_per_task": per_node}}}))
    args = [tmp_path / "sacct.txt", profile, tmp_path / "metrics.csv"] + ([nodes] if nodes is not None else [])
    r = subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def test_a_complete_job_of_the_requested_shape_passes(tmp_path):
    rc, out = train_check(tmp_path, ONE_NODE, [2, 2], per_node=2)
    assert rc == 0 and "TRAIN CHECK OK: 3 sacct rows, all COMPLETED; 1 node(s)" in out
    rc, out = train_check(tmp_path, TWO_NODES, [4, 4], per_node=2, nodes=2)
    assert rc == 0 and "2 node(s), one task per node; 4 training processes" in out


@pytest.mark.parametrize("text,nodes,per_node,world,match", [
    (ONE_NODE.replace("7.0|python3.11|1|1|2|COMPLETED", "7.0|python3.11|1|1|2|FAILED"), 1, 2, [2],
     "7.0 (python3.11): state FAILED"),
    (ONE_NODE.replace("7.0|python3.11|1|1|2|COMPLETED\n", ""), 1, 2, [2], "no step ran one task on each of the 1"),
    (TWO_NODES.replace("8.1|python3.11|2|2|4|COMPLETED\n", ""), 2, 2, [4], "no step ran one task on each of the 2"),
    (TWO_NODES.replace("8.1|python3.11|2|2|", "8.1|python3.11|2|1|"), 2, 2, [4], "no step ran one task on each"),
    (ONE_NODE.replace("7.batch|batch|1|1|2|COMPLETED\n", ""), 1, 2, [2], "no batch step"),
    (ONE_NODE, 2, 2, [4], "allocation has 1 node(s), the profile asks for 2"),
    (ONE_NODE, 1, 4, [4], "allocation has 2 CPUs, the profile asks for 1 x 4"),
    (ONE_NODE, 1, 2, [1, 1], "world_size [1], 2 processes expected"),
    (ONE_NODE, 1, 2, [], "metrics have no rows"),
    ("", 1, 2, [2], "no row for the job"),
])
def test_a_missing_or_failed_task_is_named(tmp_path, text, nodes, per_node, world, match):
    rc, out = train_check(tmp_path, text, world, per_node=per_node, nodes=nodes)
    assert rc == 1 and "TRAIN CHECK FAILED: " in out and match in out, out


def test_a_malformed_sacct_line_is_named(tmp_path):
    rc, out = train_check(tmp_path, "7|uuid|1|COMPLETED\n", [2], per_node=2)
    assert rc != 0 and "6 expected" in out


def test_requested_shape_of_the_rehearsal_profile_mirrors_the_slurm_profile(tmp_path):
    """profiles/slurm: the nodes of the config's training plan (the rule's, not pinned by the profile), one task a
    node, torchrun with one process per GPU of gres gpu:a100:8; the rehearsal: one node (its cluster has one),
    one task, one process per CPU, as many as the rehearsal config's training processes."""
    gpu = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())["set-resources"]["train_model"]
    assert "nodes" not in gpu
    per_node = yaml.safe_load(REHEARSAL.read_text())["set-resources"]["train_model"]["cpus_per_task"]
    models = yaml.safe_load((ROOT / "config/rehearsal.yaml").read_text())["models"]
    trained = {m: v["train"] for m, v in models.items() if "train" in v}
    assert per_node == 2 and trained and {t.get("processes") for t in trained.values()} == {per_node}
    assert train_check(tmp_path, ONE_NODE, [2, 2])[0] == 0  # the profile's shape: 1 node x 2 processes
    rc, out = train_check(tmp_path, ONE_NODE, [2, 2], nodes=2)  # the plan's 2 nodes (the rule's) on a 1-node job
    assert rc == 1 and "allocation has 1 node(s), the profile asks for 2" in out and "4 processes expected" in out
    bare = tmp_path / "bare.yaml"
    bare.write_text(yaml.safe_dump({"set-resources": {"train_model": {"nodes": 1}}}))
    rc, out = train_check(tmp_path, ONE_NODE, [2], profile=bare)
    assert rc != 0 and "set-resources.train_model.cpus_per_task" in out


def test_wrong_arguments_print_the_usage(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "only-one"], capture_output=True, text=True)
    assert r.returncode == 2 and "SACCT_P PROFILE TRAINING_METRICS_CSV" in r.stderr
