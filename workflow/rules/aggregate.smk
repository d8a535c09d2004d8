rule paper_values:
    """The paper's numbers used by the tables and figures, with their sources."""
    output:
        f"{RESULTS}/paper_values.csv",
    log:
        f"{LOGS}/paper_values.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/paper_values_csv.py"


rule summary:
    """What this run found, on one page (every number the README quotes, with the commit it came from) and one
    picture of its findings beside it: results/<scale>/summary.md and summary.png (the page records the picture's
    sha256); scripts/update_results_doc.py copies both of a clean run into docs/ and their first part into the
    README."""
    input:
        acc=f"{R}/accuracy.csv",
        thr=f"{R}/throughput.csv",
        train=f"{R}/training_metrics.csv",
    output:
        md=f"{R}/summary.md",
        png=f"{R}/summary.png",
    params:
        root=workflow.basedir,  # the source fingerprint of the code that ran
    log:
        f"{LOGS}/summary.log",
    threads: 1
    conda:
        "../../environment.yml"
    resources:
        mem_mb=1000,
        runtime=5,
    script:
        "../scripts/make_summary.py"
