"""One node's start of a multi-node training job, the command ``srun`` runs once per node
(:func:`~.launch.train_gpus`): fetch the start model into this node's Hugging Face cache, then become the node's
``torchrun`` (``exec``) with ``HF_HUB_OFFLINE=1``, so that its ranks read the cache and none asks the Hub.

    python -m fastdllm_core.training.node_start --init Qwen/Qwen2.5-7B-Instruct -- python -m torch.distributed.run ...
"""
from __future__ import annotations

import argparse
import os
import sys

from .launch import prefetch_init


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" not in argv:
        print("node_start: give the node's command after --", file=sys.stderr)
        return 2
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="python -m fastdllm_core.training.node_start")
    p.add_argument("--init", required=True, help="the start model (a Hub id is fetched; a directory is not)")
    args, command = p.parse_args(argv[:cut]), argv[cut + 1:]
    if not command:
        p.error("no command after --")
    fetched = prefetch_init(args.init)
    print(f"node {os.environ.get('SLURM_NODEID', '?')}: start model {args.init} "
          f"{'in ' + fetched if fetched else 'is local'}", flush=True)
    os.execvpe(command[0], command, dict(os.environ, HF_HUB_OFFLINE="1") if fetched else dict(os.environ))
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
