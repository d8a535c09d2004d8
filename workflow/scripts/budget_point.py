"""One snapshot of the budget study scored and timed in one job: its accuracy on every stand-in at every test
item (block diffusion at the accuracy setting and at the speed setting: tokens per forward), then its batch-1
throughput at the speed setting against the AR base's, measured here one after the other on the same prompts."""
import sys

sys.path.insert(0, snakemake.scriptdir)  # noqa: F821
from _log import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    from pathlib import Path
    from types import SimpleNamespace

    import torch

    import bench_run
    import eval_point
    import jobs
    import plan_points
    from fastdllm_core import bench
    from fastdllm_core.model import load_model
    from fastdllm_core.provenance import write_csv_atomic
    from fastdllm_core.synthetic import user_prompts

    sm = snakemake  # noqa: F821
    config, snap, chain, name = sm.config, sm.params.snapshot, sm.params.chain, sm.wildcards.snapshot
    device = jobs.require_device(config)
    mode = config["models"][chain["model"]]["mode"]
    lever = chain["lever"] or {}
    study = {"snapshot": name, "chain": snap["chain"], "lever": lever.get("name", ""),
             "lever_value": lever.get("value", ""), "budget": snap["budget"], "budget_tokens": snap["tokens"],
             "train_seed": chain["seed"], "model_group": chain["model"]}
    label = f"{config['models'][chain['model']].get('label', chain['model'])} at {snap['budget']}x"
    # the snapshot as a model of this job's config: its rows carry the chain's model as their group
    cfg = dict(config, models=dict(config["models"], **{name: {"mode": mode, "label": label,
                                                                "seed_of": chain["model"]}}))
    p = SimpleNamespace(model=name, label=label, source=sm.input.model, mode=mode, limit=None,
                        max_new_tokens=config["decode"]["max_new_tokens"], batch_size=config["eval"]["batch_size"],
                        verdict_cache=sm.params.verdict_cache, mdm_loglikelihood="exact", mc_num=0)
    points = ([plan_points.point_name("bd", plan_points.base_decode(config)),
               plan_points.point_name("bd", plan_points.speed_decode(config))] if mode == "bd" else ["ar"])
    loaded = load_model(sm.input.model, device=device, dtype=config.get("dtype", "auto"))
    study["n_params"] = sum(t.numel() for t in loaded.model.parameters())  # tied embeddings once
    rows = []
    for task, path in sm.params.data_paths.items():
        for point in points:
            out = eval_point.run_point(loaded, p, cfg, task, point, path, device,
                                       Path(sm.params.cache_dir) / task / point)
            rows += [dict(r, **study) for r in out]
            print(f"{task} {point}: " + ", ".join(f"{r['metric']}={r['value']}" for r in out))
    write_csv_atomic(sm.output.accuracy, rows)
    del loaded

    bcfg = config["bench"]
    torch.set_num_threads(int(bcfg.get("threads", 1)))
    task = bcfg["prompts_from"]
    texts = user_prompts(task, sm.params.data_paths[task])[: int(bcfg["num_prompts"])]
    speed = plan_points.speed_decode(config)
    timed = []
    for side, model, source, run_mode in (("snapshot", name, sm.input.model, mode),
                                          ("ar_base", sm.params.ar_key, sm.params.ar_source, "ar")):
        bm = bench.load_bench_model(source, device=device, dtype=config.get("dtype", "auto"), label=model,
                                    seed=int(config["seed"]))
        prompts = bench.encode_prompts(bm.tokenizer, texts)
        run = {"model": model, "mode": run_mode, "batch_size": 1, "decode": speed}
        timed += bench_run.measure(bm, prompts, run, bcfg, int(config["seed"]), f"{task}[:{len(prompts)}]",
                                   {"run": run, "model": source, "bench": dict(bcfg)},
                                   dict(model=model, sweep="budget_study", scale=config["scale"],
                                        prompts_source=str(sm.params.data_paths[task]), side=side, **study))
    ar_tps = float(timed[-1]["tokens_per_s"])
    for r in timed:
        r["speedup_vs_main_ar"] = float(r["tokens_per_s"]) / ar_tps
    write_csv_atomic(sm.output.speed, timed)
    print(f"batch 1: {timed[0]['tokens_per_s']:.1f} tokens/s against the AR base's {ar_tps:.1f} "
          f"({timed[0]['speedup_vs_main_ar']:.2f}x)")
