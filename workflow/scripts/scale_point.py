"""A snapshot of the scale study, or a size's AR base (``base.<size>``), scored on every stand-in at every test item
(workflow/lib/study_jobs.score)."""
import sys
from functools import partial

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan_scale
    import study_jobs
    from fastdllm_core.provenance import write_csv_atomic

    sm = snakemake  # noqa: F821
    config = sm.config
    if hasattr(sm.wildcards, "size"):  # a base: the AR model every chain of the size starts from
        size = sm.wildcards.size
        fields = plan_scale.base_row_fields(config, size)
        name, mode, group = fields["snapshot"], "ar", "base"
        label = f"AR base {size} ({fields['size_params'] / 1e6:.2f}M)"
        source = sm.params.source
    else:
        job = study_jobs.snapshot_job(sm, partial(plan_scale.row_fields, config))
        name, mode, group, fields = job.name, job.mode, job.chain["model"], job.fields
        label = f"{config['models'][group].get('label', group)} {job.chain['size']} at {job.snap['budget']}x"
        source = sm.input.model
    rows = study_jobs.score(config, name, label, source, mode, fields, sm.params.data_paths, sm.params.cache_dir,
                            sm.params.verdict_cache, group)
    write_csv_atomic(sm.output[0], rows)
