"""Concatenate per-job tidy CSVs into one (rows kept as they are; columns: union in first-seen order)."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import csv

    from fastdllm_core.provenance import write_csv_atomic

    rows = []
    for path in sm.input:
        with open(path, newline="") as fh:
            rows += list(csv.DictReader(fh))
    write_csv_atomic(sm.output[0], rows)
    print(f"{len(rows)} rows from {len(sm.input)} files -> {sm.output[0]}")
