rule train_model:
    """AR base / NTP baseline / block-diffusion recipes.  The checkpoint is protected; a killed run resumes from
    the checkpoints under run/checkpoints (not a declared output, so Snakemake keeps them).  Under a training plan
    the job asks for its nodes and the partition's time limit, stops with a checkpoint before the limit, and is
    retried until the run is done (plan.train_retries)."""
    input:
        data=lambda wc: train_inputs(wc.model),
        init=lambda wc: plan.init_inputs(config, wc.model),
    output:
        final=protected(directory(f"{R}/models/{{model}}/run/final")),
        metrics=f"{R}/models/{{model}}/training_metrics.csv",
    params:
        cfg=lambda wc: plan.training_config(config, wc.model, plan.train_files(config, wc.model)),
        run_dir=lambda wc: f"{R}/models/{wc.model}/run",
        recipe=lambda wc: config["models"][wc.model]["train"]["recipe"],
    log:
        f"{LOGS}/train/{{model}}.log",
    benchmark:
        f"{R}/benchmarks/train/{{model}}.tsv"
    threads: lambda wc: plan.train_threads(config, wc.model)
    priority: lambda wc: plan.train_priority(config, wc.model)
    # a new job (allocation) resumes; never a rerun inside the stopped job's own allocation (a cluster's job step
    # runs Snakemake with the rule's retries), where the time limit that stopped it is as near as before
    retries: None if workflow.remote_exec else plan.train_retries(config)
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=lambda wc, attempt: plan.train_runtime(config, attempt),
        nodes=plan.train_nodes(config),
        # a CPU job's batch tasks, one a node (the SLURM executor writes --ntasks=1 for a CPU job otherwise, and
        # SLURM cuts --nodes down to the task count); a GPU job's tasks are SLURM's default (tasks_per_gpu unset)
        tasks=0 if GPU else plan.train_nodes(config),
        gpu=GPU,
    script:
        "../scripts/train_model.py"
