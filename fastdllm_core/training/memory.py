"""The training plan on paper: parameter count, per-GPU memory of one data-parallel process (DDP or FSDP), the
engine that fits, the gradient-accumulation arithmetic and the time the paper's wall clock implies.

Memory of one process (bytes; N parameters, W processes, ``a`` = 2 under bf16 mixed precision else 4):

* parameters: fp32 master weights, 4 N; gradients 4 N; AdamW states (exp_avg, exp_avg_sq) 2 x 4 N -- all
  replicated under DDP, divided by W under FSDP (full sharding);
* compute copy: under bf16 (accelerate's autocast) the bf16 casts of the weights, 2 N, held through the forward
  (DDP); under FSDP the all-gathered unit instead: the largest FSDP unit (a decoder layer, the embedding or an
  untied lm_head) twice in the compute dtype (the current unit and the prefetched one) plus its unsharded fp32
  gradient before the reduce-scatter;
* activations of one micro-batch, T = rows x S tokens through the model, with rows = micro_batch (x 2 under
  complementary masks: the batch doubles) and S = 2 L for block diffusion (``x_t ++ x_0``) else L:
  with gradient checkpointing, per layer the saved hidden state T x h x a, plus one layer's full activations
  recomputed in the backward, T x (8 h + 2 kv_dim + 4 I) x a (norm outputs, q, k, v, attention output, o_proj,
  residual, gate, up, act(gate), act(gate) x up); without it, every layer's full activations.  Attention scores
  are not counted (SDPA / flash kernels keep no T x T matrix);
* logits: rows x L x V at :func:`logit_bytes` each: the fp32 cross-entropy's log-softmax output and the two
  gradients of its backward, 12 B, plus 2 B for the bf16 logits' gradient under bf16 (objective.py keeps L-1
  logit rows per sequence: the x_t half only);
* DDP's gradient buckets with several processes: a second fp32 copy of the gradients, 4 N.

:func:`choose_engine` is the rule the training loop uses: DDP while DDP's whole per-process memory times
:data:`HEADROOM` fits one device, else FSDP -- so ``engine: auto`` never picks what the plan says does not fit.
A plan *fits* when its engine's total times :data:`HEADROOM` (CUDA context, allocator fragmentation,
communication buffers) is at most the device memory.  Against a measured CPU peak
(scripts/cluster/plan_vs_measured.py): 0.99 (logits), 0.96-0.97 (weights, 1 and 2 DDP processes), 0.74 (activations
without checkpointing; RMSNorm and RoPE intermediates, the dense mask and repeated k/v are not counted).

The time is an extrapolation from the paper's wall clock (Sec. 4.1: 64 A100, ~8 h for the 1.5B model, ~12 h for
the 7B, with its recipe bd_pad_cm), scaled linearly by tokens and by 64 / GPUs; the paper model closest in
parameter count gives the rate.  Every other recipe puts fewer tokens through the model per sequence (no
complementary copy; ntp and dream no clean half), so for them it is an upper bound.

Cheap to import (no torch).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .config import PAPER_HPARAMS, TrainConfig

HEADROOM = 1.2
GB = 1e9

# The published config.json of the paper's two models (Hugging Face Hub, Qwen/Qwen2.5-{1.5B,7B}-Instruct),
# transcribed for offline use; a local model directory is read from its own config.json instead.
PUBLISHED_CONFIGS = {
    "Qwen/Qwen2.5-1.5B-Instruct": {"hidden_size": 1536, "num_hidden_layers": 28, "num_attention_heads": 12,
                                   "num_key_value_heads": 2, "intermediate_size": 8960, "vocab_size": 151936,
                                   "tie_word_embeddings": True},
    "Qwen/Qwen2.5-7B-Instruct": {"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
                                 "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
                                 "tie_word_embeddings": False},
}
# The paper's training runs (Sec. 4.1): wall hours on 64 A100; their budget is PAPER_HPARAMS
PAPER_WALL_HOURS = {"1.5B": 8.0, "7B": 12.0}
PAPER_GPUS = 64
ARCH_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "intermediate_size", "vocab_size")


def model_config(init: str) -> dict:
    """The architecture of ``init``: a local directory's ``config.json``, else the published config of one of the
    paper's two models (:data:`PUBLISHED_CONFIGS`); anything else is an error naming it (no network)."""
    path = Path(init) / "config.json"
    if path.is_file():
        return json.loads(path.read_text())
    if init in PUBLISHED_CONFIGS:
        return dict(PUBLISHED_CONFIGS[init])
    raise ValueError(f"model.init {init!r}: no config.json there and not one of the published configs "
                     f"{sorted(PUBLISHED_CONFIGS)}; give a local model directory")


@dataclass(frozen=True)
class Arch:
    """The numbers of a Qwen2-style decoder that the memory model needs."""
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool
    head_dim: int

    @classmethod
    def from_config(cls, cfg: dict) -> Arch:
        missing = [k for k in ARCH_KEYS if not isinstance(cfg.get(k), int) or cfg[k] <= 0]
        if missing:
            raise ValueError(f"model config: {', '.join(missing)} missing or not a positive integer "
                             f"(got {[cfg.get(k) for k in missing]})")
        h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
        return cls(h, cfg["num_hidden_layers"], heads, cfg["num_key_value_heads"], cfg["intermediate_size"],
                   cfg["vocab_size"], bool(cfg.get("tie_word_embeddings", False)), cfg.get("head_dim") or h // heads)

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_params(self) -> int:
        """One decoder layer: q/k/v (with bias), o_proj, gate/up/down, two RMSNorms."""
        q = self.heads * self.head_dim
        attn = self.hidden * q + q + 2 * (self.hidden * self.kv_dim + self.kv_dim) + q * self.hidden
        return attn + 3 * self.hidden * self.intermediate + 2 * self.hidden

    def n_params(self) -> int:
        """Embedding + layers + final norm (+ lm_head when untied): ``sum(p.numel())`` of the HF model."""
        emb = self.vocab * self.hidden
        return emb + self.layers * self.layer_params() + self.hidden + (0 if self.tied else emb)

    def largest_unit(self) -> int:
        """Parameters of the largest FSDP unit: a decoder layer or the (un)tied embedding / lm_head."""
        return max(self.layer_params(), self.vocab * self.hidden)


def n_params(model_cfg: dict) -> int:
    """The exact parameter count of a Qwen2 config (a ``config.json`` mapping)."""
    return Arch.from_config(model_cfg).n_params()


def choose_engine(cfg: TrainConfig, arch: Arch, device_bytes: int, world_size: int) -> str:
    """``"ddp"`` when DDP's whole per-process memory (:func:`memory`: weights, gradients, AdamW, buckets,
    activations, logits) times :data:`HEADROOM` fits ``device_bytes``, else ``"fsdp"`` -- the same verdict as the
    plan's fit.  With one process there is nothing to shard over: ``"ddp"`` (a single process)."""
    for name, v in (("device_bytes", device_bytes), ("world_size", world_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"choose_engine: {name} must be a positive integer, got {v!r}")
    if world_size == 1:
        return "ddp"
    return "ddp" if memory(cfg, arch, "ddp", world_size).total * HEADROOM <= device_bytes else "fsdp"


@dataclass(frozen=True)
class Memory:
    """Per-GPU bytes of one training process."""
    params: int
    compute_copy: int
    grads: int
    optimizer: int
    activations: int
    logits: int
    buckets: int = 0

    @property
    def total(self) -> int:
        return (self.params + self.compute_copy + self.grads + self.optimizer + self.activations + self.logits
                + self.buckets)


def _compute_bytes(cfg: TrainConfig) -> int:
    """2 under bf16 mixed precision (``train.dtype`` bf16 / auto on a GPU), else 4."""
    return 2 if cfg.train.dtype in ("auto", "bf16", "bfloat16") and cfg.train.device != "cpu" else 4


def activation_bytes(cfg: TrainConfig, arch: Arch) -> tuple[int, int]:
    """(activations, logits) of one micro-batch in flight (module docstring)."""
    a, spec, L = _compute_bytes(cfg), cfg.spec, cfg.data.seq_len
    rows = cfg.optim.micro_batch_size * (2 if spec.complementary else 1)
    tokens = rows * (2 * L if spec.objective == "bd" else L)
    full_layer = tokens * (8 * arch.hidden + 2 * arch.kv_dim + 4 * arch.intermediate) * a
    if cfg.train.gradient_checkpointing:
        acts = arch.layers * tokens * arch.hidden * a + full_layer
    else:
        acts = arch.layers * full_layer
    logits = rows * L * arch.vocab * logit_bytes(a)
    return acts, logits


def logit_bytes(a: int) -> int:
    """Bytes per logit of the fp32 cross-entropy at its peak (the backward): the log-softmax output it keeps, the
    gradient arriving at it and the one it passes on (3 x 4); under bf16 also the bf16 logits' gradient (2).
    Measured on a CPU run (fp32): 12.2 (scripts/cluster/plan_vs_measured.py)."""
    return 12 + (2 if a == 2 else 0)


def memory(cfg: TrainConfig, arch: Arch, engine: str, world_size: int) -> Memory:
    """Per-GPU memory under ``engine`` (ddp: replicated; fsdp: sharded over ``world_size``)."""
    n, a = arch.n_params(), _compute_bytes(cfg)
    acts, logits = activation_bytes(cfg, arch)
    if engine == "ddp":  # several processes: DDP's gradient buckets, a second fp32 copy of the gradients
        return Memory(4 * n, 2 * n if a == 2 else 0, 4 * n, 8 * n, acts, logits, 4 * n if world_size > 1 else 0)
    if engine == "fsdp":
        unit = arch.largest_unit()
        shard = -(-n // world_size)
        return Memory(4 * shard, 2 * unit * a + 4 * unit, 4 * shard, 8 * shard, acts, logits)
    raise ValueError(f"engine must be 'ddp' or 'fsdp', got {engine!r}")


def paper_reference(n: int) -> str:
    """The paper model ("1.5B" / "7B") closest in parameter count to ``n`` (by ratio)."""
    sizes = {k: n_params(PUBLISHED_CONFIGS[v["model"]]) for k, v in PAPER_HPARAMS.items()}
    return min(sizes, key=lambda k: max(sizes[k], n) / min(sizes[k], n))


def paper_tokens(ref: str) -> int:
    h = PAPER_HPARAMS[ref]
    return h["max_steps"] * h["batch_size"] * h["seq_len"]


@dataclass(frozen=True)
class TrainingPlan:
    """One training run on ``gpus`` GPUs of ``gpu_bytes`` each, over ``nodes`` nodes."""
    n_params: int
    tokens: int
    steps: int
    global_batch: int
    micro_batch: int
    accumulation: int
    gpus: int
    nodes: int
    gpu_bytes: int
    ddp: Memory
    fsdp: Memory
    engine: str
    fits: bool
    reason: str
    paper_reference: str
    wall_hours: float
    gpu_hours: float

    @property
    def used(self) -> Memory:
        return self.ddp if self.engine == "ddp" else self.fsdp

    def require_fit(self) -> TrainingPlan:
        """The plan, or ``ValueError`` with :attr:`reason` when it does not fit."""
        if not self.fits:
            raise ValueError(self.reason)
        return self


def accumulation_steps(global_batch: int, micro_batch: int, gpus: int) -> int:
    """Micro-batches per process and optimiser step: global / (micro x gpus), which must be a whole number."""
    for name, v in (("gpus", gpus), ("global batch", global_batch), ("micro batch", micro_batch)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if global_batch % (micro_batch * gpus):
        raise ValueError(f"global batch {global_batch} is not a multiple of micro batch {micro_batch} x {gpus} GPUs "
                         f"= {micro_batch * gpus}: change optim.micro_batch_size or the GPU count")
    return global_batch // (micro_batch * gpus)


def plan_training(cfg: TrainConfig, model_config: dict, gpus: int, gpu_bytes: int, nodes: int,
                  engine: str = "auto") -> TrainingPlan:
    """The plan of ``cfg`` for the model of ``model_config`` (a ``config.json`` mapping): ``engine`` "auto"
    takes :func:`choose_engine`'s; a plan that does not fit says why in ``reason`` (naming the numbers)."""
    if engine not in ("auto", "ddp", "fsdp"):
        raise ValueError(f"engine must be auto, ddp or fsdp, got {engine!r}")
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes <= 0 or gpus % nodes:
        raise ValueError(f"nodes={nodes!r} must be a positive integer dividing gpus={gpus}")
    o, arch = cfg.optim, Arch.from_config(model_config)
    accum = accumulation_steps(o.batch_size, o.micro_batch_size, gpus)
    n = arch.n_params()
    chosen = choose_engine(cfg, arch, int(gpu_bytes), gpus) if engine == "auto" else engine
    mems = {e: memory(cfg, arch, e, gpus) for e in ("ddp", "fsdp")}
    need = mems[chosen].total * HEADROOM
    fits = need <= gpu_bytes
    reason = "" if fits else (
        f"{chosen.upper()} on {gpus} GPU(s) of {gpu_bytes / GB:.0f} GB: {n / 1e9:.2f}B parameters need "
        f"{mems[chosen].total / GB:.1f} GB per GPU (x{HEADROOM} headroom = {need / GB:.1f} GB > "
        f"{gpu_bytes / GB:.0f} GB){_hint(chosen, mems, gpu_bytes)}")
    tokens = o.max_steps * o.batch_size * cfg.data.seq_len
    ref = paper_reference(n)
    wall = PAPER_WALL_HOURS[ref] * tokens / paper_tokens(ref) * PAPER_GPUS / gpus
    return TrainingPlan(n, tokens, o.max_steps, o.batch_size, o.micro_batch_size, accum, gpus, nodes,
                        int(gpu_bytes), mems["ddp"], mems["fsdp"], chosen, fits, reason, ref, wall, wall * gpus)


def _hint(chosen: str, mems: dict, gpu_bytes: int) -> str:
    """What would fit instead: the other engine, when it does."""
    other = "fsdp" if chosen == "ddp" else "ddp"
    need = mems[other].total * HEADROOM
    if need > gpu_bytes:
        return ""
    return (f"; {other.upper()} would need {need / GB:.1f} GB: set train.engine: {other} "
            f"(plan-training --engine {other})")
