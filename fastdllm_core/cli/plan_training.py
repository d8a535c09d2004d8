"""``fastdllm plan-training --configfile config/paper.yaml [--gpus 64 --gpu-mem-gb 80 --nodes 8]``: the training
plan on paper (:mod:`fastdllm_core.training.memory`) of every model the DAG trains under that config -- tokens,
gradient accumulation, per-GPU memory under DDP and FSDP, the engine, and the time the paper's wall clock implies.
Exits 1 naming the model and the numbers when a plan does not fit.

The config files are merged as Snakemake merges ``--configfile`` s (over config/config.yaml unless the first says
``standalone: true``), and each model's training config is resolved by the DAG's own code
(``workflow/fastdllm_dag/plan/models.py``: ``expand_seeds``, ``trained_models``, ``training_config``).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from ..training.config import TrainConfig, merge_config
from ..training.memory import GB, HEADROOM, PAPER_GPUS, PAPER_WALL_HOURS, model_config, plan_training

REPO = Path(__file__).resolve().parents[2]
PLAN_KEYS = ("gpus", "gpu_mem_gb", "nodes")


def dag_plan():
    """The DAG's plan, ``fastdllm_dag.plan.models`` (imported, not copied)."""
    from fastdllm_dag.plan import models as plan

    return plan


def load_config(files: list[str]) -> dict:
    """The ``--configfile`` s merged in order, over config/config.yaml unless ``standalone: true``."""
    over: dict = {}
    for f in files:
        p = Path(f)
        if not p.is_file():
            raise ValueError(f"--configfile {f}: file not found")
        over = merge_config(over, yaml.safe_load(p.read_text()) or {})
    config = over if over.get("standalone") else merge_config(
        yaml.safe_load((REPO / "config" / "config.yaml").read_text()), over)
    from fastdllm_dag.plan import checks as plan_checks

    try:  # the DAG's schema: a bad key or value named before any planning
        plan_checks.validate_schema(config, REPO / "workflow" / "schemas" / "config.schema.yaml")
    except plan_checks.ConfigError as exc:
        raise ValueError(f"config: {exc}") from None
    return config


def hardware(config: dict, args) -> tuple[int, float, int]:
    """(gpus, GB per GPU, nodes): the flags, else the config's ``training_plan:``; a missing one is an error."""
    tp = config.get("training_plan") or {}
    out = []
    for key in PLAN_KEYS:
        v = getattr(args, key)
        v = tp.get(key) if v is None else v
        if v is None:
            raise ValueError(f"give --{key.replace('_', '-')} or training_plan.{key} in the config")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0 or (key != "gpu_mem_gb" and v != int(v)):
            raise ValueError(f"--{key.replace('_', '-')} / training_plan.{key} must be a positive "
                             f"{'number' if key == 'gpu_mem_gb' else 'integer'}, got {v!r}")
        out.append(v if key == "gpu_mem_gb" else int(v))
    return out[0], float(out[1]), out[2]


def model_plans(config: dict, gpus: int, gpu_gb: float, nodes: int, engine: str,
                released: bool = False) -> list[tuple[str, str, object]]:
    """(model, init, TrainingPlan) of every model the DAG trains under ``config``; with ``released`` also those
    with a ``train:`` block that load their released checkpoint (planned as if ``use_released: false``)."""
    plan = dag_plan()
    if released:
        config = dict(config, models={n: (dict(m, use_released=False) if "train" in m else m)
                                      for n, m in config["models"].items()})
    config = plan.expand_seeds(config)
    out = []
    for name in plan.trained_models(config):
        raw = plan.training_config(config, name, plan.train_files(config, name))
        try:
            cfg = TrainConfig.from_dict(raw, check_files=False)
            p = plan_training(cfg, model_config(cfg.model.init), gpus, int(gpu_gb * GB), nodes, engine=engine)
        except ValueError as exc:
            raise ValueError(f"models.{name}: {exc}") from None
        out.append((name, cfg.model.init, p))
    if not out:
        raise ValueError("no model of this config is trained (every train: block has use_released: true)")
    return out


def _gb(b: int) -> str:
    return f"{b / GB:.1f}"


def table(rows: list[tuple[str, str, object]]) -> str:
    """A Markdown table, one row per trained model."""
    head = ("model", "init", "params", "tokens", "steps x batch", "micro x GPUs x accum", "DDP GB/GPU",
            "FSDP GB/GPU", "engine", "fits", "wall h", "GPU-h")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, init, p in rows:
        cells = (name, init, f"{p.n_params / 1e9:.2f}B", f"{p.tokens / 1e9:.2f}B", f"{p.steps} x {p.global_batch}",
                 f"{p.micro_batch} x {p.gpus} x {p.accumulation}", _gb(p.ddp.total), _gb(p.fsdp.total),
                 p.engine, "yes" if p.fits else "NO", f"{p.wall_hours:.1f}", f"{p.gpu_hours:.0f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def breakdown(rows) -> str:
    """The chosen engine's memory, term by term."""
    out = []
    for name, _, p in rows:
        m = p.used
        out.append(f"{name} ({p.engine}): params {_gb(m.params)} + compute copy {_gb(m.compute_copy)} + grads "
                   f"{_gb(m.grads)} + AdamW {_gb(m.optimizer)} + activations {_gb(m.activations)} + logits "
                   f"{_gb(m.logits)}{f' + DDP buckets {_gb(m.buckets)}' if m.buckets else ''} = {_gb(m.total)} GB "
                   f"(x{HEADROOM} = {_gb(int(m.total * HEADROOM))} of "
                   f"{_gb(p.gpu_bytes)} GB)")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fastdllm plan-training", description=__doc__.split("\n\n")[0])
    p.add_argument("--configfile", nargs="+", required=True, help="the DAG's config file(s), merged in order")
    p.add_argument("--gpus", type=int, default=None, help="GPUs in all (default: training_plan.gpus)")
    p.add_argument("--gpu-mem-gb", dest="gpu_mem_gb", type=float, default=None,
                   help="memory per GPU in GB (default: training_plan.gpu_mem_gb)")
    p.add_argument("--nodes", type=int, default=None, help="nodes (default: training_plan.nodes)")
    p.add_argument("--engine", choices=("auto", "ddp", "fsdp"), default="auto",
                   help="auto: DDP when 16 B/param x 1.2 fits a GPU, else FSDP")
    p.add_argument("--include-released", action="store_true",
                   help="also plan the models that load a released checkpoint (use_released: true), from their "
                        "train: block (the paper's own Fast-dLLM v2 runs)")
    args = p.parse_args(argv)
    try:
        config = load_config(args.configfile)
        gpus, gpu_gb, nodes = hardware(config, args)
        rows = model_plans(config, gpus, gpu_gb, nodes, args.engine, args.include_released)
    except ValueError as exc:
        print(f"fastdllm plan-training: error: {exc}", file=sys.stderr)
        return 2
    print(f"{gpus} GPUs of {gpu_gb:g} GB on {nodes} node(s); per-process memory of one micro-batch in flight "
          f"(fastdllm_core/training/memory.py)\n")
    print(table(rows) + "\n")
    print(breakdown(rows) + "\n")
    print(f"Time: extrapolated from the paper's wall clock ({PAPER_GPUS} A100: {PAPER_WALL_HOURS['1.5B']:g} h for "
          f"1.5B, {PAPER_WALL_HOURS['7B']:g} h for 7B, recipe bd_pad_cm), linear in tokens and {PAPER_GPUS}/GPUs; "
          "an upper bound for the other recipes (fewer tokens through the model per sequence).")
    bad = [(n, pl) for n, _, pl in rows if not pl.fits]
    for n, pl in bad:
        print(f"fastdllm plan-training: models.{n} does not fit: {pl.reason}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
