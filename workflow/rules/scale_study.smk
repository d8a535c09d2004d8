# The scale study (config scale_study:, workflow/lib/plan_scale.py): AR bases of growing size built from scratch,
# each adapted with the recipe and NTP at the default's tokens per parameter and multiples of it; its own target,
# never in paper_figures' path.  results/scale_study/: the tidy CSVs, the fit, the table and the figure.


rule scale_study:
    """The scale study's table and figure (results/scale_study/): each size's gap to its own AR base per task,
    tokens per forward and batch-1 speed against parameters, with a fit of the gap against log parameters; and the
    bases this run built, released (commit results/released/scale_*)."""
    input:
        f"{SCALE_OUT}/scale_study.md",
        f"{SCALE_OUT}/scale_study.png",
        [f"{plan_scale.release_dir(config, s)}/manifest.json" for s in SCALE_BUILT],


rule scale_plan:
    """What this run makes (bases, chains, snapshots) and its estimated training time; refused, before any training,
    when the estimate exceeds scale_study.ceiling_hours.  Named by its content (a run that makes the same is not
    checked twice)."""
    output:
        SCALE_PLAN,
    log:
        f"{LOGS}/scale_study/plan.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/scale_plan.py"


rule scale_data:
    """The study's adaptation set: the synthetic suite's adaptation rows, scale_study.n_adapt per task (about one
    pass for the largest chain), from the training problems only (the test sets are the default's)."""
    output:
        f"{SCALE_DIR}/data/adapt.jsonl",
    params:
        seed=SYN.get("seed", 0),
        n_eval=SYN.get("n_eval", 256),
        n_adapt=lambda wc: int(config["scale_study"]["n_adapt"]),
    log:
        f"{LOGS}/scale_study/data.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=2000,
        runtime=20,
    script:
        "../scripts/budget_data.py"


rule scale_base:
    """One stage of a size's AR base (pretrain: AR pretraining from a random tiny Qwen2 of the size's shape; sft:
    instruct SFT from it): the default base's training with the size's shape and learning rates times 128 / width,
    in the default base's data-parallel processes."""
    input:
        data=lambda wc: plan_scale.base_dataset(config, wc.stage),
        init=lambda wc: [f"{SCALE_DIR}/bases/{wc.size}/pretrain/run/final"] if wc.stage == "sft" else [],
        plan=ancient(SCALE_PLAN),  # after the ceiling's check; a later plan rebuilds nothing
    output:
        final=directory(f"{SCALE_DIR}/bases/{{size}}/{{stage}}/run/final"),
        metrics=f"{SCALE_DIR}/bases/{{size}}/{{stage}}/training_metrics.csv",
    params:
        cfg=lambda wc, input: plan_scale.base_train_config(
            config, wc.size, wc.stage, [input.data], input.init[0] if input.init else "tiny"),
        size=lambda wc: wc.size,
        shape=lambda wc: plan_scale.sizes(config)[wc.size],
        run_dir=lambda wc: f"{SCALE_DIR}/bases/{wc.size}/{wc.stage}/run",
        recipe=lambda wc: plan_scale.stage_train(config, wc.stage)["recipe"],
        name=lambda wc: f"scale_{wc.size}_{wc.stage}",
    log:
        f"{LOGS}/scale_study/bases/{{size}}.{{stage}}.log",
    benchmark:
        f"{SCALE_DIR}/benchmarks/bases/{{size}}.{{stage}}.tsv"
    wildcard_constraints:
        size="|".join(SCALE_BUILT) or "none",
        stage="pretrain|sft",
    threads: lambda wc: plan_scale.base_processes(config, wc.stage)
    priority: 60
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=lambda wc, attempt: 120 * attempt,
        gpu=GPU,
    script:
        "../scripts/scale_base.py"


rule scale_round:
    """A built base in bf16 (what is scored, adapted and released: the release stays small)."""
    input:
        f"{SCALE_DIR}/bases/{{size}}/sft/run/final",
    output:
        directory(f"{SCALE_DIR}/bases/{{size}}/bf16"),
    log:
        f"{LOGS}/scale_study/bases/{{size}}.bf16.log",
    wildcard_constraints:
        size="|".join(SCALE_BUILT) or "none",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/scale_round.py"


rule scale_base_point:
    """A size's AR base scored on every stand-in (all test items), as the snapshots are."""
    input:
        model=lambda wc: scale_base_inputs(wc.size),
        data=[f for t in plan.SYNTH_TASKS for f in task_inputs(t)],
    output:
        f"{SCALE_POINTS}/base.{{size}}.accuracy.csv",
    params:
        source=lambda wc: plan_scale.base_source(config, wc.size, SCALE_DIR),
        size=lambda wc: wc.size,
        data_paths={t: task_data(t) for t in plan.SYNTH_TASKS},
        cache_dir=lambda wc: f"{SCALE_DIR}/points/base.{wc.size}",
        verdict_cache=f"{R}/cache/verdicts",
    log:
        f"{LOGS}/scale_study/points/base.{{size}}.log",
    benchmark:
        f"{SCALE_DIR}/benchmarks/points/base.{{size}}.tsv"
    wildcard_constraints:
        size="|".join(plan_scale.todo_bases(config)) or "none",
    threads: 1
    priority: 100
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=lambda wc, attempt: 60 * attempt,
        gpu=GPU,
    script:
        "../scripts/scale_point.py"


rule scale_release:
    """A base this run built, released into scale_study.released_dir/scale_<size> with its manifest (what built it,
    where, its losses and scores, its files' hashes).  Commit the directory afterwards."""
    input:
        model=f"{SCALE_DIR}/bases/{{size}}/bf16",
        metrics=[f"{SCALE_DIR}/bases/{{size}}/{stage}/training_metrics.csv" for stage in plan_scale.STAGES],
        accuracy=f"{SCALE_POINTS}/base.{{size}}.accuracy.csv",
    output:
        f"{config['scale_study']['released_dir']}/scale_{{size}}/manifest.json",
    params:
        out=lambda wc: plan_scale.release_dir(config, wc.size),
    log:
        f"{LOGS}/scale_study/release.{{size}}.log",
    wildcard_constraints:
        size="|".join(SCALE_BUILT) or "none",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/scale_release.py"


rule scale_train:
    """One snapshot: the chain's run (scale_study/runs/<chain>) trained to this budget's steps from its size's base,
    resuming from the previous snapshot's checkpoint, and its final checkpoint kept as the snapshot."""
    input:
        unpack(scale_snapshot_inputs),
    output:
        model=directory(f"{SCALE_DIR}/models/{{snapshot}}"),
        metrics=f"{SCALE_POINTS}/{{snapshot}}.metrics.csv",
    params:
        cfg=lambda wc: plan_scale.train_config(config, scale_chain(wc), [f"{SCALE_DIR}/data/adapt.jsonl"],
                                                plan_scale.base_source(config, scale_chain(wc)["size"], SCALE_DIR)),
        snapshot=lambda wc: SCALE_SNAPSHOTS[wc.snapshot],
        chain=scale_chain,
        run_dir=lambda wc: f"{SCALE_DIR}/runs/{SCALE_SNAPSHOTS[wc.snapshot]['chain']}",
        fields=lambda wc: plan_scale.row_fields(config, wc.snapshot, SCALE_SNAPSHOTS[wc.snapshot], scale_chain(wc)),
    log:
        f"{LOGS}/scale_study/train/{{snapshot}}.log",
    benchmark:
        f"{SCALE_DIR}/benchmarks/train/{{snapshot}}.tsv"
    wildcard_constraints:
        snapshot="|".join(s.replace(".", r"\.") for s in SCALE_TODO) or "none",
    threads: 1
    priority: lambda wc: plan_scale.priority(config, SCALE_SNAPSHOTS[wc.snapshot])
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=lambda wc, attempt: plan_scale.runtime_minutes(config, scale_chain(wc), attempt),
        gpu=GPU,
    script:
        "../scripts/budget_train.py"


rule scale_point:
    """A snapshot's accuracy on every stand-in (all test items; block diffusion at the accuracy setting and at the
    speed setting, which gives its tokens per forward)."""
    input:
        model=f"{SCALE_DIR}/models/{{snapshot}}",
        data=[f for t in plan.SYNTH_TASKS for f in task_inputs(t)],
    output:
        f"{SCALE_POINTS}/{{snapshot}}.accuracy.csv",
    params:
        snapshot=lambda wc: SCALE_SNAPSHOTS[wc.snapshot],
        chain=scale_chain,
        data_paths={t: task_data(t) for t in plan.SYNTH_TASKS},
        cache_dir=lambda wc: f"{SCALE_DIR}/points/{wc.snapshot}",
        verdict_cache=f"{R}/cache/verdicts",
    log:
        f"{LOGS}/scale_study/points/{{snapshot}}.log",
    benchmark:
        f"{SCALE_DIR}/benchmarks/points/{{snapshot}}.tsv"
    wildcard_constraints:
        snapshot="|".join(s.replace(".", r"\.") for s in SCALE_TODO) or "none",
    threads: 1
    priority: 100  # a finished snapshot is scored before the next training starts
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=lambda wc, attempt: 60 * attempt,
        gpu=GPU,
    script:
        "../scripts/scale_point.py"


rule scale_speed:
    """A snapshot's batch-1 tokens/s at the speed setting and its own base's, in interleaved rounds in this job,
    which holds bench.job_threads cores (no other job of the run beside it)."""
    input:
        model=f"{SCALE_DIR}/models/{{snapshot}}",
        ar=lambda wc: scale_base_inputs(scale_chain(wc)["size"]),
        prompts=task_data(config["bench"]["prompts_from"]),
    output:
        f"{SCALE_POINTS}/{{snapshot}}.speed.csv",
    params:
        snapshot=lambda wc: SCALE_SNAPSHOTS[wc.snapshot],
        chain=scale_chain,
        ar_key=lambda wc: f"base.{scale_chain(wc)['size']}",
        ar_source=lambda wc: plan_scale.base_source(config, scale_chain(wc)["size"], SCALE_DIR),
    log:
        f"{LOGS}/scale_study/speed/{{snapshot}}.log",
    benchmark:
        f"{SCALE_DIR}/benchmarks/speed/{{snapshot}}.tsv"
    wildcard_constraints:
        snapshot="|".join(s.replace(".", r"\.") for s in SCALE_TODO) or "none",
    threads: plan.bench_job_threads(config)
    priority: 90
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=lambda wc, attempt: 30 * attempt,
        gpu=GPU,
    script:
        "../scripts/scale_speed.py"


rule scale_report:
    """The study's tidy CSVs (every accuracy and speed row; one summary row per size, model, budget, quantity and
    column; the fit of each gap against log parameters) and its table and figure: pure functions of those CSVs
    (analysis/scale_study.py)."""
    input:
        accuracy=scale_points("accuracy"),
        speed=scale_points("speed"),
        metrics=scale_points("metrics"),
        bases=[f for s in plan_scale.sizes(config) for f in [plan_scale.point_files(config, f"base.{s}")["accuracy"]]
               if s in plan_scale.todo_bases(config) or os.path.exists(f)],
    output:
        rows=f"{SCALE_OUT}/scale_study_rows.csv",
        summary=f"{SCALE_OUT}/scale_study.csv",
        fit=f"{SCALE_OUT}/scale_fit.csv",
        md=f"{SCALE_OUT}/scale_study.md",
        png=f"{SCALE_OUT}/scale_study.png",
        pdf=f"{SCALE_OUT}/scale_study.pdf",
    log:
        f"{LOGS}/scale_study/report.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/scale_report.py"
