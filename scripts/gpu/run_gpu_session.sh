#!/usr/bin/env bash
# GPU session for issue 6 (and the GPU half of issue 3 §6): CUDA tests, NVML-logged throughput sweeps at real
# Qwen2.5 shapes (random weights), a small block-diffusion model trained on this GPU (real acceptance), rooflines,
# and fig_gpu_batch_throughput.  Run from the repository root on a machine with one CUDA GPU:
#
#   bash scripts/gpu/run_gpu_session.sh all          # everything (an H100 needs roughly an hour)
#   bash scripts/gpu/run_gpu_session.sh STEP ...     # steps: env tests bw dist sweep15 sweep7 train trained roofline figure
#
# Knobs (environment): OUT (results/gpu), DEVICE (cuda:0), MAX_NEW (256), PROMPT_LEN (128), REPEATS (3),
# WARMUP (1), BATCHES ("1 4 16 32 64"), FORCED_K ("1 2 4 8 16"), AR_BASELINES ("hf hf_static"), SUB_BLOCKS ("8 16"),
# TRAIN_STEPS_AR (1500), TRAIN_STEPS_BD (1000), TRAINED_THRESHOLDS ("1.0 0.95 0.9 0.8 0.7 0.5"),
# TRAINED_SUB_BLOCKS ("2 4 8 16 32"), N_PROMPTS (64), CUDA_TEST_FILES (all), TESTS_ALL (1), FASTDLLM (the CLI: "fastdllm"; "python -m fastdllm_core.cli"
# without the package installed).  A short run within a few minutes of device time: scripts/gpu/quick_session.sh.
# Every CSV row carries device, driver, CUDA/torch/transformers versions and the git commit (run_metadata) and the
# NVML columns (energy per token from the energy counter).  Each step rewrites its CSV atomically after every row,
# so an interrupted step keeps what it measured.
set -euo pipefail

OUT=${OUT:-results/gpu}
DEVICE=${DEVICE:-cuda:0}
MAX_NEW=${MAX_NEW:-256}
PROMPT_LEN=${PROMPT_LEN:-128}
REPEATS=${REPEATS:-3}
WARMUP=${WARMUP:-1}
BATCHES=${BATCHES:-"1 4 16 32 64"}
FORCED_K=${FORCED_K:-"1 2 4 8 16"}
TRAIN_STEPS_AR=${TRAIN_STEPS_AR:-1500}
TRAIN_STEPS_BD=${TRAIN_STEPS_BD:-1000}
AR_BASELINES=${AR_BASELINES:-"hf hf_static"}
SUB_BLOCKS=${SUB_BLOCKS:-"8 16"}
TRAINED_THRESHOLDS=${TRAINED_THRESHOLDS:-"1.0 0.95 0.9 0.8 0.7 0.5"}
TRAINED_SUB_BLOCKS=${TRAINED_SUB_BLOCKS:-"2 4 8 16 32"}
N_PROMPTS=${N_PROMPTS:-64}
TRAIN_DEVICE=${TRAIN_DEVICE:-cuda}
TRAIN_CONFIG=${TRAIN_CONFIG:-scripts/gpu/train_small.yaml}
FASTDLLM=${FASTDLLM:-fastdllm}
CUDA_TEST_FILES=${CUDA_TEST_FILES:-}   # empty: every test file (the CUDA-marked tests among them)
TESTS_ALL=${TESTS_ALL:-1}               # 1: the whole suite after the CUDA tests
WORK=${WORK:-$OUT/work}       # trained checkpoints and generated data (large; not committed)
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT" "$WORK"

step_env() {
  nvidia-smi | tee "$OUT/nvidia-smi.txt"
  python - <<'EOF' | tee "$OUT/env.json"
import json, torch, transformers
import torch.nn.attention.flex_attention  # noqa: F401  (a submodule: hasattr alone does not import it)
from fastdllm_core.provenance import run_metadata
from fastdllm_core.bench.telemetry import NvmlSampler
s = NvmlSampler("cuda:0")
print(json.dumps({"meta": run_metadata(device="cuda:0"), "nvml": s.device_info, "nvml_reason": s.reason,
                  "flex_attention": hasattr(torch.nn.attention, "flex_attention")}, indent=2, default=str))
EOF
}

step_tests() {
  # the CUDA tests of the suite (flex-attention masks equal dense, bf16 training step, bf16 decoding), then all
  # shellcheck disable=SC2086
  python -m pytest -q -m cuda -rs $CUDA_TEST_FILES 2>&1 | tee "$OUT/pytest_cuda.txt"
  if [ "$TESTS_ALL" = 1 ]; then python -m pytest -q -x 2>&1 | tail -n 30 | tee "$OUT/pytest_all.txt"; fi
}

step_bw() {
  python - <<EOF | tee "$OUT/bandwidth.txt"
import torch
from fastdllm_core.bench.roofline import measure_bandwidth, spec_bandwidth
name = torch.cuda.get_device_name(torch.device("$DEVICE"))
bw = measure_bandwidth("$DEVICE", nbytes=1 << 30, iters=20)
print(f"device={name} measured_d2d_copy_gbs={bw:.1f} vendor_spec_gbs={spec_bandwidth(name)}")
EOF
}

# AR (HF dynamic cache and static cache + torch.compile) vs block diffusion with forced acceptance k tokens/step
sweep_shape() {
  local shape=$1 out=$2
  # shellcheck disable=SC2086
  $FASTDLLM bench --model "random:$shape" --out "$out" --device "$DEVICE" --dtype bfloat16 --attn sdpa \
    --synthetic-prompts "$N_PROMPTS" --prompt-len "$PROMPT_LEN" --max-new-tokens "$MAX_NEW" --ignore-eos \
    --modes ar bd --ar-baselines $AR_BASELINES --batch-sizes $BATCHES --forced-k $FORCED_K \
    --thresholds 0.9 --sub-block-sizes $SUB_BLOCKS --sub-block-cache off on --grid cross \
    --warmup "$WARMUP" --repeats "$REPEATS"
}
step_sweep15() { sweep_shape qwen2.5-1.5b "$OUT/bench_qwen2.5-1.5b_random.csv"; }
step_sweep7() { sweep_shape qwen2.5-7b "$OUT/bench_qwen2.5-7b_random.csv"; }

# A small model trained on this GPU (bf16): AR pre-training on the synthetic suite's pretraining text and instruct
# rows, then the paper's block-diffusion recipe (pad + complementary masks) on its adaptation rows; its acceptance
# is real.
step_train() {
  python -c "from fastdllm_core.synthetic import write_suite
print(write_suite('$WORK/data', seed=0, n_eval=64, n_pretrain=4000, n_sft=1000, n_adapt=2000))"
  $FASTDLLM train --config "$TRAIN_CONFIG" --output-dir "$WORK/ar_base" --max-steps "$TRAIN_STEPS_AR" \
    --set recipe=ar_pretrain --set model.init=tiny --set "data.train_files=[$WORK/data/pretrain.jsonl,$WORK/data/sft.jsonl]" \
    --set optim.lr=0.001 --set "train.device=$TRAIN_DEVICE" --no-progress
  $FASTDLLM train --config "$TRAIN_CONFIG" --output-dir "$WORK/bd_pad_cm" --max-steps "$TRAIN_STEPS_BD" \
    --set recipe=bd_pad_cm --set "model.init=$WORK/ar_base/final" --set "data.train_files=[$WORK/data/adapt.jsonl]" \
    --set optim.lr=0.0003 --set "train.device=$TRAIN_DEVICE" --no-progress
  cp "$WORK/ar_base/metrics.csv" "$OUT/train_ar_base_metrics.csv"
  cp "$WORK/bd_pad_cm/metrics.csv" "$OUT/train_bd_pad_cm_metrics.csv"
}

# The cluster path on this node: torchrun (torch's own launcher) with one process per GPU over NCCL, FSDP2 then DDP,
# bf16, the small model; FSDP2 stopped after 6 steps (--stop-after) and resumed from its checkpoint to 12.
# Metrics: dist_{fsdp,ddp}_metrics.csv (engine, world size and device in every row).
step_dist() {
  python -c "from fastdllm_core.synthetic import write_suite
print(write_suite('$WORK/dist_data', seed=0, n_eval=4, n_pretrain=10, n_sft=10, n_adapt=300))"
  local n engine files="[$WORK/dist_data/adapt.jsonl]"
  n=${NPROC:-$(nvidia-smi -L | wc -l)}
  for engine in fsdp ddp; do
    local args=(train --config "$TRAIN_CONFIG" --output-dir "$WORK/dist_$engine" --max-steps 12
      --set recipe=bd_pad_cm --set model.init=tiny --set "data.train_files=$files" --set "train.device=$TRAIN_DEVICE"
      --set "train.engine=$engine" --set train.save_every=6 --set optim.warmup_steps=2 --set optim.batch_size=16
      --set optim.micro_batch_size=8 --set train.log_every=2 --no-progress)
    if [ "$engine" = fsdp ]; then
      python -m torch.distributed.run --standalone --nproc-per-node "$n" -m fastdllm_core.cli "${args[@]}" --stop-after 6
    fi
    python -m torch.distributed.run --standalone --nproc-per-node "$n" -m fastdllm_core.cli "${args[@]}"
    cp "$WORK/dist_$engine/metrics.csv" "$OUT/dist_${engine}_metrics.csv"
  done
}

step_trained() {
  # real acceptance: thresholds, sub-block sizes, sub-block cache on/off, batch sizes; AR = HF greedy on the same
  # model (both baselines); prompts: the synthetic arithmetic test questions, chat-templated
  # shellcheck disable=SC2086
  $FASTDLLM bench --model "$WORK/bd_pad_cm/final" --model-label "bd_pad_cm (trained on GPU)" \
    --out "$OUT/bench_trained_small.csv" --device "$DEVICE" --dtype bfloat16 --attn sdpa \
    --prompts "$WORK/data/arith_test.jsonl" --n-prompts "$N_PROMPTS" --max-new-tokens "$MAX_NEW" \
    --modes ar bd --ar-baselines $AR_BASELINES --batch-sizes $BATCHES \
    --thresholds $TRAINED_THRESHOLDS --sub-block-sizes $TRAINED_SUB_BLOCKS --sub-block-cache off on --grid axes \
    --warmup "$WARMUP" --repeats "$REPEATS"
}

step_roofline() {
  for f in "$OUT"/bench_*.csv; do
    $FASTDLLM roofline --bench "$f" --out "${f%.csv}_roofline.csv" --measure-bandwidth --device "$DEVICE"
  done
}

step_figure() {
  python scripts/gpu/plot_batch_throughput.py --results "$OUT" --out "$OUT/fig_gpu_batch_throughput"
}

steps=("$@")
if [ ${#steps[@]} -eq 0 ] || [ "${steps[0]}" = all ]; then
  steps=(env tests bw dist sweep15 sweep7 train trained roofline figure)
fi
for s in "${steps[@]}"; do
  echo "=== step $s ($(date -u +%FT%TZ))"
  "step_$s"
done
