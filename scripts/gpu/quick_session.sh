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
# sizes that fit (measured on an H100, 2026-11-26: results/gpu/README.md): at batch 1 every prompt is decoded on
# its own, about 20 ms per forward at the 1.5B and 7B shapes (launch-bound), so few prompts and short generations
export MAX_NEW=${MAX_NEW:-64} REPEATS=${REPEATS:-2} WARMUP=${WARMUP:-1} N_PROMPTS=${N_PROMPTS:-4}
export BATCHES=${BATCHES:-"1 4"} FORCED_K=${FORCED_K:-"1 4 16"} SUB_BLOCKS=${SUB_BLOCKS:-8}
export AR_BASELINES=${AR_BASELINES:-hf}
export TRAIN_STEPS_AR=${TRAIN_STEPS_AR:-300} TRAIN_STEPS_BD=${TRAIN_STEPS_BD:-200}
export TRAINED_THRESHOLDS=${TRAINED_THRESHOLDS:-"1.0 0.9 0.7"} TRAINED_SUB_BLOCKS=${TRAINED_SUB_BLOCKS:-8}
export CUDA_TEST_FILES=${CUDA_TEST_FILES:-"tests/test_cuda.py tests/test_masks.py tests/test_telemetry.py"}
export TESTS_ALL=${TESTS_ALL:-0}
mkdir -p "$OUT"
here=$(dirname "$0")
# step:seconds, in order of value: the CUDA paths first, then the measurements
PLAN=${PLAN:-"env:15 tests:60 bw:10 sweep15:130 train:120 trained:60 dist:60 sweep7:60 roofline:20 figure:15"}
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
