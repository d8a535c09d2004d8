"""Train one model (fastdllm_core.training: loop.train, launch.train_processes on CPU processes, launch.train_gpus
on every GPU of the allocation); resumes from run/checkpoints when a previous run was killed."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from pathlib import Path

    from fastdllm_dag.job import common as jobs

    cfg = sm.params.cfg
    from fastdllm_core.training.config import TrainConfig, paper_budget_warning

    warning = paper_budget_warning(cfg, f"the training config of {sm.wildcards.model} (training: + models."
                                        f"{sm.wildcards.model}.train:)")
    if warning:  # first line of the job's output: never the paper-scale budget silently
        print(warning, flush=True)
    device = jobs.require_device(sm.config)
    missing = [f for f in cfg["data"]["train_files"] if not Path(f).is_file()]
    if missing:
        raise FileNotFoundError(f"data.train_files: not found: {missing} (model {sm.wildcards.model}); give local SFT "
                                "JSONL files ({'messages': [...]} or {'prompt', 'response'} rows)")
    from fastdllm_core.training.data import check_train_files

    config = TrainConfig.from_dict(cfg)  # a bad key or value is named before anything is written
    # a bad row is named (file, line, field) before anything is written into the run directory or any process
    # starts (with several training processes each would otherwise fail on its own, after the directory is made)
    check_train_files(config.data.train_files)
    run_dir = jobs.start_run(sm.params.run_dir, cfg, config, sm.wildcards.model)  # a changed setting: step 0
    print(f"training {sm.wildcards.model} ({sm.params.recipe}); config: {run_dir / 'train_config.yaml'}")
    import os
    import subprocess

    from fastdllm_core.training.launch import allocation_nodes, job_allocation, train_gpus, train_processes
    from fastdllm_core.training.loop import train
    from fastdllm_core.training.stopping import TrainingInterrupted

    try:
        env = job_allocation(os.environ)  # the SLURM job's nodes, asked once (its job step shows one)
        nodes = allocation_nodes(env)  # a multi-node SLURM job: processes on every node
        if config.train.device == "cpu" and (sm.threads > 1 or nodes > 1):
            # the thread policy of CPU training: data-parallel processes of one thread each (never OpenMP threads,
            # which collapse on a busy machine); see fastdllm_core.training.launch.train_processes
            print(f"{sm.threads} training processes of one thread each on each of {nodes} node(s) (torchrun, gloo)")
            final = train_processes(config, run_dir, sm.threads, env=env)
        elif config.train.device != "cpu" and device == "cuda":
            # one process per GPU of the allocation (every GPU of the node, every node of a SLURM allocation);
            # train.engine: ddp / fsdp / auto (fastdllm_core.training.parallel)
            final = train_gpus(config, run_dir, env=env)
        else:
            final = train(config, run_dir, progress=True, data_checked=True)
    except (TrainingInterrupted, subprocess.CalledProcessError) as exc:
        # a signal or the job's deadline (fastdllm_core.training.stopping), or a failed process: the newest
        # checkpoint under run/checkpoints is where the next attempt (the rule's retries) resumes, unless the run
        # diverged (fastdllm_core.training.failures: the retry stops at once)
        from fastdllm_core.training.checkpoints import checkpoints
        from fastdllm_core.training.failures import MARKER

        if (run_dir / MARKER).is_file():
            raise RuntimeError(f"training of {sm.wildcards.model} diverged: {(run_dir / MARKER).read_text()}; "
                               "no final model was written") from None
        newest = (checkpoints(run_dir) or [run_dir / "checkpoints" / "(none yet: from step 0)"])[-1]
        raise RuntimeError(f"training of {sm.wildcards.model} stopped before optim.max_steps ({exc}); the next "
                           f"attempt resumes from {newest}") from exc
    print(f"final checkpoint: {final}")
    jobs.write_metrics(run_dir, sm.output.metrics, {"model": sm.wildcards.model, "recipe": sm.params.recipe})
