"""Measuring one run: warm-up, timed repeats under NVML and the host-load monitor, the profiling pass, expected
forwards under forced acceptance, and the sub-block cache's token agreement."""
from __future__ import annotations

import statistics

import torch

from ..decode_config import STATIC_PATHS
from ..decoding.ar import ar_generation_summary
from ..hostload import HostLoad, warn_if_busy
from ..provenance import NOT_AVAILABLE
from .batches import Runner
from .hooks import forced_acceptance_forwards
from .telemetry import NvmlSampler, per_token


def token_agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Mean over rows of the fraction of equal positions up to the shorter length."""
    if len(a) != len(b) or not a:
        raise ValueError(f"agreement needs the same non-zero number of rows, got {len(a)} and {len(b)}")
    fr = []
    for x, y in zip(a, b):
        n = min(len(x), len(y))
        fr.append(sum(int(p == q) for p, q in zip(x[:n], y[:n])) / n if n else float(len(x) == len(y)))
    return sum(fr) / len(fr)


def _timed_repeats(runner: Runner, item: dict, prompts: list[list[int]]):
    """(outputs, NVML summary, host-load summary, peak memory, capture seconds) of the timed repeats, after the
    warm-up runs (where the static path captures its graphs: the seconds are summed over every run)."""
    cfg, dev = runner.cfg, runner.bm.device
    capture = sum(runner.run(item, prompts).stats.capture_time_s for _ in range(cfg.warmup))
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    sampler = NvmlSampler(dev if dev.type == "cuda" else "cpu", hz=cfg.nvml_hz)
    outs = []
    try:
        with sampler, HostLoad() as host:
            for _ in range(cfg.repeats):
                outs.append(runner.run(item, prompts))
        tele = sampler.summary()
    finally:
        sampler.close()
    peak_mem = torch.cuda.max_memory_allocated(dev) / 2 ** 20 if dev.type == "cuda" else NOT_AVAILABLE
    return outs, tele, host.summary(), peak_mem, capture + sum(o.stats.capture_time_s for o in outs)


def _timing_fields(outs, tele: dict, host: dict, peak_mem) -> dict:
    st = [o.stats for o in outs]
    tokens = [s.total_tokens for s in st]
    walls = [s.wall_time_s for s in st]
    lat = [x for s in st for x in s.row_latency_s]
    s0 = st[0]
    return dict(
        total_tokens=statistics.mean(tokens), wall_time_s=statistics.mean(walls), wall_time_s_min=min(walls),
        wall_time_s_max=max(walls), tokens_per_s=sum(tokens) / sum(walls), nfe=s0.nfe,
        tokens_per_forward=s0.tokens_per_forward, latency_mean_s=statistics.mean(lat),
        latency_p50_s=statistics.median(lat),
        steps_per_block_mean=statistics.mean(s0.steps_per_block) if s0.steps_per_block else "",
        host_syncs=s0.host_syncs, host_syncs_per_step=s0.host_syncs / s0.nfe if s0.nfe else NOT_AVAILABLE,
        peak_mem_mib=peak_mem, **per_token(tele, sum(tokens)), torch_threads=torch.get_num_threads(),
        **host,
    )


def _expected_tokens_per_forward(runner: Runner, item: dict, prompts: list[list[int]]) -> float:
    cfg, bs = runner.cfg, item["batch_size"]
    row_forwards = sum(forced_acceptance_forwards([len(p) for p in prompts[i:i + bs]], cfg.max_new_tokens,
                                                  runner.D, item["sub_block_size"], item["forced_k"])
                       for i in range(0, len(prompts), bs))
    return cfg.max_new_tokens * len(prompts) / row_forwards


def _profile_fields(runner: Runner, item: dict, prompts: list[list[int]]) -> dict:
    if not runner.cfg.profile:
        return {}
    if not runner.profile_supported(item):
        return dict(forward_time_s=NOT_AVAILABLE, decoder_overhead_frac=NOT_AVAILABLE)
    p = runner.run(item, prompts, profile=True).stats
    return dict(forward_time_s=p.forward_time_s, profile_wall_time_s=p.wall_time_s,
                decoder_overhead_frac=1.0 - p.forward_time_s / p.wall_time_s if p.wall_time_s > 0 else "")


def measure(runner: Runner, item: dict, prompts: list[list[int]]) -> dict:
    """One row: warm-up, timed repeats under NVML, then the profiling pass and the agreement check."""
    outs, tele, host, peak_mem, capture = _timed_repeats(runner, item, prompts)
    row = dict(item)
    row.update(_timing_fields(outs, tele, host, peak_mem), capture_time_s=capture)
    if row.get("decode_path") == "compiled":
        from ..decoding.static import last_compile_scope

        row["compile_scope"] = last_compile_scope(getattr(runner.bm.model, "module", runner.bm.model))
    row["ar_generation"] = ar_generation_summary() if item["mode"] == "ar" else ""
    warn_if_busy(row, f"{item['mode']} batch {item['batch_size']}")
    if item["mode"] == "bd" and item["acceptance"] == "forced_k":
        row["tokens_per_forward_expected"] = _expected_tokens_per_forward(runner, item, prompts)
    if item.get("point"):  # masked diffusion: the setting's decoding columns (gen_length, steps, alg, cache ...)
        from ..decode_config import DecodeConfig

        dc = DecodeConfig.from_slug(item["point"])
        row.update(dc.row_fields(item["mode"]), max_new_tokens=dc.max_new_tokens)
    row.update(_profile_fields(runner, item, prompts))
    runner.remember(item, outs[0].sequences)
    if item["mode"] == "bd" and item["use_sub_block_cache"]:
        ref = runner.sequences_without_cache(item, prompts)
        row.update(token_agreement=token_agreement(outs[0].sequences, ref),
                   agreement_reference="same configuration without the sub-block cache")
    if item.get("decode_path") in STATIC_PATHS:  # the goal: the same tokens as the eager path
        row["eager_agreement"] = token_agreement(outs[0].sequences, runner.sequences_eager(item, prompts))
    return row
