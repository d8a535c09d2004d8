"""The training plan's per-process memory (fastdllm_core.training.memory) against the peak of a real CPU run
(issue 39, item 4): one optimiser step of each configuration in a fresh process (fp32 on the CPU, the same
model code, objective and AdamW as the training loop), its peak resident memory above the process' memory just
before training (which already holds the weights), plus the weights, against the plan's total for that process.
The configurations are tiny Qwen2 models sized so that one term dominates: the logits (a large vocabulary), the
activations (long sequences) and the weights and optimiser (wide layers).  DDP over 2 processes (gloo) adds its
gradient buckets.

    python scripts/cluster/plan_vs_measured.py --out results/cluster/plan_vs_measured.csv
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from fastdllm_core.provenance import write_csv_atomic  # noqa: E402

CASES = {  # name: (tiny model, recipe, L, micro batch, processes)
    "logits": ({"vocab_size": 32768, "hidden_size": 64, "layers": 2, "heads": 4, "kv_heads": 2,
                "intermediate_size": 128}, "bd_pad_cm", 512, 4, 1),
    "activations": ({"vocab_size": 512, "hidden_size": 256, "layers": 4, "heads": 4, "kv_heads": 2,
                     "intermediate_size": 768}, "bd_pad_cm", 2048, 4, 1),
    "weights": ({"vocab_size": 4096, "hidden_size": 1024, "layers": 8, "heads": 8, "kv_heads": 2,
                 "intermediate_size": 4096, "tie_word_embeddings": False}, "ntp", 64, 1, 1),
    "weights_ddp2": ({"vocab_size": 4096, "hidden_size": 1024, "layers": 8, "heads": 8, "kv_heads": 2,
                      "intermediate_size": 4096, "tie_word_embeddings": False}, "ntp", 64, 1, 2),
}

CHILD = r'''
import json, os, resource, sys, torch
from fastdllm_core.tiny import tiny_model, tiny_qwen2_config
from fastdllm_core.training import objective as obj
from fastdllm_core.training.config import TrainConfig
from fastdllm_core.training.memory import Arch, memory
spec = json.loads(sys.argv[1])
torch.set_num_threads(1)
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    torch.distributed.init_process_group("gloo")
cfg = TrainConfig.from_dict({"recipe": spec["recipe"], "data": {"train_files": ["x"], "seq_len": spec["L"]},
                             "objective": {"block_size": 32}, "optim": {"batch_size": spec["micro"] * world,
                             "micro_batch_size": spec["micro"]}, "train": {"device": "cpu", "dtype": "float32"}},
                            check_files=False)
model = tiny_model(tiny_qwen2_config(**spec["model"]), seed=0)
model.train()
n = sum(p.numel() for p in model.parameters())
if world > 1:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(0)
ids = torch.randint(4, spec["model"]["vocab_size"], (spec["micro"], spec["L"]), generator=g)
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
base = rss()
if spec["recipe"] == "ntp":
    loss, _ = obj.ntp_loss_sum(model, ids, ids)
else:
    x, lab, m = obj.noise_batch(ids, ids, block_size=32, eps=1e-3, complementary=True,
                                generators=[obj.sample_generator(0, 0, i) for i in range(spec["micro"])])
    loss, _ = obj.bd_loss_sum(model, x, m, 3, 32)
loss.backward()
opt.step()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
raw = model.module if world > 1 else model
plan = memory(cfg, Arch.from_config(raw.config.to_dict()), "ddp", world)
if int(os.environ.get("RANK", "0")) == 0:
    print(json.dumps({"params": n, "measured_bytes": peak - base + 4 * n, "plan_bytes": plan.total,
                      "plan_terms": {k: getattr(plan, k) for k in ("params", "compute_copy", "grads", "optimizer",
                                     "activations", "logits", "buckets")}}))
'''


def run(case: str) -> dict:
    model, recipe, L, micro, procs = CASES[case]
    spec = json.dumps({"model": model, "recipe": recipe, "L": L, "micro": micro})
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
        fh.write(CHILD)
    cmd = [sys.executable, fh.name, spec] if procs == 1 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(procs), fh.name, spec]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    finally:
        os.unlink(fh.name)
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    out = json.loads(res.stdout.strip().splitlines()[-1])
    return {"case": case, "recipe": recipe, "seq_len": L, "micro_batch": micro, "processes": procs,
            "params": out["params"], "measured_mib": round(out["measured_bytes"] / 2**20, 1),
            "plan_mib": round(out["plan_bytes"] / 2**20, 1),
            "plan_over_measured": round(out["plan_bytes"] / out["measured_bytes"], 3),
            **{f"plan_{k}_mib": round(v / 2**20, 1) for k, v in out["plan_terms"].items()},
            "cpu": platform.processor() or platform.machine()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    a = p.parse_args()
    rows = []
    for case in a.cases:
        rows.append(run(case))
        print(rows[-1], flush=True)
        write_csv_atomic(a.out, rows)


if __name__ == "__main__":
    main()
