"""How the data-parallel processes hold the model (``train.engine``): DDP or FSDP2, both torch's own.

* ``ddp``: every process holds the whole model; accelerate wraps it in ``DistributedDataParallel`` (bf16 autocast
  over fp32 weights on CUDA); checkpoints are accelerate's ``save_state``.
* ``fsdp``: ``torch.distributed.fsdp.fully_shard`` on every decoder layer and on the root, so that weights,
  gradients and AdamW states are sharded over the processes (on CUDA: bf16 compute, fp32 master weights and fp32
  gradient reduction, ``MixedPrecisionPolicy``); checkpoints are sharded (``torch.distributed.checkpoint``),
  the final model is gathered on rank 0.
* ``auto``: :func:`.memory.choose_engine`: DDP when the plan's DDP memory fits the device, else FSDP.

With one process there is nothing to shard or synchronise: the single-process path (``ddp``) whatever the
setting, so single-process numerics never depend on it.
"""
from __future__ import annotations

import contextlib
import os

import torch

from .memory import Arch, choose_engine


def device_bytes(device: torch.device, world: int) -> int:
    """The memory one process may use: its GPU's, or on the CPU the physical RAM shared by ``world`` processes."""
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory)
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) // world


def resolve(cfg, model, accelerator) -> str:
    """The engine a run uses: ``train.engine``, ``auto`` decided by :func:`.memory.choose_engine` on the run's
    config and the model's architecture (the plan's own fit verdict)."""
    world, setting = accelerator.num_processes, cfg.train.engine
    if world == 1:
        return "ddp"
    if setting != "auto":
        return setting
    arch = Arch.from_config(model.config.to_dict())
    return choose_engine(cfg, arch, device_bytes(accelerator.device, world), world)


class DDP:
    """accelerate's DDP (or the plain model with one process)."""
    name = "ddp"

    def __init__(self, accelerator):
        self.acc = accelerator

    def prepare(self, model, make_optimizer):
        """The model and its optimizer and lr schedule (``make_optimizer(model)``) ready for training.  The
        schedule is stepped once per optimiser step by the loop (accelerate's wrapper would step it once per
        process, assuming a sharded dataloader); it is registered so that checkpoints hold its state."""
        optimizer, scheduler = make_optimizer(model)
        model, optimizer = self.acc.prepare(model, optimizer)
        self.acc.register_for_checkpointing(scheduler)
        return model, optimizer, scheduler

    def raw(self, model):
        return self.acc.unwrap_model(model)

    def sync(self, model, last: bool):
        """The context of a micro-batch's forward and backward: no gradient all-reduce but on the last one."""
        if self.acc.num_processes > 1 and not last:
            return self.acc.no_sync(model)
        return contextlib.nullcontext()

    def autocast(self):
        return self.acc.autocast()

    def backward(self, loss):
        self.acc.backward(loss)

    def clip(self, model, max_norm: float):
        return self.acc.clip_grad_norm_(model.parameters(), max_norm)

    def save_state(self, path) -> None:
        self.acc.save_state(str(path))

    def load_state(self, path) -> None:
        self.acc.load_state(str(path))

    def full_state_dict(self, model):
        return None  # the raw model on rank 0 is the whole model


class FSDP(DDP):
    """FSDP2: ``fully_shard`` per decoder layer and on the root."""
    name = "fsdp"

    def prepare(self, model, make_optimizer):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        self.model_class = type(model)  # fully_shard swaps the class for an FSDP subclass
        cuda = self.acc.device.type == "cuda"
        mesh = init_device_mesh(self.acc.device.type, (self.acc.num_processes,))
        bf16 = cuda and self.acc.mixed_precision == "bf16"
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else \
            MixedPrecisionPolicy()
        layer_names = set(getattr(model, "_no_split_modules", None) or ())
        layers = [m for m in model.modules() if type(m).__name__ in layer_names]
        if not layers:
            raise ValueError(f"train.engine=fsdp: no decoder layer ({sorted(layer_names)}) in {type(model).__name__}")
        for layer in layers:
            fully_shard(layer, mesh=mesh, mp_policy=mp)
        fully_shard(model, mesh=mesh, mp_policy=mp)
        self.model = model
        self.optimizer, self.scheduler = make_optimizer(model)
        return model, self.optimizer, self.scheduler

    def raw(self, model):
        return model

    def sync(self, model, last: bool):
        model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()

    def autocast(self):
        return contextlib.nullcontext()  # the MixedPrecisionPolicy casts

    def backward(self, loss):
        loss.backward()

    def clip(self, model, max_norm: float):
        """Clip to the global gradient norm over every shard (a sharded gradient's norm is a partial DTensor)."""
        from torch.distributed.tensor import DTensor

        params = [p for p in model.parameters() if p.grad is not None]
        total = torch.nn.utils.get_total_norm([p.grad for p in params], 2.0)
        if isinstance(total, DTensor):
            total = total.full_tensor()
        torch.nn.utils.clip_grads_with_norm_(params, max_norm, total)
        return total

    def save_state(self, path) -> None:
        """Each process writes its shards (``dcp/``); rank 0 the lr schedule's state."""
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict

        msd, osd = get_state_dict(self.model, self.optimizer)
        dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(path / "dcp"))
        if self.acc.is_main_process:
            torch.save(self.scheduler.state_dict(), path / "scheduler.pt")

    def load_state(self, path) -> None:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

        msd, osd = get_state_dict(self.model, self.optimizer)
        state = {"model": msd, "optim": osd}
        dcp.load(state, checkpoint_id=str(path / "dcp"))
        set_state_dict(self.model, self.optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        self.scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))

    def full_state_dict(self, model):
        """The whole model, gathered on rank 0 into a fresh unsharded copy (a collective: every rank calls it);
        None on the other ranks."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        sd = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if not self.acc.is_main_process:
            return None
        full = self.model_class(model.config)
        full.load_state_dict(sd)
        return full


def make_engine(name: str, accelerator):
    return {"ddp": DDP, "fsdp": FSDP}[name](accelerator)
