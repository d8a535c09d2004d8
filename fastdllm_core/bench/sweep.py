"""Throughput benchmark: the AR baseline vs the block-diffusion decoder on the same model and prompts.

``fastdllm bench --model M --out results.csv [grid options]`` (or :func:`run_sweep` from Python) writes one tidy
CSV row per configuration (mode, AR baseline, batch size, threshold, sub-block size, sub-block cache, acceptance).
On LLaDA / Dream checkpoints the masked-diffusion samplers are measured by point name (``--points``, e.g.
``llada_g256_s256_b32_lc v1_g256_s8_b32_t0.9_dual``): one row per point and batch size, with the setting's
``gen_length``, ``steps``, ``remasking`` / ``alg``, ``cache``; the same timing, counting and speed-ups (against an
AR row of the same generation length, when there is one).

How each row is measured
------------------------
* The model is loaded once, before any timing (model load is never timed).
* ``warmup`` untimed runs, then ``repeats`` timed runs of the same batch.  Each run's wall time is the decoder's
  synchronised wall time (tokenisation excluded; prefill included).  ``tokens_per_s`` = generated tokens summed over
  the repeats / wall time summed over the repeats.  Tokens are counted the same way for both modes: per row, up to
  and including the first stop id (EOS); padding never counts.
* NVML telemetry (:mod:`fastdllm_core.bench.telemetry`) runs over the timed repeats: energy (counter delta), average
  and peak power, joules per generated token.  ``peak_mem_mib`` is ``torch.cuda.max_memory_allocated`` over the
  timed repeats.  On CPU both say "not available".
* A separate profiling run (``profile=True`` for the diffusion decoder, forward hooks for the HF baseline)
  synchronises around every model forward to measure ``forward_time_s``; ``decoder_overhead_frac`` =
  1 - forward time / wall time of that run.  The timed runs above are never perturbed by it.
* ``host_syncs_per_step``: device-to-host copies divided by model forwards (the diffusion decoder counts its own;
  for the AR baseline it is the decoder module's count for HF ``generate``).
* ``token_agreement`` (sub-block cache rows): per row, the fraction of positions where the cached output equals the
  output of the same configuration without the sub-block cache (up to the shorter length), averaged over rows.
* ``truncated_prompts``: prompts cut from the left to fit the model's context with ``max_new_tokens`` (only with
  ``--truncate-prompts left``; otherwise such a prompt is refused, naming it and both lengths).
* ``speedup_vs_ar``: against the *fastest* AR baseline measured at the same batch size (``speedup_baseline`` names
  it); ``speedup_vs_<baseline>`` (``hf``, ``hf_static``, ``static``, ``compiled``) are against each baseline
  separately.

Synthetic acceptance
--------------------
With random weights a diffusion decoder accepts about one token per forward, so its throughput says nothing about
a trained model.  ``acceptance="forced_k"`` installs :class:`ForcedAcceptance`, a forward hook on the model that
rewrites the logits so that, at every decoding step, exactly ``k`` masked positions of the current sub-block (the
leftmost ones) are confident and all others are not: the decoder then unmasks exactly ``min(k, masked left)``
tokens per step.  The rows report tokens/s as a function of the resulting tokens per forward, independent of the
weights (the hook itself costs one elementwise pass over the kept logits).  These rows always say
``acceptance=forced_k`` and are never mixed with real acceptance.

Model sources: a checkpoint (Hub id / directory / ``.gguf``) through :func:`fastdllm_core.loading.load_model`, or
``random:SHAPE`` with SHAPE in :data:`MODEL_SHAPES` (real Qwen2.5 dimensions from a ``Qwen2Config`` written in
code, random weights, no download; ``random:tiny`` is the tiny CPU model).
"""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from ..decode_config import DecodeConfig
from ..decoding import check_family, fit_context, model_context
from ..prompts import batch_of, synthetic_prompts
from ..provenance import run_metadata, write_csv_atomic
from .batches import Runner
from .grid import SweepConfig, plan_runs
from .measure import measure
from .models import BenchModel, load_bench_model
from .rows import COLUMNS, add_speedups, common_fields


def model_synthetic_prompts(bm: BenchModel, n: int, length: int, seed: int) -> list[list[int]]:
    """``n`` random prompts of ``length`` tokens for ``bm``, its mask and stop ids (and the tiny model's special
    ids below 4) left out."""
    return synthetic_prompts(n, length, bm.model.config.vocab_size, seed=seed,
                             avoid=[bm.mask_token_id, *bm.stop_token_ids], low=4 if bm.label == "tiny" else 0)


def run_sweep(model, prompts: list[list[int]] | None = None, *, cfg: SweepConfig | None = None,
              prompt_set: str = "custom", out: str | Path | None = None, progress: bool = True,
              meta_config: dict | None = None) -> list[dict]:
    """Run the grid and return the rows; with ``out`` the CSV is rewritten atomically after every row.

    ``model``: a :class:`BenchModel` or a source string for :func:`load_bench_model` (CPU, sdpa).
    ``prompts``: token-id lists (default: 4 synthetic prompts of 24 tokens).
    """
    from tqdm.auto import tqdm

    cfg = cfg or SweepConfig()
    bm = model if isinstance(model, BenchModel) else load_bench_model(str(model), seed=cfg.seed)
    D = cfg.block_size or bm.block_size
    cfg.validate(D)
    # masked-diffusion points need a LLaDA / Dream model, ar / bd a causal one: refused before any measurement
    for mode in list(cfg.modes) + [DecodeConfig.slug_mode(p) for p in cfg.points]:
        check_family(bm, mode)
    if prompts is None:
        prompts = model_synthetic_prompts(bm, 4, 24, cfg.seed)
        prompt_set = f"synthetic_4x24_seed{cfg.seed}"
    if not prompts:
        raise ValueError("no prompts given")
    longest = max([cfg.max_new_tokens] + [DecodeConfig.from_slug(p).max_new_tokens for p in cfg.points])
    prompts, n_truncated = fit_context(prompts, longest, model_context(bm.model), truncate=cfg.truncate_prompts)
    torch.manual_seed(cfg.seed)
    meta = run_metadata(config=meta_config or {"sweep": asdict(cfg), "model": bm.source, "prompt_set": prompt_set},
                        seed=cfg.seed, device=str(bm.device))
    common = common_fields(bm, cfg, D, prompt_set, n_truncated)
    runner = Runner(bm, cfg, D)
    rows: list[dict] = []
    for item in tqdm(plan_runs(cfg), desc=f"bench {bm.label}", disable=not progress):
        batch = batch_of(prompts, item["batch_size"])
        row = {**common, "n_prompts": len(batch),
               "prompt_len_mean": sum(len(p) for p in batch) / len(batch), **measure(runner, item, batch), **meta}
        for k in ("threshold", "sub_block_size", "use_sub_block_cache", "forced_k", "point", "gen_length", "steps",
                  "remasking", "alg", "alg_temp", "cache", "logits_eos_inf", "confidence_eos_eot_inf"):
            row.setdefault(k, "")
        if row.get("forced_k") is None:
            row["forced_k"] = ""
        rows.append(row)
        add_speedups(rows)
        if out is not None:
            write_csv_atomic(out, rows, COLUMNS)
    return rows
