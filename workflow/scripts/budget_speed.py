"""One snapshot of the budget study timed: its batch-1 throughput at the speed setting (an AR snapshot: AR) and
the AR base's, on the same prompts in interleaved rounds in this job (``bench.rounds``, as rule bench), which holds
bench.job_threads cores so that no other job of the run disturbs the timing."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    import torch

    import bench_run
    import jobs
    import plan_budget
    import plan_points
    from fastdllm_core import bench
    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_core.synthetic import user_prompts

    sm = snakemake  # noqa: F821
    job = plan_budget.snapshot_job(sm)
    config, name, mode, study = job.config, job.name, job.mode, job.fields
    device = jobs.require_device(config)
    bcfg = config["bench"]
    torch.set_num_threads(int(bcfg.get("threads", 1)))
    task = bcfg["prompts_from"]
    texts = user_prompts(task, sm.input.prompts)[: int(bcfg["num_prompts"])]
    speed = plan_points.speed_decode(config)
    sides = {"snapshot": (name, sm.input.model, mode), "ar_base": (sm.params.ar_key, sm.params.ar_source, "ar")}

    def load(side):
        model, source, _ = sides[side]
        bm = bench.load_bench_model(source, device=device, dtype=config.get("dtype", "auto"), label=model,
                                    seed=int(config["seed"]))
        return bm, bench.encode_prompts(bm.tokenizer, texts)

    def measure_one(loaded, side, run):
        bm, prompts = loaded
        return bench_run.measure(bm, prompts, run, bcfg, int(config["seed"]), f"{task}[:{len(prompts)}]",
                                 {"run": run, "model": sides[side][1], "bench": dict(bcfg)},
                                 dict(model=run["model"], sweep="budget_study", scale=config["scale"],
                                      prompts_source=str(sm.input.prompts), side=side, **study))

    runs = {side: [{"model": m, "mode": run_mode, "batch_size": 1, "decode": speed}]
            for side, (m, _, run_mode) in sides.items()}
    # the two sides in interleaved rounds (bench.rounds), each side's fastest round kept: rule bench's measurement
    timed = bench_run.measure_rounds(runs, load, measure_one, int(bcfg.get("rounds", 1)))
    ar_tps = float(timed[-1]["tokens_per_s"])
    for r in timed:
        r["speedup_vs_main_ar"] = float(r["tokens_per_s"]) / ar_tps
    write_csv_atomic(sm.output[0], timed)
    print(f"batch 1: {timed[0]['tokens_per_s']:.1f} tokens/s against the AR base's {ar_tps:.1f} "
          f"({timed[0]['speedup_vs_main_ar']:.2f}x)")
