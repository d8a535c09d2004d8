"""A study's snapshot timed: batch-1 tokens/s at the speed setting against its own base, in interleaved rounds in
this job (workflow/lib/study_jobs.time_snapshot), which holds bench.job_threads cores."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import study_jobs
    from study_specs import StudyJob

    sm = snakemake  # noqa: F821
    study_jobs.time_snapshot(sm.config, StudyJob(**sm.params.job), sm.input.model, sm.input.prompts, sm.output[0])
