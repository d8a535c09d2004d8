"""Throughput benchmark: the AR baseline vs the block-diffusion decoder on the same model and prompts.

One idea per module: :mod:`.models` (checkpoints and random-weight models), :mod:`.grid` (the sweep's grid and
its runs), :mod:`.batches` (decoding a run's prompts), :mod:`.hooks` (forced acceptance, forward timing),
:mod:`.measure` (timed repeats, profiling, agreement), :mod:`.prompt_source` (a sweep's prompts: local file, Hub),
:mod:`.unavailable` (n/a rows of a model that cannot be loaded), :mod:`.rows` (CSV columns, speed-ups),
:mod:`.telemetry` (NVML), :mod:`.roofline` (memory-bandwidth bound) and :mod:`.sweep` (:func:`run_sweep`, how
each row is measured).  The command line is :mod:`fastdllm_core.cli.bench`; prompt sets are
:mod:`fastdllm_core.prompts`."""
from ..decoding import bd_generate
from ..prompts import batch_of, encode_prompts, read_prompt_texts, synthetic_prompts
from .batches import Runner
from .grid import AR_BASELINES, SweepConfig, plan_runs
from .hooks import ForcedAcceptance, ForwardTimer, forced_acceptance_forwards
from .measure import measure, token_agreement
from .models import MODEL_SHAPES, QWEN_MASK_ID, QWEN_STOP_IDS, BenchModel, load_bench_model, random_model
from .prompt_source import PromptsUnavailable, load_prompt_texts
from .rows import COLUMNS, add_speedups, print_summary
from .sweep import model_synthetic_prompts, run_sweep
from .unavailable import load_or_reason, na_rows

__all__ = ["AR_BASELINES", "COLUMNS", "MODEL_SHAPES", "QWEN_MASK_ID", "QWEN_STOP_IDS", "BenchModel",
           "ForcedAcceptance", "ForwardTimer", "PromptsUnavailable", "Runner", "SweepConfig", "add_speedups",
           "batch_of", "bd_generate", "encode_prompts", "forced_acceptance_forwards", "load_bench_model",
           "load_or_reason", "load_prompt_texts", "measure", "model_synthetic_prompts", "na_rows", "plan_runs",
           "print_summary", "random_model", "read_prompt_texts", "run_sweep", "synthetic_prompts",
           "token_agreement"]
