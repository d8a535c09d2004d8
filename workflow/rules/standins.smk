# A rehearsal of the paper-scale DAG on a CPU, offline (config/rehearsal.yaml): the checkpoints and benchmark
# files its sources, inits and data.eval_paths point at ({standins}/...), built here by fastdllm_core.rehearsal.


rule standin_models:
    """Tiny random checkpoints in the formats users load (standins.models.<name>.format: qwen2 = a Hugging Face
    Qwen2 directory with a Qwen2.5-Instruct-style tokenizer and chat template; fast_dllm = the released Fast-dLLM
    v2 layout; llada / dream = those releases), all in one job (one interpreter start).  Stand-in weights:
    numbers measured on them are no results."""
    output:
        **{n: directory(p) for n, p in plan.standin_models(config).items()},
    params:
        spec=config["standins"].get("models", {}),
    log:
        f"{LOGS}/standins/models.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_standins.py"


rule standin_data:
    """Small evaluation files in each benchmark's own format (GSM8K, EvalPlus HumanEval+/MBPP+, IFEval, MATH and
    MMLU per subtask, GPQA) and an SFT file standing in for the adaptation data."""
    output:
        directory(f"{plan.standin_dir(config)}/data"),
    params:
        spec=lambda wc: config["standins"]["data"],
    log:
        f"{LOGS}/standins/data.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_standins.py"
