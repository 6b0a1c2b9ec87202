#!/usr/bin/env bash
# GPU smoke check (docs/GPU.md): 200 steps of PACT, DiCE and PACE each on a random-init ViT-L/14
# with synthetic data; one JSON line per trainer (steps/s, peak memory). Arguments pass through:
#   training/gpu_smoke.sh                       # all three, the vitl14 configs' batch sizes
#   training/gpu_smoke.sh --only pact --pact-stream
# PYTHON picks the interpreter (default: the repo's .venv, else python3 on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3 || command -v python)"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}" OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
exec "$PY" -m training.gpu_smoke "$@"
