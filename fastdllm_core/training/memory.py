"""Training memory: which engine a run needs (:func:`choose_engine`)."""
from __future__ import annotations


def choose_engine(n_params: int, device_bytes: int, world_size: int) -> str:
    """``"ddp"`` when every process can hold the unsharded fp32 weights, gradients and both AdamW states
    (16 bytes per parameter) with ~20% headroom in ``device_bytes``, else ``"fsdp"`` (shard them over the
    ``world_size`` processes).  With one process there is nothing to shard over: ``"ddp"`` (a single process)."""
    for name, v in (("n_params", n_params), ("device_bytes", device_bytes), ("world_size", world_size)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"choose_engine: {name} must be a positive integer, got {v!r}")
    if world_size == 1 or n_params * 16 * 1.2 <= device_bytes:
        return "ddp"
    return "fsdp"
