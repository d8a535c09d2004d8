"""A study's data: its adaptation set (``adapt``: n_adapt rows per task, from the training problems only) or a base's
pretraining text (``pretrain.x<m>``: m times the default's rows); only that file of the synthetic suite kept (the
test sets the study scores on are the default run's)."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import os
    import tempfile
    from pathlib import Path

    from fastdllm_core.synthetic import write_suite

    p, out = sm.params, Path(sm.output[0])
    kind = "adapt" if "n_adapt" in p.rows else "pretrain"
    counts = {"n_pretrain": 0, "n_sft": 0, "n_adapt": 0, **p.rows}  # the one set this job writes
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        # the same seed and test split as the default's suite: its rows are drawn from the same training problems
        written = write_suite(tmp, seed=int(p.seed), n_eval=int(p.n_eval), **counts)
        os.replace(written[kind], out)
    with open(out) as fh:
        rows = sum(1 for _ in fh)
    print(f"{rows} {kind} rows ({p.rows} per task) -> {out}")
