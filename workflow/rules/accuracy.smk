rule evaluate:
    """Accuracy of one model on a set of tasks and decoding points (plan_points.evaluation_jobs: the Table 1-2
    points of a model in one job, its sweep points in jobs of a few each), the model loaded once.  The points are
    a param: adding or changing one reruns this job, which then measures only the new points -- points measured
    before with the same model, data, settings and code are reused from the model's cache."""
    input:
        # the per-item results of the points split into shards (eval.shards), merged here
        unpack(lambda wc: eval_shard_inputs(wc.job)),
        model=lambda wc: plan.model_inputs(config, EVAL_JOBS[wc.job]["model"]),
        data=lambda wc: [f for t in EVAL_JOBS[wc.job]["points"] for f in task_inputs(t)],
    output:
        f"{R}/accuracy/{{job}}.csv",
    params:
        **eval_params(lambda wc: EVAL_JOBS[wc.job]["model"]),
        points=lambda wc: EVAL_JOBS[wc.job]["points"],
        data_paths=lambda wc: {t: plan.task_data(config, t) for t in EVAL_JOBS[wc.job]["points"]},
        summary=lambda wc: summaries.eval_summary(config, EVAL_JOBS[wc.job], SHARD_JOBS),
    log:
        f"{LOGS}/accuracy/{{job}}.log",
    benchmark:
        f"{R}/benchmarks/accuracy/{{job}}.tsv"
    message:
        "accuracy {wildcards.job} -> {output}: {params.summary}"
    threads: 1
    priority: lambda wc: plan_points.eval_priority(config, wc.job, EVAL_JOBS)
    conda:
        "../../environment.yml"
    resources:
        **MODEL_RESOURCES,
    script:
        "../scripts/evaluate.py"


rule evaluate_shard:
    """One shard of a decoding point whose estimated cost exceeds one job's budget (eval.shards;
    workflow/fastdllm_dag/plan/eval_cost.py): a contiguous item range of the point (in every subtask), its per-item
    results kept for rule evaluate to merge into the point's rows, and each answer kept as it comes (lm-eval's request
    cache, or EvalPlus answers' JSONL) so that a killed shard resumes where it stopped
    (workflow/scripts/evaluate_shard.py)."""
    input:
        model=lambda wc: plan.model_inputs(config, SHARD_JOBS[wc.shard]["model"]),
        data=lambda wc: task_inputs(SHARD_JOBS[wc.shard]["task"]),
    output:
        f"{R}/accuracy/shards/{{shard}}.json",
    params:
        **eval_params(lambda wc: SHARD_JOBS[wc.shard]["model"]),
        shard=lambda wc: SHARD_JOBS[wc.shard],
        data_path=lambda wc: plan.task_data(config, SHARD_JOBS[wc.shard]["task"]),
        summary=lambda wc: eval_cost.shard_cost_summary(config, SHARD_JOBS[wc.shard]),
    log:
        f"{LOGS}/accuracy/shards/{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/accuracy/shards/{{shard}}.tsv"
    message:
        "accuracy shard {wildcards.shard} -> {output}: {params.summary}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        **MODEL_RESOURCES,
    script:
        "../scripts/evaluate_shard.py"


rule case_study:
    """The case-study prompts answered by the model under test (roles.main_bd): single-turn, one prompt per case;
    multi-turn, a list of conversations, each user turn following the model's own previous answers."""
    input:
        model=plan.model_inputs(config, plan.role(config, "main_bd")),
    output:
        f"{R}/cases/{{kind}}.csv",
    params:
        source=lambda wc: plan.model_source(config, plan.role(config, "main_bd")),
        model=plan.role(config, "main_bd"),
        conversations=lambda wc: plan_points.case_conversations(config, wc.kind),
        summary=lambda wc: summaries.case_summary(config, wc.kind),
        decode=plan_points.base_decode(config),
        max_new_tokens=config["tables"]["cases"]["max_new_tokens"],
    log:
        f"{LOGS}/cases/{{kind}}.log",
    benchmark:
        f"{R}/benchmarks/cases/{{kind}}.tsv"
    message:
        "case study {wildcards.kind} -> {output}: model {params.model} (roles.main_bd); {params.summary}"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        **MODEL_RESOURCES,
    script:
        "../scripts/case_study.py"
