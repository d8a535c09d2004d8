"""One snapshot of the budget study timed: its batch-1 throughput at the speed setting (an AR snapshot: AR) and
the AR base's, on the same prompts in interleaved rounds in this job (``bench.rounds``, as rule bench; each side's
fastest round kept: workflow/lib/study_jobs.time_snapshot), which holds bench.job_threads cores so that no other
job of the run disturbs the timing."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan_budget
    import study_jobs

    sm = snakemake  # noqa: F821
    study_jobs.time_snapshot(sm, study_jobs.snapshot_job(sm, plan_budget.row_fields), "budget_study")
