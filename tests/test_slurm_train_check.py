"""scripts/dev/slurm_train_check.py: the sacct check of the rehearsal's training job (no SLURM daemon needed)."""
import importlib.util
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("slurm_train_check", ROOT / "scripts/dev/slurm_train_check.py")
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

# sacct -j 7 -n -P --format=JobID,JobName,NNodes,NTasks,AllocCPUS,State of a one-node job (snakemake's job step 0)
ONE_NODE = "7|uuid|1||2|COMPLETED\n7.batch|batch|1|1|2|COMPLETED\n7.0|python3.11|1|1|2|COMPLETED\n"
# two nodes: the job step, then launch_command's srun --nodes=2 --ntasks-per-node=1 (one torchrun per node)
TWO_NODES = ("8|uuid|2||4|COMPLETED\n8.batch|batch|1|1|2|COMPLETED\n8.0|python3.11|1|1|2|COMPLETED\n"
             "8.1|python3.11|2|2|4|COMPLETED\n")


def test_a_complete_job_of_the_requested_shape_passes():
    assert check.problems(check.parse_sacct(ONE_NODE), 1, 2, [2, 2]) == []
    assert check.problems(check.parse_sacct(TWO_NODES), 2, 2, [4, 4]) == []


@pytest.mark.parametrize("text,nodes,per_node,world,match", [
    (ONE_NODE.replace("7.0|python3.11|1|1|2|COMPLETED", "7.0|python3.11|1|1|2|FAILED"), 1, 2, [2],
     r"7\.0 \(python3\.11\): state FAILED"),
    (ONE_NODE.replace("7.0|python3.11|1|1|2|COMPLETED\n", ""), 1, 2, [2], "no step ran one task on each of the 1"),
    (TWO_NODES.replace("8.1|python3.11|2|2|4|COMPLETED\n", ""), 2, 2, [4], "no step ran one task on each of the 2"),
    (TWO_NODES.replace("8.1|python3.11|2|2|", "8.1|python3.11|2|1|"), 2, 2, [4], "no step ran one task on each"),
    (ONE_NODE.replace("7.batch|batch|1|1|2|COMPLETED\n", ""), 1, 2, [2], "no batch step"),
    (ONE_NODE, 2, 2, [4], "allocation has 1 node.*asks for 2"),
    (ONE_NODE, 1, 4, [4], "allocation has 2 CPUs, the profile asks for 1 x 4"),
    (ONE_NODE, 1, 2, [1, 1], r"world_size \[1\], 2 processes expected"),
    (ONE_NODE, 1, 2, [], "metrics have no rows"),
    ("", 1, 2, [2], "no row for the job"),
])
def test_a_missing_or_failed_task_is_named(text, nodes, per_node, world, match):
    found = check.problems(check.parse_sacct(text), nodes, per_node, world)
    assert any(re.search(match, p) for p in found), found


def test_a_malformed_sacct_line_is_named():
    with pytest.raises(ValueError, match="6 expected"):
        check.parse_sacct("7|uuid|1|COMPLETED")


def test_requested_shape_of_the_rehearsal_profile_mirrors_the_slurm_profile():
    """profiles/slurm: the nodes of the config's training plan (the rule's, not pinned by the profile), one task a
    node, torchrun with one process per GPU of gres gpu:a100:8; the rehearsal: one node (its cluster has one),
    one task, one process per CPU, as many as the rehearsal config's training processes."""
    prof = yaml.safe_load((ROOT / "profiles/slurm-rehearsal/config.yaml").read_text())
    gpu = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())["set-resources"]["train_model"]
    nodes, per_node = check.requested(prof)
    assert nodes == 1 and per_node == 2 and "nodes" not in gpu
    models = yaml.safe_load((ROOT / "config/rehearsal.yaml").read_text())["models"]
    trained = {m: v["train"] for m, v in models.items() if "train" in v}
    assert trained and {t.get("processes") for t in trained.values()} == {per_node}
    assert check.requested(prof, 2) == (2, 2)  # the rule's nodes (the training plan's), given by the rehearsal
    with pytest.raises(ValueError, match="set-resources.train_model.cpus_per_task"):
        check.requested({"set-resources": {"train_model": {"nodes": 1}}})


def test_main_fails_loudly(tmp_path, capsys):
    (tmp_path / "s.txt").write_text(ONE_NODE.replace("7.0|python3.11|1|1|2|COMPLETED\n", ""))
    (tmp_path / "m.csv").write_text("step,world_size\n1,2\n2,2\n")
    rc = check.main([str(tmp_path / "s.txt"), str(ROOT / "profiles/slurm-rehearsal/config.yaml"),
                     str(tmp_path / "m.csv")])
    assert rc == 1 and "TRAIN CHECK FAILED: no step ran one task" in capsys.readouterr().out
    (tmp_path / "s.txt").write_text(ONE_NODE)
    assert check.main([str(tmp_path / "s.txt"), str(ROOT / "profiles/slurm-rehearsal/config.yaml"),
                       str(tmp_path / "m.csv")]) == 0
    out = capsys.readouterr().out
    assert check.main([str(tmp_path / "s.txt"), str(ROOT / "profiles/slurm-rehearsal/config.yaml"),
                       str(tmp_path / "m.csv"), "2"]) == 1  # the plan's 2 nodes against a 1-node job
    out = capsys.readouterr().out
    assert "allocation has 1 node(s), the profile asks for 2" in out and "4 processes expected" in out
