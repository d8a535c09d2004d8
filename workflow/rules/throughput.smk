rule bench:
    """A throughput sweep (AR vs block diffusion); its runs are params, so changing one reruns this sweep only."""
    input:
        models=lambda wc: [p for m in plan_points.sweep_models(config, wc.sweep) for p in plan.model_inputs(config, m)],
        data=task_inputs(config["bench"]["prompts_from"]),
    output:
        f"{R}/throughput/{{sweep}}.csv",
    params:
        runs=lambda wc: SWEEPS[wc.sweep],
        sources=lambda wc: {m: plan.model_source(config, m) for m in plan_points.sweep_models(config, wc.sweep)},
        prompts_task=config["bench"]["prompts_from"],
        prompts_path=lambda wc: plan.task_data(config, config["bench"]["prompts_from"]),
        bench=config["bench"],
        summary=lambda wc: summaries.sweep_summary(config, wc.sweep),
    log:
        f"{LOGS}/throughput/{{sweep}}.log",
    benchmark:
        f"{R}/benchmarks/throughput/{{sweep}}.tsv"
    message:
        "throughput sweep {wildcards.sweep} -> {output}: {params.summary}"
    threads: plan.bench_job_threads(config)
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=model_runtime,
        gpu=lambda wc: 1 if (GPU or wc.sweep == "gpu_batch") else 0,
    script:
        "../scripts/bench.py"
