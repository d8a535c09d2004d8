"""A study's snapshot timed: batch-1 tokens/s at the speed setting against its own base, in interleaved rounds in
this job (workflow/fastdllm_dag/job/study.time_snapshot), which holds bench.job_threads cores."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from fastdllm_dag.job import study as study_jobs
    from fastdllm_dag.plan.study_specs import StudyJob

    study_jobs.time_snapshot(sm.config, StudyJob(**sm.params.job), sm.input.model, sm.input.prompts, sm.output[0])
