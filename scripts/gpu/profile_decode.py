"""Where a decode's time goes, kernel by kernel: one ``fastdllm bench`` run (any of its arguments) under
torch.profiler, its GPU (or CPU) time summed by kind of operation, for the issue-40 question of why the captured
block forward of the 7B reaches 34.8% of the bandwidth roofline where AR's one-token forward reaches 46.5%.

    python scripts/gpu/profile_decode.py --out $OUT/profile_7b_bd -- --model random:qwen2.5-7b --out $OUT/p.csv \\
        --device cuda --dtype bfloat16 --synthetic-prompts 1 --prompt-len 128 --max-new-tokens 128 --ignore-eos \\
        --modes bd --decode-paths eager --batch-sizes 1 --forced-k 4 --thresholds 0.9 --sub-block-sizes 8 \\
        --sub-block-cache off --warmup 1 --repeats 1 --no-profile --quiet

Writes ``<out>_ops.csv`` (every operator: calls, self device time, self CPU time, its kind) and ``<out>_kinds.csv``
(time by kind: matmul, attention, norm/activation, softmax/top-k/sampling, copy/index, other; and the host's
synchronisations: ``cudaStreamSynchronize`` / ``cudaMemcpy*`` calls, each a wait of the CPU for the GPU).  One
run, warm-up included: compare kinds within a run, not across runs.  Profile an eager path (a captured graph
shows as one launch).
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

KINDS = [  # first match wins, on the lower-cased operator name
    ("attention", r"attention|flash|fmha|sdpa|efficient_attention|softmax_backward"),
    ("matmul", r"gemm|matmul|\bmm\b|aten::mm|addmm|bmm|linear|cutlass|sm90_xmma|nvjet"),
    ("softmax/top-k/sampling", r"softmax|topk|sort|argmax|\bmax\b|aten::max|where|multinomial|cumsum"),
    ("norm/activation", r"rms|norm|silu|mul|add|rsqrt|pow|mean|neg|sigmoid|rotary|cos|sin"),
    ("copy/index", r"copy|cat|index|gather|scatter|slice|select|fill|zero|clone|contiguous|to_copy|memcpy|memset"),
]
SYNCS = re.compile(r"cudaStreamSynchronize|cudaDeviceSynchronize|cudaMemcpy(?!Async)|cudaEventSynchronize|"
                   r"aten::item|aten::_local_scalar_dense")


def kind(name: str) -> str:
    low = name.lower()
    return next((k for k, pat in KINDS if re.search(pat, low)), "other")


def _time(ev, *names) -> float:
    """Microseconds: the first attribute of ``names`` the event has (torch renamed cuda_* to device_*)."""
    return float(next((getattr(ev, n) for n in names if hasattr(ev, n)), 0.0))


def summarise(events, out: Path) -> list[dict]:
    from fastdllm_core.provenance import write_csv_atomic

    ops = [{"op": ev.key, "calls": ev.count,
            "self_device_us": _time(ev, "self_device_time_total", "self_cuda_time_total"),
            "self_cpu_us": _time(ev, "self_cpu_time_total"), "kind": kind(ev.key)} for ev in events]
    ops.sort(key=lambda r: (-r["self_device_us"], -r["self_cpu_us"]))
    device = sum(r["self_device_us"] for r in ops) > 0
    col = "self_device_us" if device else "self_cpu_us"
    syncs, kinds = [], {}
    for r in ops:  # a host sync is a wait, not work: counted apart
        if SYNCS.search(r["op"]):
            syncs.append(r)
        else:
            kinds[r["kind"]] = kinds.get(r["kind"], 0.0) + r[col]
    total = sum(kinds.values()) or 1.0
    rows = [{"kind": k, "time": "device" if device else "cpu", "us": round(v, 1), "share": round(v / total, 4)}
            for k, v in sorted(kinds.items(), key=lambda kv: -kv[1])]
    rows.append({"kind": "host syncs (calls)", "time": "calls", "us": sum(r["calls"] for r in syncs),
                 "share": ""})
    write_csv_atomic(out.with_name(out.name + "_ops.csv"), ops)
    write_csv_atomic(out.with_name(out.name + "_kinds.csv"), rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        sys.exit(__doc__)
    cut = argv.index("--")
    p = argparse.ArgumentParser(prog="profile_decode.py")
    p.add_argument("--out", required=True, help="prefix of the two CSVs")
    args, bench_argv = p.parse_args(argv[:cut]), argv[cut + 1:]
    import torch
    from torch.profiler import ProfilerActivity, profile

    from fastdllm_core.cli.bench import main as bench_main

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        rc = bench_main(bench_argv)
    if rc:
        return rc
    for r in summarise(prof.key_averages(), Path(args.out)):
        print(f"{r['kind']:<24} {r['us']:>14} {r['share']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
