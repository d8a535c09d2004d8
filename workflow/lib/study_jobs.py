"""What the studies' scoring jobs share (rules budget_point, budget_speed, scale_point, scale_speed): the snapshot a
job starts from, a checkpoint scored on every stand-in at every test item, and timed at batch 1 against a reference
AR model in interleaved rounds.  Run inside a job (torch imported here, not at parse time)."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Callable


def snapshot_job(sm, row_fields: Callable[[str, dict, dict], dict]) -> SimpleNamespace:
    """What a snapshot's scoring job starts from (``sm`` its ``snakemake`` object, whose params carry the snapshot
    and its chain): ``config``, the snapshot's ``name``, ``snap`` and ``chain``, the chain's ``mode`` (its model's:
    bd or ar) and the ``fields`` every row of it carries (``row_fields(name, snap, chain)``, the study's)."""
    config, snap, chain, name = sm.config, sm.params.snapshot, sm.params.chain, sm.wildcards.snapshot
    return SimpleNamespace(config=config, name=name, snap=snap, chain=chain,
                           mode=config["models"][chain["model"]]["mode"], fields=row_fields(name, snap, chain))


def score(config: dict, name: str, label: str, source: str, mode: str, fields: dict, data_paths: dict,
          cache_dir: str, verdict_cache: str, group: str) -> list[dict]:
    """Rows of checkpoint ``source`` (as model ``name`` of ``mode``, grouped as ``group``) on every task of
    ``data_paths``, all items: block diffusion at the accuracy and the speed setting (its tokens per forward), AR
    at its one point; every row carries ``fields`` and ``n_params``."""
    import eval_point
    import jobs
    import plan_points
    from fastdllm_core.loading import load_model

    device = jobs.require_device(config)
    cfg = dict(config, models=dict(config["models"], **{name: {"mode": mode, "label": label, "seed_of": group}}))
    p = SimpleNamespace(model=name, label=label, source=source, mode=mode, limit=None,
                        max_new_tokens=config["decode"]["max_new_tokens"], batch_size=config["eval"]["batch_size"],
                        verdict_cache=verdict_cache, mdm_loglikelihood="exact", mc_num=0)
    points = ([plan_points.point_name("bd", plan_points.base_decode(config)),
               plan_points.point_name("bd", plan_points.speed_decode(config))] if mode == "bd" else ["ar"])
    loaded = load_model(source, device=device, dtype=config.get("dtype", "auto"))
    extra = dict(fields, n_params=sum(t.numel() for t in loaded.model.parameters()))  # tied embeddings once
    rows = []
    for task, path in data_paths.items():
        for point in points:
            out = eval_point.run_point(loaded, p, cfg, task, point, path, device, Path(cache_dir) / task / point)
            rows += [dict(r, **extra) for r in out]
            print(f"{task} {point}: " + ", ".join(f"{r['metric']}={r['value']}" for r in out), flush=True)
    return rows


def time_against(config: dict, sides: dict, prompts_file: str, fields: dict, sweep: str) -> list[dict]:
    """Batch-1 tokens/s at the speed setting of each side of ``sides`` (``{side: (model key, source, mode)}``, the
    reference AR side last) on the bench prompts, in ``bench.rounds`` interleaved rounds (rule bench's
    measurement), each side's fastest round kept; ``speedup_vs_main_ar`` over the last side's."""
    import torch

    import bench_run
    import jobs
    import plan_points
    from fastdllm_core import bench
    from fastdllm_core.synthetic import user_prompts

    device = jobs.require_device(config)
    bcfg = config["bench"]
    torch.set_num_threads(int(bcfg.get("threads", 1)))
    task, seed = bcfg["prompts_from"], int(config["seed"])
    texts = user_prompts(task, prompts_file)[: int(bcfg["num_prompts"])]
    speed = plan_points.speed_decode(config)

    def load(side):
        model, source, _ = sides[side]
        bm = bench.load_bench_model(source, device=device, dtype=config.get("dtype", "auto"), label=model, seed=seed)
        return bm, bench.encode_prompts(bm.tokenizer, texts)

    def measure_one(loaded, side, run):
        bm, prompts = loaded
        return bench_run.measure(bm, prompts, run, bcfg, seed, f"{task}[:{len(prompts)}]",
                                 {"run": run, "model": sides[side][1], "bench": dict(bcfg)},
                                 dict(model=run["model"], sweep=sweep, scale=config["scale"],
                                      prompts_source=str(prompts_file), side=side, **fields))

    runs = {side: [{"model": m, "mode": run_mode, "batch_size": 1, "decode": speed}]
            for side, (m, _, run_mode) in sides.items()}
    timed = bench_run.measure_rounds(runs, load, measure_one, int(bcfg.get("rounds", 1)))
    ref = float(timed[-1]["tokens_per_s"])
    for r in timed:
        r["speedup_vs_main_ar"] = float(r["tokens_per_s"]) / ref
    return timed


def time_snapshot(sm, job: SimpleNamespace, sweep: str) -> None:
    """Rules budget_speed and scale_speed: snapshot ``job`` (:func:`snapshot_job`) and the AR base it is compared
    with (``sm.params.ar_key``, ``ar_source``) timed by :func:`time_against`, their rows written atomically to the
    rule's output."""
    from fastdllm_core.provenance import write_csv_atomic

    sides = {"snapshot": (job.name, sm.input.model, job.mode), "ar_base": (sm.params.ar_key, sm.params.ar_source, "ar")}
    timed = time_against(job.config, sides, sm.input.prompts, job.fields, sweep)
    write_csv_atomic(sm.output[0], timed)
    print(f"batch 1: {timed[0]['tokens_per_s']:.1f} tokens/s against the AR base's {timed[-1]['tokens_per_s']:.1f} "
          f"({timed[0]['speedup_vs_main_ar']:.2f}x)")
