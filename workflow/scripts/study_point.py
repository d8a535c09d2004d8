"""A study's snapshot, or one of its bases (``base.<base>``), scored on every stand-in at every test item
(workflow/fastdllm_dag/job/study.score); the rows written atomically to the study's points."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_dag.job import study as study_jobs
    from fastdllm_dag.plan.study_specs import StudyJob

    write_csv_atomic(sm.output[0], study_jobs.score(sm.config, StudyJob(**sm.params.job)))
