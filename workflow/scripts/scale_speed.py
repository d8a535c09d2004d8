"""A snapshot of the scale study timed: batch-1 tokens/s at the speed setting against its own size's AR base, in
interleaved rounds in this job (workflow/lib/study_jobs.time_snapshot), which holds bench.job_threads cores."""
import sys
from functools import partial

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan_scale
    import study_jobs

    sm = snakemake  # noqa: F821
    study_jobs.time_snapshot(sm, study_jobs.snapshot_job(sm, partial(plan_scale.row_fields, sm.config)), "scale_study")
