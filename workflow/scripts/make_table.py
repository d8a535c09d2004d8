"""Render one table (Markdown + LaTeX) from the results CSVs."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from analysis.results_io import load_csv, load_csvs
    from analysis.tables import write_table
    from fastdllm_dag.job import report_specs

    inp = {k: [v] if isinstance(v, str) else list(v) for k, v in sm.input.items()}
    # acc: the evaluation-job CSVs of the models the table shows (workflow/fastdllm_dag/plan/report_inputs.py), as one
    # frame
    t = report_specs.build_table(sm.params.name, sm.config, acc=load_csvs(inp["acc"]) if "acc" in inp else None,
                                 cases=load_csv(inp["cases"][0]) if "cases" in inp else None)
    write_table(t, sm.output.md, sm.output.tex)
    print(open(sm.output.md).read())
