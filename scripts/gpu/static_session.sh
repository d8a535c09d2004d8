#!/usr/bin/env bash
# Issue 40 on one GPU, in one device call (~8 minutes): the static decode path (decoding/static.py: static KV cache,
# fixed-shape forwards captured as CUDA graphs) and the compiled one (the same, torch.compile before the capture)
# against the eager one, for the AR baseline and block diffusion, at
# the Qwen2.5-1.5B and 7B shapes (random weights, bf16), side by side in one run per shape.  Each step runs under
# its own time limit; what a step measured before its limit stays (the bench rewrites its CSV after every row).
#
#   bash scripts/gpu/make_wheels.sh                   # here, once: .whl/ (transformers etc.; carry it)
#   bash scripts/gpu/static_session.sh                # there, from the repository root (one call, <= 600 s)
#
# Writes to $OUT (default results/gpu/static): steps.tsv (step, exit, seconds), log_<step>.txt, env.json,
# nvidia-smi.txt, pytest_cuda.txt, bandwidth.txt, static_<shape>.csv and compiled_<shape>.csv (+ _roofline.csv),
# static_real_<shape>.csv.
# The figure is drawn afterwards from the CSVs (scripts/gpu/plot_static.py; no matplotlib needed there).
# PACK=<file>: after every step, everything in $OUT packed into that one .tar.gz (for a tool that returns few files).
# Knobs: BATCHES ("1 4"), BATCHES_LARGE (compiled7's: "1 4"), FORCED_K (4), N_PROMPTS (4), PROMPT_LEN (128),
# MAX_NEW (128), REPEATS (2), WARMUP (1), PLAN (step:seconds ...; or the steps as arguments), MAX_S (560: the most
# the PLAN's limits may add up to, so that the session fits one device call of 600 s), CUDA_TEST_FILES (the static
# paths' CUDA tests), DEVICE (cuda:0), FASTDLLM_COMPILE_SCOPE (the compiled path's scope; CUDA default 'layers'),
# SHAPE_SMALL / SHAPE_LARGE (the two shapes; a dry run on a CPU: DEVICE=cpu SHAPE_SMALL=tiny SHAPE_LARGE=tiny
# MAX_S=9999 bash ... graphs15 real15 compiled7 roofline).
set -uo pipefail

export OUT=${OUT:-results/gpu/static}
export DEVICE=${DEVICE:-cuda:0} BATCHES=${BATCHES:-"1 4"} FORCED_K=${FORCED_K:-4} N_PROMPTS=${N_PROMPTS:-4}
export PROMPT_LEN=${PROMPT_LEN:-128} MAX_NEW=${MAX_NEW:-128} REPEATS=${REPEATS:-2} WARMUP=${WARMUP:-1}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export FASTDLLM=${FASTDLLM:-"python -m fastdllm_core.cli"}
export SHAPE_SMALL=${SHAPE_SMALL:-qwen2.5-1.5b} SHAPE_LARGE=${SHAPE_LARGE:-qwen2.5-7b}   # tiny: a CPU dry run
HERE=$(cd "$(dirname "$0")" && pwd)
export HERE
mkdir -p "$OUT"

step_setup() {  # the carried wheels, only what is missing or at another version than CI's pin (never torch)
  local pin
  pin=$(grep -i '^transformers==' constraints.txt)
  python -c "import transformers, pynvml; assert transformers.__version__ == '${pin#*==}'" 2>/dev/null \
    && { echo "already installed: $pin"; return 0; }
  python -m pip install --no-index --find-links .whl "$pin" nvidia-ml-py
}

# env (nvidia-smi.txt, env.json), the CUDA tests (pytest_cuda.txt; the static path captured: same tokens as eager,
# captured once, OOM named) and the copy bandwidth (bandwidth.txt): run_gpu_session.sh's own steps, into $OUT
step_env() { bash "$HERE/run_gpu_session.sh" env; }
CUDA_TEST_FILES=${CUDA_TEST_FILES:-"tests/test_cuda.py::test_static_paths_capture_once_and_equal_eager_in_fp32 \
  tests/test_cuda.py::test_out_of_memory_while_capturing_is_a_named_error"}
export CUDA_TEST_FILES
step_tests() { TESTS_ALL=0 bash "$HERE/run_gpu_session.sh" tests; }
step_bw() { bash "$HERE/run_gpu_session.sh" bw; }

# AR eager (HF generate) and AR on each of PATHS (default: static, captured) against block diffusion eager and on
# each of PATHS, forced acceptance of FORCED_K tokens per step (so the speed does not depend on the random
# weights), EOS off: every row to MAX_NEW; into $OUT/<prefix>_<shape>.csv
bench_shape() {
  local shape=$1 prefix=${2:-static} paths=${3:-static}
  # shellcheck disable=SC2086
  $FASTDLLM bench --model "random:$shape" --out "$OUT/${prefix}_$shape.csv" --device "$DEVICE" --dtype bfloat16 \
    --attn sdpa --synthetic-prompts "$N_PROMPTS" --prompt-len "$PROMPT_LEN" --max-new-tokens "$MAX_NEW" \
    --ignore-eos --modes ar bd --ar-baselines hf $paths --decode-paths eager $paths --batch-sizes $BATCHES \
    --forced-k $FORCED_K --thresholds 0.9 --sub-block-sizes 8 --sub-block-cache off --grid cross \
    --warmup "$WARMUP" --repeats "$REPEATS" --no-profile --quiet
}
step_graphs15() { bench_shape "$SHAPE_SMALL"; }
step_graphs7() { bench_shape "$SHAPE_LARGE"; }

# the compiled path (each captured shape compiled by torch.compile / Inductor first: fused norms, rotary embedding and
# activation) beside the eager and static paths, AR and block diffusion, in one run per shape, the bench's settings
# above: the two goals of issue 40 the static path missed (7B batch 1 at >= 40 % of the roofline, 1.5B >= 5x eager)
bench_compiled() {
  # Triton builds its kernel launcher with the machine's C compiler: without one every shape runs uncompiled (a log
  # line per shape; the compiled rows then time the static path)
  command -v "${CC:-gcc}" >/dev/null || command -v cc >/dev/null || echo "WARNING: no C compiler on this machine"
  bench_shape "$1" compiled "static compiled"
}
# the 7B at batch 1 (its goal) and 4; on CUDA each shape compiles the decoder layer once for all 28 layers (compile
# scope 'layers'): seconds per shape, where the whole forward took 42-65 s per shape on a 2-core CPU
# (docs/throughput.md, "Two compile scopes")
step_compiled7() { BATCHES=${BATCHES_LARGE:-"1 4"} bench_compiled "$SHAPE_LARGE"; }
step_compiled15() { bench_compiled "$SHAPE_SMALL"; }

# real acceptance on random weights (about one token per forward): do the captured forwards give the eager
# path's tokens?  fp32 (where they should agree exactly) and bf16 (rounding of another kernel), batch 4
step_real15() {
  local dt
  for dt in float32 bfloat16; do
    $FASTDLLM bench --model "random:$SHAPE_SMALL" --out "$OUT/static_real_${SHAPE_SMALL}_$dt.csv" --device "$DEVICE" \
      --dtype "$dt" --attn sdpa --synthetic-prompts 4 --prompt-len "$PROMPT_LEN" --max-new-tokens 64 \
      --modes ar bd --ar-baselines hf static --decode-paths eager static --batch-sizes 4 --thresholds 0.9 \
      --sub-block-sizes 8 --sub-block-cache off on --grid cross --warmup 1 --repeats 1 --no-profile --quiet
  done
}

# where the 7B's block forward loses to AR's one-token forward (issue 40: 34.8% against 46.5% of the roofline):
# one eager decode of each under torch.profiler, time by kind of kernel (scripts/gpu/profile_decode.py); not in the
# default PLAN: `bash scripts/gpu/static_session.sh profile7:150`
step_profile7() {
  local mode
  for mode in bd ar; do
    python scripts/gpu/profile_decode.py --out "$OUT/profile_${SHAPE_LARGE}_$mode" -- --model "random:$SHAPE_LARGE" \
      --out "$OUT/profile_${SHAPE_LARGE}_$mode.csv" --device "$DEVICE" --dtype bfloat16 --attn sdpa \
      --synthetic-prompts 1 --prompt-len "$PROMPT_LEN" --max-new-tokens "$MAX_NEW" --ignore-eos --modes "$mode" \
      --ar-baselines hf --decode-paths eager --batch-sizes 1 --forced-k "$FORCED_K" --thresholds 0.9 \
      --sub-block-sizes 8 --sub-block-cache off --grid cross --warmup 1 --repeats 1 --no-profile --quiet
  done
}

step_roofline() {
  local f
  for f in "$OUT"/static_*.csv "$OUT"/compiled_*.csv; do
    [ -e "$f" ] || continue
    case $f in *_roofline.csv|*static_real_*) continue ;; esac
    $FASTDLLM roofline --bench "$f" --out "${f%.csv}_roofline.csv" --measure-bandwidth --device "$DEVICE"
  done
}

# default: the compiled path's session, the 7B's goal first (the static path's: PLAN="setup:40 env:15 tests:60 bw:10
# graphs15:150 graphs7:170 real15:70 roofline:25", run 2026-11-27 in two calls, results/gpu/static/README.md; its
# steps took 15, 8, 17, 4, 116, 102 and 55 s)
PLAN=${PLAN:-"setup:30 env:10 tests:60 bw:10 compiled7:210 compiled15:190 roofline:20"}
if [ $# -gt 0 ]; then PLAN="$*"; fi
# the device tool runs one command for at most 600 s: a PLAN whose limits add up to more is refused before any step
total=0
for item in $PLAN; do
  limit=${item##*:}
  [ "$limit" = "${item%%:*}" ] && limit=600
  case $limit in ''|*[!0-9]*) echo "static_session.sh: step limit '$item' is not step:seconds" >&2; exit 2 ;; esac
  total=$((total + limit))
done
if [ "$total" -gt "${MAX_S:-560}" ]; then
  echo "static_session.sh: the PLAN's limits add up to ${total} s, over MAX_S=${MAX_S:-560} s" \
    "(one device call: 600 s): $PLAN" >&2
  exit 2
fi
printf 'step\texit\tseconds\n' > "$OUT/steps.tsv"
for item in $PLAN; do
  step=${item%%:*} limit=${item##*:}
  [ "$limit" = "$step" ] && limit=600
  start=$(date +%s)
  echo "=== $step (limit ${limit}s, $(date -u +%T))"
  timeout --kill-after=5 "$limit" bash -c "$(declare -f "step_$step" bench_shape bench_compiled); step_$step" \
    > "$OUT/log_$step.txt" 2>&1
  rc=$?
  printf '%s\t%s\t%s\n' "$step" "$rc" "$(( $(date +%s) - start ))" | tee -a "$OUT/steps.tsv"
  tail -n 8 "$OUT/log_$step.txt"
  # one archive of everything so far, replaced after every step (the device tool returns at most 8 files); built
  # outside $OUT and without the previous archive, so that PACK may lie inside $OUT (tar would otherwise read a file
  # it is writing, warn "file changed as we read it", exit 1 and keep no archive of that step)
  if [ -n "${PACK:-}" ]; then
    part=$(mktemp)
    tar -czf "$part" --exclude="./$(basename "$PACK")" -C "$OUT" . && chmod 644 "$part" && mv "$part" "$PACK" || rm -f "$part"
  fi
done
