"""A study's tidy CSVs, fit, page and figure (analysis/study.py: pure functions of the rows under
results/<study>/points).  ``snakemake.params.study``: the keywords of :func:`analysis.study.report` (name, x, title,
describe, missing, columns, points, labels, pretrain_tokens, threshold); the input and output names are its
others."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from analysis import study

    inputs = {k: list(getattr(sm.input, k)) for k in ("accuracy", "speed", "metrics", "bases", "builds")}
    outputs = {k: getattr(sm.output, k) for k in study.OUTPUTS}
    print(study.report(**inputs, **dict(sm.params.study), **outputs))
