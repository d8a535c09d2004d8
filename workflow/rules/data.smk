rule synthetic_data:
    """The synthetic suite (arithmetic word problems in GSM8K form, small Python functions in HumanEval form)."""
    output:
        **SYN_FILES,
    params:
        seed=SYN.get("seed", 0),
        n_train=SYN.get("n_train", 4000),
        n_eval=SYN.get("n_eval", 100),
    log:
        f"{LOGS}/synthetic_data.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=10,
    script:
        "../scripts/make_data.py"
