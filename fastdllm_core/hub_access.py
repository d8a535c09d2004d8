"""Refusals of the Hugging Face Hub as errors that name the repository and the fix.

A gated model or dataset (``meta-llama/Llama-3.2-1B-Instruct``, GPQA's ``Idavidrein/gpqa``) is downloaded only by
an account that accepted its licence on the repository's Hub page, with that account's token in ``HF_TOKEN``.
``huggingface_hub`` says so with :class:`~huggingface_hub.errors.GatedRepoError` (401/403), an unknown or private
id with :class:`~huggingface_hub.errors.RepositoryNotFoundError`; ``transformers`` and ``datasets`` re-raise them
as ``OSError`` / ``DatasetNotFoundError`` with the original as the cause.  :func:`refusal` finds one anywhere in
the chain; :func:`hub_guard` turns it into :class:`HubAccessError`.
"""
from __future__ import annotations

import contextlib
import re


class HubAccessError(RuntimeError):
    """The Hub refused a download; the message names the repository, why, and the fix."""

    def __init__(self, message: str, repo_id: str, kind: str):
        super().__init__(message)
        self.repo_id, self.kind, self.reason = repo_id, kind, message


def _chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def refusal(exc: BaseException) -> str | None:
    """Why the Hub refused (``gated``, ``not found or private``, ``HTTP 401`` / ``HTTP 403``), or None when
    ``exc`` is not a refusal."""
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    chain = list(_chain(exc))
    for e in chain:  # the typed errors first, wherever they are in the chain
        if isinstance(e, GatedRepoError):
            return "gated"
        if isinstance(e, RepositoryNotFoundError):
            return "not found or private"
        status = getattr(getattr(e, "response", None), "status_code", None)
        if status in (401, 403):
            return f"HTTP {status}"
    for e in chain:  # datasets' DatasetNotFoundError: "Dataset '...' is a gated dataset on the Hub. ..."
        if re.search(r"\bgated\b", str(e), re.IGNORECASE):
            return "gated"
    return None


def fix_text(repo_id: str, kind: str) -> str:
    page = f"https://huggingface.co/{'datasets/' if kind == 'dataset' else ''}{repo_id}"
    return (f"accept the licence of {repo_id} on its Hub page {page} (logged in), then set HF_TOKEN to a read "
            f"token of that account (export HF_TOKEN=hf_...); or point the config at a local copy")


def describe_refusal(exc: BaseException, repo_id: str, kind: str) -> str:
    """One line for ``exc``: the refusal and its fix, or the exception itself when it is not a refusal."""
    why = refusal(exc)
    if why is None:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return f"the Hugging Face Hub refused {kind} {repo_id} ({why}): {fix_text(repo_id, kind)}"


@contextlib.contextmanager
def hub_guard(repo_id: str, kind: str = "model"):
    """Re-raise a Hub refusal inside the block as :class:`HubAccessError` (other errors pass unchanged)."""
    try:
        yield
    except HubAccessError:
        raise
    except Exception as exc:
        if refusal(exc) is None:
            raise
        raise HubAccessError(describe_refusal(exc, repo_id, kind), repo_id, kind) from exc
