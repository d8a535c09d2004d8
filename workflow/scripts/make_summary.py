"""The summary page of this run (analysis.summary) and its findings' picture (analysis.fig_findings) beside it: every
number the README quotes, with the commit it came from; the page records the picture's sha256."""
from pathlib import Path

from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from analysis.fig_findings import draw_findings, picture_note, picture_rows
    from analysis.results_io import load_csv, load_throughput
    from analysis.summary import build_summary, summary_cells
    from fastdllm_core.provenance import source_fingerprint, write_text_atomic
    from fastdllm_dag.job import report_specs

    spec, acc = report_specs.summary_spec(sm.config), load_csv(sm.input.acc)
    sha = draw_findings(picture_rows(*summary_cells(spec, acc)), sm.output.png, banner=spec["banner"],
                        note=picture_note(spec))
    text = build_summary(spec, acc, load_throughput(sm.input.thr), load_csv(sm.input.train),
                         fingerprint=source_fingerprint(sm.params.root), picture=(Path(sm.output.png).name, sha))
    write_text_atomic(sm.output.md, text)
    print(text)
