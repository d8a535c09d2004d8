"""One snapshot of the budget study scored: its accuracy on every stand-in at every test item (block diffusion at the
accuracy setting and at the speed setting, which gives its tokens per forward)."""
import sys

sys.path.insert(0, f"{snakemake.scriptdir}/../lib")  # noqa: F821  (workflow/lib: the DAG's library)
from joblog import logged  # noqa: E402

with logged(snakemake):  # noqa: F821
    from pathlib import Path
    from types import SimpleNamespace

    import eval_point
    import jobs
    import plan_budget
    import plan_points
    from fastdllm_core.loading import load_model
    from fastdllm_core.provenance import write_csv_atomic

    sm = snakemake  # noqa: F821
    job = plan_budget.snapshot_job(sm)
    config, snap, chain, name, mode, study = job.config, job.snap, job.chain, job.name, job.mode, job.fields
    device = jobs.require_device(config)
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
    write_csv_atomic(sm.output[0], rows)
