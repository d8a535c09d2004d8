"""The training configuration: one frozen, typed :class:`TrainConfig` (the counterpart of
:class:`~fastdllm_core.decode_config.DecodeConfig`), a dataclass per YAML section.

* The defaults live here and nowhere else: the fields' defaults.  ``TrainConfig().to_dict()`` is the full default
  config (``DEFAULTS``), the keys the DAG's config checks and ``fastdllm train`` accept.
* :meth:`TrainConfig.from_dict` takes the YAML of ``fastdllm train`` and of the DAG's ``training:`` /
  ``models.<name>.train:`` blocks: an unknown key, at any depth, is an error naming it and the closest valid key;
  missing keys take their defaults; :meth:`TrainConfig.validate` names the bad field before any expensive work.
  :meth:`TrainConfig.to_dict` gives the resolved YAML back, key for key and byte for byte as the dict-based
  configuration wrote it (tests/data/train_configs.yaml).
* Functions take the section they need (:class:`OptimConfig`, :class:`DataConfig`, ...).

Cheap to import (no torch): the DAG reads it at parse time.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import difflib
import functools
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PKG = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Recipe:
    """What a recipe trains: the ``objective`` (ntp | bd | dream), the ``packing`` of the data (whole | pad | naive,
    :mod:`.data`) and whether every sequence is also trained on its complementary mask."""
    objective: str
    packing: str
    complementary: bool


RECIPES = {
    "ar_pretrain": Recipe("ntp", "whole", False),  # pretrain the tiny AR base from random init
    "sft": Recipe("ntp", "whole", False),  # instruct-tune it: the stand-in for Qwen2.5-Instruct
    "ntp": Recipe("ntp", "pad", False),  # the "NTP fine-tuned" / Nemo-FT baseline
    "bd_naive": Recipe("bd", "naive", False),  # "naive token shift"
    "bd_pad": Recipe("bd", "pad", False),  # "+ pad"
    "bd_pad_cm": Recipe("bd", "pad", True),  # "+ pad + CM": the paper's recipe
    # full-attention masked diffusion from the AR model (Dream's recipe) on the same packed data as "+ pad"
    "dream": Recipe("dream", "pad", False),
}

# The paper's hyper-parameters (Sec. 4.1): global batch 256 sequences of L 2048, D 32, AdamW, 500 warm-up steps.
PAPER_HPARAMS = {
    "1.5B": {"model": "Qwen/Qwen2.5-1.5B-Instruct", "lr": 2e-5, "max_steps": 6000, "batch_size": 256,
             "seq_len": 2048, "block_size": 32, "warmup_steps": 500},
    "7B": {"model": "Qwen/Qwen2.5-7B-Instruct", "lr": 1e-5, "max_steps": 2500, "batch_size": 256,
           "seq_len": 2048, "block_size": 32, "warmup_steps": 500},
}
SCHEDULES = ("constant", "linear", "cosine")
MASK_INITS = ("keep", "zero")
TOKENIZERS = ("char", "bpe")
ENGINES = ("auto", "ddp", "fsdp")
DTYPES = ("auto", "bf16", "bfloat16", "fp32", "float32")  # train.dtype (auto: bf16 mixed precision on a GPU)


@dataclass(frozen=True)
class ModelConfig:
    """``model:``: ``init`` is ``tiny`` (a random tiny Qwen2, ``tiny`` its architecture arguments) or a checkpoint."""
    init: str = "tiny"
    tiny: dict = field(default_factory=dict)
    tokenizer: str = "char"
    vocab_size: int = 768
    mask_init: str = "keep"


@dataclass(frozen=True)
class DataConfig:
    """``data:``: JSONL files of chat or plain-text rows, packed into sequences of ``seq_len`` tokens."""
    train_files: tuple = ()
    seq_len: int = 128
    max_examples: int | None = None
    drop_after_answer: bool = True


@dataclass(frozen=True)
class ObjectiveConfig:
    """``objective:``: block size D and the smallest noise level ``eps`` (t ~ U(eps, 1))."""
    block_size: int = 32
    eps: float = 1e-3


@dataclass(frozen=True)
class OptimConfig:
    """``optim:``: AdamW over a global batch of ``batch_size`` sequences in micro-batches; the paper-scale budget
    by default."""
    lr: float = 2e-5
    weight_decay: float = 0.0
    betas: tuple = (0.9, 0.999)
    warmup_steps: int = 500
    max_steps: int = 6000
    batch_size: int = 256
    micro_batch_size: int = 8
    grad_clip: float = 1.0
    schedule: str = "constant"


@dataclass(frozen=True)
class RunConfig:
    """``train:``: the run's seed, checkpointing, logging, device and precision."""
    seed: int = 0
    save_every: int = 500
    keep_checkpoints: int = 2
    dtype: str = "auto"
    gradient_checkpointing: bool = False
    log_every: int = 10
    device: str = "auto"
    attn_implementation: str | None = None
    engine: str = "auto"  # auto | ddp | fsdp: how several processes hold the model (.parallel)
    nonfinite_skips: int = 0  # non-finite steps skipped (no update) before the run stops; 0: the first stops it


SECTIONS = {"model": ModelConfig, "data": DataConfig, "objective": ObjectiveConfig, "optim": OptimConfig,
            "train": RunConfig}
LIST_FIELDS = {("data", "train_files"), ("optim", "betas")}  # tuples here, lists in the YAML
NUMBER_FIELDS = (("optim", "lr"), ("optim", "weight_decay"), ("optim", "grad_clip"), ("objective", "eps"))
EXTRA_KEYS = {("train",): {"output_dir"}}  # read by ``fastdllm train`` (the run directory), not a training setting
FREE_FORM = {("model", "tiny")}  # checked against the tiny model's config arguments
PAPER_BUDGET_KEYS = ("max_steps", "batch_size")


@dataclass(frozen=True)
class TrainConfig:
    """One training run's configuration (see the module docstring)."""
    recipe: str = "bd_pad_cm"
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    objective: ObjectiveConfig = field(default_factory=ObjectiveConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: RunConfig = field(default_factory=RunConfig)

    @property
    def spec(self) -> Recipe:
        """The recipe's objective, packing and masks."""
        return RECIPES[self.recipe]

    @classmethod
    def from_dict(cls, raw: dict | None, *, check_files: bool = True) -> TrainConfig:
        """The config of a YAML mapping: keys checked, defaults filled, YAML-1.1 number strings ("2e-5") read as
        numbers, then :meth:`validate`.  ``train.output_dir`` (a ``fastdllm train`` option) is accepted and left
        to the caller."""
        check_keys(raw or {}, DEFAULTS, "training config")
        merged = merge_config(DEFAULTS, {k: v for k, v in (raw or {}).items() if v is not None})
        merged["train"].pop("output_dir", None)
        _read_numbers(merged)
        if isinstance(merged["data"]["train_files"], str):
            merged["data"]["train_files"] = [merged["data"]["train_files"]]
        for sec, key in LIST_FIELDS:
            merged[sec][key] = tuple(merged[sec][key])
        cfg = cls(recipe=merged["recipe"], **{name: sec(**merged[name]) for name, sec in SECTIONS.items()})
        cfg.validate(check_files=check_files)
        return cfg

    def to_dict(self) -> dict:
        """The resolved YAML mapping (sections in order, lists where the YAML has lists)."""
        out = {"recipe": self.recipe}
        for name in SECTIONS:
            sec = {f.name: copy.deepcopy(getattr(getattr(self, name), f.name))
                   for f in dataclasses.fields(SECTIONS[name])}
            for s, key in LIST_FIELDS:
                if s == name:
                    sec[key] = list(sec[key])
            out[name] = sec
        return out

    def with_max_steps(self, max_steps: int) -> TrainConfig:
        """The same run with another ``optim.max_steps``."""
        return dataclasses.replace(self, optim=dataclasses.replace(self.optim, max_steps=int(max_steps)))

    def validate(self, check_files: bool = True) -> None:
        """Raise ``ValueError`` / ``FileNotFoundError`` naming the first bad field."""
        if self.recipe not in RECIPES:
            raise ValueError(f"recipe: unknown {self.recipe!r}; choose from {sorted(RECIPES)}")
        if self.model.mask_init not in MASK_INITS:
            raise ValueError(f"model.mask_init must be one of {MASK_INITS}, got {self.model.mask_init!r}")
        if self.model.init == "tiny" and self.model.tokenizer not in TOKENIZERS:
            raise ValueError(f"model.tokenizer must be 'char' or 'bpe', got {self.model.tokenizer!r}")
        check_lengths(self.data.seq_len, self.objective.block_size)
        _validate_optim(self.optim)
        if not 0 <= self.objective.eps < 1:
            raise ValueError(f"objective.eps must be in [0, 1), got {self.objective.eps!r}")
        if self.train.dtype not in DTYPES:
            raise ValueError(f"train.dtype must be one of {DTYPES}, got {self.train.dtype!r}")
        if self.train.engine not in ENGINES:
            raise ValueError(f"train.engine must be one of {ENGINES}, got {self.train.engine!r}")
        if not (_posint(self.train.nonfinite_skips) or self.train.nonfinite_skips == 0) or isinstance(
                self.train.nonfinite_skips, bool):
            raise ValueError(f"train.nonfinite_skips must be an integer >= 0, got {self.train.nonfinite_skips!r}")
        if not _posint(self.train.save_every):
            raise ValueError(f"train.save_every must be a positive integer, got {self.train.save_every!r}")
        if not self.data.train_files:
            raise ValueError("data.train_files is empty: give at least one JSONL file")
        for f in self.data.train_files if check_files else ():
            if not Path(f).is_file():
                raise FileNotFoundError(f"data.train_files: file not found: {f}")


def _posint(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _validate_optim(o: OptimConfig) -> None:
    for key in ("batch_size", "micro_batch_size", "max_steps"):
        if not _posint(getattr(o, key)):
            raise ValueError(f"optim.{key} must be a positive integer, got {getattr(o, key)!r}")
    if o.batch_size % o.micro_batch_size:
        raise ValueError(f"optim.micro_batch_size={o.micro_batch_size} must divide optim.batch_size={o.batch_size}")
    if not (isinstance(o.lr, (int, float)) and o.lr > 0):
        raise ValueError(f"optim.lr must be > 0, got {o.lr!r}")
    if o.schedule not in SCHEDULES:
        raise ValueError(f"optim.schedule must be one of {SCHEDULES}, got {o.schedule!r}")


def _read_numbers(merged: dict) -> None:
    for sec, key in NUMBER_FIELDS:
        v = merged[sec][key]
        if isinstance(v, str):  # YAML 1.1 reads "2e-5" as a string
            try:
                merged[sec][key] = float(v)
            except ValueError:
                raise ValueError(f"{sec}.{key} must be a number, got {v!r}") from None


def check_lengths(seq_len: int, block_size: int) -> None:
    """Sequence length L and block size D: positive integers, D divides L."""
    for name, v in (("seq_len (L)", seq_len), ("block_size (D)", block_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    if seq_len < block_size:
        raise ValueError(f"seq_len L={seq_len} is smaller than block_size D={block_size}")
    if seq_len % block_size:
        raise ValueError(f"block_size D={block_size} must divide seq_len L={seq_len}")


DEFAULTS = TrainConfig().to_dict()  # derived from the fields above, never edited


# ------------------------------------------------------------------------------------------------ YAML mappings
def set_key(cfg: dict, dotted: str, value: str) -> None:
    """``--set optim.lr=1e-4`` on a YAML mapping: the value is parsed as YAML."""
    keys = dotted.split(".")
    d = cfg
    for k in keys[:-1]:
        d = d.setdefault(k, {})
    d[keys[-1]] = yaml.safe_load(value)


def merge_config(base: dict, over: dict | None) -> dict:
    """``base`` with ``over`` merged in, key by key at every depth (``over`` wins; neither is modified).  The one
    merge of training configs: :meth:`TrainConfig.from_dict` (defaults under a config) and the DAG (``training:``
    under ``models.<name>.train:``)."""
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        out[k] = merge_config(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


class UnknownKey(ValueError):
    """A config key that no section knows; the message names it and the closest valid key."""


@functools.lru_cache(maxsize=1)
def _tiny_named() -> frozenset:
    """The arguments of :func:`fastdllm_core.tiny.tiny_qwen2_config`, read from its source (no torch import)."""
    for node in ast.parse((PKG / "tiny.py").read_text()).body:
        if isinstance(node, ast.FunctionDef) and node.name == "tiny_qwen2_config":
            return frozenset(a.arg for a in node.args.args + node.args.kwonlyargs)
    return frozenset()


@functools.lru_cache(maxsize=1)
def _qwen2_keys() -> frozenset:
    import inspect

    from transformers import Qwen2Config

    return frozenset(inspect.signature(Qwen2Config.__init__).parameters) - {"self", "kwargs"} | set(
        Qwen2Config().to_dict())


def allowed_keys(path: tuple, defaults: dict, top_extra=()) -> set | None:
    """The valid keys under ``path`` (None: not a mapping the defaults describe)."""
    node = defaults
    for k in path:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    if path in FREE_FORM:
        return set(_tiny_named())
    if not isinstance(node, dict):
        return None
    return set(node) | EXTRA_KEYS.get(path, set()) | (set(top_extra) if not path else set())


def check_keys(cfg: dict, defaults: dict | None = None, where: str = "training config", top_extra=()) -> None:
    """Raise :class:`UnknownKey` for the first key of ``cfg`` (at any depth) that ``defaults`` (default:
    ``DEFAULTS``) does not have, naming it with its dotted path and the closest valid key (difflib); a section
    that must be a mapping and is not is an error too.  ``model.tiny`` takes the tiny model's arguments and any
    ``transformers.Qwen2Config`` argument."""
    defaults = DEFAULTS if defaults is None else defaults

    def walk(node, path):
        allowed = allowed_keys(path, defaults, top_extra)
        if allowed is None or node is None:
            return
        if not isinstance(node, dict):
            raise UnknownKey(f"{where}: {'.'.join(path)!r} must be a mapping of {', '.join(sorted(allowed))}; got "
                             f"{type(node).__name__} {node!r}")
        for k, v in node.items():
            if k not in allowed:
                _unknown(where, path, k, allowed)
            if path not in FREE_FORM:
                walk(v, (*path, k))

    walk(cfg, ())


def _unknown(where: str, path: tuple, key, allowed: set) -> None:
    """Raise the error for ``key`` under ``path``, unless it is a Qwen2Config argument under ``model.tiny``."""
    shown = ", ".join(sorted(allowed))
    if path in FREE_FORM:
        qwen = _qwen2_keys()
        if key in qwen:
            return
        allowed, shown = allowed | qwen, shown + ", or any transformers.Qwen2Config argument"
    dotted = ".".join((*path, str(key)))
    close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.5)
    hint = f"; did you mean {'.'.join((*path, close[0]))!r}?" if close else ""
    under = f" under {'.'.join(path)!r}" if path else ""
    raise UnknownKey(f"{where}: unknown key {dotted!r}{hint} (valid keys{under}: {shown})")


def paper_budget_warning(cfg: dict, source: str, max_steps_given: bool = False) -> str | None:
    """One line saying that the paper-scale budget (``optim.max_steps`` / ``optim.batch_size`` left to their
    defaults) is used, or None when the YAML mapping ``cfg`` sets it."""
    optim = (cfg or {}).get("optim") or {}
    unset = [f"optim.{k}" for k in PAPER_BUDGET_KEYS if k not in optim and not (max_steps_given and k == "max_steps")]
    if not unset:
        return None
    d = DEFAULTS["optim"]
    vals = ", ".join(f"{k} = {d[k.split('.')[1]]}" for k in unset)
    return (f"WARNING: {source} does not set {' / '.join(unset)}: using the PAPER-SCALE defaults ({vals}; "
            f"global batch of {d['batch_size']} sequences for {d['max_steps']} steps); set them for a smaller run")
