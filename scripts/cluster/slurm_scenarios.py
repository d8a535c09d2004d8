"""The SLURM rehearsal's scenarios (scripts/cluster/slurm_rehearsal.sh with REHEARSAL_TRAIN_ONLY=<model>): their config
overlays and their checks.

Time limit (REHEARSAL_TIME_LIMIT=<minutes>): one training job longer than its time limit, finished by the job
Snakemake submits after it.
  timelimit-overlay: measure this machine's steps per second on the model's rehearsal training (2 processes, 80
           steps less 20), then write a config overlay: ``training_plan`` with ``job_minutes: <minutes>`` (every
           training job asks SLURM for that limit; retries from the plan, 3 spare jobs) and the model's
           ``optim.max_steps`` sized to ~1.4 jobs of training, with no periodic checkpoint (the only checkpoints
           are the ones a stop writes).
  timelimit-check: after the run: sacct's allocations of the model's train_model jobs (the first ones not
           COMPLETED, the last COMPLETED), the steps each job trained (their logs), and the run's losses and final
           weights against an uninterrupted run of the same train_config.yaml (2 processes, here, no SLURM).
  timelimit-jobs: the sacct part of timelimit-check alone (no training; e.g. on a kept sacct output).
Nodes (REHEARSAL_NODES=N): one training job over N nodes.
  nodes-overlay: ``training_plan`` of N nodes (2 processes each) and a global batch of 2N micro-batches, so that
           each of the 2N processes has one.
  nodes-check: the run's losses against a 1-process run of the same train_config.yaml, to the 6 printed decimals.
Exit 1 on any failure.

  python scripts/cluster/slurm_scenarios.py timelimit-overlay MODEL MINUTES MARGIN_S OUT.yaml CONFIGFILE...
  python scripts/cluster/slurm_scenarios.py timelimit-check MODEL SACCT_PARSABLE RUN_DIR LOG...
  python scripts/cluster/slurm_scenarios.py timelimit-jobs MODEL SACCT_PARSABLE
  python scripts/cluster/slurm_scenarios.py nodes-overlay MODEL N OUT.yaml
  python scripts/cluster/slurm_scenarios.py nodes-check RUN_DIR

SACCT_PARSABLE: `sacct -X -n -P -o JobID,Comment,State,ExitCode,Timelimit`; LOG: a log file, or a directory searched
for *.log.
"""
from __future__ import annotations

import csv
import math
import re
import sys
import tempfile
import time
from pathlib import Path

import yaml

STARTUP_S = 30  # the job's start before its first step (jobstep, imports, torchrun, model load), a bound
SPAN = 1.4      # training sized to this many jobs' worth of steps


def steps_per_s(config: dict, model: str, short: int = 20, long: int = 80) -> float:
    """Optimiser steps per second of ``model``'s training config here (2 processes): the wall-time difference of a
    ``long`` and a ``short`` run (after a first, cold one), so that start-up does not count."""
    from fastdllm_core.training.launch import train_processes
    from fastdllm_dag.plan import models as plan

    m = config["models"][model]["train"]
    walls = []
    for steps in (short, short, long):  # the first one pays the cold start (imports, file caches) and is not used
        m["optim"] = {**(m.get("optim") or {}), "max_steps": steps}
        cfg = plan.training_config(config, model, plan.train_files(config, model))
        cfg["train"]["save_every"] = steps
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            train_processes(cfg, d, 2)
            walls.append(time.perf_counter() - t)
    if walls[2] <= walls[1]:
        sys.exit(f"calibration: {long} steps took {walls[2]:.1f} s, {short} steps {walls[1]:.1f} s: not a speed")
    return (long - short) / (walls[2] - walls[1])


def overlay(model: str, minutes: int, margin_s: float, out: str, configfiles: list[str]) -> None:
    from fastdllm_core.cli.plan_training import load_config  # the DAG's merge, over config.yaml unless standalone

    config = load_config(configfiles)
    if "train" not in (config["models"].get(model) or {}):
        sys.exit(f"REHEARSAL_TRAIN_ONLY={model!r} is not a trained model of {configfiles}")
    rate = steps_per_s(config, model)
    per_job = minutes * 60 - STARTUP_S - margin_s
    if per_job < 20:
        sys.exit(f"REHEARSAL_TIME_LIMIT={minutes} min leaves {per_job:.0f} s of training per job "
                 f"(start-up {STARTUP_S} s, margin {margin_s:.0f} s): give a longer limit")
    steps = math.ceil(SPAN * per_job * rate)
    # spare_jobs 3: up to 4 jobs, for a job that trains slower than the measurement here (measured: 0.57x, the
    # job step's Snakemake and the checkpoint beside the training)
    doc = {"training_plan": {"gpus": 2, "gpu_mem_gb": 80, "nodes": 1, "job_minutes": minutes, "spare_jobs": 3},
           "models": {model: {"train": {"optim": {"max_steps": steps, "warmup_steps": 1},
                                        "train": {"save_every": steps}}}}}
    Path(out).write_text(f"# REHEARSAL_TIME_LIMIT: {rate:.1f} steps/s measured here; {steps} steps ~ {SPAN} jobs "
                         f"of {minutes} min\n" + yaml.safe_dump(doc, sort_keys=False))
    print(f"{rate:.1f} steps/s here: max_steps {steps} (~{steps / rate:.0f} s of training; each {minutes}-min job "
          f"trains ~{per_job:.0f} s)")


def _losses(path: Path) -> dict[int, str]:
    rows = list(csv.DictReader(open(path)))
    steps = [int(r["step"]) for r in rows]
    if len(steps) != len(set(steps)):
        raise AssertionError(f"{path}: a step is logged twice")
    return {int(r["step"]): r["loss"] for r in rows}


def _weights_equal(a: Path, b: Path) -> str | None:
    import torch
    from safetensors.torch import load_file

    wa = {k: v for f in sorted(a.glob("*.safetensors")) for k, v in load_file(f).items()}
    wb = {k: v for f in sorted(b.glob("*.safetensors")) for k, v in load_file(f).items()}
    if wa.keys() != wb.keys():
        return f"weights differ in names ({len(wa)} vs {len(wb)} tensors)"
    bad = [k for k in wa if not torch.equal(wa[k], wb[k])]
    return f"{len(bad)} of {len(wa)} weight tensors differ (first: {bad[0]})" if bad else None


def job_problems(sacct_text: str, model: str) -> tuple[list[tuple[str, ...]], list[str]]:
    """The model's train_model allocations in ``sacct -X -n -P -o JobID,Comment,State,ExitCode,Timelimit`` output
    (JobID, State, ExitCode, Timelimit), and what is wrong with them: fewer than 2 (the training never went past a
    limit), or not every one but the last stopped and the last COMPLETED."""
    rows = [ln.split("|") for ln in sacct_text.splitlines() if ln.strip()]
    jobs = [(r[0], r[2], r[3], r[4]) for r in rows if len(r) == 5 and r[1] == f"rule_train_model_wildcards_{model}"]
    if len(jobs) < 2:
        return jobs, [f"{len(jobs)} train_model job(s): the training never went past its time limit"]
    if jobs[-1][1] != "COMPLETED" or any(j[1] == "COMPLETED" for j in jobs[:-1]):
        return jobs, ["expected every job but the last stopped, the last COMPLETED"]
    return jobs, []


def _jobs(model: str, sacct_file: str) -> tuple[list[tuple[str, ...]], list[str]]:
    """:func:`job_problems` of ``sacct_file``, the jobs printed."""
    jobs, fails = job_problems(Path(sacct_file).read_text(), model)
    print("train_model jobs (JobID State ExitCode Timelimit):", *(" ".join(j) for j in jobs), sep="\n  ")
    return jobs, fails


def jobs_check(model: str, sacct_file: str) -> int:
    """The sacct part of :func:`check` alone: exit status 1 and every problem printed when the jobs are not some
    stopped ones then a COMPLETED one."""
    jobs, fails = _jobs(model, sacct_file)
    for f in fails:
        print("TIME-LIMIT CHECK FAILED:", f)
    print("train_model jobs: " + ("FAILED" if fails else f"passed ({len(jobs)} jobs, the last COMPLETED)"))
    return 1 if fails else 0


def check(model: str, sacct_file: str, run_dir: str, *logs: str) -> int:
    jobs, fails = _jobs(model, sacct_file)
    for log in [f for p in map(Path, logs) for f in (sorted(p.glob("**/*.log")) if p.is_dir() else [p])]:
        text = log.read_text(errors="replace") if log.is_file() else ""  # each job's executor log, the rule's log
        for ck in dict.fromkeys(re.findall(r"the next attempt resumes from (\S+)", text)):
            print(f"  {log.parent.name}/{log.name}: stopped; the next attempt resumes from {ck}")
        for ck in dict.fromkeys(re.findall(r"resumed from (\S+)", text)):
            print(f"  {log.parent.name}/{log.name}: resumed from {ck}")
    run = Path(run_dir)
    cfg = yaml.safe_load(open(run / "train_config.yaml"))
    from fastdllm_core.training.launch import train_processes

    with tempfile.TemporaryDirectory() as ref:
        t = time.time()
        train_processes(cfg, ref, 2)
        print(f"uninterrupted run of {run / 'train_config.yaml'} here: {time.time() - t:.0f} s")
        got, want = _losses(run / "metrics.csv"), _losses(Path(ref) / "metrics.csv")
        if got != want:
            diff = [s for s in want if got.get(s) != want[s]]
            fails.append(f"losses differ from the uninterrupted run at {len(diff)} of {len(want)} steps "
                         f"(first: step {diff[0] if diff else '?'})")
        else:
            print(f"losses equal the uninterrupted run's at all {len(want)} steps")
        bad = _weights_equal(run / "final", Path(ref) / "final")
        fails.append(bad) if bad else print("final weights equal the uninterrupted run's (torch.equal)")
    for f in fails:
        print("TIME-LIMIT CHECK FAILED:", f)
    print("time-limit check: " + ("FAILED" if fails else f"passed ({len(jobs)} jobs, the last COMPLETED)"))
    return 1 if fails else 0


def nodes_overlay(model: str, nodes: int, out: str) -> None:
    if nodes < 2:
        sys.exit(f"REHEARSAL_NODES={nodes}: give 2 or more")
    doc = {"training_plan": {"gpus": 2 * nodes, "nodes": nodes},
           "models": {model: {"train": {"processes": 2, "optim": {
               "max_steps": 4, "warmup_steps": 1, "batch_size": 2 * nodes, "micro_batch_size": 1}}}}}
    Path(out).write_text(f"# REHEARSAL_NODES={nodes}: 2 processes on each node, one micro-batch each\n"
                         + yaml.safe_dump(doc, sort_keys=False))


def nodes_check(run_dir: str) -> int:
    run = Path(run_dir)
    rows = list(csv.DictReader(open(run / "metrics.csv")))
    print(f"{run / 'metrics.csv'}: {len(rows)} steps, world_size {sorted({r['world_size'] for r in rows})}")
    from fastdllm_core.training.loop import train

    with tempfile.TemporaryDirectory() as ref:
        train(yaml.safe_load(open(run / "train_config.yaml")), ref)  # one process, here
        want = {int(r["step"]): float(r["loss"]) for r in csv.DictReader(open(Path(ref) / "metrics.csv"))}
    got = {int(r["step"]): float(r["loss"]) for r in rows}
    if got.keys() != want.keys():
        print(f"NODES CHECK FAILED: steps {sorted(got)} against the 1-process run's {sorted(want)}")
        return 1
    diff = max(abs(got[s] - want[s]) for s in want)
    for s in sorted(want):
        print(f"  step {s}: loss {got[s]:.6f} ({rows[0]['world_size']} processes) vs {want[s]:.6f} (1 process)")
    ok = diff <= 1.5e-6  # the 6 printed decimals (a last-digit rounding apart)
    print(f"nodes check: {'passed' if ok else 'FAILED'} (largest loss difference to the 1-process run {diff:.1e})")
    return 0 if ok else 1


if __name__ == "__main__":
    cmd, *args = sys.argv[1:] or [""]
    if cmd == "timelimit-overlay" and len(args) >= 5:
        overlay(args[0], int(args[1]), float(args[2]), args[3], args[4:])
    elif cmd == "timelimit-check" and len(args) >= 4:
        sys.exit(check(*args))
    elif cmd == "timelimit-jobs" and len(args) == 2:
        sys.exit(jobs_check(*args))
    elif cmd == "nodes-overlay" and len(args) == 3:
        nodes_overlay(args[0], int(args[1]), args[2])
    elif cmd == "nodes-check" and len(args) == 1:
        sys.exit(nodes_check(args[0]))
    else:
        sys.exit(__doc__)
