# The collections of this scale: each concatenates the tidy CSVs of one kind (workflow/scripts/collect.py).


def collect_rule(kind, doc, csvs, output):
    rule:
        name:
            f"collect_{kind}"
        input:
            csvs,
        output:
            output,
        log:
            f"{LOGS}/collect_{kind}.log",
        threads: 1
        conda:
            "../../environment.yml"
        resources:
            mem_mb=1000,
            runtime=5,
        script:
            "../scripts/collect.py"

    workflow.get_rule(f"collect_{kind}").docstring = doc


collect_rule("accuracy", "All accuracy measurements of this scale in one tidy CSV (one row per measurement).",
             ACCURACY_CSVS, f"{R}/accuracy.csv")
collect_rule("throughput", "All throughput measurements of this scale in one tidy CSV.", THROUGHPUT_CSVS,
             f"{R}/throughput.csv")
collect_rule("training", "Training curves of every model trained here (empty when only released checkpoints are used).",
             [f"{R}/models/{m}/training_metrics.csv" for m in TRAINED], f"{R}/training_metrics.csv")
