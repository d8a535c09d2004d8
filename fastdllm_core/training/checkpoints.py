"""A training run's files: resumable checkpoints (written atomically, the newest ``keep`` kept), the metrics
read back on resume, and the final Hugging Face checkpoint."""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import shutil
from pathlib import Path

import torch

from ..provenance import write_json_atomic
from .config import TrainConfig
from .failures import WriteFailed, any_process, writing


def checkpoints(output_dir: Path) -> list[Path]:
    """The complete checkpoints of a run (``checkpoints/step-N`` with its ``state.json``), oldest first."""
    d = output_dir / "checkpoints"
    if not d.is_dir():
        return []
    cks = [p for p in d.iterdir() if p.name.startswith("step-") and (p / "state.json").is_file()]
    return sorted(cks, key=checkpoint_step)


def checkpoint_step(path: Path) -> int:
    """The optimiser step of checkpoint ``path`` (``.../step-N``)."""
    return int(Path(path).name.split("-")[1])


def save_checkpoint(engine, output_dir: Path, step: int, tokens_seen: int, keep: int, data: dict | None = None,
                    run: dict | None = None) -> None:
    """``checkpoints/step-N``: the engine's state (accelerate's, or FSDP's shards) and ``state.json`` (with ``data``,
    the identity of the token store it was trained on: :func:`~.store_key.check_resume`, and ``run``, the run's
    identity: :func:`~.run_identity.check_same_run`).  The temporary ``.tmp-step-N`` is shared by the run's
    processes; the run's lock keeps other runs out of it.  A write that fails in any process removes it, keeps the
    previous checkpoint and raises :class:`~.failures.WriteFailed` in every process."""
    accelerator = engine.acc
    final = output_dir / "checkpoints" / f"step-{step}"
    tmp = output_dir / "checkpoints" / f".tmp-step-{step}"
    if accelerator.is_main_process and tmp.exists():
        shutil.rmtree(tmp)
    accelerator.wait_for_everyone()
    state = {"step": step, "tokens_seen": tokens_seen, "engine": engine.name, **({"data": data} if data else {}),
             **({"run": run} if run else {})}

    def write():
        engine.save_state(tmp)
        if accelerator.is_main_process:
            write_json_atomic(tmp / "state.json", state)

    together(write, final, "the checkpoint", accelerator, cleanup=lambda: shutil.rmtree(tmp, ignore_errors=True))
    if accelerator.is_main_process:
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        for old in checkpoints(output_dir)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def together(write, path: Path, what: str, accelerator, cleanup=None) -> None:
    """``write()`` in every process, then one agreement: a failed write anywhere (:func:`~.failures.writing`)
    is :class:`~.failures.WriteFailed` everywhere, after ``cleanup()`` in the main process."""
    error = None
    try:
        with writing(path, what):
            write()
    except WriteFailed as exc:
        error = exc
    if any_process(error is not None, accelerator.device):
        if accelerator.is_main_process and cleanup is not None:
            cleanup()
        raise error or WriteFailed(f"{what} {path} could not be written by another process (see its log)")


def read_metrics(path: Path, upto: int) -> list[dict]:
    if not path.is_file():
        return []
    with open(path, newline="") as fh:
        return [r for r in csv.DictReader(fh) if int(r["step"]) <= upto]


def final_dtype(cfg: TrainConfig, device_type: str) -> torch.dtype:
    """The dtype of the final checkpoint: the training dtype -- bf16 when ``train.dtype`` says bf16, or ``auto``
    on a GPU (bf16 mixed precision), as the released checkpoints; else fp32 (a CPU run: its weights as trained)."""
    bf16 = cfg.train.dtype in ("bf16", "bfloat16") or (cfg.train.dtype == "auto" and device_type == "cuda")
    return torch.bfloat16 if bf16 else torch.float32


def save_final(model, tok, cfg: TrainConfig, output_dir: Path, meta: dict, dtype: torch.dtype = torch.float32) -> None:
    """The final Hugging Face checkpoint in ``dtype`` (:func:`final_dtype`), written atomically: a
    block-diffusion model records its block size (``bd_size``), a Dream-recipe model is saved in Dream's release
    format; ``fastdllm_train.json`` holds the resolved config, the recipe and the run's metadata.  The fp32
    master weights stay in the last resumable checkpoint."""
    from .run_lock import unique_dir

    tmp = unique_dir(output_dir, ".final.tmp.")
    try:
        with writing(output_dir / "final", "the final model"):
            _write_final(model, tok, cfg, tmp, meta, dtype)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    final = output_dir / "final"
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)


def _write_final(model, tok, cfg: TrainConfig, tmp: Path, meta: dict, dtype: torch.dtype) -> None:
    model.to(dtype)  # the training is over: the model (or FSDP's gathered copy) is only saved from here
    objective = cfg.spec.objective
    if objective == "bd":
        model.config.bd_size = cfg.objective.block_size
    model.config.use_cache = True
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if objective == "dream":  # Dream's release format: loads as full-attention masked diffusion (Qwen2
        raw = json.loads((tmp / "config.json").read_text())  # weights; its mask_token_id and the logit shift)
        raw.update(model_type="Dream", architectures=["DreamModel"], use_cache=False)
        write_json_atomic(tmp / "config.json", raw)
    write_json_atomic(tmp / "fastdllm_train.json", {"config": cfg.to_dict(), "recipe": dataclasses.asdict(cfg.spec),
                                                    "metadata": meta})
