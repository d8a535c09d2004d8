"""The paper's numbers used by the tables and figures (analysis.paper_values) as a CSV, with sources."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    from analysis.paper_values import as_records
    from fastdllm_core.provenance import write_csv_atomic

    write_csv_atomic(snakemake.output[0], as_records())  # noqa: F821
