"""What the task modules share (re-exported by :mod:`fastdllm_core.evaluation`): the task names, the prompt
styles, :class:`TaskUnavailable` and where a task's local data is looked for.  A leaf: it imports nothing of the
package, so that :mod:`.runner`, :mod:`.tasks` and :mod:`.codeeval` need not import the package itself."""
from __future__ import annotations

import os
from pathlib import Path

SYNTH_TASKS = ("synth_arith", "synth_math", "synth_code", "synth_mbpp", "synth_mc", "synth_ifeval")
TASKS = (*SYNTH_TASKS, "gsm8k", "humaneval", "mbpp", "minerva_math", "ifeval", "mmlu", "gpqa")
PROMPT_STYLES = ("paper", "boxed", "plain", "evalplus")


class TaskUnavailable(RuntimeError):
    """The task's data cannot be loaded here; the message names the path or variable that fixes it."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def offline() -> bool:
    """True when the Hugging Face / network downloads are switched off by the usual variables."""
    return any(os.environ.get(v, "0").lower() not in ("0", "", "false")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "FASTDLLM_OFFLINE"))


def shared_dir() -> Path:
    """The read-only shared material: ``$FASTDLLM_SHARED_DIR`` or ``../shared`` next to the repository root."""
    env = os.environ.get("FASTDLLM_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared"


def local_test_file(data_path, env_var: str, fname: str, missing: str, not_found: str) -> Path:
    """A task's local test file: ``data_path`` (the file, or the suite directory holding ``fname``), else
    ``$env_var``.  :class:`TaskUnavailable` with ``missing`` when neither is given, with ``not_found`` (``{p}``:
    the path looked at) when there is no such file."""
    p = data_path or os.environ.get(env_var)
    if not p:
        raise TaskUnavailable(missing)
    p = Path(p)
    if p.is_dir():
        p = p / fname
    if not p.is_file():
        raise TaskUnavailable(not_found.replace("{p}", str(p)))
    return p


def encode_pair(tok_encode, context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) of a likelihood request.

    lm-eval's convention moves the context's trailing whitespace into the continuation (`` A`` is one token in
    GPT-2's BPE).  A trailing line break stays in the context: under a chat template the context ends with the
    assistant turn's ``\n`` (Qwen: ``<|im_start|>assistant\n``) and lm-eval's continuation is the bare option, so
    moved, the break would make MMLU's one-token letter two tokens (``\n``, ``A``) and GPQA's ``(A)`` three, and
    a masked-diffusion likelihood would score the break jointly with the answer.  The continuation is the whole's
    tokens after the context's when those are a prefix of it, else encoded on its own (a merge across the
    boundary)."""
    tail = context[len(context.rstrip()):]
    if tail and "\n" not in tail:
        context, continuation = context[: -len(tail)], tail + continuation
    ctx = tok_encode(context)
    whole = tok_encode(context + continuation)
    cont = whole[len(ctx):] if whole[: len(ctx)] == ctx else []
    return ctx, cont or tok_encode(continuation)
