"""What the run's token store costs against the size of the training set: memory and disk of its build, and the
memory of reading it back as the training steps do (fastdllm_core/training/token_store.py).

For each token count: a chat JSONL of about that many tokens under the released tiny base's tokenizer (rows of
about 750 tokens: an 80-word question, a 300-word answer), then in a fresh process (a) the build
(``build_store``: L = 2048, D = 32, the paper's ``pad`` packing) with its resident memory sampled every 20 ms
apart -- anonymous (``RssAnon``) and file-backed (``RssFile``) of ``/proc/self/status`` -- while this process
samples the size of its run directory as often (the build's temporary disk), and (b) every sequence read once in
batches of 256 in a seeded order, as the steps read them.  One CSV row per size; the slope of each figure per
million tokens (least squares over the sizes) and the value it gives at 1B tokens are printed: an extrapolation,
linear in tokens.

    python scripts/cluster/store_footprint.py --tokens 2e6 8e6 32e6 --out results/cluster/store_footprint.csv
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from fastdllm_core.provenance import write_csv_atomic  # noqa: E402

TOKENIZER = ROOT / "results" / "released" / "tiny_ar_base"
WORDS = ("the value of x is computed by adding each number in the list then return sum because first we define a "
         "function print answer 12 347 59 0 8 = + - * ( ) : if else for while step result total").split()
TOKENS_PER_ROW = 750  # about, with the tiny base's tokenizer (measured by this script: tokens / rows)
FIGURES = ("build_anon_peak_mib", "build_file_peak_mib", "build_hwm_mib", "build_disk_peak_mib", "store_mib",
           "build_s", "read_anon_peak_mib", "read_file_peak_mib")

CHILD = r"""
import json, sys, time
from pathlib import Path
import numpy as np
from fastdllm_core.loading import _load_tokenizer, ensure_mask_token
from fastdllm_core.training import footprint
from fastdllm_core.training.token_store import TokenStore, build_store

data, run, tok_dir = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
tok = _load_tokenizer(tok_dir, None, {"local_files_only": True})
mask = ensure_mask_token(tok)
before = footprint.status()
peak, t0 = footprint.PeakRss(interval=0.02), time.perf_counter()
store = build_store(tok, [data], run / "data", seq_len=2048, block_size=32, packing="pad", pad_id=mask,
                    progress=False)
build_s, build = time.perf_counter() - t0, peak.stop().peaks
hwm = footprint.status()["hwm"]
store_bytes = sum((run / "data" / f).stat().st_size for f in ("ids.u32", "sup.u8"))
order = np.random.default_rng(0).permutation(len(store))
peak = footprint.PeakRss(interval=0.02)
for i in range(0, len(order), 256):
    store.input_ids[order[i:i + 256]], store.labels[order[i:i + 256]]
read = peak.stop().peaks
print(json.dumps({"sequences": len(store), "examples": store.meta["examples"],
                  "example_tokens": (store.meta["build_disk_bytes"] - store_bytes) // 5,
                  "start_anon_mib": before["anon"], "start_file_mib": before["file"], "start_hwm_mib": before["hwm"],
                  "build_anon_peak_mib": build["anon"], "build_file_peak_mib": build["file"], "build_hwm_mib": hwm,
                  "build_disk_bytes_meta": store.meta["build_disk_bytes"],
                  "store_mib": store_bytes / 2**20, "build_s": build_s,
                  "read_anon_peak_mib": read["anon"], "read_file_peak_mib": read["file"]}))
"""


def write_rows(path: Path, tokens: float, seed: int = 0) -> int:
    r, n = random.Random(seed), int(tokens / TOKENS_PER_ROW)
    with open(path, "w") as fh:
        for _ in range(n):
            fh.write(json.dumps({"messages": [
                {"role": "user", "content": " ".join(r.choice(WORDS) for _ in range(80))},
                {"role": "assistant", "content": " ".join(r.choice(WORDS) for _ in range(300))}]}) + "\n")
    return n


def measure(tokens: float, work: Path) -> dict:
    """One size: the child builds and reads; this process samples the size of its run directory (the child's
    memory is not touched by the sampling)."""
    work.mkdir(parents=True)
    rows = write_rows(work / "train.jsonl", tokens)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(work / "train.jsonl"), str(work / "run"),
                              str(TOKENIZER)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1",
                                      TOKENIZERS_PARALLELISM="false"))
    disk = 0
    while child.poll() is None:
        disk = max(disk, _du(work / "run"))
        time.sleep(0.02)
    if child.returncode:
        raise RuntimeError(f"the measuring process failed ({child.returncode})")
    res = json.loads(child.stdout.read().strip().splitlines()[-1])
    res["build_disk_peak_mib"] = disk / 2**20
    return {"target_tokens": int(tokens), "rows": rows, **{k: round(v, 1) if isinstance(v, float) else v
                                                            for k, v in res.items()}, "cpu": platform.machine()}


def _du(d: Path) -> int:
    total = 0
    for f in d.rglob("*") if d.exists() else ():
        try:
            total += f.stat().st_size if f.is_file() else 0
        except OSError:  # removed while counted
            pass
    return total


def extrapolate(rows: list[dict]) -> list[str]:
    """Each figure's least-squares line in example tokens, and its value at 1B tokens."""
    x = np.array([r["example_tokens"] for r in rows], dtype=float) / 1e6
    out = []
    for k in FIGURES:
        slope, icpt = np.polyfit(x, np.array([r[k] for r in rows], dtype=float), 1) if len(rows) > 1 else (0.0, 0.0)
        out.append(f"{k}: {slope:+.3f} per million tokens, {icpt:.1f} at none; extrapolated to 1B tokens: "
                   f"{icpt + slope * 1000:.0f}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=float, nargs="+", default=[2e6, 8e6, 32e6])
    p.add_argument("--out", type=Path, help="CSV of the measurements")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        rows = [measure(t, Path(d) / f"t{i}") for i, t in enumerate(args.tokens)]
    for r in rows:
        print(json.dumps(r))
    for line in extrapolate(rows):
        print(line)
    if args.out:
        write_csv_atomic(args.out, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
