#!/usr/bin/env bash
# The real-data pipeline, rehearsed end to end on the generated world, offline:
#
#   world --export--> image-caption manifest --build_itt (rules)--> ITT JSONL
#         --> PACT, compose-only, DiCE trained from the ITT file (data=itt:FILE)
#   world --export--> L-CIRR train split --> PACE (data=lcirr:ROOT)
#   (validation and Chord's λ on the CIRR / L-CIRR export of the val split)
#   --> evaluated on the CIRR-format export of the test split, beside the same methods trained
#       natively on the world with the same settings, steps and seed
#   --> pushed with `cir_core.hub push` to a folder remote
#   --> `python app.py --checkpoints <that remote>` answers with the pushed checkpoints
#
# Every step is the command a researcher runs on real data; only the files come from the world.
#
#   training/rehearse_real.sh [OUT]          full scale: the tiny configs as shipped (~2-3 h, 2 cores)
#   REHEARSAL_SCALE=tiny training/rehearse_real.sh OUT   a few dozen steps (the test suite runs this)
#
# Environment: PYTHON (default python), REHEARSAL_SCALE (full | tiny), SEED (default 0),
# NATIVE_CHECKPOINTS (a folder of <method>/ checkpoints trained natively with the same configs,
# e.g. assets/methods for the shipped ones at full scale; default: train them here too, validated
# on the same val split), PARALLEL=1 (train the rehearsal and the native methods side by side,
# logs in OUT/logs/; the configs use one thread each).
# The report (report.md, report.json) lands in OUT; docs/RESULTS.md quotes the full run.
set -euo pipefail

OUT=${1:-runs/rehearsal}
PY=${PYTHON:-python}
SCALE=${REHEARSAL_SCALE:-full}
SEED=${SEED:-0}
export HF_HUB_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False
cd "$(dirname "$0")/.."
. training/lib/lanes.sh  # two_lanes

case "$SCALE" in
  full)
    N_TRAIN=20000; N_VAL=500; N_TEST=1000
    PACT_ARGS=(); DICE_ARGS=(); PACE_ARGS=() ;;
  tiny)
    N_TRAIN=120; N_VAL=24; N_TEST=30
    PACT_ARGS=(identity_steps=8 joint_steps=16 batch_size=16 replay_batch=8 identity_warmup=2 joint_warmup=2
               eval_every=1000 ckpt_every=1000 log_every=8)
    DICE_ARGS=(steps=24 warmup=4 batch_size=32 eval_every=1000 ckpt_every=1000 log_every=8)
    PACE_ARGS=(steps=24 warmup=4 batch_size=16 bank_size=64 eval_every=1000 ckpt_every=1000 log_every=8) ;;
  *) echo "REHEARSAL_SCALE must be full or tiny, got $SCALE" >&2; exit 2 ;;
esac

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
step() { echo; echo "== [$(date +%T), ${SECONDS}s] $*"; }
export_world() {  # FORMAT SPLIT N DIR: the world in an official layout (skipped when already there)
  [ -f "$4/world_export.json" ] || $PY -m cir_core.world.export "$1" --split "$2" --n-queries "$3" --out "$4" --quiet
}

step "1. the world as real data: an image-caption manifest, L-CIRR train, CIRR / L-CIRR val and test"
export_world itt train "$N_TRAIN" "$OUT/data/manifest"        # captions.jsonl + images/
export_world lcirr train "$N_TRAIN" "$OUT/data/lcirr-train"   # lcirr/train.jsonl over CIRR's train layout
export_world cirr val "$N_VAL" "$OUT/data/cirr-val"
export_world lcirr val "$N_VAL" "$OUT/data/lcirr-val"
export_world cirr test "$N_TEST" "$OUT/data/cirr-test"

step "2. ITT triplets from the manifest's captions (rules, one edit per caption)"
ITT="$OUT/data/itt/itt.jsonl"
mkdir -p "$OUT/data/itt"
$PY -m training.build_itt --manifest "$OUT/data/manifest/captions.jsonl" --out "$ITT" --per-caption 1 \
    --seed "$SEED" --quiet
$PY -m training.build_itt --validate "$ITT"

step "3. training: real-format data, then the same settings on the native world"
common=(seed="$SEED" data_seed="$SEED" n_train="$N_TRAIN")
train() {  # MODULE CONFIG NAME KIND EXTRA...: one method, rehearsal (KIND=real) or native
  local module=$1 config=$2 name=$3 kind=$4; shift 4
  $PY -m "training.$module" --config "training/configs/$config" "${common[@]}" \
      out_dir="$OUT/runs/$kind/$name" export_dir="$OUT/methods-$kind/$name" "$@"
}
ITT_DATA=(data="itt:$ITT" image_root="$OUT/data/manifest")
VAL=(val="cirr:$OUT/data/cirr-val")          # the world's val split, as CIRR: λ and validation
PACE_VAL=(val="lcirr:$OUT/data/lcirr-val")
train_real() {
  train train_pact pact_tiny.json pact real "${ITT_DATA[@]}" "${VAL[@]}" "${PACT_ARGS[@]}"
  train train_pact compose_only_tiny.json compose-only real "${ITT_DATA[@]}" "${VAL[@]}" "${PACT_ARGS[@]}"
  train train_dice dice_tiny.json dice real "${ITT_DATA[@]}" "${VAL[@]}" "${DICE_ARGS[@]}"
  # PACE on whole texts (prefix_fraction=0, as pace_vitl14.json): real data has no intermediate
  # targets, so the tiny recipe's prefix training could not run on it, nor be the same as native
  train train_pace pace_tiny.json pace real data="lcirr:$OUT/data/lcirr-train" prefix_fraction=0 "${PACE_VAL[@]}" "${PACE_ARGS[@]}"
}
train_native() {  # the configs' own data (the world's training stream), the same val split
  train train_pact pact_tiny.json pact native "${VAL[@]}" "${PACT_ARGS[@]}"
  train train_pact compose_only_tiny.json compose-only native "${VAL[@]}" "${PACT_ARGS[@]}"
  train train_dice dice_tiny.json dice native "${VAL[@]}" "${DICE_ARGS[@]}"
  # the world alone (no films), as the L-CIRR export holds it: the same training as the rehearsal
  train train_pace pace_tiny.json pace native data=world:films=0 prefix_fraction=0 "${PACE_VAL[@]}" "${PACE_ARGS[@]}"
}
NATIVE=${NATIVE_CHECKPOINTS:-}
if [ -n "$NATIVE" ]; then
  train_real
elif [ "${PARALLEL:-0}" = 1 ]; then
  mkdir -p "$OUT/logs"
  two_lanes train_real "$OUT/logs/train-real.log" train_native "$OUT/logs/train-native.log" || exit $?
  grep -h '"exported"' "$OUT/logs/train-real.log" "$OUT/logs/train-native.log"
else
  train_real
  train_native
fi
[ -n "$NATIVE" ] || NATIVE="$OUT/methods-native"

step "4. evaluation on the CIRR-format export of the test split (and the world's own, for identity@1)"
METHODS=pact,compose-only,dice,pace,sum
for kind in real native; do
  ck=$OUT/methods-real; [ "$kind" = native ] && ck=$NATIVE
  $PY -m cir_core.eval --benchmark cirr --root "$OUT/data/cirr-test" --split test --checkpoints "$ck" \
      --methods "$METHODS" --json "$OUT/eval-cirr-$kind.json"
  $PY -m cir_core.eval --benchmark world --split test --n-queries "$N_TEST" --checkpoints "$ck" \
      --methods "$METHODS" --json "$OUT/eval-world-$kind.json"
done

step "5. push the rehearsal's checkpoints to a folder remote, then the app loads them from it"
export CIR_LOCAL_HUB="$OUT/hub"
$PY -m cir_core.hub push methods "$OUT/methods-real" rehearsal/cir-methods --tag "seed$SEED" \
    --message "rehearse_real.sh ($SCALE, seed $SEED)"
$PY -m training.rehearsal_report app --checkpoints "rehearsal/cir-methods@seed$SEED" \
    --expect "$OUT/methods-real" --out "$OUT/app-check.json"

step "6. report"
$PY -m training.rehearsal_report report --out "$OUT" --scale "$SCALE" --seed "$SEED" --native "$NATIVE"
