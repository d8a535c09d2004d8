#!/usr/bin/env bash
# Benchmark (not a test): time the embedded default end to end from a clean checkout, then check that a second
# invocation does nothing.  Usage: bash scripts/time_embedded_default.sh [CORES]   (default 2)
# Writes results/benchmarks/embedded_default_time.json in this checkout (git commit, cores, wall seconds).
set -euo pipefail
cores=${1:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone -q "$here" "$work/repo"
cd "$work/repo"
# ../shared is looked up relative to the checkout: point the clone at the original one
ln -s "$(cd "$here/.." && pwd)/shared" "$work/shared" 2>/dev/null || true
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
start=$(date +%s.%N)
python -m snakemake --cores "$cores" paper_figures > "$work/run.log" 2>&1 || { tail -50 "$work/run.log"; exit 1; }
end=$(date +%s.%N)
second=$(python -m snakemake --cores "$cores" paper_figures -n 2>&1 | grep -c "Nothing to be done" || true)
wall=$(python -c "print(round($end - $start, 1))")
mkdir -p "$here/results/benchmarks"
python - "$here/results/benchmarks/embedded_default_time.json" <<PY
import json, sys, platform, os
from fastdllm_core.provenance import run_metadata, write_json_atomic
write_json_atomic(sys.argv[1], {"wall_s": $wall, "cores": $cores, "second_invocation_nothing_to_do": bool($second),
                                "jobs_log_tail": open("$work/run.log").read().splitlines()[-3:], **run_metadata()})
PY
echo "embedded default: ${wall} s wall on ${cores} cores; second invocation does nothing: $([ "$second" -gt 0 ] && echo yes || echo NO)"
