"""One decoding setting, end to end: :class:`DecodeConfig`.

The same object is built by the CLI (``fastdllm generate / eval / bench``), named in the DAG by its
:meth:`DecodeConfig.slug` (a *point* such as ``bd_b32_s8_t0.9_c1``, rebuilt with :meth:`DecodeConfig.from_slug`),
passed to the decoder and written into the CSV rows (:meth:`DecodeConfig.point_fields`).

Also here: :data:`BLOCK_SIZE`, the default block size (the paper's D = 32; a checkpoint's ``bd_size`` overrides
it), and :func:`parse_bool`, the one reader of boolean words (config values, CLI flags, lm-eval ``model_args``).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace

BLOCK_SIZE = 32  # the paper's block size D; the default wherever a checkpoint does not say (bd_size)
SUB_BLOCK_SIZE = 8
AR_SLUG = "ar"  # the point name of the autoregressive baseline (no decoding parameters)
SLUG_FIELDS = ("block_size", "sub_block_size", "threshold", "use_sub_block_cache")  # what a point name carries
_SLUG_RE = re.compile(r"bd_b(\d+)_s(\d+)_t([0-9.]+)_c([01])")

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
    """The block-diffusion decoder's settings (see :mod:`fastdllm_core.decoding`).

    Immutable: derive a variant with :func:`dataclasses.replace` (or :meth:`with_block_size`)."""

    block_size: int = BLOCK_SIZE
    sub_block_size: int = SUB_BLOCK_SIZE
    threshold: float = 0.9
    use_sub_block_cache: bool = False
    max_new_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None

    def validate(self) -> "DecodeConfig":
        for name in ("block_size", "sub_block_size", "max_new_tokens"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.block_size % self.sub_block_size:
            raise ValueError(
                f"sub_block_size={self.sub_block_size} must divide block_size={self.block_size}"
            )
        if not (0.0 < float(self.threshold) <= 1.0):
            raise ValueError(f"threshold must be in (0, 1], got {self.threshold!r}")
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature!r}")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        return self

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

    def point_fields(self) -> dict:
        """The fields a point name carries (block, sub-block, threshold, cache), as a dict."""
        return {k: getattr(self, k) for k in SLUG_FIELDS}

    def with_block_size(self, block_size: int | None) -> "DecodeConfig":
        """The same setting with the model's block size when none was asked for (``block_size=None``: keep)."""
        return self if block_size is None else replace(self, block_size=int(block_size))

    # ------------------------------------------------------------------------------------------ point names
    def slug(self, mode: str = "bd") -> str:
        """The point name: ``ar`` for the AR baseline, else ``bd_b<D>_s<S>_t<threshold>_c<0|1>``."""
        if mode == "ar":
            return AR_SLUG
        return (f"bd_b{self.block_size}_s{self.sub_block_size}_t{format_threshold(self.threshold)}"
                f"_c{int(bool(self.use_sub_block_cache))}")

    @classmethod
    def from_slug(cls, slug: str, **rest) -> "DecodeConfig":
        """The setting a point name stands for; ``rest`` sets the fields a name does not carry (``max_new_tokens``,
        sampling).  ``ar`` gives the defaults (the AR baseline uses only ``max_new_tokens``).  A ``@N`` item limit
        after the name is ignored (see ``workflow/lib/plan.py``)."""
        slug = slug.split("@", 1)[0]
        if slug == AR_SLUG:
            return cls(**rest)
        m = _SLUG_RE.fullmatch(slug)
        if not m:
            raise ValueError(f"bad decoding point {slug!r}")
        return cls(block_size=int(m[1]), sub_block_size=int(m[2]), threshold=float(m[3]),
                   use_sub_block_cache=m[4] == "1", **rest)

    @staticmethod
    def slug_mode(slug: str) -> str:
        """``ar`` or ``bd``: the decoder a point name is for."""
        return "ar" if slug.split("@", 1)[0] == AR_SLUG else "bd"
