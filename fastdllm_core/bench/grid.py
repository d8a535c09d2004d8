"""The sweep's grid (:class:`SweepConfig`) and the runs it plans, one per CSV row."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from ..decode_config import AR_BASELINES, DECODE_PATHS, MDM_MODES, STATIC_PATHS, DecodeConfig


@dataclass
class SweepConfig:
    """The grid.  ``grid="cross"``: every combination; ``grid="axes"``: vary one factor at a time around the base
    configuration (``base_threshold``, ``base_sub_block_size``, ``base_cache``) at every batch size."""

    modes: tuple = ("ar", "bd")
    ar_baselines: tuple = ("hf",)
    thresholds: tuple = (1.0, 0.9)
    sub_block_sizes: tuple = (8,)
    sub_block_cache: tuple = (False,)
    decode_paths: tuple = ("eager",)  # bd rows: DECODE_PATHS (decoding/static.py: static, compiled; captured on CUDA)
    batch_sizes: tuple = (1,)
    forced_k: tuple = ()  # non-empty: diffusion rows use synthetic acceptance with these k instead of real
    block_size: int | None = None  # None: the model's block size
    max_new_tokens: int = 64
    grid: str = "cross"
    base_threshold: float = 0.9
    base_sub_block_size: int = 8
    base_cache: bool = False
    warmup: int = 1
    repeats: int = 3
    profile: bool = True
    ignore_eos: bool = False
    compile: bool | None = None  # hf_static: None = torch.compile on CUDA only
    nvml_hz: float = 20.0
    seed: int = 0
    truncate_prompts: bool = False  # a prompt + max_new_tokens beyond the context: cut from the left (else refused)
    # masked-diffusion settings (point names, e.g. llada_g64_s64_b32_lc, v1_g64_s2_b32_t0.9_dual): one row each
    # per batch size; their generation length is the point's
    points: tuple = ()

    def validate(self, block_size: int) -> "SweepConfig":
        def ints(name, vals, lo=1):
            if not vals:
                raise ValueError(f"{name} is empty")
            for v in vals:
                if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                    raise ValueError(f"{name}: {v!r} is not an integer >= {lo}")

        for m in self.modes:
            if m not in ("ar", "bd"):
                raise ValueError(f"unknown mode {m!r} (expected 'ar' or 'bd'; masked-diffusion samplers go in points)")
        if not self.modes and not self.points:
            raise ValueError("modes is empty (and no masked-diffusion points)")
        for p in self.points:
            mode = DecodeConfig.slug_mode(p)
            if mode not in MDM_MODES:
                raise ValueError(f"point {p!r} is not a masked-diffusion setting ({', '.join(MDM_MODES)})")
            DecodeConfig.from_slug(p).validate(mode)
        for b in self.ar_baselines:
            if b not in AR_BASELINES:
                raise ValueError(f"unknown AR baseline {b!r} (expected one of {AR_BASELINES})")
        if "ar" in self.modes and not self.ar_baselines:
            raise ValueError("mode 'ar' needs at least one AR baseline")
        ints("batch_sizes", self.batch_sizes)
        ints("max_new_tokens", [self.max_new_tokens])
        ints("warmup", [self.warmup], 0)
        ints("repeats", [self.repeats])
        if self.grid not in ("cross", "axes"):
            raise ValueError(f"unknown grid {self.grid!r} (expected 'cross' or 'axes')")
        if "bd" in self.modes:
            ints("sub_block_sizes", self.sub_block_sizes)
            if not self.thresholds:
                raise ValueError("thresholds is empty")
            for s in list(self.sub_block_sizes) + ([self.base_sub_block_size] if self.grid == "axes" else []):
                DecodeConfig(block_size=block_size, sub_block_size=s).validate()
            for t in list(self.thresholds) + ([self.base_threshold] if self.grid == "axes" else []):
                DecodeConfig(block_size=block_size, threshold=t).validate()
            if not self.sub_block_cache:
                raise ValueError("sub_block_cache is empty (give False, True or both)")
            bad = [p for p in self.decode_paths if p not in DECODE_PATHS] or ([] if self.decode_paths else ["none"])
            if bad:
                raise ValueError(f"decode_paths: {bad[0]!r} is not one of {DECODE_PATHS}")
            if self.forced_k:
                ints("forced_k", self.forced_k)
                if max(self.forced_k) > 1 and max(self.thresholds) >= 1.0:
                    raise ValueError("forced acceptance with k > 1 needs thresholds < 1 (at threshold 1.0 the decoder "
                                     f"accepts one token per step), got thresholds {list(self.thresholds)}")
        return self

    def bd_configs(self) -> list[tuple[float, int, bool]]:
        if self.grid == "cross":
            return list(itertools.product(self.thresholds, self.sub_block_sizes, self.sub_block_cache))
        out = [(t, self.base_sub_block_size, self.base_cache) for t in self.thresholds]
        out += [(self.base_threshold, s, self.base_cache) for s in self.sub_block_sizes]
        out += [(self.base_threshold, self.base_sub_block_size, c) for c in self.sub_block_cache]
        return list(dict.fromkeys(out))


def plan_runs(cfg: SweepConfig) -> list[dict]:
    """The rows of a sweep, in order: per batch size, the AR baselines, every block-diffusion configuration, then the
    masked-diffusion points."""
    plan = []
    accept = [("forced_k", k) for k in cfg.forced_k] or [("real", None)]
    for b in cfg.batch_sizes:
        if "ar" in cfg.modes:
            plan += [dict(mode="ar", baseline=bl, batch_size=b, decode_path=bl if bl in STATIC_PATHS else "eager")
                     for bl in cfg.ar_baselines]
        if "bd" in cfg.modes:
            for (t, s, c), (acc, k), path in itertools.product(cfg.bd_configs(), accept, cfg.decode_paths):
                plan.append(dict(mode="bd", baseline="bd", batch_size=b, threshold=t, sub_block_size=s,
                                 use_sub_block_cache=c, acceptance=acc, forced_k=k, decode_path=path))
        for p in cfg.points:
            plan.append(dict(mode=DecodeConfig.slug_mode(p), baseline=DecodeConfig.slug_mode(p), batch_size=b,
                             point=p, acceptance="real", decode_path="eager"))
    return plan
