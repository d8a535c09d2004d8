rule synthetic_data:
    """The synthetic suite: six stand-in tasks (test sets in the form of GSM8K, MATH, HumanEval, MBPP, MMLU and
    IFEval) and the training text of the AR base, its instruct SFT and the adaptation data."""
    output:
        **SYN_FILES,
    params:
        seed=SYN.get("seed", 0),
        n_eval=SYN.get("n_eval", 256),
        n_pretrain=SYN.get("n_pretrain", 3000),
        n_sft=SYN.get("n_sft", 600),
        n_adapt=SYN.get("n_adapt", 1500),
    log:
        f"{LOGS}/synthetic_data.log",
    benchmark:
        f"{R}/benchmarks/synthetic_data.tsv"
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/make_data.py"


if ADAPTATION_OUT:

    rule adaptation_data:
        """The paper's adaptation set (data.adaptation): a seeded, token-budgeted subset of the LLaMA-Nemotron
        post-training dataset in the training rows' format, with a manifest beside it (rows and tokens per subset,
        sha256, dataset and revision, the config).  No GPU; offline without data.adaptation.local_dir it fails
        naming that key, before any training job runs."""
        input:
            plan_data.adaptation_inputs(config),
        output:
            data=ADAPTATION_OUT,
            manifest=f"{ADAPTATION_OUT}.manifest.json",
        params:
            spec=plan_data.adaptation_config(config),
            tokenizer=lambda wc: plan_data.adaptation_tokenizer(config),
        log:
            f"{LOGS}/adaptation_data.log",
        benchmark:
            f"{R}/benchmarks/adaptation_data.tsv"
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=8000,
            runtime=lambda wc, attempt: (600 if config["scale"].startswith("paper") else 10) * attempt,
        script:
            "../scripts/make_adaptation_data.py"
