#!/usr/bin/env bash
# Ablations recorded in docs/RESULTS.md: PACT's Table 3 configurations and DiCE without each loss
# / without EMA, all on the tiny world, each then evaluated on the test split.
# Two lanes (one thread each) so it fits 2 cores; ~30 min on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export HF_HUB_OFFLINE=1
A=runs/ablations
mkdir -p "$A"
# The trainers' modules and shipped recipes come from the trainer catalogue (training/trainers.py).
PACT_MODULE=$($PY -m training.trainers module pact) PACT_CONFIG=$($PY -m training.trainers config pact)
DICE_MODULE=$($PY -m training.trainers module dice) DICE_CONFIG=$($PY -m training.trainers config dice)
pact() {  # name objective [extra overrides]
  local name=$1 obj=$2; shift 2
  $PY -m "$PACT_MODULE" --config "$PACT_CONFIG" objective="$obj" \
      out_dir="$A/$name" export_dir="$A/$name/export" "$@" > "$A/$name.log" 2>&1
}
dice() {  # name [overrides]
  local name=$1; shift
  $PY -m "$DICE_MODULE" --config "$DICE_CONFIG" \
      out_dir="$A/$name" export_dir="$A/$name/export" "$@" > "$A/$name.log" 2>&1
}
( pact pact-preserve preserve; dice dice-no-align w_align=0; dice dice-no-delta w_delta=0 ) &
( pact pact-compose-visual compose+visual visual_weight=1.0; dice dice-no-ctr w_ctr=0; dice dice-no-ema ema=0 ) &
wait
for run in pact-preserve:pact pact-compose-visual:pact dice-no-align:dice dice-no-delta:dice dice-no-ctr:dice dice-no-ema:dice; do
  name=${run%%:*} method=${run##*:}
  $PY -m cir_core.eval --methods "$method" --checkpoint "$method=$A/$name/export" \
      --json "$A/$name.eval.json" > "$A/$name.eval.txt" 2>&1
done
echo "ablations done: $A/*.eval.json"
