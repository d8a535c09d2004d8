#!/usr/bin/env bash
# The wheels a bare GPU machine needs to run scripts/gpu/*.sh, downloaded here into .whl/ (git-ignored) for its
# Python (3.12 on the machines lent so far: results/gpu/env.json) and carried there; it has torch with CUDA but
# reaches no package registry.  torch itself is never downloaded (the machine's own CUDA build is used).
#
#   bash scripts/gpu/make_wheels.sh            # then carry .whl (the device tool's carry argument)
#   PYVER=3.11 bash scripts/gpu/make_wheels.sh # another Python
#
# On the GPU machine: pip install --no-index --find-links .whl transformers==<pinned> nvidia-ml-py
set -euo pipefail
cd "$(dirname "$0")/../.."
PYVER=${PYVER:-3.12}
DEST=${DEST:-.whl}
pin() { grep -i "^$1==" constraints.txt | head -n1; }   # the versions CI tested
mkdir -p "$DEST"
# transformers and its dependencies (none of them is torch), NVML for the energy counter, matplotlib for figures
python -m pip download --quiet --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  --platform manylinux_2_34_x86_64 --platform any -d "$DEST" \
  "$(pin transformers)" "$(pin nvidia-ml-py)" "$(pin tqdm)" "$(pin pyyaml)"
rm -f "$DEST"/torch-* "$DEST"/nvidia_*cu* "$DEST"/triton-*   # never a second torch
du -sh "$DEST"
ls "$DEST"
