"""Unknown keys in training configs are errors, never silently dropped.

The valid keys are those of ``fastdllm_core.train_config.DEFAULTS`` (so a key added there is accepted everywhere at
once), plus ``train.output_dir`` (read by ``fastdllm train``) and, under ``model.tiny``, the arguments of
:func:`fastdllm_core.tiny.tiny_qwen2_config` and of ``transformers.Qwen2Config``.  Used by ``fastdllm train``
(:func:`fastdllm_core.train.resolve_config`) and by the DAG's config checks (``training:`` and
``models.<name>.train:``).  Importing this module is cheap (no torch): the DAG reads ``DEFAULTS`` from
``train_config.py``'s source when it is a literal.
"""
from __future__ import annotations

import ast
import copy
import difflib
import functools
from pathlib import Path

PKG = Path(__file__).resolve().parent
EXTRA_KEYS = {("train",): {"output_dir"}}  # read by the CLI, not part of DEFAULTS
FREE_FORM = {("model", "tiny")}  # checked against the tiny model's config arguments
PAPER_BUDGET_KEYS = ("max_steps", "batch_size")


def merge_config(base: dict, over: dict | None) -> dict:
    """``base`` with ``over`` merged in, key by key at every depth (``over`` wins; neither is modified).  The one
    merge of training configs: ``fastdllm train`` (its defaults under a config) and the DAG (``training:`` under
    ``models.<name>.train:``)."""
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        out[k] = merge_config(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


class UnknownKey(ValueError):
    """A config key that no layer knows; the message names it and the closest valid key."""


@functools.lru_cache(maxsize=1)
def train_defaults() -> dict:
    """``train_config.DEFAULTS``, read from the source when it is a literal (no torch import), else imported."""
    try:
        for node in ast.parse((PKG / "train_config.py").read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DEFAULTS" for t in node.targets):
                return ast.literal_eval(node.value)
    except (OSError, ValueError, SyntaxError):
        pass
    from .train_config import DEFAULTS

    return DEFAULTS


@functools.lru_cache(maxsize=1)
def _tiny_named() -> frozenset:
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
    """Raise :class:`UnknownKey` for the first key of ``cfg`` (at any depth) that ``defaults`` does not have,
    naming it with its dotted path and the closest valid key (difflib); a section that must be a mapping and is
    not is an error too."""
    defaults = train_defaults() if defaults is None else defaults

    def fail(path, key, allowed, shown):
        dotted = ".".join((*path, str(key)))
        close = difflib.get_close_matches(str(key), sorted(allowed), n=1, cutoff=0.5)
        hint = f"; did you mean {'.'.join((*path, close[0]))!r}?" if close else ""
        under = f" under {'.'.join(path)!r}" if path else ""
        raise UnknownKey(f"{where}: unknown key {dotted!r}{hint} (valid keys{under}: {shown})")

    def walk(node, path):
        allowed = allowed_keys(path, defaults, top_extra)
        if allowed is None:
            return
        if not isinstance(node, dict):
            if node is None:
                return
            raise UnknownKey(f"{where}: {'.'.join(path)!r} must be a mapping of {', '.join(sorted(allowed))}; got "
                             f"{type(node).__name__} {node!r}")
        for k, v in node.items():
            if k not in allowed:
                shown = ", ".join(sorted(allowed))
                if path in FREE_FORM:
                    qwen = _qwen2_keys()
                    if k in qwen:
                        continue
                    allowed, shown = allowed | qwen, shown + ", or any transformers.Qwen2Config argument"
                fail(path, k, allowed, shown)
            if path not in FREE_FORM:
                walk(v, (*path, k))

    walk(cfg, ())


def paper_budget_unset(cfg: dict) -> list[str]:
    """``optim.max_steps`` / ``optim.batch_size`` when ``cfg`` leaves them to DEFAULTS (the paper-scale budget)."""
    optim = (cfg or {}).get("optim") or {}
    return [f"optim.{k}" for k in PAPER_BUDGET_KEYS if k not in optim]


def paper_budget_warning(cfg: dict, source: str, max_steps_given: bool = False) -> str | None:
    """One line saying that the paper-scale budget is used, or None when the config sets it."""
    unset = [k for k in paper_budget_unset(cfg) if not (max_steps_given and k == "optim.max_steps")]
    if not unset:
        return None
    d = train_defaults()["optim"]
    vals = ", ".join(f"{k} = {d[k.split('.')[1]]}" for k in unset)
    return (f"WARNING: {source} does not set {' / '.join(unset)}: using the PAPER-SCALE defaults ({vals}; "
            f"global batch of {d['batch_size']} sequences for {d['max_steps']} steps); set them for a smaller run")
