"""Peak resident memory of the training data path against the size of the set (issue 39, item 1).

For each size: a local copy of the LLaMA-Nemotron SFT layout in the dataset's own schema (five subsets, chat and
safety short of their share as in the real set, think-trace rows the default drops, one malformed row per
subset), the adaptation set built from it (``adaptation_data.build``), then 2 training processes (torchrun,
gloo, one thread each) from the released tiny base for a few steps: the main process tokenizes and packs into
the run's token store, both read their batches from it; then a resume, which reuses the store.  For comparison,
the packing of the previous code path (every row and sequence in Python lists: ``build_dataset``) in one process.
Every phase runs in a fresh process and reports its own ``ru_maxrss``; the training processes also the peaks of
their anonymous and file-backed resident memory (``anon_peak_mib``, ``file_peak_mib``: the log line of
``fastdllm_core.training.loop``).

    python scripts/cluster/data_memory.py --tokens 1e7 4e7 --out results/cluster/data_memory.csv
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from fastdllm_core.provenance import write_csv_atomic  # noqa: E402

BASE = ROOT / "results" / "released" / "tiny_ar_base"
WORDS = ("the value of x is computed by adding each number in the list then return sum because first we define a "
         "function print answer 12 347 59 0 8 = + - * ( ) : if else for while step result total").split()
SHARES = {"code": 0.3, "math": 0.3, "science": 0.3, "chat": 0.05, "safety": 0.05}  # of the rows written
TOKENS_PER_ROW = 750  # about, with the tiny base's tokenizer (measured)
PEAK = re.compile(r"process (\d+): peak resident memory (\d+) MiB")
PARTS = re.compile(r"process (\d+): peak resident memory \d+ MiB \(ru_maxrss; anonymous peak (\d+) MiB, file-backed "
                   r"peak (\d+) MiB\)")


def write_source(root: Path, tokens: float, seed: int = 0) -> None:
    """SFT/<subset>/part-0.jsonl with about 1.6 x ``tokens`` in the dataset's schema."""
    r = random.Random(seed)
    rows = int(1.6 * tokens / TOKENS_PER_ROW)
    for subset, share in SHARES.items():
        d = root / "SFT" / subset
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "part-0.jsonl", "w") as fh:
            fh.write('{"input": [{"role": "user", "content": "cut short\n')  # malformed: skipped, counted
            for i in range(int(rows * share)):
                on = i % 10 == 0  # a think-trace row: not eligible under reasoning "off"
                out = " ".join(r.choice(WORDS) for _ in range(300))
                row = {"input": [{"role": "user", "content": " ".join(r.choice(WORDS) for _ in range(80))}],
                       "output": f"<think>{out}</think>" if on else out, "reasoning": "on" if on else "off",
                       "system_prompt": f"detailed thinking {'on' if on else 'off'}", "category": subset,
                       "license": "cc-by-4.0", "generator": "data_memory.py", "used_in_training": ["Nano"],
                       "version": "v1"}
                fh.write(json.dumps(row) + "\n")


def child(code: str) -> tuple[dict, float]:
    """Run ``code`` in a fresh Python; it prints one JSON line, to which its peak memory (and its largest child
process') is added."""
    tail = ("\nimport json, resource; out['peak_rss_mib'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024"
            "\nout['children_peak_rss_mib'] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024"
            "\nprint(json.dumps(out))")
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code + tail], capture_output=True, text=True, cwd=ROOT)
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1]), time.perf_counter() - t


def build_set(work: Path, tokens: float) -> tuple[dict, float]:
    cfg = {"local_dir": str(work / "src"), "token_budget": tokens, "seed": 0}
    code = (f"from transformers import AutoTokenizer\nfrom fastdllm_core.training import adaptation_data as ad\n"
            f"m = ad.build({cfg!r}, AutoTokenizer.from_pretrained({str(BASE)!r}), {str(work / 'adapt.jsonl')!r},"
            f" progress=False)\nout = {{k: m[k] for k in ('rows', 'tokens', 'shortfall_tokens', 'malformed_rows')}}"
            f"\nout['redistributed'] = {{s: v['redistributed_tokens'] for s, v in m['subsets'].items()}}")
    return child(code)


def in_memory(work: Path) -> tuple[dict, float]:
    code = (f"from transformers import AutoTokenizer\nfrom fastdllm_core.training.data import build_dataset, "
            f"read_train_files\nfrom fastdllm_core.loading import ensure_mask_token\n"
            f"tok = AutoTokenizer.from_pretrained({str(BASE)!r})\nmask = ensure_mask_token(tok)\n"
            f"ds = build_dataset(tok, read_train_files([{str(work / 'adapt.jsonl')!r}]), seq_len=256, "
            f"block_size=32, packing='pad', pad_id=mask)\nout = {{'sequences': len(ds)}}")
    return child(code)


def train(work: Path, steps: int) -> tuple[dict, float]:
    cfg = {"recipe": "bd_pad_cm", "model": {"init": str(BASE), "mask_init": "zero"},
           "data": {"train_files": [str(work / "adapt.jsonl")], "seq_len": 256}, "objective": {"block_size": 32},
           "optim": {"lr": 1e-4, "warmup_steps": 1, "max_steps": steps, "batch_size": 4, "micro_batch_size": 2},
           "train": {"device": "cpu", "save_every": 2, "log_every": 1, "seed": 0}}
    (work / "train.yaml").write_text(yaml.safe_dump(cfg))
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
           "fastdllm_core.cli", "train", "--config", str(work / "train.yaml"), "--output-dir", str(work / "run"),
           "--no-progress"]
    t = time.perf_counter()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    if res.returncode:
        raise RuntimeError(res.stderr[-3000:])
    peaks = {int(a): float(b) for a, b in PEAK.findall(res.stderr)}
    parts = {int(a): (float(b), float(c)) for a, b, c in PARTS.findall(res.stderr)}
    meta = json.loads((work / "run" / "data" / "meta.json").read_text())
    return {"peaks": peaks, "parts": parts, "sequences": meta["sequences"],
            "store_mtime_ns": (work / "run" / "data" / "meta.json")
            .stat().st_mtime_ns}, time.perf_counter() - t


def measure(tokens: float, work: Path) -> list[dict]:
    work.mkdir(parents=True, exist_ok=True)
    write_source(work / "src", tokens)
    built, t_build = build_set(work, tokens)
    print(f"{tokens:.0e}: adaptation set {built} in {t_build:.0f} s", flush=True)
    first, t_first = train(work, 2)
    again, t_again = train(work, 4)  # resumes from step 2; the store is reused
    old, t_old = in_memory(work)
    common = {"target_tokens": int(tokens), "set_tokens": built["tokens"], "set_rows": built["rows"],
              "packed_sequences": first["sequences"], "cpu": platform.processor() or platform.machine()}
    rows = [dict(common, phase="adaptation_build", process=0, peak_rss_mib=round(built["peak_rss_mib"]),
                 wall_s=round(t_build, 1), note=f"largest worker process {built['children_peak_rss_mib']:.0f} MiB, "
                                                f"shortfall {built['shortfall_tokens']}, malformed "
                                                f"{built['malformed_rows']}, redistributed {built['redistributed']}")]
    for phase, r, t in (("train_2proc_builds_store", first, t_first), ("resume_2proc_reuses_store", again, t_again)):
        rows += [dict(common, phase=phase, process=p, peak_rss_mib=round(v),
                      anon_peak_mib=round(r["parts"][p][0]) if p in r["parts"] else "",
                      file_peak_mib=round(r["parts"][p][1]) if p in r["parts"] else "", wall_s=round(t, 1),
                      note=("store built" if r is first else "store reused" if again["store_mtime_ns"] ==
                            first["store_mtime_ns"] else "store rebuilt"))
                 for p, v in sorted(r["peaks"].items())]
    rows.append(dict(common, phase="in_memory_build_dataset (before)", process=0,
                     peak_rss_mib=round(old["peak_rss_mib"]),
                     wall_s=round(t_old, 1), note=f"{old['sequences']} sequences"))
    for r in rows:
        print(r, flush=True)
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=float, nargs="+", default=[1e7, 4e7])
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, default=Path("/tmp/data_memory"))
    a = p.parse_args()
    rows = []
    for n in a.tokens:
        rows += measure(n, a.work / f"{n:.0e}")
        write_csv_atomic(a.out, rows)


if __name__ == "__main__":
    main()
