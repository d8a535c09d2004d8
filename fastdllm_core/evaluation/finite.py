"""An evaluation scores only a model whose numbers are finite: weights checked before any item runs
(:func:`nonfinite_weights`), logits watched while it runs (:class:`LogitWatch`).  Either failing turns the task's
rows into ``status = failed`` rows that say why (:func:`failed_rows`), never a score: a NaN model's argmax is token
0 at every position, which a scorer would otherwise count as answers."""
from __future__ import annotations

import torch


def nonfinite_weights(model) -> list[str]:
    """The names of the parameters holding a NaN or an infinity."""
    with torch.no_grad():
        return [n for n, p in model.named_parameters() if not torch.isfinite(p).all()]


class LogitWatch:
    """Records whether any logits the model computes are not finite: a forward hook on its output layer (the
    whole model where it has none) that keeps one flag on the device, read once (:meth:`met`), so that decoding
    gains no synchronisation."""

    def __init__(self, model):
        head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
        self.flag = None
        self.handle = (head if head is not None else model).register_forward_hook(self._hook)

    def _hook(self, module, args, out) -> None:
        logits = getattr(out, "logits", None)
        logits = logits if logits is not None else out[0] if isinstance(out, tuple) else out
        if torch.is_tensor(logits):
            bad = ~torch.isfinite(logits).all()
            self.flag = bad if self.flag is None else self.flag | bad

    def met(self) -> bool:
        return self.flag is not None and bool(self.flag)

    def close(self) -> None:
        self.handle.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def failed_rows(rows: list[dict], reason: str) -> list[dict]:
    """``rows`` (one a metric) as failed rows naming ``reason``; one failed row without a metric when there are
    none (the task did not run)."""
    rows = rows or [{"metric": "", "n": 0}]
    return [{**r, "value": "", "status": "failed", "note": reason} for r in rows]
