#!/usr/bin/env bash
# The GPU session in about 9 minutes (one device call): every step of run_gpu_session.sh at reduced sizes, each
# under its own time limit so that one slow or broken step cannot take the others' time; what a step measured
# before its limit stays (its CSV is rewritten atomically after every row).  Writes results to $RESULTS
# (default results/gpu), a log per step, and steps.tsv (step, exit status, seconds).
#
#   bash scripts/gpu/quick_session.sh                     # from the repository root, on a machine with a CUDA GPU
#
# Without the package installed (a bare GPU machine): FASTDLLM="python -m fastdllm_core.cli" and PYTHONPATH=.
set -uo pipefail

export OUT=${RESULTS:-results/gpu}
export MAX_NEW=${MAX_NEW:-128} REPEATS=${REPEATS:-3} WARMUP=${WARMUP:-1} N_PROMPTS=${N_PROMPTS:-32}
export BATCHES=${BATCHES:-"1 32"} FORCED_K=${FORCED_K:-"1 2 4 8 16"} SUB_BLOCKS=${SUB_BLOCKS:-8}
export AR_BASELINES=${AR_BASELINES:-hf}
export TRAIN_STEPS_AR=${TRAIN_STEPS_AR:-500} TRAIN_STEPS_BD=${TRAIN_STEPS_BD:-300}
export TRAINED_THRESHOLDS=${TRAINED_THRESHOLDS:-"1.0 0.9 0.7"} TRAINED_SUB_BLOCKS=${TRAINED_SUB_BLOCKS:-8}
export CUDA_TEST_FILES=${CUDA_TEST_FILES:-"tests/test_cuda.py tests/test_masks.py tests/test_telemetry.py"}
export TESTS_ALL=${TESTS_ALL:-0}
mkdir -p "$OUT"
here=$(dirname "$0")
# step:seconds, in order of value: the CUDA paths first, then the measurements
PLAN=${PLAN:-"env:25 tests:70 bw:15 dist:90 sweep15:110 train:100 trained:60 sweep7:40 roofline:15 figure:15"}
printf 'step\texit\tseconds\n' > "$OUT/steps.tsv"
for item in $PLAN; do
  step=${item%%:*} limit=${item##*:}
  start=$(date +%s)
  echo "=== $step (limit ${limit}s, $(date -u +%T))"
  timeout --kill-after=5 "$limit" bash "$here/run_gpu_session.sh" "$step" > "$OUT/log_$step.txt" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$step" "$rc" "$(( $(date +%s) - start ))" | tee -a "$OUT/steps.tsv"
  tail -n 5 "$OUT/log_$step.txt"
done
