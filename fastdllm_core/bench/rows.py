"""The CSV rows of a sweep: their columns, the fields every row of a run shares, the speed-ups over the AR
baselines, and the summary table printed at the end."""
from __future__ import annotations

import math

from ..hostload import COLUMNS as HOSTLOAD_COLUMNS
from ..provenance import META_COLUMNS
from .grid import AR_BASELINES
from .models import BenchModel

COLUMNS = [
    "model", "model_label", "weights", "n_params", "dtype", "attn_implementation", "device",
    "mode", "baseline", "decode_path", "compile_scope", "batch_size", "threshold", "sub_block_size", "block_size",
    "use_sub_block_cache", "point", "gen_length", "steps", "remasking", "alg", "alg_temp", "cache", "logits_eos_inf",
    "confidence_eos_eot_inf", "acceptance", "forced_k", "prompt_set", "n_prompts", "prompt_len_mean", "max_new_tokens",
    "ignore_eos",
    "warmup", "repeats", "total_tokens", "wall_time_s", "wall_time_s_min", "wall_time_s_max", "tokens_per_s",
    "nfe", "tokens_per_forward", "tokens_per_forward_expected", "latency_mean_s", "latency_p50_s",
    "steps_per_block_mean", "host_syncs", "host_syncs_per_step", "forward_time_s", "profile_wall_time_s",
    "decoder_overhead_frac", "capture_time_s", "token_agreement", "agreement_reference", "eager_agreement",
    "ar_tokens_per_s_hf", "ar_tokens_per_s_hf_static", "ar_tokens_per_s_static", "ar_tokens_per_s_compiled",
    "speedup_vs_hf", "speedup_vs_hf_static", "speedup_vs_static", "speedup_vs_compiled", "speedup_vs_ar",
    "speedup_baseline",
    "power_avg_w", "power_peak_w", "energy_j", "energy_method", "joules_per_token", "peak_mem_mib",
    "nvml_mem_used_peak_mib", "gpu_util_avg", "sm_clock_avg_mhz", "nvml_samples", "nvml_index",
    "nvml_device_name", "nvml_driver", "nvml_cuda_driver", "truncated_prompts", "torch_threads", "ar_generation",
    *HOSTLOAD_COLUMNS,
] + META_COLUMNS


def common_fields(bm: BenchModel, cfg, block_size: int, prompt_set: str, n_truncated: int) -> dict:
    """The columns every row of a sweep shares: the model, the prompt set and the measurement settings."""
    return dict(model=bm.source, model_label=bm.label, weights=bm.weights,
                n_params=sum(p.numel() for p in bm.model.parameters()), dtype=bm.info.get("dtype", ""),
                attn_implementation=bm.info.get("attn_implementation", ""), device=str(bm.device),
                block_size=block_size, prompt_set=prompt_set, max_new_tokens=cfg.max_new_tokens,
                ignore_eos=cfg.ignore_eos, warmup=cfg.warmup, repeats=cfg.repeats, truncated_prompts=n_truncated)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


def add_speedups(rows: list[dict]) -> None:
    """Fill the AR reference columns and speed-ups of the diffusion rows (same batch size, prompts, budget)."""
    ar = {}
    for r in rows:
        if r["mode"] == "ar":
            ar[(r["batch_size"], r["prompt_set"], r["max_new_tokens"], r["baseline"])] = r["tokens_per_s"]
    for r in rows:
        if r["mode"] == "ar":
            continue
        base = {bl: ar.get((r["batch_size"], r["prompt_set"], r["max_new_tokens"], bl)) for bl in AR_BASELINES}
        for bl, v in base.items():
            r[f"ar_tokens_per_s_{bl}"] = v if v is not None else ""
            r[f"speedup_vs_{bl}"] = r["tokens_per_s"] / v if v else ""
        have = {bl: v for bl, v in base.items() if v}
        if have:
            best = max(have, key=have.get)
            r.update(speedup_vs_ar=r["tokens_per_s"] / have[best], speedup_baseline=f"ar_{best} (fastest AR measured)")


def print_summary(rows: list[dict]) -> None:
    def f(v, fmt):
        return format(v, fmt) if _num(v) else str(v or "-")

    print(f"{'mode':<4} {'base':<9} {'path':<8} {'bs':>3} {'thr':>5} {'S':>3} {'cache':>5} {'accept':<10} {'tok/s':>9} "
          f"{'tok/fwd':>7} {'sync/fwd':>8} {'ovh':>6} {'agree':>6} {'speedup':>7}")
    for r in rows:
        acc = r["acceptance"] if r["mode"] == "bd" else ""
        if acc == "forced_k":
            acc = f"forced_{r['forced_k']}"
        cache = str(r.get("use_sub_block_cache", ""))
        print(f"{r['mode']:<4} {r['baseline']:<9} {r.get('decode_path', ''):<8} {r['batch_size']:>3} "
              f"{f(r.get('threshold'), '.2f'):>5} {f(r.get('sub_block_size'), 'd'):>3} {cache:>5} {acc:<10} "
              f"{r['tokens_per_s']:>9.1f} {r['tokens_per_forward']:>7.2f} {f(r.get('host_syncs_per_step'), '.2f'):>8} "
              f"{f(r.get('decoder_overhead_frac'), '.2f'):>6} {f(r.get('token_agreement'), '.3f'):>6} "
              f"{f(r.get('speedup_vs_ar'), '.2f'):>7}")
