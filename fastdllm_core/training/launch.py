"""Starting the training processes: :func:`launch_command` builds the launcher command (one node: ``torchrun
--standalone``; a multi-node SLURM allocation: ``srun`` one ``torchrun`` per node, c10d rendezvous on the first
node), :func:`train_launched` runs it on the same resolved config, :func:`train_processes` is the CPU policy
(``threads`` processes of one thread each, gloo)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import yaml

from .config import TrainConfig
from .loop import check_split, train
from .run_identity import prefetch_init

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS",
                    "VECLIB_MAXIMUM_THREADS", "GOTO_NUM_THREADS")
RDZV_PORT = 29400
# what a stopped launch gives its ranks to write their checkpoint before it is killed (a 7B FSDP one takes minutes)
STOP_GRACE_S = 300


def slurm_hostnames(nodelist: str) -> list[str]:
    """The hosts of a SLURM node list (``node[01-04]``), through ``scontrol show hostnames``."""
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], check=True, capture_output=True, text=True)
    return out.stdout.split()


def _posint(name: str, v) -> int:
    """``v`` (an int or its decimal string, as in an environment) as a positive integer, or a named error."""
    ok = (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v.strip().isdigit())
    if not ok or int(v) < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


NODE_VARIABLES = ("SLURM_JOB_NUM_NODES", "SLURM_NNODES")  # the job's, else the step's


def allocation_nodes(env: Mapping[str, str]) -> int:
    """Nodes of the SLURM allocation ``env`` runs in (1 outside one): the job's ``SLURM_JOB_NUM_NODES``, else
    ``SLURM_NNODES`` (snakemake's jobstep runs the job in a 1-node step, whose count is not the job's)."""
    key = next((k for k in NODE_VARIABLES if env.get(k)), None)
    return _posint(key, env[key]) if key else 1


RESOLVED_VAR = "FASTDLLM_ALLOCATION_OF"  # the job id whose nodes job_allocation put in the environment


def job_allocation(env: Mapping[str, str], run=subprocess.run) -> dict:
    """``env`` with the SLURM job's own node count and node list (``SLURM_JOB_NUM_NODES``, ``SLURM_JOB_NODELIST``),
    asked of SLURM (``squeue -h -j $SLURM_JOB_ID -o '%D|%N'``) when ``env`` is inside a job: Snakemake's job step is
    an ``srun -n1`` started with the allocation's variables removed, so its environment shows the step's one node,
    not the job's (measured on the 2-node rehearsal cluster, scripts/cluster/slurm_rehearsal.sh).  Unchanged outside a
    job, when squeue does not answer (a warning), or when ``env`` is already this function's answer for the job
    (marked ``RESOLVED_VAR``: one squeue call per job start, whoever asks again)."""
    env = dict(env)
    if not env.get("SLURM_JOB_ID") or env.get(RESOLVED_VAR) == env["SLURM_JOB_ID"]:
        return env
    try:
        out = run(["squeue", "-h", "-j", env["SLURM_JOB_ID"], "-o", "%D|%N"], capture_output=True, text=True,
                  timeout=60)
        m = None if out.returncode else re.fullmatch(r"(\d+)\|(\S+)", (out.stdout or "").strip())
    except (OSError, subprocess.SubprocessError):
        m = None
    if m is None:
        print(f"warning: squeue did not give job {env['SLURM_JOB_ID']}'s nodes; using the environment's",
              file=sys.stderr)
        return env
    return {**env, "SLURM_JOB_NUM_NODES": m.group(1), "SLURM_JOB_NODELIST": m.group(2),
            RESOLVED_VAR: env["SLURM_JOB_ID"]}


def launch_command(env: Mapping[str, str], train_args: list[str], *, processes_per_node, optim=None,
                   nodes=None, port: int = RDZV_PORT, hostnames: Callable[[str], list[str]] = slurm_hostnames,
                   python: str = sys.executable) -> list[str]:
    """The command that starts ``processes_per_node`` training processes on each node (``train_args``: the
    arguments of ``python -m``, e.g. ``fastdllm_core.cli train --config C --output-dir D``).

    ``env`` is the environment of the job: with ``SLURM_JOB_NUM_NODES`` (else ``SLURM_NNODES``) > 1 (a
    multi-node allocation) the command is ``srun --nodes=N --ntasks-per-node=1 --overlap torchrun --nnodes N ...
    --rdzv-backend c10d --rdzv-endpoint HEAD:port
    --rdzv-id SLURM_JOB_ID``, the same torchrun command on every node (HEAD: the first host of
    ``SLURM_JOB_NODELIST``); otherwise ``torchrun --standalone``.  ``nodes``: the nodes to use (default: all of
    the allocation's).  Named errors: processes per node missing or not a positive integer, more nodes than the
    allocation has, a process count that does not split ``optim``'s micro-batches."""
    if processes_per_node in (None, "", 0, "0"):
        raise ValueError("GPUs per node: none given or found (CUDA_VISIBLE_DEVICES / torch.cuda.device_count); "
                         "the launch needs at least one process per node")
    per_node = _posint("processes per node (GPUs per node)", processes_per_node)
    have = allocation_nodes(env)
    n_nodes = have if nodes is None else _posint("nodes", nodes)
    if n_nodes > have:
        key = next((k for k in NODE_VARIABLES if env.get(k)), NODE_VARIABLES[0])
        raise ValueError(f"nodes={n_nodes} but the allocation has {have} node(s) ({key}={env.get(key)})")
    if optim is not None:
        check_split(optim, n_nodes * per_node)
    torchrun = [python, "-m", "torch.distributed.run"]
    if n_nodes == 1:
        return [*torchrun, "--standalone", "--nproc-per-node", str(per_node), "-m", *train_args]
    for key in ("SLURM_JOB_NODELIST", "SLURM_JOB_ID"):
        if not env.get(key):
            raise ValueError(f"a {n_nodes}-node launch needs {key} in the environment (run it inside the allocation)")
    hosts = hostnames(env["SLURM_JOB_NODELIST"])
    if len(hosts) < n_nodes:
        raise ValueError(f"SLURM_JOB_NODELIST={env['SLURM_JOB_NODELIST']!r} names {len(hosts)} host(s), "
                         f"{n_nodes} needed")
    # a job step as SLURM documents one: its nodes and tasks explicit (one task, one torchrun, per node), run with
    # step_env (the enclosing step's SLURM_* removed, as the jobstep executor does for its own srun); --overlap:
    # the job's own step (snakemake's jobstep srun) holds the first node's CPUs and GPUs
    cpus = [f"--cpus-per-task={env['SLURM_CPUS_PER_TASK']}"] if env.get("SLURM_CPUS_PER_TASK") else []
    return ["srun", f"--nodes={n_nodes}", f"--ntasks={n_nodes}", "--ntasks-per-node=1", "--overlap", *cpus,
            *torchrun, "--nnodes", str(n_nodes), "--nproc-per-node", str(per_node), "--rdzv-backend", "c10d",
            "--rdzv-endpoint", f"{hosts[0]}:{port}", "--rdzv-id", env["SLURM_JOB_ID"], "-m", *train_args]


# what a nested srun may inherit: the allocation's identity (the jobstep executor's own list)
STEP_KEEP = ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN",
             "SLURM_ARRAY_TASK_MAX", "SLURM_ARRAY_TASK_STEP", "SLURM_CLUSTER_NAME", "SLURM_SUBMIT_DIR",
             "SLURM_SUBMIT_HOST")


def step_env(env: Mapping[str, str]) -> dict:
    """``env`` for a nested ``srun``: every ``SLURM_*`` of the enclosing step (its task count, nodes, CPU binding,
    GPUs) dropped but the allocation's identity (:data:`STEP_KEEP`), and every ``SRUN_*`` / ``SBATCH_*`` default,
    as snakemake-executor-plugin-slurm-jobstep does before its own ``srun``: the step's values would override
    the flags of the new step (``SLURM_NTASKS=1`` against ``--nodes=8``)."""
    return {k: v for k, v in env.items()
            if not ((k.startswith("SLURM_") and k not in STEP_KEEP) or k.startswith(("SRUN_", "SBATCH_")))}


def gpus_on_node(env: Mapping[str, str]) -> int:
    """The GPUs this job may use on its node: ``CUDA_VISIBLE_DEVICES`` when set, else ``torch.cuda.device_count``."""
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    import torch

    return torch.cuda.device_count()


def train_args(config_path: str | Path, output_dir: str | Path) -> list[str]:
    return ["fastdllm_core.cli", "train", "--config", str(config_path), "--output-dir", str(output_dir)]


def train_launched(cfg: TrainConfig, output_dir: str | Path, command: Callable[[list[str]], list[str]],
                   env: Mapping[str, str] | None = None) -> Path:
    """Write the resolved config into ``output_dir`` (where every node reads it) and run ``command(train_args)``
    with ``env``; returns the final checkpoint's path."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=output_dir, delete=False) as fh:
        yaml.safe_dump(cfg.to_dict(), fh, sort_keys=False)
    out = {k: f for k, f in (("stdout", sys.stdout), ("stderr", sys.stderr)) if _has_fileno(f)}  # e.g. a log
    try:
        run_until_stopped(command(train_args(fh.name, output_dir)), dict(env or os.environ), **out)
    finally:
        os.unlink(fh.name)
    return output_dir / "final"


def run_until_stopped(cmd: list[str], env: Mapping[str, str], grace_s: float = STOP_GRACE_S, **popen) -> None:
    """Run the launcher ``cmd``; a non-zero exit raises :class:`subprocess.CalledProcessError`.  When this process
    is stopped while it runs (Ctrl-C's KeyboardInterrupt, or any exception), the stop is passed on as SIGTERM and
    the launcher gets ``grace_s`` seconds for its ranks to write their checkpoint (:mod:`.stopping`) before it is
    killed; ``subprocess.run`` would kill it at once and leave the ranks without their launcher."""
    proc = subprocess.Popen(cmd, env=env, **popen)
    try:
        code = proc.wait()
    except BaseException:
        stop_gracefully(proc, grace_s)
        raise
    if code:
        raise subprocess.CalledProcessError(code, cmd)


def stop_gracefully(proc: subprocess.Popen, grace_s: float) -> int:
    """SIGTERM to ``proc``, then SIGKILL if it has not exited after ``grace_s`` seconds (or if this wait is itself
    interrupted); returns its exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=grace_s)
        except BaseException:
            proc.kill()
    return proc.wait()


def train_gpus(cfg: TrainConfig, output_dir: str | Path, env: Mapping[str, str] | None = None,
               hostnames: Callable[[str], list[str]] = slurm_hostnames, run=subprocess.run) -> Path:
    """Train on every GPU of the job's allocation: one process per GPU of the node, on every node of a SLURM
    allocation (:func:`launch_command`, on the job's nodes as SLURM gives them: :func:`job_allocation`, ``run``
    its runner); in this process when that is one GPU.  The start model is fetched before
    any rank starts (:func:`prefetch_init`): here on one node, by each node's :mod:`.node_start` on several, whose
    ``srun`` runs with :func:`step_env`."""
    env = job_allocation(os.environ if env is None else env, run)
    per_node = gpus_on_node(env)

    def command(args: list[str]) -> list[str]:  # checks the batch split and the allocation (named errors)
        return launch_command(env, args, processes_per_node=per_node, optim=cfg.optim, hostnames=hostnames)

    launcher = command([])[0]  # the named errors, before any process starts or any directory is made
    if launcher == "srun":
        return _train_on_nodes(cfg, output_dir, command, env)
    fetched = prefetch_init(cfg.model.init)  # one node: the start model fetched here, its ranks read the cache
    if per_node == 1:
        return train(cfg, output_dir)
    return train_launched(cfg, output_dir, command, dict(env, HF_HUB_OFFLINE="1") if fetched else env)


def _train_on_nodes(cfg: TrainConfig, output_dir: str | Path, command: Callable[[list[str]], list[str]],
                    env: Mapping[str, str]) -> Path:
    """Run the multi-node ``command`` (``srun`` ... ``torchrun``, :func:`launch_command`) with :func:`step_env`,
    each node's torchrun behind :mod:`.node_start`, which fetches the start model into that node's cache first."""

    def node_command(args: list[str]) -> list[str]:
        cmd = command(args)
        at = cmd.index(sys.executable)
        return [*cmd[:at], sys.executable, "-m", "fastdllm_core.training.node_start", "--init", cfg.model.init, "--",
                *cmd[at:]]

    return train_launched(cfg, output_dir, node_command, step_env(env))


def train_processes(cfg: TrainConfig | dict, output_dir: str | Path, processes: int,
                    env: Mapping[str, str] | None = None,
                    hostnames: Callable[[str], list[str]] = slurm_hostnames, run=subprocess.run) -> Path:
    """Train on the CPU with ``processes`` data-parallel processes of one thread each per node (``torchrun``,
    gloo), or in this process when that is one process on one node.  ``env``: the job's environment (default:
    none, one node); in a multi-node SLURM allocation (:func:`job_allocation`) ``processes`` run on every node of
    it, started as :func:`train_gpus` starts them (``srun``, one ``torchrun`` per node).

    On a 2-core machine two single-threaded processes train faster than one process with two OpenMP threads, and
    they do not collapse when another program takes a core (OpenMP threads spin at barriers while a sibling is
    preempted; a single-threaded process just runs at its share).  Batches, masks and results are those of a
    single process (see :mod:`.loop`)."""
    if not isinstance(processes, int) or processes < 1:
        raise ValueError(f"processes must be a positive integer, got {processes!r}")
    cfg = cfg if isinstance(cfg, TrainConfig) else TrainConfig.from_dict(cfg)  # named errors before any process
    # one thread per process: every threading library's variable (a workflow manager may have set MKL's to the
    # job's cores, and torch takes the largest)
    env = job_allocation(env or {}, run)
    threaded = {**os.environ, **env, **{v: "1" for v in THREAD_VARIABLES}}

    def command(args: list[str]) -> list[str]:  # checks the batch split and the allocation (named errors)
        return launch_command(env, args, processes_per_node=processes, optim=cfg.optim, hostnames=hostnames)

    if command([])[0] == "srun":
        return _train_on_nodes(cfg, output_dir, command, threaded)
    if processes == 1:
        return train(cfg, output_dir)
    return train_launched(cfg, output_dir, command, threaded)


def _has_fileno(f) -> bool:
    try:
        f.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True
