#!/usr/bin/env bash
# The device check for a lent GPU (docs/GPU.md): the trainers' smoke check and the training-free
# rows' embedding throughput on a random-init ViT-L/14, rows appended to docs/GPU.md (and the page
# copied to $OUT when the device tool sets it). Arguments pass through:
#   bench/gpu_reproduce_smoke.sh                          # ViT-L-14, 100 steps per trainer, 1024 images
#   bench/gpu_reproduce_smoke.sh --steps 200 --images 4096
# PYTHON picks the interpreter (default: the repo's .venv, else python3 on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3 || command -v python)"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
status=0
"$PY" bench/gpu_reproduce_smoke.py "$@" || status=$?
if [ -n "${OUT:-}" ]; then cp docs/GPU.md "$OUT/GPU.md"; fi
exit "$status"
