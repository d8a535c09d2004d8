rule evaluate:
    """Accuracy of one model on one task at every decoding point the tables and figures need (the points are a
    param: adding or changing one reruns this job, which then measures only the new points -- points measured
    before with the same model, data, settings and code are reused from the job's cache)."""
    input:
        model=lambda wc: dc.model_inputs(config, wc.model),
        data=lambda wc: task_inputs(wc.task),
    output:
        f"{R}/accuracy/{{model}}/{{task}}.csv",
    params:
        points=lambda wc: EVALUATIONS[(wc.model, wc.task)],
        source=lambda wc: dc.model_source(config, wc.model),
        label=lambda wc: config["models"][wc.model].get("label", wc.model),
        mode=lambda wc: config["models"][wc.model]["mode"],
        data_path=lambda wc: task_data(wc.task),
        max_new_tokens=config["decode"]["max_new_tokens"],
        batch_size=config["eval"]["batch_size"],
        limit=config["eval"].get("limit"),
        cache_dir=lambda wc: f"{R}/accuracy/{wc.model}/{wc.task}",
    log:
        f"{LOGS}/accuracy/{{model}}/{{task}}.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=model_runtime,
        gpu=GPU,
    script:
        "../scripts/evaluate.py"


rule case_study:
    """The case-study prompts (single- and multi-turn) answered by the model under test."""
    input:
        model=dc.model_inputs(config, config["roles"]["main_bd"]),
    output:
        f"{R}/cases/{{kind}}.csv",
    params:
        source=lambda wc: dc.model_source(config, config["roles"]["main_bd"]),
        model=config["roles"]["main_bd"],
        prompts=lambda wc: config["tables"]["cases"][wc.kind],
        decode=dc.base_decode(config),
        max_new_tokens=config["tables"]["cases"]["max_new_tokens"],
    log:
        f"{LOGS}/cases/{{kind}}.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=model_mem_mb,
        runtime=model_runtime,
        gpu=GPU,
    script:
        "../scripts/case_study.py"
