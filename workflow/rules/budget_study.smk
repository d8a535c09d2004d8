# The budget study (config budget_study:, workflow/lib/plan_budget.py): the recipe and its NTP baseline at
# growing adaptation budgets, one training run per chain whose snapshots are the budgets; its own target, never in
# paper_figures' path.  results/budget_study/: the tidy CSVs, the table and the figure.


rule budget_study:
    """The budget study's table and figure (results/budget_study/): accuracy gap to the AR base per task, tokens
    per forward at the speed threshold and batch-1 speed against AR, against adaptation tokens per parameter."""
    input:
        f"{STUDY_OUT}/budget_study.md",
        f"{STUDY_OUT}/budget_study.png",


rule budget_data:
    """The study's adaptation set: the synthetic suite's adaptation rows, budget_study.n_adapt per task (about one
    pass at the largest budget), drawn from the training problems only (the test sets are the default's)."""
    output:
        f"{STUDY_DIR}/data/adapt.jsonl",
    params:
        seed=SYN.get("seed", 0),
        n_eval=SYN.get("n_eval", 256),
        n_adapt=lambda wc: plan_budget.data_rows(config),
    log:
        f"{LOGS}/budget_study/data.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/budget_data.py"


rule budget_train:
    """One snapshot: the chain's run (budget_study/runs/<chain>) trained to this budget's steps, resuming from the
    previous snapshot's checkpoint, and its final checkpoint kept as the snapshot."""
    input:
        unpack(study_snapshot_inputs),
    output:
        model=directory(f"{STUDY_DIR}/models/{{snapshot}}"),
        metrics=f"{STUDY_DIR}/metrics/{{snapshot}}.csv",
    params:
        cfg=lambda wc: plan_budget.train_config(config, study_chain(wc), [f"{STUDY_DIR}/data/adapt.jsonl"]),
        snapshot=lambda wc: STUDY_SNAPSHOTS[wc.snapshot],
        chain=study_chain,
        run_dir=lambda wc: f"{STUDY_DIR}/runs/{STUDY_SNAPSHOTS[wc.snapshot]['chain']}",
    log:
        f"{LOGS}/budget_study/train/{{snapshot}}.log",
    benchmark:
        f"{STUDY_DIR}/benchmarks/train/{{snapshot}}.tsv"
    threads: 1
    priority: lambda wc: plan_budget.priority(STUDY_CHAINS, STUDY_SNAPSHOTS[wc.snapshot])
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=lambda wc, attempt: plan_budget.runtime_minutes(config, study_chain(wc), attempt),
        gpu=GPU,
    script:
        "../scripts/budget_train.py"


rule budget_point:
    """A snapshot's accuracy on every stand-in (all test items; block diffusion at the accuracy setting and at the
    speed setting, which gives its tokens per forward)."""
    input:
        model=f"{STUDY_DIR}/models/{{snapshot}}",
        data=[f for t in plan.SYNTH_TASKS for f in task_inputs(t)],
    output:
        f"{STUDY_DIR}/points/{{snapshot}}.accuracy.csv",
    params:
        snapshot=lambda wc: STUDY_SNAPSHOTS[wc.snapshot],
        chain=study_chain,
        data_paths={t: task_data(t) for t in plan.SYNTH_TASKS},
        cache_dir=lambda wc: f"{STUDY_DIR}/points/{wc.snapshot}",
        verdict_cache=f"{R}/cache/verdicts",
    log:
        f"{LOGS}/budget_study/points/{{snapshot}}.log",
    benchmark:
        f"{STUDY_DIR}/benchmarks/points/{{snapshot}}.tsv"
    threads: 1
    priority: 100  # a finished snapshot is scored before the next training starts
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=model_runtime,
        gpu=GPU,
    script:
        "../scripts/budget_point.py"


rule budget_speed:
    """A snapshot's batch-1 tokens/s at the speed setting and the AR base's, timed one after the other in this job,
    which holds bench.job_threads cores (no other job of the run beside it)."""
    input:
        model=f"{STUDY_DIR}/models/{{snapshot}}",
        ar=plan.model_inputs(config, plan.role(config, "speed_ar")),
        prompts=task_data(config["bench"]["prompts_from"]),
    output:
        f"{STUDY_DIR}/points/{{snapshot}}.speed.csv",
    params:
        snapshot=lambda wc: STUDY_SNAPSHOTS[wc.snapshot],
        chain=study_chain,
        ar_key=plan.role(config, "speed_ar"),
        ar_source=plan.model_source(config, plan.role(config, "speed_ar")),
    log:
        f"{LOGS}/budget_study/speed/{{snapshot}}.log",
    benchmark:
        f"{STUDY_DIR}/benchmarks/speed/{{snapshot}}.tsv"
    threads: plan.bench_job_threads(config)
    priority: 90
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=model_runtime,
        gpu=GPU,
    script:
        "../scripts/budget_speed.py"


rule budget_report:
    """The study's tidy CSVs (every accuracy and speed row, one summary row per model, lever, budget and task) and
    its table and figure: pure functions of those CSVs (analysis/budget_study.py)."""
    input:
        accuracy=[f"{STUDY_DIR}/points/{s}.accuracy.csv" for s in STUDY_SNAPSHOTS],
        speed=[f"{STUDY_DIR}/points/{s}.speed.csv" for s in STUDY_SNAPSHOTS],
        metrics=[f"{STUDY_DIR}/metrics/{s}.csv" for s in STUDY_SNAPSHOTS],
        ar=plan_points.accuracy_path(config, plan.role(config, "speed_ar")),
    output:
        rows=f"{STUDY_OUT}/budget_study_rows.csv",
        summary=f"{STUDY_OUT}/budget_study.csv",
        md=f"{STUDY_OUT}/budget_study.md",
        png=f"{STUDY_OUT}/budget_study.png",
        pdf=f"{STUDY_OUT}/budget_study.pdf",
    log:
        f"{LOGS}/budget_study/report.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/budget_report.py"
