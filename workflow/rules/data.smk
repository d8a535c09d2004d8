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
