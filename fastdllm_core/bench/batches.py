"""Running one planned run of a sweep on its prompts, in consecutive batches."""
from __future__ import annotations

from ..decode_config import MDM_MODES, STATIC_PATHS, DecodeConfig
from ..decoding import GenerationOutput, GenerationStats, ar_generate, bd_generate, mdm_generate
from .grid import SweepConfig
from .hooks import ForcedAcceptance, ForwardTimer
from .models import BenchModel


class Runner:
    """Decodes a run's prompts (AR baseline or diffusion, real or forced acceptance) and remembers the uncached
    outputs that the sub-block cache rows are compared with."""

    def __init__(self, bm: BenchModel, cfg: SweepConfig, block_size: int):
        self.bm, self.cfg, self.D = bm, cfg, block_size
        self.stops = [] if cfg.ignore_eos else list(bm.stop_token_ids)
        self._seq_cache: dict = {}

    def run(self, item: dict, prompts: list[list[int]], profile: bool = False):
        """Decode ``prompts`` in consecutive batches of ``item["batch_size"]``; one combined output."""
        bs = item["batch_size"]
        outs = [self._run_batch(item, prompts[i:i + bs], profile) for i in range(0, len(prompts), bs)]
        return GenerationOutput([q for o in outs for q in o.sequences],
                                GenerationStats.combine([o.stats for o in outs]))

    def _run_batch(self, item: dict, prompts: list[list[int]], profile: bool = False):
        bm, cfg = self.bm, self.cfg
        if item["mode"] in MDM_MODES:
            dc = DecodeConfig.from_slug(item["point"], seed=cfg.seed)
            return mdm_generate(bm, prompts, item["mode"], dc, stop_token_ids=self.stops, profile=profile)
        if item["mode"] == "ar":
            if item["baseline"] in STATIC_PATHS:  # times its own forwards
                return ar_generate(bm.model, prompts, stop_token_ids=self.stops, max_new_tokens=cfg.max_new_tokens,
                                   baseline=item["baseline"], profile=profile)
            if profile:
                with ForwardTimer(bm.model) as ft:
                    out = ar_generate(bm.model, prompts, stop_token_ids=self.stops, max_new_tokens=cfg.max_new_tokens,
                                      baseline=item["baseline"], compile=cfg.compile)
                out.stats.forward_time_s = ft.total
                return out
            return ar_generate(bm.model, prompts, stop_token_ids=self.stops, max_new_tokens=cfg.max_new_tokens,
                               baseline=item["baseline"], compile=cfg.compile)
        dc = DecodeConfig(block_size=self.D, sub_block_size=item["sub_block_size"], threshold=item["threshold"],
                          use_sub_block_cache=item["use_sub_block_cache"], max_new_tokens=cfg.max_new_tokens,
                          decode_path=item["decode_path"])
        kw = dict(mask_token_id=bm.mask_token_id, stop_token_ids=self.stops, config=dc, profile=profile)
        if item["acceptance"] == "forced_k":
            with ForcedAcceptance(bm.model, item["forced_k"], bm.mask_token_id, bm.stop_token_ids):
                return bd_generate(bm.model, prompts, **kw)
        return bd_generate(bm.model, prompts, **kw)

    def profile_supported(self, item) -> bool:
        if item["mode"] == "bd" or item["mode"] in MDM_MODES:
            return True
        compiled = item["baseline"] == "hf_static" and (
            self.cfg.compile if self.cfg.compile is not None else self.bm.device.type == "cuda")
        return not compiled  # forward hooks inside a compiled graph would break it (and perturb it)

    @staticmethod
    def _key(item) -> tuple:
        return tuple(item.get(k) for k in ("mode", "baseline", "batch_size", "threshold", "sub_block_size",
                                           "use_sub_block_cache", "acceptance", "forced_k", "decode_path", "point"))

    def _sequences(self, item, prompts):
        key = self._key(item)
        if key not in self._seq_cache:
            self._seq_cache[key] = self.run(item, prompts).sequences
        return self._seq_cache[key]

    def sequences_without_cache(self, item, prompts):
        """The outputs of the same configuration without the sub-block cache (decoded once, then remembered)."""
        return self._sequences({**item, "use_sub_block_cache": False}, prompts)

    def sequences_eager(self, item, prompts):
        """The outputs of the same configuration on the eager path (AR: the ``hf`` baseline)."""
        ref = {**item, "decode_path": "eager"}
        if item["mode"] == "ar":
            ref["baseline"] = "hf"
        return self._sequences(ref, prompts)

    def remember(self, item, sequences):
        self._seq_cache[self._key(item)] = sequences
