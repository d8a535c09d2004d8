"""One run of a throughput sweep (a model, a mode, a batch size, a decoding setting) measured through
fastdllm_core.bench.run_sweep, for rule bench and the studies' snapshots (rule <study>_speed); the compared
models' runs measured in interleaved rounds (``bench.rounds``)."""
from __future__ import annotations

import itertools
from typing import Callable

from fastdllm_core import bench
from fastdllm_core.decode_config import MDM_MODES, DecodeConfig
from fastdllm_dag.plan import points as plan_points


def sweep_config(run: dict, bcfg: dict, seed: int) -> bench.SweepConfig:
    """The sweep of one run: ar / bd on the config's own grid; a masked-diffusion sampler (llada, dream,
    Fast-dLLM v1) at its point, whose generation length is its own."""
    d = DecodeConfig.from_dict(dict(run["decode"]))
    mdm = run["mode"] in MDM_MODES
    return bench.SweepConfig(
        modes=() if mdm else (run["mode"],), ar_baselines=(bcfg.get("ar_baseline", "hf"),),
        decode_paths=(bcfg.get("decode_path", "eager"),),
        points=(plan_points.point_name(run["mode"], run["decode"]),) if mdm else (),
        thresholds=(float(d.threshold if d.threshold is not None else 1.0),),
        sub_block_sizes=(int(d.sub_block_size),), sub_block_cache=(bool(d.use_sub_block_cache),),
        batch_sizes=(int(run["batch_size"]),), block_size=None if mdm else int(d.block_size),
        max_new_tokens=int(bcfg["max_new_tokens"]), grid="cross", warmup=int(bcfg.get("warmup", 1)),
        repeats=int(bcfg.get("repeats", 1)), profile=False, seed=seed)


def measure(loaded, run: dict, bcfg: dict, seed: int, task: str, meta: dict, fields: dict) -> list[dict]:
    """The rows of one run on ``loaded`` (a bench model and its encoded prompts, from ``task``), each with ``fields``
    (model, sweep, ...) and status ok; AR rows carry the sweep's decode columns empty (they do not apply)."""
    bm, prompts = loaded
    out = bench.run_sweep(bm, prompts, cfg=sweep_config(run, bcfg, seed), prompt_set=f"{task}[:{len(prompts)}]",
                          progress=True, meta_config=meta)
    for r in out:
        r.update(model_source=r["model"], **fields, status="ok", note="")
        if r["mode"] == "ar":
            r.update(threshold="", sub_block_size="", use_sub_block_cache="")
    return out


def _keep_fastest(candidates: list[list[dict]]) -> list[dict]:
    """The rows of the round whose first row has the highest tokens/s, with ``rounds``, ``round_kept``,
    ``tokens_per_s_rounds`` (every round's, in round order) and ``wall_time_s_min`` / ``_max`` over every timed
    repeat of every round (the figures' error bars then span the whole measurement, drift included)."""
    tps = [float(rows[0]["tokens_per_s"]) for rows in candidates]
    k = max(range(len(tps)), key=tps.__getitem__)
    out = []
    for i, row in enumerate(candidates[k]):
        walls = [float(rows[i][c]) for rows in candidates for c in ("wall_time_s_min", "wall_time_s_max")]
        out.append(dict(row, rounds=len(candidates), round_kept=k, wall_time_s_min=min(walls),
                        wall_time_s_max=max(walls), tokens_per_s_rounds=";".join(f"{x:.3f}" for x in tps)))
    return out


def measure_rounds(runs_by_model: dict[str, list[dict]], load: Callable[[str], object | None],
                   measure_one: Callable[[object, str, dict], list[dict]], rounds: int) -> list[dict]:
    """Every model's runs measured ``rounds`` times, interleaved: round r goes through the models (and each model's
    runs) in the given order when r is even, in reverse when odd, so that drift within the job (a slower stretch of
    a shared machine, the allocator's state after another model) falls on every model alike.  ``load(model)``
    gives what ``measure_one(loaded, model, run)`` needs, or None for a model that cannot be loaded (left out: the
    caller writes its n/a rows); it is called once per model and round (one model in memory at a time).  Per run,
    the round with the highest tokens/s is kept (:func:`_keep_fastest`); rows come back in the given order."""
    if rounds < 1:
        raise ValueError(f"bench.rounds must be >= 1, got {rounds!r}")
    order = [(m, i) for m, runs in runs_by_model.items() for i in range(len(runs))]
    got: dict[tuple[str, int], list[list[dict]]] = {}
    for r in range(rounds):
        for model, keys in itertools.groupby(order if r % 2 == 0 else order[::-1], key=lambda k: k[0]):
            loaded = load(model)
            if loaded is None:
                continue
            for _, i in keys:
                got.setdefault((model, i), []).append(measure_one(loaded, model, runs_by_model[model][i]))
            del loaded
    return [row for key in order if key in got for row in _keep_fastest(got[key])]
