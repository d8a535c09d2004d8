"""One throughput sweep through fastdllm_core.bench.run_sweep: each run of the sweep is one tidy row (status ok;
a model that cannot be loaded: status n/a, note = why, no measurement); ``prompts_source`` says where the prompts
came from (a local file's path, or the Hub dataset)."""
from fastdllm_dag.job.log import logged

with logged(snakemake) as sm:  # noqa: F821
    import torch

    from fastdllm_core import bench
    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_dag.job import bench_run
    from fastdllm_dag.job import common as jobs
    from fastdllm_dag.plan import models as plan

    p, config = sm.params, sm.config
    device = jobs.require_device(config)
    if sm.wildcards.sweep == "gpu_batch" and device != "cuda":
        raise RuntimeError("the gpu_batch sweep measures GPU throughput and needs CUDA; it is left out when gpu: false")
    bcfg = p.bench
    # the job reserves bench.job_threads cores (no other job of this run disturbs the timing) but decodes with
    # bench.threads torch threads (default 1: a tiny model at small batch gains nothing from more, and a lone
    # thread cannot collapse on a busy machine); each row records the threads and how busy the host was
    torch.set_num_threads(int(bcfg.get("threads", 1)))
    if p.prompts_task in plan.SYNTH_TASKS:  # the user turns the accuracy evaluation sends, item by item
        from fastdllm_core.synthetic import user_prompts

        texts, prompts_from = user_prompts(p.prompts_task, p.prompts_path), p.prompts_path
    else:  # data.eval_paths.<task>, else (GSM8K) the evaluation's local default or the Hub; else named n/a
        texts, prompts_from = bench.load_prompt_texts(p.prompts_task, p.prompts_path)
    if not texts:
        raise RuntimeError(f"no prompts for bench.prompts_from={p.prompts_task!r}; set data.eval_paths")
    texts = texts[: int(bcfg["num_prompts"])]
    by_model, failed = {}, {}
    for run in p.runs:
        by_model.setdefault(run["model"], []).append(run)
    fields = dict(sweep=sm.wildcards.sweep, scale=config["scale"], prompts_source=str(prompts_from))

    def load(model):
        """The model and its prompts; a model that cannot be loaded (gated Hub id, missing checkpoint): None, its
        reason kept for its n/a rows (the others go on)."""
        if model in failed:
            return None
        bm, reason = bench.load_or_reason(lambda: bench.load_bench_model(
            p.sources[model], device=device, dtype=config.get("dtype", "auto"),
            label=config["models"][model].get("label", model), seed=int(config["seed"])), p.sources[model])
        if bm is None:
            print(f"{model}: n/a, {reason}")
            failed[model] = reason
            return None
        print(f"{model}: {len(by_model[model])} runs, {len(texts)} prompts from {prompts_from}")
        return bm, bench.encode_prompts(bm.tokenizer, texts)

    def measure_one(loaded, model, run):
        meta = {"sweep": sm.wildcards.sweep, "run": run, "model": p.sources[model], "bench": dict(bcfg)}
        out = bench_run.measure(loaded, run, bcfg, int(config["seed"]), p.prompts_task, meta,
                                dict(model=model, **fields))
        print(run, "->", [round(float(r["tokens_per_s"]), 1) for r in out])
        return out

    # bench.rounds > 1: the models' runs measured in interleaved rounds, each run's fastest round kept
    rows = bench_run.measure_rounds(by_model, load, measure_one, int(bcfg.get("rounds", 1)))
    for model, reason in failed.items():
        rows += [dict(r, model_source=p.sources[model], model=model, **fields)
                 for r in bench.na_rows(by_model[model], reason)]
    rows.sort(key=lambda r: list(by_model).index(r["model"]))  # the sweep's model order, n/a rows included
    if not any(r["status"] == "ok" for r in rows):  # nothing measured: the job fails naming every reason
        raise RuntimeError("no model of sweep " + sm.wildcards.sweep + " could be loaded: "
                           + "; ".join(sorted({f"{r['model']}: {r['note']}" for r in rows})))
    # speed-up of every row over the AR reference model (roles.main_ar) at the same batch size, when measured here
    ref = {r["batch_size"]: float(r["tokens_per_s"]) for r in rows
           if r["model"] == config["roles"]["main_ar"] and r["mode"] == "ar" and r["status"] == "ok"}
    for r in rows:
        b = ref.get(r["batch_size"])
        r["speedup_vs_main_ar"] = float(r["tokens_per_s"]) / b if b and r["status"] == "ok" else ""
    write_csv_atomic(sm.output[0], rows)
