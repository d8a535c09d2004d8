"""What the studies' scoring jobs run (rules <study>_point, <study>_base_point, <study>_speed): a checkpoint scored on
every stand-in at every test item, and timed at batch 1 against its base in interleaved rounds.  Run inside a job
(torch imported here, not at parse time); each job's parameters are one :class:`study_specs.StudyJob`."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from fastdllm_dag.job import common as jobs
from fastdllm_dag.plan import points as plan_points
from fastdllm_dag.plan.study_specs import StudyJob


def score(config: dict, job: StudyJob) -> list[dict]:
    """Rows of ``job``'s checkpoint (its ``source``, as model ``point`` of ``mode``, grouped as ``group``) on every
    task of ``data_paths``, all items: block diffusion at the accuracy and the speed setting (its tokens per
    forward), AR at its one point; every row carries the job's ``fields`` and ``n_params``."""
    from fastdllm_core.loading import load_model
    from fastdllm_dag.job import eval_point

    device = jobs.require_device(config)
    models = dict(config["models"], **{job.point: {"mode": job.mode, "label": job.label, "seed_of": job.group}})
    cfg = dict(config, models=models)
    p = SimpleNamespace(model=job.point, label=job.label, source=job.source, mode=job.mode, limit=None,
                        max_new_tokens=config["decode"]["max_new_tokens"], batch_size=config["eval"]["batch_size"],
                        verdict_cache=job.verdict_cache)  # as run_point reads rule evaluate's params
    points = ([plan_points.point_name("bd", plan_points.base_decode(config)),
               plan_points.point_name("bd", plan_points.speed_decode(config))] if job.mode == "bd" else ["ar"])
    loaded = load_model(job.source, device=device, dtype=config.get("dtype", "auto"))
    extra = dict(job.fields, n_params=sum(t.numel() for t in loaded.model.parameters()))  # tied embeddings once
    rows = []
    for task, path in job.data_paths.items():
        for point in points:
            out = eval_point.run_point(loaded, p, cfg, task, point, path, device, Path(job.cache_dir) / task / point)
            rows += [dict(r, **extra) for r in out]
            print(f"{task} {point}: " + ", ".join(f"{r['metric']}={r['value']}" for r in out), flush=True)
    return rows


def time_snapshot(config: dict, job: StudyJob, model: str, prompts_file: str) -> list[dict]:
    """Rule <study>_speed: batch-1 tokens/s at the speed setting of ``job``'s snapshot (checkpoint ``model``) and of
    its base (the reference AR side, last) on the bench prompts, in ``bench.rounds`` interleaved rounds (rule bench's
    measurement), each side's fastest round kept; ``speedup_vs_main_ar`` over the base's."""
    import torch

    from fastdllm_core import bench
    from fastdllm_core.synthetic import user_prompts
    from fastdllm_dag.job import bench_run

    device = jobs.require_device(config)
    bcfg = config["bench"]
    torch.set_num_threads(int(bcfg.get("threads", 1)))
    task, seed = bcfg["prompts_from"], int(config["seed"])
    texts = user_prompts(task, prompts_file)[: int(bcfg["num_prompts"])]
    speed = plan_points.speed_decode(config)
    sides = {"snapshot": (job.point, model, job.mode), "ar_base": (job.ar_key, job.ar_source, "ar")}

    def load(side):
        key, source, _ = sides[side]
        bm = bench.load_bench_model(source, device=device, dtype=config.get("dtype", "auto"), label=key, seed=seed)
        return bm, bench.encode_prompts(bm.tokenizer, texts)

    def measure_one(loaded, side, run):
        return bench_run.measure(loaded, run, bcfg, seed, task,
                                 {"run": run, "model": sides[side][1], "bench": dict(bcfg)},
                                 dict(model=run["model"], sweep=f"{job.study}_study", scale=config["scale"],
                                      prompts_source=str(prompts_file), side=side, **job.fields))

    runs = {side: [{"model": m, "mode": run_mode, "batch_size": 1, "decode": speed}]
            for side, (m, _, run_mode) in sides.items()}
    timed = bench_run.measure_rounds(runs, load, measure_one, int(bcfg.get("rounds", 1)))
    ref = float(timed[-1]["tokens_per_s"])
    for r in timed:
        r["speedup_vs_main_ar"] = float(r["tokens_per_s"]) / ref
    print(f"batch 1: {timed[0]['tokens_per_s']:.1f} tokens/s against the base's {timed[-1]['tokens_per_s']:.1f} "
          f"({timed[0]['speedup_vs_main_ar']:.2f}x)")
    return timed
