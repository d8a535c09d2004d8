"""Training engines and launch (issue 29): FSDP2 and DDP over 2 gloo processes follow the single process, an FSDP run
killed and resumed equals the uninterrupted one, a 2-"node" launch built by the SLURM command builder runs on
localhost, and the builder's named errors (tiny Qwen2 of tests/test_train.py, CPU)."""
import csv
import json
import os
import socket
import subprocess
import sys

import pytest
import torch
import yaml
from safetensors.torch import load_file

from fastdllm_core.training import launch
from fastdllm_core.training.config import OptimConfig, TrainConfig
from fastdllm_core.training.launch import gpus_on_node, launch_command, train_args, train_gpus
from fastdllm_core.training.loop import train
from fastdllm_core.training.memory import choose_engine
from test_train import ROOT, cfg, data_file  # noqa: F401  (the fixture)

ENV = dict(os.environ, OMP_NUM_THREADS="1")
# same global batch and masks: the curves agree up to float reduction order (the tolerance of the DDP test)
LOSS_TOL, W_ATOL, W_RTOL = dict(rel=1e-4, abs=1e-5), 1e-4, 1e-3


def run_cfg(data_file, recipe="bd_pad_cm", engine="auto"):  # noqa: F811
    c = cfg(data_file, recipe=recipe, max_steps=4, micro_batch_size=1)  # 4 micro-batches: 2 per process
    c["train"].update(save_every=2, engine=engine)
    return c


def metrics(run):
    return list(csv.DictReader(open(run / "metrics.csv")))


def weights(run):
    return load_file(str(run / "final" / "model.safetensors"))


def torchrun(c, out, *extra, processes=2):
    out.mkdir(parents=True, exist_ok=True)
    (out.parent / f"{out.name}.yaml").write_text(yaml.safe_dump(c))
    cmd = launch_command({}, train_args(out.parent / f"{out.name}.yaml", out) + ["--no-progress", *extra],
                         processes_per_node=processes)
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="module")
def single(tmp_path_factory, data_file):  # noqa: F811
    """The single-process run of a recipe (cached per module)."""
    done = {}

    def get(recipe):
        if recipe not in done:
            done[recipe] = tmp_path_factory.mktemp(f"single-{recipe}")
            train(run_cfg(data_file, recipe), done[recipe], progress=False)
        return done[recipe]

    return get


def assert_follows(run, ref, world="2", engine="fsdp"):
    a, b = metrics(run), metrics(ref)
    assert [r["step"] for r in a] == [r["step"] for r in b] == ["1", "2", "3", "4"]
    assert {(r["world_size"], r["engine"]) for r in a} == {(world, engine)}
    for x, y in zip(a, b):
        assert x["lr"] == y["lr"]
        assert float(x["loss"]) == pytest.approx(float(y["loss"]), **LOSS_TOL)
        # the clipped norm is the global one over every shard, not a shard's
        assert float(x["grad_norm"]) == pytest.approx(float(y["grad_norm"]), **LOSS_TOL)
    wa, wb = weights(run), weights(ref)
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], atol=W_ATOL, rtol=W_RTOL)


@pytest.mark.slow
@pytest.mark.parametrize("recipe", ["bd_pad_cm", "ntp"])
def test_fsdp_two_processes_follow_single_process(tmp_path, data_file, single, recipe):  # noqa: F811
    torchrun(run_cfg(data_file, recipe, engine="fsdp"), tmp_path / "fsdp")
    assert (tmp_path / "fsdp" / "checkpoints" / "step-4" / "dcp").is_dir()  # sharded checkpoints
    assert_follows(tmp_path / "fsdp", single(recipe))
    from fastdllm_core.loading import load_model

    lm = load_model(str(tmp_path / "fsdp" / "final"), device="cpu", dtype=torch.float32)  # the evaluation's loader
    assert type(lm.model).__name__ == "Qwen2ForCausalLM"
    assert json.loads((tmp_path / "fsdp" / "final" / "config.json").read_text())["architectures"] == \
        ["Qwen2ForCausalLM"]


@pytest.mark.slow
def test_fsdp_killed_and_resumed_equals_uninterrupted(tmp_path, data_file):  # noqa: F811
    c = run_cfg(data_file, engine="fsdp")
    torchrun(c, tmp_path / "full")
    torchrun(c, tmp_path / "killed", "--stop-after", "2")
    killed = tmp_path / "killed"
    assert not (killed / "final").exists()
    state = json.loads((killed / "checkpoints" / "step-2" / "state.json").read_text())
    assert {k: state[k] for k in ("step", "tokens_seen", "engine")} == \
        {"step": 2, "tokens_seen": 8 * 64, "engine": "fsdp"}
    assert state["data"]["key"] == json.loads((killed / "data" / "meta.json").read_text())["key"]  # what it trained on
    torchrun(c, killed)  # resumes from step 2: model and AdamW shards, lr schedule
    assert [r["loss"] for r in metrics(killed)] == [r["loss"] for r in metrics(tmp_path / "full")]
    wa, wb = weights(tmp_path / "full"), weights(killed)
    for k in wa:
        assert torch.equal(wa[k], wb[k]), k
    longer = {**c, "optim": {**c["optim"], "max_steps": 6}}  # one process cannot resume FSDP shards
    with pytest.raises(ValueError, match="written by train.engine='fsdp', this run uses 'ddp'"):
        train(longer, killed, progress=False, allow_config_change=True)  # the longer cosine: another run, allowed


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_node_launch_on_localhost(tmp_path, data_file, single):  # noqa: F811
    """Two "nodes" (both 127.0.0.1), one process each, started by the SLURM command's per-node part: the same
    torchrun command that srun runs on every node, c10d rendezvous on the head."""
    c = run_cfg(data_file)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(c))
    env = {"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "fake[0-1]", "SLURM_JOB_ID": "4242"}
    cmd = launch_command(env, train_args(tmp_path / "c.yaml", tmp_path / "run") + ["--no-progress"],
                         processes_per_node=1, optim=TrainConfig.from_dict(c).optim, port=free_port(),
                         hostnames=lambda nodelist: ["127.0.0.1", "127.0.0.1"])
    assert cmd[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--overlap"]
    procs = [subprocess.Popen(cmd[5:], env=dict(ENV, SLURM_NODEID=str(rank), **env), cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for rank in (0, 1)]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs[0][-2000:] + outs[1][-2000:]
    assert_follows(tmp_path / "run", single("bd_pad_cm"), engine="ddp")  # auto: the tiny model fits -> ddp


# ------------------------------------------------------------------------------------------------ fast
ARGS = ["fastdllm_core.cli", "train", "--config", "c.yaml", "--output-dir", "run"]
SLURM2 = {"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "gpu[01-02]", "SLURM_JOB_ID": "77"}


def hosts(nodelist):
    assert nodelist == "gpu[01-02]"
    return ["gpu01", "gpu02"]


def test_launch_command_one_node():
    cmd = launch_command({}, ARGS, processes_per_node=8, optim=OptimConfig(), python="py")
    assert cmd == ["py", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "8", "-m", *ARGS]
    assert launch_command({"SLURM_NNODES": "1"}, ARGS, processes_per_node="4", python="py")[3] == "--standalone"


def test_launch_command_slurm_nodes():
    cmd = launch_command(SLURM2, ARGS, processes_per_node=8, optim=OptimConfig(), hostnames=hosts, python="py")
    assert cmd == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--overlap", "py", "-m",
                   "torch.distributed.run", "--nnodes", "2",
                   "--nproc-per-node", "8", "--rdzv-backend", "c10d", "--rdzv-endpoint", "gpu01:29400",
                   "--rdzv-id", "77", "-m", *ARGS]
    one = launch_command(SLURM2, ARGS, processes_per_node=8, nodes=1, hostnames=hosts, python="py")
    assert one[3] == "--standalone"  # one node of the allocation asked for
    job = {**SLURM2, "SLURM_NNODES": "1", "SLURM_JOB_NUM_NODES": "2", "SLURM_CPUS_PER_TASK": "32"}  # in a step
    assert launch_command(job, ARGS, processes_per_node=8, hostnames=hosts, python="py")[:6] == \
        ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--overlap", "--cpus-per-task=32"]


def test_a_nested_srun_runs_without_the_enclosing_steps_variables(tmp_path, data_file, monkeypatch):  # noqa: F811
    """The multi-node launch inside snakemake's job step: the srun gets the allocation's identity only (the step's
    task count would override --nodes), and each node's command fetches the start model before its torchrun."""
    from fastdllm_core.training.launch import step_env

    job = {**SLURM2, "SLURM_NNODES": "1", "SLURM_NTASKS": "1", "SLURM_JOB_NUM_NODES": "2", "SLURM_STEP_ID": "0",
           "SLURM_CPU_BIND": "quiet", "SLURM_GPUS": "8", "SRUN_CPUS_PER_TASK": "4", "SBATCH_GRES": "gpu:8",
           "CUDA_VISIBLE_DEVICES": "0", "PATH": "/bin", "SLURM_CLUSTER_NAME": "c"}
    assert step_env(job) == {"SLURM_JOB_ID": "77", "SLURM_CLUSTER_NAME": "c", "CUDA_VISIBLE_DEVICES": "0",
                             "PATH": "/bin"}
    seen = {}
    monkeypatch.setattr(subprocess, "run", lambda cmd, env=None, **k: seen.update(cmd=cmd, env=env))  # squeue
    monkeypatch.setattr(launch, "run_until_stopped", lambda cmd, env=None, **k: seen.update(cmd=cmd, env=env))
    train_gpus(TrainConfig.from_dict(run_cfg(data_file)), tmp_path / "run", env=job, hostnames=hosts)
    cmd = seen["cmd"]
    assert cmd[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--overlap"]
    at = cmd.index("fastdllm_core.training.node_start")
    assert cmd[at + 1:at + 4] == ["--init", "tiny", "--"] and cmd[at + 5:at + 7] == ["-m", "torch.distributed.run"]
    assert not any(k.startswith(("SRUN_", "SBATCH_")) or k in ("SLURM_NTASKS", "SLURM_NNODES") for k in seen["env"])


def test_cpu_processes_run_on_every_node_of_a_multi_node_allocation(tmp_path, data_file, monkeypatch,  # noqa: F811
                                                                    capsys):
    """train_processes inside a 2-node SLURM job (the rehearsal's REHEARSAL_NODES=2): ``processes`` per node, started
    by the same srun + torchrun-per-node command as the GPUs', one thread each; outside an allocation, one node."""
    import subprocess as sp

    from fastdllm_core.training.launch import allocation_nodes, job_allocation, train_processes

    # Snakemake's job step (srun -n1, the allocation's variables removed): the step's one node in the environment;
    # the job's 2 nodes from SLURM (squeue)
    job = {"SLURM_JOB_ID": "77", "SLURM_NNODES": "1", "SLURM_NTASKS": "1", "SLURM_JOB_NODELIST": "gpu01",
           "SLURM_CPUS_PER_TASK": "2", "OMP_NUM_THREADS": "2"}
    asked = []

    def squeue(cmd, **k):
        asked.append(cmd)
        return sp.CompletedProcess(cmd, 0, stdout="2|gpu[01-02]\n")

    assert allocation_nodes(job) == 1 and allocation_nodes(job_allocation(job, squeue)) == 2
    assert asked[0] == ["squeue", "-h", "-j", "77", "-o", "%D|%N"] and job_allocation({}, squeue) == {}
    resolved = job_allocation(job, squeue)  # asked again with its own answer (train_model, then the launch): kept
    assert job_allocation(resolved, squeue) == resolved and len(asked) == 2
    assert job_allocation(dict(resolved, SLURM_JOB_ID="78"), squeue)["SLURM_JOB_ID"] == "78" and len(asked) == 3
    failed = job_allocation(job, lambda cmd, **k: sp.CompletedProcess(cmd, 1, stdout=""))
    assert failed == job and "squeue did not give job 77's nodes" in capsys.readouterr().err
    seen = {}
    monkeypatch.setattr(sp, "run", lambda cmd, env=None, **k: seen.update(cmd=cmd, env=env))  # squeue
    monkeypatch.setattr(launch, "run_until_stopped", lambda cmd, env=None, **k: seen.update(cmd=cmd, env=env))
    cfg = run_cfg(data_file)  # 4 micro-batches: one for each of 2 nodes x 2 processes
    train_processes(cfg, tmp_path / "run", 2, env=job, hostnames=hosts, run=squeue)
    cmd = seen["cmd"]
    assert cmd[:6] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--overlap", "--cpus-per-task=2"]
    assert cmd[cmd.index("--nnodes") + 1] == "2" and cmd[cmd.index("--nproc-per-node") + 1] == "2"
    assert "fastdllm_core.training.node_start" in cmd and seen["env"]["OMP_NUM_THREADS"] == "1"
    assert "SLURM_NTASKS" not in seen["env"] and seen["env"]["SLURM_JOB_ID"] == "77"
    with pytest.raises(ValueError, match="4 micro-batches cannot be split over 6 processes"):  # 2 nodes x 3
        train_processes(cfg, tmp_path / "run2", 3, env=job, hostnames=hosts, run=squeue)
    train_processes(cfg, tmp_path / "run3", 2)  # no allocation given: one node, torchrun --standalone
    assert seen["cmd"][seen["cmd"].index("torch.distributed.run") + 1] == "--standalone"


def test_the_start_model_is_fetched_once_before_the_ranks(tmp_path):
    from fastdllm_core.training.launch import prefetch_init

    asked = []
    assert prefetch_init("tiny", download=asked.append) is None and prefetch_init(str(tmp_path), asked.append) is None
    assert prefetch_init("Qwen/Qwen2.5-7B-Instruct", download=lambda repo, **k: asked.append(repo) or "/snap") == \
        "/snap" and asked == ["Qwen/Qwen2.5-7B-Instruct"]
    r = subprocess.run([sys.executable, "-m", "fastdllm_core.training.node_start", "--init", str(tmp_path), "--",
                        sys.executable, "-c", "import os; print('rank env', os.environ.get('HF_HUB_OFFLINE'))"],
                       capture_output=True, text=True, cwd=ROOT, env={k: v for k, v in os.environ.items()
                                                                       if k != "HF_HUB_OFFLINE"})
    assert r.returncode == 0 and "is local" in r.stdout and "rank env None" in r.stdout, r.stderr


@pytest.mark.parametrize("env,kw,match", [
    (SLURM2, {"processes_per_node": None}, "GPUs per node: none given or found"),
    (SLURM2, {"processes_per_node": "eight"}, "processes per node .* positive integer, got 'eight'"),
    (SLURM2, {"processes_per_node": 8, "nodes": 3}, "nodes=3 but the allocation has 2 node"),
    ({**SLURM2, "SLURM_NNODES": "two"}, {"processes_per_node": 8}, "SLURM_NNODES must be a positive integer"),
    ({**SLURM2, "SLURM_JOB_ID": ""}, {"processes_per_node": 8}, "needs SLURM_JOB_ID"),
    ({**SLURM2, "SLURM_NNODES": "3"}, {"processes_per_node": 8}, "names 2 host.*3 needed"),
    (SLURM2, {"processes_per_node": 3, "optim": OptimConfig(batch_size=4, micro_batch_size=1)},
     "4 micro-batches cannot be split over 6 processes"),
])
def test_launch_command_named_errors(env, kw, match):
    with pytest.raises(ValueError, match=match):
        launch_command(env, ARGS, hostnames=lambda nl: ["gpu01", "gpu02"], **kw)


@pytest.mark.parametrize("env,match", [
    ({"CUDA_VISIBLE_DEVICES": "0,1,2"}, "4 micro-batches cannot be split over 3 processes"),  # one node, 3 GPUs
    ({**SLURM2, "CUDA_VISIBLE_DEVICES": "0,1,2"}, "4 micro-batches cannot be split over 6 processes"),  # 2 x 3
    ({"CUDA_VISIBLE_DEVICES": ""}, "GPUs per node: none given or found"),
])
def test_train_gpus_names_bad_input_before_any_process(tmp_path, data_file, env, match, monkeypatch):  # noqa: F811
    """The GPU launch checks the GPU count against the batch before it starts a process (and leaves no config
    file behind)."""
    started = []
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: started.append(a))  # squeue
    monkeypatch.setattr(launch, "run_until_stopped", lambda *a, **k: started.append(a))
    with pytest.raises(ValueError, match=match):
        train_gpus(TrainConfig.from_dict(run_cfg(data_file)), tmp_path / "run", env=env)
    assert not started
    run = tmp_path / "run"
    assert not run.exists() or not any(run.iterdir())  # no config file left behind


def test_train_gpus_makes_no_run_directory_for_bad_input(tmp_path, data_file):  # noqa: F811
    with pytest.raises(ValueError, match="cannot be split over 3 processes"):
        train_gpus(TrainConfig.from_dict(run_cfg(data_file)), tmp_path / "run", env={"CUDA_VISIBLE_DEVICES": "0,1,2"})
    assert not (tmp_path / "run").exists()


def test_gpus_on_node():
    assert gpus_on_node({"CUDA_VISIBLE_DEVICES": "0,1,2"}) == 3
    assert gpus_on_node({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert gpus_on_node({}) == torch.cuda.device_count()


def test_choose_engine():
    from fastdllm_core.training.memory import PUBLISHED_CONFIGS, Arch

    cfg = TrainConfig.from_dict({"data": {"train_files": ["x"], "seq_len": 2048}, "optim": {"micro_batch_size": 1},
                                 "train": {"device": "cuda", "dtype": "bf16", "gradient_checkpointing": True}},
                                check_files=False)
    q15, q7 = (Arch.from_config(PUBLISHED_CONFIGS[f"Qwen/Qwen2.5-{s}-Instruct"]) for s in ("1.5B", "7B"))
    gib = 2 ** 30
    assert choose_engine(cfg, q15, 80 * gib, 8) == "ddp"  # 1.5B, micro batch 1: ~40 GB x 1.2 fit 80 GiB
    assert choose_engine(cfg, q7, 80 * gib, 8) == "fsdp"  # 7B: 22 B/param alone is 168 GB
    assert choose_engine(cfg, q15, 40 * gib, 8) == "fsdp"  # the same 1.5B on 40 GB GPUs
    assert choose_engine(cfg, q7, 80 * gib, 1) == "ddp"  # nothing to shard over
    with pytest.raises(ValueError, match="device_bytes must be a positive integer"):
        choose_engine(cfg, q15, 0, 2)


def test_bad_engine_is_named(data_file):  # noqa: F811
    with pytest.raises(ValueError, match="train.engine must be one of .*'zero3'"):
        TrainConfig.from_dict(run_cfg(data_file, engine="zero3"))
