"""Check one ``train_model`` SLURM job of scripts/cluster/slurm_rehearsal.sh against the shape its profile asked for.

    python scripts/cluster/slurm_train_check.py SACCT_P PROFILE TRAINING_METRICS_CSV [NODES]

``SACCT_P``: ``sacct -j <id> -n -P --format=JobID,JobName,NNodes,NTasks,AllocCPUS,State`` of the job (allocation and
every step); ``PROFILE``: the profile's config.yaml (``set-resources.train_model``: ``nodes``, default 1, and
``cpus_per_task``: the data-parallel processes per node of a CPU job, as ``gres gpu:<model>:N`` gives N GPUs per node
on the GPU cluster); ``TRAINING_METRICS_CSV``: the job's output, whose ``world_size`` column is the number of
training processes that ran; ``NODES``: the nodes the job asked for (the rule's, from the config's training plan;
default: the profile's ``nodes``, else 1).  Checked: the allocation has the nodes and CPUs asked for, every row
(allocation, batch step, Snakemake's job step, a per-node launch step) is COMPLETED, one step ran one task on each
node, and the training ran nodes x processes processes.  Prints the verdict; exit status 1 with every problem named.
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

FIELDS = ("JobID", "JobName", "NNodes", "NTasks", "AllocCPUS", "State")


def parse_sacct(text: str) -> list[dict]:
    """Rows of ``sacct -n -P`` output in the order of :data:`FIELDS`."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            values = line.split("|")
            if len(values) != len(FIELDS):
                raise ValueError(f"sacct line {line!r}: {len(values)} fields, {len(FIELDS)} expected ({FIELDS})")
            rows.append(dict(zip(FIELDS, values)))
    return rows


def requested(profile: dict, nodes: int | None = None) -> tuple[int, int]:
    """(nodes, processes per node) that ``profile`` asks for ``train_model``: ``nodes`` when given (the rule's,
    from the training plan), else the profile's (default 1)."""
    res = (profile.get("set-resources") or {}).get("train_model")
    if not res or "cpus_per_task" not in res:
        raise ValueError("the profile has no set-resources.train_model.cpus_per_task (the processes per node)")
    return int(nodes if nodes is not None else res.get("nodes", 1)), int(res["cpus_per_task"])


def problems(rows: list[dict], nodes: int, per_node: int, world_sizes: list[int]) -> list[str]:
    """Every way the job differs from ``nodes`` nodes x ``per_node`` processes, all steps COMPLETED."""
    if not rows:
        return ["sacct shows no row for the job"]
    out = [f"{r['JobID']} ({r['JobName']}): state {r['State']}, not COMPLETED" for r in rows
           if r["State"] != "COMPLETED"]
    alloc = [r for r in rows if "." not in r["JobID"]]
    if len(alloc) != 1:
        out.append(f"{len(alloc)} allocation rows (JobID without a step), 1 expected")
    else:
        if int(alloc[0]["NNodes"]) != nodes:
            out.append(f"allocation has {alloc[0]['NNodes']} node(s), the profile asks for {nodes}")
        if int(alloc[0]["AllocCPUS"]) != nodes * per_node:
            out.append(f"allocation has {alloc[0]['AllocCPUS']} CPUs, the profile asks for {nodes} x {per_node}")
    steps = [r for r in rows if "." in r["JobID"]]
    if not any(r["JobID"].endswith(".batch") for r in steps):
        out.append("no batch step")
    if not any(r["NTasks"].isdigit() and int(r["NNodes"]) == int(r["NTasks"]) == nodes for r in steps
               if not r["JobID"].endswith((".batch", ".extern"))):
        out.append(f"no step ran one task on each of the {nodes} node(s)")
    want = nodes * per_node
    if not world_sizes:
        out.append("the training metrics have no rows")
    elif set(world_sizes) != {want}:
        out.append(f"training world_size {sorted(set(world_sizes))}, {want} processes expected "
                   f"({nodes} node(s) x {per_node})")
    return out


def main(argv: list[str]) -> int:
    import yaml

    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    rows = parse_sacct(Path(argv[0]).read_text())
    nodes, per_node = requested(yaml.safe_load(Path(argv[1]).read_text()), int(argv[3]) if len(argv) == 4 else None)
    with open(argv[2], newline="") as fh:
        world = [int(r["world_size"]) for r in csv.DictReader(fh)]
    found = problems(rows, nodes, per_node, world)
    for p in found:
        print(f"TRAIN CHECK FAILED: {p}")
    if not found:
        print(f"TRAIN CHECK OK: {len(rows)} sacct rows, all COMPLETED; {nodes} node(s), one task per node; "
              f"{nodes * per_node} training processes (world_size in every metrics row)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
