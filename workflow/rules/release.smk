rule release_base:
    """Write each released checkpoint built in this run (`--config build_released=True`: the embedded default's
    tiny AR base) into its `source` directory with a manifest: what built it, where, its scores, its files' hashes
    (fastdllm_core.release).  Commit the directory afterwards."""
    input:
        unpack(release_inputs),
    output:
        f"{R}/released.json",
    params:
        builds=RELEASE_BUILDS,
    log:
        f"{LOGS}/release_base.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../scripts/release_base.py"
