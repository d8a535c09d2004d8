"""A snapshot of the scale study timed: batch-1 tokens/s at the speed setting against its own size's AR base, in
interleaved rounds in this job (workflow/lib/study_jobs.time_against), which holds bench.job_threads cores."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan_scale
    import study_jobs
    from fastdllm_core.provenance import write_csv_atomic

    sm = snakemake  # noqa: F821
    job = plan_scale.snapshot_job(sm)
    sides = {"snapshot": (job.name, sm.input.model, job.mode), "ar_base": (sm.params.ar_key, sm.params.ar_source, "ar")}
    timed = study_jobs.time_against(job.config, sides, sm.input.prompts, job.fields, "scale_study")
    write_csv_atomic(sm.output[0], timed)
    print(f"batch 1: {timed[0]['tokens_per_s']:.1f} tokens/s against its base's {timed[-1]['tokens_per_s']:.1f} "
          f"({timed[0]['speedup_vs_main_ar']:.2f}x)")
