"""One decoding setting, end to end: :class:`DecodeConfig`.

The same object is built by the CLI (``fastdllm generate / eval / bench``), named in the DAG by its
:meth:`DecodeConfig.slug` (a *point* such as ``bd_b32_s8_t0.9_c1``, rebuilt with :meth:`DecodeConfig.from_slug`),
passed to the decoder and written into the CSV rows (:meth:`DecodeConfig.point_fields`).

Also here: :data:`BLOCK_SIZE`, the default block size (the paper's D = 32; a checkpoint's ``bd_size`` overrides
it), and :func:`parse_bool`, the one reader of boolean words (config values, CLI flags, lm-eval ``model_args``).

Modes (the decoder a setting is for; passed beside the setting, the first word of a point name):

* ``ar``: the AR baseline (point ``ar``);
* ``bd``: the Fast-dLLM v2 block-diffusion decoder (``bd_b<D>_s<S>_t<threshold>_c<0|1>[_stop]``, ``_stop`` for
  ``eos_rule="stop"``);
* ``llada``: LLaDA's ``generate`` (``llada_g<gen>_s<steps>_b<block>_<lc|rand>[_le][_ce]``: low-confidence or
  random remasking, ``_le`` = ``logits_eos_inf``, ``_ce`` = ``confidence_eos_eot_inf``);
* ``dream``: Dream's ``diffusion_generate`` (``dream_g<gen>_s<steps>_<alg>[_at<alg_temp>]``);
* ``v1``: Fast-dLLM v1 threshold decoding on a masked-diffusion model
  (``v1_g<gen>_s<steps>_b<block>_t<threshold|none>_<none|prefix|dual>``).

For the masked-diffusion modes ``max_new_tokens`` is the generation length worked on (``gen_length``) and
``block_size`` the block length; sampling (``temperature``, ``top_p``, ``seed``) and ``eps`` are not part of a name.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace

BLOCK_SIZE = 32  # the paper's block size D; the default wherever a checkpoint does not say (bd_size)
SUB_BLOCK_SIZE = 8
AR_SLUG = "ar"  # the point name of the autoregressive baseline (no decoding parameters)
# what a bd point name carries (eos_rule only when it is not the default: ``_stop``)
SLUG_FIELDS = ("block_size", "sub_block_size", "threshold", "use_sub_block_cache", "eos_rule")
_SLUG_RE = re.compile(r"bd_b(\d+)_s(\d+)_t([0-9.]+)_c([01])(_stop)?")
# the block-diffusion decoder's EOS rule: "fill_block" (the official batch_sample, the default): every masked
# position of the block stays an unmasking candidate, also after a row's first EOS; "stop": positions after a row's
# first EOS are never candidates.  Either way the output ends at the first EOS.
EOS_RULES = ("fill_block", "stop")
# how the ar / bd decoders run their forwards: "eager" (the model's forward at the exact shapes of each step),
# "static" (a preallocated cache and fixed-shape forwards, captured as CUDA graphs on a GPU: decoding/static.py),
# "compiled" (the static path with each forward compiled by torch.compile before its capture).
# Not part of a point name: all give the same tokens (tested), the static paths on a GPU faster.
DECODE_PATHS = ("eager", "static", "compiled")
STATIC_PATHS = ("static", "compiled")  # the decode paths (and AR baselines) served by decoding/static.py
# the AR baseline's decoders: Hugging Face generate with its dynamic cache ("hf") or its static cache + torch.compile on
# CUDA ("hf_static"); this project's static cache + captured one-token forward ("static", decoding/ar_static.py),
# and the same compiled by torch.compile before its capture ("compiled")
AR_BASELINES = ("hf", "hf_static", "static", "compiled")
MDM_MODES = ("llada", "dream", "v1")  # the masked-diffusion samplers
MODES = ("ar", "bd") + MDM_MODES
REMASKING = {"low_confidence": "lc", "random": "rand"}
ALGS = ("origin", "maskgit_plus", "topk_margin", "entropy")
CACHES = ("none", "prefix", "dual")
# the fields each mode's point name carries (point_fields)
MODE_FIELDS = {
    "ar": (), "bd": SLUG_FIELDS,
    "llada": ("max_new_tokens", "steps", "block_size", "remasking", "logits_eos_inf", "confidence_eos_eot_inf"),
    "dream": ("max_new_tokens", "steps", "alg", "alg_temp"),
    "v1": ("max_new_tokens", "steps", "block_size", "threshold", "cache"),
}
# the decoding columns of a results row, every mode (row_fields): "" where a mode has no such setting
ROW_DECODE_COLUMNS = ("block_size", "sub_block_size", "threshold", "use_sub_block_cache", "eos_rule", "gen_length",
                      "steps",
                      "remasking", "alg", "alg_temp", "cache", "logits_eos_inf", "confidence_eos_eot_inf")
_NUM = r"([0-9]+(?:\.[0-9]+)?(?:e-?[0-9]+)?)"
_LLADA_RE = re.compile(r"llada_g(\d+)_s(\d+)_b(\d+)_(lc|rand)(_le)?(_ce)?")
_DREAM_RE = re.compile(r"dream_g(\d+)_s(\d+)_(" + "|".join(ALGS) + r")(?:_at" + _NUM + r")?")
_V1_RE = re.compile(r"v1_g(\d+)_s(\d+)_b(\d+)_t(" + _NUM[1:-1] + r"|none)_(" + "|".join(CACHES) + r")")

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def parse_bool(v, *, empty_false: bool = False) -> bool:
    """``True`` / ``False`` from a bool, 0 / 1, or a word (true/false, yes/no, on/off, 1/0; any case).

    ``empty_false``: "", "none" and None also read as False (lm-eval ``model_args``).  Anything else raises
    ``ValueError``."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    s = "" if v is None else str(v).strip().lower()
    if s in TRUE_WORDS:
        return True
    if s in FALSE_WORDS or (empty_false and s in ("", "none")):
        return False
    raise ValueError(f"expected a boolean (true/false, on/off, yes/no, 1/0), got {v!r}")


def format_threshold(t) -> str:
    """A threshold as written in point names and summaries: ``1``, ``0.9``."""
    return f"{float(t):g}"


@dataclass(frozen=True)
class DecodeConfig:
    """One decoding setting (see :mod:`fastdllm_core.decoding`): the block-diffusion decoder's fields, the
    masked-diffusion samplers' (``steps`` ... ``confidence_eos_eot_inf``) and the sampling ones; the mode they are
    for is passed beside it (:meth:`validate`, :meth:`slug`).

    Immutable: derive a variant with :func:`dataclasses.replace` (or :meth:`with_block_size`)."""

    block_size: int = BLOCK_SIZE
    sub_block_size: int = SUB_BLOCK_SIZE
    threshold: float | None = 0.9  # None only for v1's step schedule (cache only)
    use_sub_block_cache: bool = False
    eos_rule: str = "fill_block"  # bd: EOS_RULES
    decode_path: str = "eager"  # bd: DECODE_PATHS
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    # masked-diffusion samplers (modes llada / dream / v1)
    steps: int | None = None  # diffusion steps over the whole generation (None: the mode's default, with_mode_defaults)
    remasking: str = "low_confidence"  # llada: low_confidence | random
    alg: str = "entropy"  # dream: origin | maskgit_plus | topk_margin | entropy
    alg_temp: float = 0.0  # dream: > 0 draws the positions to unmask from softmax(confidence / alg_temp)
    eps: float = 1e-3  # dream: the last timestep
    cache: str = "none"  # v1: none | prefix | dual
    logits_eos_inf: bool = False  # llada: EOS logit -inf (LLaDA Appendix B.4)
    confidence_eos_eot_inf: bool = False  # llada: EOS / EoT predictions get no confidence

    def validate(self, mode: str = "bd") -> "DecodeConfig":
        """Check the fields ``mode`` uses (``ValueError`` naming the field and the bad value); returns self."""
        if mode not in MODES:
            raise ValueError(f"unknown decoding mode {mode!r}; choose from {', '.join(MODES)}")
        _positive_int("max_new_tokens", self.max_new_tokens)
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if mode in ("ar", "bd"):
            return self._validate_bd()
        _positive_int("steps", self.steps, "(the mode's default: DecodeConfig.with_mode_defaults)")
        if mode in ("llada", "v1"):
            _positive_int("block_size", self.block_size)
            if self.max_new_tokens % self.block_size:
                raise ValueError(f"block_size={self.block_size} must divide the generation length "
                                 f"max_new_tokens={self.max_new_tokens}")
            blocks = self.max_new_tokens // self.block_size
            if self.steps % blocks:
                raise ValueError(f"steps={self.steps} must be a multiple of the number of blocks {blocks} "
                                 f"(max_new_tokens / block_size)")
        if mode == "llada" and self.remasking not in REMASKING:
            raise ValueError(f"remasking must be one of {sorted(REMASKING)}, got {self.remasking!r}")
        if mode == "dream":
            if self.alg not in ALGS:
                raise ValueError(f"alg must be one of {ALGS}, got {self.alg!r}")
            if self.alg_temp < 0:
                raise ValueError(f"alg_temp must be >= 0, got {self.alg_temp!r}")
            if not 0 < self.eps < 1:
                raise ValueError(f"eps must be in (0, 1), got {self.eps!r}")
        if mode == "v1":
            if self.cache not in CACHES:
                raise ValueError(f"cache must be one of {CACHES}, got {self.cache!r}")
            if self.threshold is None:
                if self.cache == "none":
                    raise ValueError("threshold=None (the step schedule) needs cache prefix or dual; without both "
                                     "it is the family's own sampler (mode llada / dream)")
            elif not (0.0 < float(self.threshold) <= 1.0):
                raise ValueError(f"threshold must be in (0, 1] or None, got {self.threshold!r}")
        return self

    def _validate_bd(self) -> "DecodeConfig":
        for name in ("block_size", "sub_block_size"):
            _positive_int(name, getattr(self, name))
        if self.block_size % self.sub_block_size:
            raise ValueError(
                f"sub_block_size={self.sub_block_size} must divide block_size={self.block_size}"
            )
        if self.threshold is None or not (0.0 < float(self.threshold) <= 1.0):
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")
        if self.eos_rule not in EOS_RULES:
            raise ValueError(f"eos_rule must be one of {EOS_RULES}, got {self.eos_rule!r}")
        if self.decode_path not in DECODE_PATHS:
            raise ValueError(f"decode_path must be one of {DECODE_PATHS}, got {self.decode_path!r}")
        return self

    def with_mode_defaults(self, mode: str) -> "DecodeConfig":
        """``steps=None`` resolved for ``mode``: one step per token (llada, dream; the published settings), one
        step per block (v1, the Fast-dLLM scripts' ``steps = length / block_length``)."""
        if self.steps is not None or mode not in MDM_MODES:
            return self
        if mode == "v1":
            return replace(self, steps=max(1, self.max_new_tokens // max(1, self.block_size)))
        return replace(self, steps=self.max_new_tokens)

    # ------------------------------------------------------------------------------------------ dict forms
    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict, **overrides) -> "DecodeConfig":
        """From a mapping (the config's ``decode:`` block, a CSV row, ``to_dict()``); keys that are not fields
        (``max_new_tokens: task``'s sibling keys, a row's other columns) are an error unless ``overrides`` or
        :meth:`point_fields` pick them.  Values are kept as given (no coercion): :meth:`validate` checks them."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"unknown decoding key(s) {unknown}; valid: {sorted(names)}")
        return cls(**{**d, **overrides})

    def point_fields(self, mode: str = "bd") -> dict:
        """The fields ``mode``'s point name carries, as a dict (bd: block, sub-block, threshold, cache; the
        masked-diffusion modes: the generation length ``max_new_tokens``, ``steps`` and their own)."""
        return {k: getattr(self, k) for k in MODE_FIELDS[mode]}

    def row_fields(self, mode: str) -> dict:
        """The decoding columns of a results row (:data:`ROW_DECODE_COLUMNS`, every mode): ``gen_length`` and
        ``steps`` always present (empty where a mode has none: the AR baseline's steps, bd's adaptive steps),
        the fields ``mode`` does not use empty."""
        used = set(MODE_FIELDS[mode]) | ({"remasking"} if mode == "v1" else set())
        row = {k: (getattr(self, k) if k in used else "") for k in ROW_DECODE_COLUMNS
               if k not in ("gen_length", "steps")}
        row["gen_length"] = self.max_new_tokens
        row["steps"] = self.steps if mode in MDM_MODES else ""
        if mode == "v1" and self.threshold is None:
            row["threshold"] = "none"
        return {k: row[k] for k in ROW_DECODE_COLUMNS}

    def with_block_size(self, block_size: int | None) -> "DecodeConfig":
        """The same setting with the model's block size when none was asked for (``block_size=None``: keep)."""
        return self if block_size is None else replace(self, block_size=int(block_size))

    # ------------------------------------------------------------------------------------------ point names
    def slug(self, mode: str = "bd") -> str:
        """The point name of ``mode`` (grammar in the module docstring)."""
        if mode == "ar":
            return AR_SLUG
        if mode == "bd":
            return (f"bd_b{self.block_size}_s{self.sub_block_size}_t{format_threshold(self.threshold)}"
                    f"_c{int(bool(self.use_sub_block_cache))}" + ("_stop" if self.eos_rule == "stop" else ""))
        if mode not in MDM_MODES:
            raise ValueError(f"unknown decoding mode {mode!r}; choose from {', '.join(MODES)}")
        if self.steps is None:
            raise ValueError(f"a {mode} point name needs steps (DecodeConfig.with_mode_defaults)")
        head = f"{mode}_g{self.max_new_tokens}_s{self.steps}"
        if mode == "llada":
            return (f"{head}_b{self.block_size}_{REMASKING[self.remasking]}"
                    f"{'_le' if self.logits_eos_inf else ''}{'_ce' if self.confidence_eos_eot_inf else ''}")
        if mode == "dream":
            return f"{head}_{self.alg}" + (f"_at{self.alg_temp:g}" if self.alg_temp else "")
        thr = "none" if self.threshold is None else format_threshold(self.threshold)
        return f"{head}_b{self.block_size}_t{thr}_{self.cache}"

    @classmethod
    def from_slug(cls, slug: str, **rest) -> "DecodeConfig":
        """The setting a point name stands for; ``rest`` sets the fields a name does not carry (``max_new_tokens``,
        sampling).  ``ar`` gives the defaults (the AR baseline uses only ``max_new_tokens``).  A ``@N`` item limit
        after the name is ignored (see ``workflow/fastdllm_dag/plan/models.py``)."""
        slug = slug.split("@", 1)[0]
        if slug == AR_SLUG:
            return cls(**rest)
        mode = cls.slug_mode(slug)
        if mode == "bd":
            m = _SLUG_RE.fullmatch(slug)
            if not m:
                raise ValueError(f"bad decoding point {slug!r}")
            return cls(block_size=int(m[1]), sub_block_size=int(m[2]), threshold=float(m[3]),
                       use_sub_block_cache=m[4] == "1", eos_rule="stop" if m[5] else "fill_block", **rest)
        m = {"llada": _LLADA_RE, "dream": _DREAM_RE, "v1": _V1_RE}[mode].fullmatch(slug)
        if not m:
            raise ValueError(f"bad decoding point {slug!r} (grammar: fastdllm_core.decode_config)")
        fields_ = {"max_new_tokens": int(m[1]), "steps": int(m[2])}
        if mode == "llada":
            fields_.update(block_size=int(m[3]), remasking={v: k for k, v in REMASKING.items()}[m[4]],
                           logits_eos_inf=bool(m[5]), confidence_eos_eot_inf=bool(m[6]))
        elif mode == "dream":
            fields_.update(alg=m[3], alg_temp=float(m[4]) if m[4] else 0.0)
        else:
            fields_.update(block_size=int(m[3]), threshold=None if m[4] == "none" else float(m[4]), cache=m[5])
        if "max_new_tokens" in rest and rest["max_new_tokens"] != fields_["max_new_tokens"]:
            raise ValueError(f"point {slug!r} fixes the generation length {fields_['max_new_tokens']}; "
                             f"max_new_tokens={rest['max_new_tokens']!r} contradicts it")
        return cls(**{**rest, **fields_})

    @staticmethod
    def slug_mode(slug: str) -> str:
        """The decoder a point name is for: ``ar``, ``bd``, ``llada``, ``dream`` or ``v1`` (its first word)."""
        slug = slug.split("@", 1)[0]
        if slug == AR_SLUG:
            return "ar"
        head = slug.split("_", 1)[0]
        return head if head in MDM_MODES else "bd"


def _positive_int(name: str, v, hint: str = "") -> None:
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ValueError(f"{name} must be a positive integer, got {v!r}" + (f" {hint}" if hint else ""))
