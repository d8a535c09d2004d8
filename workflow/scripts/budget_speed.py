"""One snapshot of the budget study timed: its batch-1 throughput at the speed setting (an AR snapshot: AR) and
the AR base's, on the same prompts in interleaved rounds in this job (``bench.rounds``, as rule bench), which holds
bench.job_threads cores so that no other job of the run disturbs the timing."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import plan_budget
    import study_jobs
    from fastdllm_core.provenance import write_csv_atomic

    sm = snakemake  # noqa: F821
    job = plan_budget.snapshot_job(sm)
    sides = {"snapshot": (job.name, sm.input.model, job.mode), "ar_base": (sm.params.ar_key, sm.params.ar_source, "ar")}
    # the two sides in interleaved rounds (bench.rounds), each side's fastest round kept: rule bench's measurement
    timed = study_jobs.time_against(job.config, sides, sm.input.prompts, job.fields, "budget_study")
    write_csv_atomic(sm.output[0], timed)
    print(f"batch 1: {timed[0]['tokens_per_s']:.1f} tokens/s against the AR base's {timed[-1]['tokens_per_s']:.1f} "
          f"({timed[0]['speedup_vs_main_ar']:.2f}x)")
