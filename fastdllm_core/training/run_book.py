"""The bookkeeping of a training run (:class:`RunBook`): its range of steps with a progress bar, its metrics rows,
its checkpoints (each with the run's and the data's identity), its stop after a step, and what a diverged run
leaves (:mod:`.failures`)."""
from __future__ import annotations

import logging
import time
from pathlib import Path

import torch

from ..hostload import HostLoad
from ..provenance import run_metadata, write_csv_atomic, write_json_atomic
from . import footprint
from .checkpoints import checkpoints, read_metrics, save_checkpoint, together
from .config import TrainConfig
from .failures import MARKER, NonFinitePolicy, TrainingDiverged, weights_finite
from .stopping import TrainingInterrupted

log = logging.getLogger(__name__)


class RunBook:
    """What a run records as it goes: metrics rows, checkpoints, the stop after a step, a divergence."""

    def __init__(self, cfg: TrainConfig, engine, output_dir: Path, start_step: int, tokens_seen: int,
                 stop_after: int | None, progress: bool, data: dict | None = None, memory=None,
                 run: dict | None = None, model=None):
        from tqdm.auto import tqdm

        self.model = model  # its weights are checked before each checkpoint
        self.data, self.run = data, run  # the token store's and the run's identity, recorded in every checkpoint
        self.engine, accelerator = engine, engine.acc
        world, o = accelerator.num_processes, cfg.optim
        self.cfg, self.acc, self.output_dir, self.tokens_seen = cfg, accelerator, output_dir, tokens_seen
        self.metrics_path = output_dir / "metrics.csv"
        self.metrics = read_metrics(self.metrics_path, start_step)
        full = cfg.to_dict()
        self.meta = run_metadata({k: full[k] for k in ("recipe", "model", "data", "objective", "optim")},
                                 cfg.train.seed, str(accelerator.device))
        self.n_micro = o.batch_size // o.micro_batch_size
        self.my_micros = list(range(accelerator.process_index, self.n_micro, world))
        self.end = o.max_steps if stop_after is None else min(o.max_steps, start_step + stop_after)
        self.nonfinite = NonFinitePolicy(cfg.train.nonfinite_skips)
        self.bar = tqdm(range(start_step, self.end), initial=start_step, total=o.max_steps,
                        desc=f"train {cfg.recipe}", disable=not (progress and accelerator.is_main_process),
                        dynamic_ncols=True)
        self.clock = _Clock(tokens_seen, HostLoad(processes=world).start(), memory)  # and how busy the machine was

    def skip(self, step: int, loss: float, grad_norm) -> bool:
        """Whether step ``step``'s update is skipped (non-finite, within ``train.nonfinite_skips``); a diverged
        run stops here (:meth:`diverged`)."""
        try:
            skipped = self.nonfinite.skip(step + 1, loss, grad_norm, self.last_checkpoint())
        except TrainingDiverged as exc:
            raise self.diverged(exc) from None
        if skipped:
            log.warning("step %d: loss %s, gradient norm %s: update skipped (%d of train.nonfinite_skips=%d)",
                        step + 1, loss, None if grad_norm is None else float(grad_norm), self.nonfinite.skipped,
                        self.nonfinite.skips)
        return skipped

    def last_checkpoint(self) -> Path | None:
        cks = checkpoints(self.output_dir)
        return cks[-1] if cks else None

    def diverged(self, exc: TrainingDiverged) -> TrainingDiverged:
        """Record the divergence (``diverged.json``, main process) and return it, to be raised."""
        if self.acc.is_main_process:
            write_json_atomic(self.output_dir / MARKER, {"step": exc.step, "what": exc.what, "run": self.run,
                                                         "checkpoint": str(exc.checkpoint or "")})
        log.error("%s", exc)
        return exc

    def done_step(self, step: int, loss: float, lr: float, grad_norm, norm: int, n_seq: int) -> float:
        """Count the step's tokens; a metrics row every ``train.log_every`` steps and at the end; a checkpoint
        every ``train.save_every`` steps and at the end.  Returns the seconds the checkpoint took (0 if none)."""
        t, total = self.cfg.train, self.cfg.optim.max_steps
        self.tokens_seen += n_seq * self.cfg.data.seq_len
        done = step + 1
        if done % t.log_every == 0 or done == total or done == self.end:
            tps = self.clock.tokens_per_s(self.tokens_seen)
            self.metrics.append({"step": done, "loss": round(loss, 6), "lr": lr,
                                 "grad_norm": "" if grad_norm is None else round(float(grad_norm), 6),
                                 "supervised_tokens": norm, "tokens_seen": self.tokens_seen,
                                 "tokens_per_s": round(tps, 2),
                                 **self.clock.context(self.cfg.recipe, self.acc.num_processes),
                                 "engine": self.engine.name, **self.meta})

            def write():
                if self.acc.is_main_process:
                    write_csv_atomic(self.metrics_path, self.metrics)

            together(write, self.metrics_path, "the metrics", self.acc)
            self.bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{tps:.0f}")
        if done % t.save_every == 0 or done == self.end:
            t0 = time.perf_counter()
            self.checkpoint(done)
            return time.perf_counter() - t0
        return 0.0

    def checkpoint(self, done: int) -> None:
        """``checkpoints/step-<done>``, once the weights are known to be finite (else the run has diverged)."""
        if self.model is not None and not weights_finite(self.model, self.acc.device):
            raise self.diverged(TrainingDiverged(done, "the weights are no longer finite", self.last_checkpoint()))
        save_checkpoint(self.engine, self.output_dir, done, self.tokens_seen, self.cfg.train.keep_checkpoints,
                        self.data, self.run)

    def interrupt(self, done: int, reason: str, saved: bool) -> None:
        """Stop after step ``done``: its checkpoint (unless this step wrote one), then :class:`TrainingInterrupted`."""
        if not saved:
            self.checkpoint(done)
        log.warning("stopping after step %d: %s", done, reason)
        raise TrainingInterrupted(done, reason, self.output_dir / "checkpoints" / f"step-{done}")


class _Clock:
    """Tokens per second over each logged interval, with the host's load sampled over the same interval."""

    def __init__(self, tokens_seen: int, host: HostLoad, memory=None):
        self.t_last, self.tok_last, self.host, self.memory = time.perf_counter(), tokens_seen, host, memory

    def tokens_per_s(self, tokens_seen: int) -> float:
        now = time.perf_counter()
        tps = (tokens_seen - self.tok_last) / max(now - self.t_last, 1e-9)
        self.t_last, self.tok_last = now, tokens_seen
        return tps

    def context(self, recipe: str, world: int) -> dict:
        """The run's columns of a metrics row: recipe, processes, threads, the peak resident memory (total, and
        its anonymous and file-backed parts where the platform tells them: :mod:`.footprint`), and the host's load
        since the last."""
        peaks = self.memory.peaks if self.memory is not None else {}
        return {"recipe": recipe, "world_size": world, "torch_threads": torch.get_num_threads(),
                "peak_rss_mib": round(peak_rss_mib(), 1),
                **{f"peak_rss_{k}_mib": round(peaks[k], 1) for k in ("anon", "file") if k in peaks},
                **self.host.sample()}


peak_rss_mib = footprint.peak_rss_mib
