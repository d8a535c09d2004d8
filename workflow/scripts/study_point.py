"""A study's snapshot, or one of its bases (``base.<base>``), scored on every stand-in at every test item
(workflow/lib/study_jobs.score); the rows written atomically to the study's points."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import study_jobs
    from fastdllm_core.provenance import write_csv_atomic
    from study_specs import StudyJob

    sm = snakemake  # noqa: F821
    write_csv_atomic(sm.output[0], study_jobs.score(sm.config, StudyJob(**sm.params.job)))
