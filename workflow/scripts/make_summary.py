"""The summary page of this run (analysis.summary): every number the README quotes, with the commit it came from."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import report_specs
    from analysis.results_io import load_csv, load_throughput
    from analysis.summary import build_summary
    from fastdllm_core.provenance import source_fingerprint, write_text_atomic

    sm = snakemake  # noqa: F821
    text = build_summary(report_specs.summary_spec(sm.config), load_csv(sm.input.acc), load_throughput(sm.input.thr),
                         load_csv(sm.input.train),
                         fingerprint=source_fingerprint(sm.params.root))
    write_text_atomic(sm.output[0], text)
    print(text)
