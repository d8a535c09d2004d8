"""A study's snapshot timed: batch-1 tokens/s at the speed setting against its own base, in interleaved rounds in
this job (workflow/fastdllm_dag/job/study.time_snapshot), which holds bench.job_threads cores; the rows written
atomically to the study's points."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_dag.job import study as study_jobs
    from fastdllm_dag.plan.study_specs import StudyJob

    job = StudyJob(**sm.params.job)
    write_csv_atomic(sm.output[0], study_jobs.time_snapshot(sm.config, job, sm.input.model, sm.input.prompts))
