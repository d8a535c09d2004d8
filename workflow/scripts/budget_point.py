"""One snapshot of the budget study scored: its accuracy on every stand-in at every test item (block diffusion at the
accuracy setting and at the speed setting, which gives its tokens per forward)."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan_budget
    import study_jobs
    from fastdllm_core.provenance import write_csv_atomic

    sm = snakemake  # noqa: F821
    job = study_jobs.snapshot_job(sm, plan_budget.row_fields)
    group = job.chain["model"]  # the snapshot's rows carry the chain's model as their group
    label = f"{job.config['models'][group].get('label', group)} at {job.snap['budget']}x"
    rows = study_jobs.score(job.config, job.name, label, sm.input.model, job.mode, job.fields, sm.params.data_paths,
                            sm.params.cache_dir, sm.params.verdict_cache, group)
    write_csv_atomic(sm.output[0], rows)
