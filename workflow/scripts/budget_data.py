"""The budget study's adaptation set: the synthetic suite with budget_study.n_adapt adaptation rows per task, only
its adaptation file kept (the test sets the study scores on are the default run's)."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import os
    import tempfile
    from pathlib import Path

    from fastdllm_core.synthetic import write_suite

    p, out = snakemake.params, Path(snakemake.output[0])  # noqa: F821
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        # the same seed and test split as the default's suite: its adaptation rows are drawn from the same training
        # problems, the default's 1500 per task being the first rows of this set
        written = write_suite(tmp, seed=int(p.seed), n_eval=int(p.n_eval), n_pretrain=0, n_sft=0,
                              n_adapt=int(p.n_adapt))
        os.replace(written["adapt"], out)
    with open(out) as fh:
        rows = sum(1 for _ in fh)
    print(f"{rows} adaptation rows ({p.n_adapt} per task) -> {out}")
