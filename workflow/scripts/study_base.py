"""One training stage of a base a study builds (pretrain or sft): the default base's training with the base's shape,
scaled learning rates and steps, in the default base's data-parallel processes (one thread each on the CPU);
resumes from run/checkpoints when a previous run was stopped."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from fastdllm_core.training.config import TrainConfig
    from fastdllm_core.training.data import check_train_files
    from fastdllm_core.training.launch import train_processes
    from fastdllm_core.training.loop import train
    from fastdllm_dag.job import common as jobs
    from fastdllm_dag.plan.study_specs import StudyJob

    job = StudyJob(**sm.params.job)
    device = jobs.require_device(sm.config)
    config = TrainConfig.from_dict(job.train)  # a bad key or value is named before anything is written
    check_train_files(config.data.train_files)
    run_dir = jobs.start_run(job.run_dir, job.train, config, job.label)  # a changed setting trains from step 0
    print(f"{job.label}: {job.meta['recipe']}, shape {job.meta['shape']}, lr {config.optim.lr:g}, "
          f"{config.optim.max_steps} steps, {sm.threads} process(es)", flush=True)
    if config.train.device == "cpu" and sm.threads > 1:
        final = train_processes(config, run_dir, sm.threads)
    else:
        final = train(config, run_dir, progress=True, data_checked=True)
    extra = {"model": job.label, "recipe": job.meta["recipe"], "base": job.meta["base"], "stage": job.meta["stage"],
             "lr": config.optim.lr, "device": device}
    rows = jobs.write_metrics(run_dir, sm.output.metrics, extra)
    print(f"final checkpoint: {final}; final loss {rows[-1]['loss']}")
