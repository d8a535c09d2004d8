"""Throughput benchmark: the AR baseline vs the block-diffusion decoder on the same model and prompts.

``fastdllm bench --model M --out results.csv [grid options]`` (or :func:`run_sweep` from Python) writes one tidy
CSV row per configuration (mode, AR baseline, batch size, threshold, sub-block size, sub-block cache, acceptance).

How each row is measured
------------------------
* The model is loaded once, before any timing (model load is never timed).
* ``warmup`` untimed runs, then ``repeats`` timed runs of the same batch.  Each run's wall time is the decoder's
  synchronised wall time (tokenisation excluded; prefill included).  ``tokens_per_s`` = generated tokens summed over
  the repeats / wall time summed over the repeats.  Tokens are counted the same way for both modes: per row, up to
  and including the first stop id (EOS); padding never counts.
* NVML telemetry (:mod:`fastdllm_core.telemetry`) runs over the timed repeats: energy (counter delta), average
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
  it); ``speedup_vs_hf`` and ``speedup_vs_hf_static`` are against each baseline separately.

Synthetic acceptance
--------------------
With random weights a diffusion decoder accepts about one token per forward, so its throughput says nothing about
a trained model.  ``acceptance="forced_k"`` installs :class:`ForcedAcceptance`, a forward hook on the model that
rewrites the logits so that, at every decoding step, exactly ``k`` masked positions of the current sub-block (the
leftmost ones) are confident and all others are not: the decoder then unmasks exactly ``min(k, masked left)``
tokens per step.  The rows report tokens/s as a function of the resulting tokens per forward, independent of the
weights (the hook itself costs one elementwise pass over the kept logits).  These rows always say
``acceptance=forced_k`` and are never mixed with real acceptance.

Model sources: a checkpoint (Hub id / directory / ``.gguf``) through :func:`fastdllm_core.model.load_model`, or
``random:SHAPE`` with SHAPE in :data:`MODEL_SHAPES` (real Qwen2.5 dimensions from a ``Qwen2Config`` written in
code, random weights, no download; ``random:tiny`` is the tiny CPU model).
"""
from __future__ import annotations

import argparse
import itertools
import json
import logging
import math
import statistics
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from .decoding import (DecodeConfig, GenerationOutput, GenerationStats, ar_generate, bd_generate, fit_context,
                       model_context)
from .hostload import COLUMNS as HOSTLOAD_COLUMNS
from .hostload import HostLoad, warn_if_busy
from .provenance import META_COLUMNS, NOT_AVAILABLE, run_metadata, write_csv_atomic
from .telemetry import NvmlSampler, per_token

log = logging.getLogger(__name__)

# Real Qwen2.5(-Instruct) dimensions (from the published config.json files); random weights only.
QWEN_COMMON = dict(rope_theta=1_000_000.0, max_position_embeddings=32768, rms_norm_eps=1e-6, hidden_act="silu",
                   bos_token_id=151643, eos_token_id=151645, pad_token_id=151643)
MODEL_SHAPES = {
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, intermediate_size=4864, tie_word_embeddings=True, **QWEN_COMMON),
    "qwen2.5-1.5b": dict(vocab_size=151936, hidden_size=1536, num_hidden_layers=28, num_attention_heads=12,
                         num_key_value_heads=2, intermediate_size=8960, tie_word_embeddings=True, **QWEN_COMMON),
    "qwen2.5-7b": dict(vocab_size=152064, hidden_size=3584, num_hidden_layers=28, num_attention_heads=28,
                       num_key_value_heads=4, intermediate_size=18944, tie_word_embeddings=False, **QWEN_COMMON),
}
QWEN_MASK_ID, QWEN_STOP_IDS = 151665, [151645, 151643]  # |<MASK>| (inside the padded table), <|im_end|>, <|endoftext|>
AR_BASELINES = ("hf", "hf_static")

COLUMNS = [
    "model", "model_label", "weights", "n_params", "dtype", "attn_implementation", "device",
    "mode", "baseline", "batch_size", "threshold", "sub_block_size", "block_size", "use_sub_block_cache",
    "acceptance", "forced_k", "prompt_set", "n_prompts", "prompt_len_mean", "max_new_tokens", "ignore_eos",
    "warmup", "repeats", "total_tokens", "wall_time_s", "wall_time_s_min", "wall_time_s_max", "tokens_per_s",
    "nfe", "tokens_per_forward", "tokens_per_forward_expected", "latency_mean_s", "latency_p50_s",
    "steps_per_block_mean", "host_syncs", "host_syncs_per_step", "forward_time_s", "profile_wall_time_s",
    "decoder_overhead_frac", "token_agreement", "agreement_reference", "ar_tokens_per_s_hf",
    "ar_tokens_per_s_hf_static", "speedup_vs_hf", "speedup_vs_hf_static", "speedup_vs_ar", "speedup_baseline",
    "power_avg_w", "power_peak_w", "energy_j", "energy_method", "joules_per_token", "peak_mem_mib",
    "nvml_mem_used_peak_mib", "gpu_util_avg", "sm_clock_avg_mhz", "nvml_samples", "nvml_index",
    "nvml_device_name", "nvml_driver", "nvml_cuda_driver", "truncated_prompts", "torch_threads", *HOSTLOAD_COLUMNS,
] + META_COLUMNS


# ----------------------------------------------------------------------------------------------------- models
@dataclass
class BenchModel:
    model: torch.nn.Module
    tokenizer: object | None
    mask_token_id: int
    stop_token_ids: list[int]
    block_size: int
    source: str
    label: str
    weights: str  # "random" or "checkpoint"
    info: dict = field(default_factory=dict)

    @property
    def device(self) -> torch.device:
        return self.model.device


def random_model(shape: str, *, device: str = "cpu", dtype: str | torch.dtype = "auto", attn: str = "sdpa",
                 seed: int = 0) -> BenchModel:
    """A randomly initialised model with real (or tiny) dimensions, built on ``device`` (no download)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from .model import resolve_dtype
    from .tiny import char_tokenizer, tiny_qwen2_config

    torch_dtype = resolve_dtype(dtype, device)
    torch.manual_seed(seed)
    if shape == "tiny":
        cfg, tok = tiny_qwen2_config(), char_tokenizer()
        mask_id, stops = tok.convert_tokens_to_ids("|<MASK>|"), [tok.eos_token_id]
    elif shape in MODEL_SHAPES:
        cfg, tok = Qwen2Config(**MODEL_SHAPES[shape]), None
        mask_id, stops = QWEN_MASK_ID, list(QWEN_STOP_IDS)
    else:
        raise ValueError(f"unknown model shape {shape!r}; choose from {['tiny', *MODEL_SHAPES]}")
    cfg._attn_implementation = attn
    with torch.device(device):
        model = Qwen2ForCausalLM._from_config(cfg, dtype=torch_dtype, attn_implementation=attn)
    model.eval()
    model.config.mask_token_id = mask_id
    model.generation_config.eos_token_id = stops
    return BenchModel(model, tok, mask_id, stops, 32, f"random:{shape}", shape, "random",
                      {"dtype": str(torch_dtype).replace("torch.", ""), "attn_implementation": attn,
                       "device": str(device)})


def load_bench_model(source: str, *, device: str = "cpu", dtype: str = "auto", attn: str = "sdpa",
                     block_size: int | None = None, label: str | None = None, seed: int = 0) -> BenchModel:
    if source.startswith("random:"):
        bm = random_model(source.split(":", 1)[1], device=device, dtype=dtype, attn=attn, seed=seed)
        if block_size:
            bm.block_size = block_size
    else:
        from .model import load_model

        lm = load_model(source, device=device, dtype=dtype, attn_implementation=attn, block_size=block_size)
        bm = BenchModel(lm.model, lm.tokenizer, lm.mask_token_id, lm.eos_token_ids, lm.block_size, source,
                        Path(source.rstrip("/")).name or source, "checkpoint", dict(lm.info))
    if label:
        bm.label = label
    return bm


# ----------------------------------------------------------------------------------------------------- prompts
def read_prompt_texts(path: str | Path, field_name: str | None = None) -> list[str]:
    """Prompts from a JSONL file (``prompt`` / ``question`` / ``text`` / ``messages[0].content``, or the field
    named) or from a text file with one prompt per line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"prompts file not found: {path}")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        if path.suffix in (".jsonl", ".json"):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not valid JSON ({exc})") from None
            if isinstance(row, str):
                out.append(row)
                continue
            keys = [field_name] if field_name else ["prompt", "question", "text"]
            text = next((row[k] for k in keys if k in row), None)
            if text is None and not field_name and row.get("messages"):
                text = next((m["content"] for m in row["messages"] if m.get("role") == "user"), None)
            if not isinstance(text, str):
                raise ValueError(f"{path}:{n}: no prompt text under {keys} (keys: {sorted(row)})")
            out.append(text)
        else:
            out.append(line)
    if not out:
        raise ValueError(f"prompts file {path} holds no prompts")
    return out


def encode_prompts(tokenizer, texts: list[str], chat: bool | None = None) -> list[list[int]]:
    """Token ids; chat-templated (a user turn plus the generation prompt) when the tokenizer has a template."""
    if tokenizer is None:
        raise ValueError("this model has no tokenizer: use synthetic prompts (--synthetic-prompts N)")
    if chat is None:
        chat = bool(getattr(tokenizer, "chat_template", None))
    if chat and not getattr(tokenizer, "chat_template", None):
        raise ValueError("--chat was asked for but the tokenizer has no chat template")
    out = []
    for t in texts:
        if chat:
            ids = tokenizer.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True,
                                                tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
        else:
            ids = tokenizer.encode(t, add_special_tokens=False)
        out.append([int(i) for i in ids])
    return out


def synthetic_prompts(n: int, length: int, vocab_size: int, *, avoid: list[int] = (), seed: int = 0,
                      low: int = 0) -> list[list[int]]:
    """``n`` random token sequences of ``length`` (ids in ``[low, vocab_size)``, specials in ``avoid`` excluded)."""
    if n <= 0 or length <= 0:
        raise ValueError(f"synthetic prompts need n > 0 and length > 0, got n={n}, length={length}")
    g = torch.Generator().manual_seed(seed)
    avoid_t = torch.tensor(sorted(set(avoid)) or [-1])
    out = []
    for _ in range(n):
        ids = torch.randint(low, vocab_size, (length,), generator=g)
        bad = torch.isin(ids, avoid_t)
        ids[bad] = low + (ids[bad] + 1 - low) % (vocab_size - low)
        bad = torch.isin(ids, avoid_t)
        ids[bad] = low + (ids[bad] + 1 - low) % (vocab_size - low)
        out.append(ids.tolist())
    return out


def batch_of(prompts: list[list[int]], batch_size: int) -> list[list[int]]:
    """The prompts a row decodes: every prompt, cycling through the list up to a whole number of batches (at
    least one) of ``batch_size``; the row decodes them in consecutive batches, so that every batch size is
    measured on the same prompts."""
    n = max(len(prompts), batch_size)
    n = -(-n // batch_size) * batch_size
    return [prompts[i % len(prompts)] for i in range(n)]


# ----------------------------------------------------------------------------------------------------- forced acceptance
class ForcedAcceptance:
    """Synthetic acceptance: a forward hook that makes the diffusion decoder unmask exactly ``k`` tokens per step.

    For every kept logit the hook works out which input position it predicts (logit ``j`` predicts input position
    ``j + 1``, the decoder's token shift).  Among the positions that are still the mask token, the ``k`` leftmost
    of each row get a confident logit (``filler`` token, logit ``high``: probability ~1 above any threshold < 1);
    every other kept logit becomes nearly uniform (``filler`` ahead by ``low``), far below the threshold.  The
    decoder keeps only candidates of its current sub-block, which are exactly the masked targets of the kept
    logits, so it accepts ``min(k, masked)`` tokens per step.  ``filler`` is never a stop id, so rows run to their
    token budget.  Use as a context manager; it removes its hook on exit.
    """

    def __init__(self, model, k: int, mask_token_id: int, stop_token_ids=(), high: float = 30.0, low: float = 1.0):
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"forced acceptance k must be a positive integer, got {k!r}")
        self.model, self.k, self.mask_id = model, k, int(mask_token_id)
        self.high, self.low = high, low
        bad = {int(s) for s in stop_token_ids} | {self.mask_id}
        self.filler = next(i for i in range(model.get_output_embeddings().out_features) if i not in bad)
        self._handle = None

    def _hook(self, module, args, kwargs, output):
        ids = kwargs.get("input_ids")
        if ids is None:
            ids = args[0] if args else None
        if ids is None:
            return output
        logits = output.logits
        B, Q = ids.shape
        keep = kwargs.get("logits_to_keep", 0)
        n_keep = logits.shape[1]
        if torch.is_tensor(keep):
            kept = keep.to(ids.device).reshape(-1)
        else:
            kept = torch.arange(Q - n_keep, Q, device=ids.device)
        target = kept + 1
        valid = target < Q
        tgt_tok = ids.index_select(1, target.clamp(max=Q - 1))
        masked = (tgt_tok == self.mask_id) & valid[None]
        forced = masked & (masked.cumsum(dim=1) <= self.k)
        logits.zero_()
        logits[..., self.filler] = torch.where(forced, torch.tensor(self.high, dtype=logits.dtype, device=logits.device),
                                               torch.tensor(self.low, dtype=logits.dtype, device=logits.device))
        return output

    def __enter__(self):
        self._handle = self.model.register_forward_hook(self._hook, with_kwargs=True)
        return self

    def __exit__(self, *exc):
        if self._handle is not None:
            self._handle.remove()
            self._handle = None


def forced_acceptance_forwards(prompt_lens: list[int], max_new_tokens: int, block_size: int, sub_block_size: int,
                               k: int) -> int:
    """Row-forwards (the sum of ``row_nfe``) the decoder needs for a batch under :class:`ForcedAcceptance`.

    Mirrors the decoder's schedule: one prefill over the shortest prompt's whole blocks; per block, the first
    decodable position filled from the previous forward; per sub-block a row takes part in as many steps as its own
    masked positions need at ``k`` per step (while it waits for the other rows it is not counted); every active row
    takes part in the prefill and the commits; rows whose budget ends in the block are dropped before its commit.
    Expected tokens per forward = tokens / this number.
    """
    D, S = block_size, sub_block_size
    lens = list(prompt_lens)
    limits = [n + max_new_tokens for n in lens]
    T = math.ceil(max(limits) / D) * D
    prefill = (min(lens) // D) * D
    active = list(range(len(lens)))
    total = len(active) if prefill else 0
    have_logit = bool(prefill)
    for b0 in range(prefill, T, D):
        masked = []
        for r in active:
            dec = [lens[r] <= p < limits[r] for p in range(b0, b0 + D)]
            if have_logit and dec[0]:
                dec[0] = False  # filled from the previous forward's last logit
            masked.append(dec)
        for s0 in range(0, D, S):
            total += sum(math.ceil(sum(m[s0:s0 + S]) / k) for m in masked)
        active = [r for r in active if limits[r] > b0 + D]
        if not active:
            break
        total += len(active)  # commit
        have_logit = True
    return total


# ----------------------------------------------------------------------------------------------------- helpers
class ForwardTimer:
    """Synchronised time inside a module's forwards (pre/post hooks), for the AR baseline's profiling run."""

    def __init__(self, model):
        self.model, self.total, self.n, self._t0, self._h = model, 0.0, 0, None, []

    def _sync(self):
        if self.model.device.type == "cuda":
            torch.cuda.synchronize(self.model.device)

    def _pre(self, module, args, kwargs):
        self._sync()
        self._t0 = time.perf_counter()

    def _post(self, module, args, kwargs, output):
        self._sync()
        self.total += time.perf_counter() - self._t0
        self.n += 1

    def __enter__(self):
        self._h = [self.model.register_forward_pre_hook(self._pre, with_kwargs=True),
                   self.model.register_forward_hook(self._post, with_kwargs=True)]
        return self

    def __exit__(self, *exc):
        for h in self._h:
            h.remove()


@contextmanager
def _eos_off(model, on: bool):
    """Clear the generation config's EOS while ``on`` (random-weight timing runs to the full budget)."""
    gc = getattr(model, "generation_config", None)
    old = getattr(gc, "eos_token_id", None)
    if on and gc is not None:
        gc.eos_token_id = None
    try:
        yield
    finally:
        if on and gc is not None:
            gc.eos_token_id = old


def token_agreement(a: list[list[int]], b: list[list[int]]) -> float:
    """Mean over rows of the fraction of equal positions up to the shorter length."""
    if len(a) != len(b) or not a:
        raise ValueError(f"agreement needs the same non-zero number of rows, got {len(a)} and {len(b)}")
    fr = []
    for x, y in zip(a, b):
        n = min(len(x), len(y))
        fr.append(sum(int(p == q) for p, q in zip(x[:n], y[:n])) / n if n else float(len(x) == len(y)))
    return sum(fr) / len(fr)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)


# ----------------------------------------------------------------------------------------------------- sweep
@dataclass
class SweepConfig:
    """The grid.  ``grid="cross"``: every combination; ``grid="axes"``: vary one factor at a time around the base
    configuration (``base_threshold``, ``base_sub_block_size``, ``base_cache``) at every batch size."""

    modes: tuple = ("ar", "bd")
    ar_baselines: tuple = ("hf",)
    thresholds: tuple = (1.0, 0.9)
    sub_block_sizes: tuple = (8,)
    sub_block_cache: tuple = (False,)
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

    def validate(self, block_size: int) -> "SweepConfig":
        def ints(name, vals, lo=1):
            if not vals:
                raise ValueError(f"{name} is empty")
            for v in vals:
                if not isinstance(v, int) or isinstance(v, bool) or v < lo:
                    raise ValueError(f"{name}: {v!r} is not an integer >= {lo}")

        for m in self.modes:
            if m not in ("ar", "bd"):
                raise ValueError(f"unknown mode {m!r} (expected 'ar' or 'bd')")
        if not self.modes:
            raise ValueError("modes is empty")
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


def _plan(cfg: SweepConfig) -> list[dict]:
    plan = []
    accept = [("forced_k", k) for k in cfg.forced_k] or [("real", None)]
    for b in cfg.batch_sizes:
        if "ar" in cfg.modes:
            plan += [dict(mode="ar", baseline=bl, batch_size=b) for bl in cfg.ar_baselines]
        if "bd" in cfg.modes:
            for (t, s, c), (acc, k) in itertools.product(cfg.bd_configs(), accept):
                plan.append(dict(mode="bd", baseline="bd", batch_size=b, threshold=t, sub_block_size=s,
                                 use_sub_block_cache=c, acceptance=acc, forced_k=k))
    return plan


class _Runner:
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
        if item["mode"] == "ar":
            with _eos_off(bm.model, cfg.ignore_eos):
                if profile:
                    with ForwardTimer(bm.model) as ft:
                        out = ar_generate(bm.model, prompts, stop_token_ids=self.stops,
                                          max_new_tokens=cfg.max_new_tokens, baseline=item["baseline"],
                                          compile=cfg.compile)
                    out.stats.forward_time_s = ft.total
                    return out
                return ar_generate(bm.model, prompts, stop_token_ids=self.stops, max_new_tokens=cfg.max_new_tokens,
                                   baseline=item["baseline"], compile=cfg.compile)
        dc = DecodeConfig(block_size=self.D, sub_block_size=item["sub_block_size"], threshold=item["threshold"],
                          use_sub_block_cache=item["use_sub_block_cache"], max_new_tokens=cfg.max_new_tokens)
        kw = dict(mask_token_id=bm.mask_token_id, stop_token_ids=self.stops, config=dc, profile=profile)
        if item["acceptance"] == "forced_k":
            with ForcedAcceptance(bm.model, item["forced_k"], bm.mask_token_id, bm.stop_token_ids):
                return bd_generate(bm.model, prompts, **kw)
        return bd_generate(bm.model, prompts, **kw)

    def profile_supported(self, item) -> bool:
        if item["mode"] == "bd":
            return True
        compiled = item["baseline"] == "hf_static" and (
            self.cfg.compile if self.cfg.compile is not None else self.bm.device.type == "cuda")
        return not compiled  # forward hooks inside a compiled graph would break it (and perturb it)

    def sequences_without_cache(self, item, prompts):
        key = (item["batch_size"], item["threshold"], item["sub_block_size"], item["acceptance"], item["forced_k"])
        if key not in self._seq_cache:
            self._seq_cache[key] = self.run({**item, "use_sub_block_cache": False}, prompts).sequences
        return self._seq_cache[key]

    def remember(self, item, sequences):
        if item["mode"] == "bd" and not item["use_sub_block_cache"]:
            key = (item["batch_size"], item["threshold"], item["sub_block_size"], item["acceptance"],
                   item["forced_k"])
            self._seq_cache[key] = sequences


def measure(runner: _Runner, item: dict, prompts: list[list[int]]) -> dict:
    """One row: warm-up, timed repeats under NVML, then the profiling pass and the agreement check."""
    cfg, bm = runner.cfg, runner.bm
    dev = bm.device
    for _ in range(cfg.warmup):
        runner.run(item, prompts)
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
    st = [o.stats for o in outs]
    tokens = [s.total_tokens for s in st]
    walls = [s.wall_time_s for s in st]
    lat = [x for s in st for x in s.row_latency_s]
    s0 = st[0]
    row = dict(item)
    row.update(
        total_tokens=statistics.mean(tokens), wall_time_s=statistics.mean(walls), wall_time_s_min=min(walls),
        wall_time_s_max=max(walls), tokens_per_s=sum(tokens) / sum(walls), nfe=s0.nfe,
        tokens_per_forward=s0.tokens_per_forward, latency_mean_s=statistics.mean(lat),
        latency_p50_s=statistics.median(lat),
        steps_per_block_mean=statistics.mean(s0.steps_per_block) if s0.steps_per_block else "",
        host_syncs=s0.host_syncs, host_syncs_per_step=s0.host_syncs / s0.nfe if s0.nfe else NOT_AVAILABLE,
        peak_mem_mib=peak_mem, **per_token(tele, sum(tokens)), torch_threads=torch.get_num_threads(),
        **host.summary(),
    )
    warn_if_busy(row, f"{item['mode']} batch {item['batch_size']}")
    if item["mode"] == "bd" and item["acceptance"] == "forced_k":
        bs = item["batch_size"]
        row_forwards = sum(forced_acceptance_forwards([len(p) for p in prompts[i:i + bs]], cfg.max_new_tokens,
                                                      runner.D, item["sub_block_size"], item["forced_k"])
                           for i in range(0, len(prompts), bs))
        row["tokens_per_forward_expected"] = cfg.max_new_tokens * len(prompts) / row_forwards
    if cfg.profile and runner.profile_supported(item):
        p = runner.run(item, prompts, profile=True).stats
        row.update(forward_time_s=p.forward_time_s, profile_wall_time_s=p.wall_time_s,
                   decoder_overhead_frac=1.0 - p.forward_time_s / p.wall_time_s if p.wall_time_s > 0 else "")
    elif cfg.profile:
        row.update(forward_time_s=NOT_AVAILABLE, decoder_overhead_frac=NOT_AVAILABLE)
    runner.remember(item, outs[0].sequences)
    if item["mode"] == "bd" and item["use_sub_block_cache"]:
        ref = runner.sequences_without_cache(item, prompts)
        row.update(token_agreement=token_agreement(outs[0].sequences, ref),
                   agreement_reference="same configuration without the sub-block cache")
    return row


def add_speedups(rows: list[dict]) -> None:
    """Fill the AR reference columns and speed-ups of the diffusion rows (same batch size, prompts, budget)."""
    ar = {}
    for r in rows:
        if r["mode"] == "ar":
            ar[(r["batch_size"], r["prompt_set"], r["max_new_tokens"], r["baseline"])] = r["tokens_per_s"]
    for r in rows:
        if r["mode"] != "bd":
            continue
        base = {bl: ar.get((r["batch_size"], r["prompt_set"], r["max_new_tokens"], bl)) for bl in AR_BASELINES}
        for bl, v in base.items():
            r[f"ar_tokens_per_s_{bl}"] = v if v is not None else ""
            r[f"speedup_vs_{bl}"] = r["tokens_per_s"] / v if v else ""
        have = {bl: v for bl, v in base.items() if v}
        if have:
            best = max(have, key=have.get)
            r.update(speedup_vs_ar=r["tokens_per_s"] / have[best], speedup_baseline=f"ar_{best} (fastest AR measured)")


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
    if prompts is None:
        prompts = synthetic_prompts(4, 24, bm.model.config.vocab_size, seed=cfg.seed,
                                    avoid=[bm.mask_token_id, *bm.stop_token_ids], low=4 if bm.label == "tiny" else 0)
        prompt_set = f"synthetic_4x24_seed{cfg.seed}"
    if not prompts:
        raise ValueError("no prompts given")
    prompts, n_truncated = fit_context(prompts, cfg.max_new_tokens, model_context(bm.model),
                                       truncate=cfg.truncate_prompts)
    torch.manual_seed(cfg.seed)
    meta = run_metadata(config=meta_config or {"sweep": asdict(cfg), "model": bm.source, "prompt_set": prompt_set},
                        seed=cfg.seed, device=str(bm.device))
    common = dict(model=bm.source, model_label=bm.label, weights=bm.weights,
                  n_params=sum(p.numel() for p in bm.model.parameters()), dtype=bm.info.get("dtype", ""),
                  attn_implementation=bm.info.get("attn_implementation", ""), device=str(bm.device),
                  block_size=D, prompt_set=prompt_set, max_new_tokens=cfg.max_new_tokens,
                  ignore_eos=cfg.ignore_eos, warmup=cfg.warmup, repeats=cfg.repeats, truncated_prompts=n_truncated)
    runner = _Runner(bm, cfg, D)
    rows: list[dict] = []
    plan = _plan(cfg)
    for item in tqdm(plan, desc=f"bench {bm.label}", disable=not progress):
        batch = batch_of(prompts, item["batch_size"])
        row = {**common, "n_prompts": len(batch),
               "prompt_len_mean": sum(len(p) for p in batch) / len(batch), **measure(runner, item, batch), **meta}
        for k in ("threshold", "sub_block_size", "use_sub_block_cache", "forced_k"):
            row.setdefault(k, "")
        if row.get("forced_k") is None:
            row["forced_k"] = ""
        rows.append(row)
        add_speedups(rows)
        if out is not None:
            write_csv_atomic(out, rows, COLUMNS)
    return rows


# ----------------------------------------------------------------------------------------------------- CLI
def _bool_list(vals: list[str]) -> tuple:
    table = {"on": True, "off": False, "true": True, "false": False, "1": True, "0": False}
    out = []
    for v in vals:
        if v.lower() not in table:
            raise ValueError(f"--sub-block-cache takes on/off, got {v!r}")
        out.append(table[v.lower()])
    return tuple(dict.fromkeys(out))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="fastdllm bench", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="Hub id, directory, .gguf, or random:SHAPE "
                   f"(SHAPE in tiny, {', '.join(MODEL_SHAPES)})")
    p.add_argument("--model-label", default=None, help="label for the rows (default: the model's name)")
    p.add_argument("--out", required=True, help="CSV path (rewritten atomically after every row)")
    src = p.add_argument_group("prompts")
    src.add_argument("--prompts", default=None, help="JSONL (prompt/question/text/messages) or text file, one per line")
    src.add_argument("--prompt-field", default=None, help="JSONL field holding the prompt")
    src.add_argument("--n-prompts", type=int, default=None, help="use the first N prompts of the file")
    src.add_argument("--synthetic-prompts", type=int, default=None, metavar="N",
                     help="N random token prompts instead of a file (needed for random models without tokenizer)")
    src.add_argument("--prompt-len", type=int, default=128, help="length of synthetic prompts")
    chat = src.add_mutually_exclusive_group()
    chat.add_argument("--chat", dest="chat", action="store_true", default=None, help="apply the chat template")
    chat.add_argument("--no-chat", dest="chat", action="store_false", help="encode prompts as plain text")
    src.add_argument("--prompt-set", default=None, help="name of the prompt set for the rows")
    g = p.add_argument_group("grid")
    g.add_argument("--modes", nargs="+", default=["ar", "bd"])
    g.add_argument("--ar-baselines", nargs="+", default=["hf", "hf_static"])
    g.add_argument("--thresholds", nargs="+", type=float, default=[1.0, 0.95, 0.9, 0.8, 0.7, 0.5])
    g.add_argument("--sub-block-sizes", nargs="+", type=int, default=[2, 4, 8, 16, 32])
    g.add_argument("--sub-block-cache", nargs="+", default=["off", "on"], help="on, off or both")
    g.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4, 16, 32, 64])
    g.add_argument("--grid", choices=["cross", "axes"], default="axes",
                   help="axes (default): vary one factor at a time around the base configuration; cross: all combinations")
    g.add_argument("--base-threshold", type=float, default=0.9)
    g.add_argument("--base-sub-block-size", type=int, default=8)
    g.add_argument("--base-cache", choices=["off", "on"], default="off")
    g.add_argument("--forced-k", nargs="+", type=int, default=[],
                   help="synthetic acceptance: diffusion rows accept exactly k tokens per step (acceptance=forced_k)")
    g.add_argument("--block-size", type=int, default=None, help="default: the model's bd_size (or 32)")
    g.add_argument("--max-new-tokens", type=int, default=256)
    m = p.add_argument_group("measurement")
    m.add_argument("--warmup", type=int, default=1)
    m.add_argument("--repeats", type=int, default=3)
    m.add_argument("--no-profile", dest="profile", action="store_false", help="skip the decoder-overhead pass")
    m.add_argument("--ignore-eos", action="store_true", help="no stop ids: every row generates max-new-tokens")
    m.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                   help="torch.compile for the hf_static baseline (auto: on CUDA only)")
    m.add_argument("--nvml-hz", type=float, default=20.0)
    m.add_argument("--device", default="cpu")
    m.add_argument("--dtype", default="auto", help="auto (bf16 on CUDA, fp32 on CPU), float32, bfloat16, ...")
    m.add_argument("--attn", default="sdpa", choices=["sdpa", "eager", "flex_attention"],
                   help="attention kernel for both modes (sdpa: the fair fast choice for HF generate)")
    m.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--quiet", action="store_true", help="no progress bar")
    m.add_argument("--truncate-prompts", choices=["none", "left"], default="none",
                   help="a prompt that does not fit the model's context with --max-new-tokens: refused (none, the "
                        "default) or cut from the left (left; counted in the truncated_prompts column)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = SweepConfig(
            modes=tuple(args.modes), ar_baselines=tuple(args.ar_baselines), thresholds=tuple(args.thresholds),
            sub_block_sizes=tuple(args.sub_block_sizes), sub_block_cache=_bool_list(args.sub_block_cache),
            batch_sizes=tuple(args.batch_sizes), forced_k=tuple(args.forced_k), block_size=args.block_size,
            max_new_tokens=args.max_new_tokens, grid=args.grid, base_threshold=args.base_threshold,
            base_sub_block_size=args.base_sub_block_size, base_cache=args.base_cache == "on", warmup=args.warmup,
            repeats=args.repeats, profile=args.profile, ignore_eos=args.ignore_eos,
            compile={"auto": None, "on": True, "off": False}[args.compile], nvml_hz=args.nvml_hz, seed=args.seed,
            truncate_prompts=args.truncate_prompts == "left")
        cfg.validate(args.block_size or 32)  # cheap checks before the model load (re-checked with its block size)
        if args.prompts and args.synthetic_prompts:
            raise ValueError("give either --prompts FILE or --synthetic-prompts N, not both")
        texts = read_prompt_texts(args.prompts, args.prompt_field) if args.prompts else None
        if texts is not None and args.n_prompts is not None:
            if args.n_prompts <= 0:
                raise ValueError(f"--n-prompts must be positive, got {args.n_prompts}")
            texts = texts[: args.n_prompts]
        if args.threads:
            torch.set_num_threads(args.threads)
        if args.device.startswith("cuda") and not torch.cuda.is_available():
            raise ValueError(f"--device {args.device}: CUDA is not available on this machine")
        bm = load_bench_model(args.model, device=args.device, dtype=args.dtype, attn=args.attn,
                              block_size=args.block_size, label=args.model_label, seed=args.seed)
        if texts is not None:
            prompts = encode_prompts(bm.tokenizer, texts, args.chat)
            prompt_set = args.prompt_set or Path(args.prompts).stem
        else:
            n = args.synthetic_prompts or 8
            prompts = synthetic_prompts(n, args.prompt_len, bm.model.config.vocab_size, seed=args.seed,
                                        avoid=[bm.mask_token_id, *bm.stop_token_ids],
                                        low=4 if bm.label == "tiny" else 0)
            prompt_set = args.prompt_set or f"synthetic_{n}x{args.prompt_len}_seed{args.seed}"
        fit_context(prompts, cfg.max_new_tokens, model_context(bm.model), truncate=cfg.truncate_prompts)
    except (ValueError, FileNotFoundError) as exc:
        print(f"fastdllm bench: error: {exc}", file=sys.stderr)
        return 2
    rows = run_sweep(bm, prompts, cfg=cfg, prompt_set=prompt_set, out=args.out, progress=not args.quiet,
                     meta_config={"argv": list(argv) if argv is not None else sys.argv[1:]})
    _print_summary(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


def _print_summary(rows: list[dict]) -> None:
    def f(v, fmt):
        return format(v, fmt) if _num(v) else str(v or "-")

    print(f"{'mode':<4} {'base':<9} {'bs':>3} {'thr':>5} {'S':>3} {'cache':>5} {'accept':<10} {'tok/s':>9} "
          f"{'tok/fwd':>7} {'sync/fwd':>8} {'ovh':>6} {'agree':>6} {'speedup':>7}")
    for r in rows:
        acc = r["acceptance"] if r["mode"] == "bd" else ""
        if acc == "forced_k":
            acc = f"forced_{r['forced_k']}"
        print(f"{r['mode']:<4} {r['baseline']:<9} {r['batch_size']:>3} {f(r.get('threshold'), '.2f'):>5} "
              f"{f(r.get('sub_block_size'), 'd'):>3} {str(r.get('use_sub_block_cache', '')):>5} {acc:<10} "
              f"{r['tokens_per_s']:>9.1f} {r['tokens_per_forward']:>7.2f} {f(r.get('host_syncs_per_step'), '.2f'):>8} "
              f"{f(r.get('decoder_overhead_frac'), '.2f'):>6} {f(r.get('token_agreement'), '.3f'):>6} "
              f"{f(r.get('speedup_vs_ar'), '.2f'):>7}")


if __name__ == "__main__":
    sys.exit(main())
