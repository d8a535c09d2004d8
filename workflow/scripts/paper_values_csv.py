"""The paper's numbers used by the tables and figures (analysis.paper_values) as a CSV, with sources."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from analysis.paper_values import as_records
    from fastdllm_core.provenance import write_csv_atomic

    write_csv_atomic(sm.output[0], as_records())
