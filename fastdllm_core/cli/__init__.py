"""``fastdllm`` command line: ``fastdllm {train,plan-training,generate,bench,eval,lm-eval} ...``.

Each sub-command is a module of this package with its own ``main(argv)``; the arguments they share (the model,
the decoding setting, prompt files) are declared once in :mod:`.args`.  This file only dispatches.
"""
from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "train": ("fastdllm_core.cli.train", "adapt a causal LM to block diffusion (or NTP fine-tune) from a YAML config"),
    "generate": ("fastdllm_core.cli.generate", "generate with the block-diffusion decoder or the AR baseline"),
    "bench": ("fastdllm_core.cli.bench", "throughput sweep: AR vs block diffusion, one CSV row per configuration"),
    "plan-training": ("fastdllm_core.cli.plan_training",
                      "the training plan on paper: memory per GPU (DDP / FSDP), accumulation, GPU-hours"),
    "roofline": ("fastdllm_core.cli.roofline", "memory-bandwidth roofline of AR and diffusion throughput rows"),
    "eval": ("fastdllm_core.cli.eval", "score a model on a task (lm-eval / EvalPlus / synthetic)"),
    "lm-eval": ("fastdllm_core.cli.lm_eval", "lm-eval's own CLI with the fast_dllm_v2 model registered"),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: fastdllm {" + ",".join(COMMANDS) + "} ...\n")
        for name, (_, doc) in COMMANDS.items():
            print(f"  {name:<13} {doc}")
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd not in COMMANDS:
        print(f"fastdllm: unknown command {cmd!r}; choose from {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    from .. import cpu_numerics

    cpu_numerics.pin()  # before torch's first kernel (fastdllm_core.cpu_numerics)
    module = importlib.import_module(COMMANDS[cmd][0])
    return int(module.main(rest) or 0)
