#!/usr/bin/env bash
# Benchmark (not a test): time the embedded default end to end from a clean checkout, check that a second
# invocation does nothing, and optionally time it again on a busy machine.
#
#   bash scripts/time_embedded_default.sh [CORES] [--busy N] [--keep DIR]
#
# CORES (default 2): snakemake --cores.  --busy N: after the idle run, run it again from a clean clone while N
# competing processes (each a 2-thread torch matmul loop) keep the machine busy for the whole run; they are
# stopped afterwards.  Writes results/benchmarks/embedded_default_time.json in this checkout: git commit, cores,
# idle and busy wall seconds, and a training speed (steps/s, median over the logged intervals) in each run: the
# AR base's pretraining when the run builds it, else the NTP adaptation's.  --keep DIR: copy the idle run's
# results/ (CSVs, tables, figures, logs; not the checkpoints) to DIR.
set -euo pipefail
cores=2
busy=0
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --busy) busy=${2:?--busy needs a number}; shift 2 ;;
    --keep) keep=${2:?--keep needs a directory}; shift 2 ;;
    *) cores=$1; shift ;;
  esac
done
here=$(cd "$(dirname "$0")/.." && pwd)
commit=$(git -C "$here" rev-parse HEAD)   # what both runs clone (uncommitted changes are not timed)
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false

run_once() {  # $1: label -> prints "<wall seconds> <base steps/s>"
  local dir="$work/$1"
  git clone -q "$here" "$dir/repo" && git -C "$dir/repo" checkout -q "$commit"
  # ../shared is looked up relative to the checkout: point the clone at the original one
  ln -s "$(cd "$here/.." && pwd)/shared" "$dir/shared" 2>/dev/null || true
  cd "$dir/repo"
  # the clone's own code in every job, not an editable install's (pip install -e of another checkout)
  export PYTHONPATH="$dir/repo:$dir/repo/workflow${PYTHONPATH:+:$PYTHONPATH}"
  local start end
  start=$(date +%s.%N)
  python -m snakemake --cores "$cores" paper_figures > "$dir/run.log" 2>&1 || { tail -50 "$dir/run.log" >&2; exit 1; }
  end=$(date +%s.%N)
  # training speed of the first model trained: the AR base's pretraining when the run builds it, else the NTP
  # adaptation (the default loads the released base)
  local metrics=results/tiny/models/ar_pretrained/run/metrics.csv
  [ -f "$metrics" ] || metrics=results/tiny/models/ntp/run/metrics.csv
  python - "$start" "$end" "$metrics" <<'PY'
import csv, statistics, sys
start, end, path = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
rows = list(csv.DictReader(open(path)))
# steps per second of each logged interval: (tokens in the interval / tokens per step) / seconds
per_step = int(rows[0]["tokens_seen"]) / int(rows[0]["step"])
rates = [float(r["tokens_per_s"]) / per_step for r in rows[1:]] or [float(rows[0]["tokens_per_s"]) / per_step]
print(round(end - start, 1), round(statistics.median(rates), 3))
PY
  cd "$here"
}

read -r idle_wall idle_rate < <(run_once idle)
second=$(cd "$work/idle/repo" && PYTHONPATH="$PWD:$PWD/workflow${PYTHONPATH:+:$PYTHONPATH}" \
  python -m snakemake --cores "$cores" paper_figures -n 2>&1 | grep -c "Nothing to be done" || true)
if [ -n "$keep" ]; then
  mkdir -p "$keep"
  (cd "$work/idle/repo" && tar --exclude='*/checkpoints' --exclude='*.safetensors' --exclude='*.bin' -cf - results) \
    | tar -C "$keep" -xf -
fi
busy_wall=None busy_rate=None  # Python literals: the summary below is written by Python
if [ "$busy" -gt 0 ]; then
  for _ in $(seq "$busy"); do
    OMP_NUM_THREADS=2 python -c "
import torch
torch.set_num_threads(2)
a = torch.randn(512, 512)
while True:
    a = torch.tanh(a @ a)
" &
    pids+=($!)
  done
  read -r busy_wall busy_rate < <(run_once busy)
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  pids=()
fi
mkdir -p "$here/results/benchmarks"
python - "$here/results/benchmarks/embedded_default_time.json" <<PY
import json, sys
from fastdllm_core.provenance import run_metadata, write_json_atomic
write_json_atomic(sys.argv[1], {
    "cores": $cores, "idle_wall_s": $idle_wall, "idle_base_train_steps_per_s": $idle_rate,
    "second_invocation_nothing_to_do": bool($second), "competitors": $busy,
    "busy_wall_s": $busy_wall, "busy_base_train_steps_per_s": $busy_rate,
    "competitor": "python: 2-thread torch 512x512 matmul loop" if $busy else None,
    **run_metadata(), "git_commit": "$commit"})
PY
echo "embedded default on ${cores} cores: idle ${idle_wall} s (base training ${idle_rate} steps/s); second invocation does nothing: $([ "$second" -gt 0 ] && echo yes || echo NO)"
if [ "$busy" -gt 0 ]; then
  echo "beside ${busy} competing 2-thread torch process(es): ${busy_wall} s (base training ${busy_rate} steps/s)"
fi
