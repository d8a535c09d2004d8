"""One run of a throughput sweep (a model, a mode, a batch size, a decoding setting) measured through
fastdllm_core.bench.run_sweep, for rule bench and the budget study's points (rule budget_point)."""
from __future__ import annotations

import plan_points
from fastdllm_core import bench
from fastdllm_core.config import MDM_MODES, DecodeConfig


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


def measure(bm, prompts, run: dict, bcfg: dict, seed: int, prompt_set: str, meta: dict, fields: dict) -> list[dict]:
    """The rows of one run, each with ``fields`` (model, sweep, ...) and status ok; AR rows carry the sweep's
    decode columns empty (they do not apply)."""
    out = bench.run_sweep(bm, prompts, cfg=sweep_config(run, bcfg, seed), prompt_set=prompt_set, progress=True,
                          meta_config=meta)
    for r in out:
        r.update(model_source=r["model"], **fields, status="ok", note="")
        if r["mode"] == "ar":
            r.update(threshold="", sub_block_size="", use_sub_block_cache="")
    return out
