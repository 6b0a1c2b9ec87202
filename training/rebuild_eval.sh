#!/usr/bin/env bash
# The evaluations docs/RESULTS.md reports, on whatever is installed in assets/ (rebuild.sh's step
# 4, runnable alone once the methods are trained): the world's test split in one lane, the film
# world's test split (104 films, 102,903 keyframes: embedded once, cached) in the other, one
# thread each. Every file RESULTS.md links is copied to docs/results/ only once its command
# succeeded.
#
#   training/rebuild_eval.sh [OUT]        # OUT: reports (default runs/rebuild)
#
# Environment: SEEDS (default 0,1,2), PYTHON (default .venv/bin/python), LANES (2; 1: one after
# the other; world or films: that lane alone). Each lane's seed table comes last: everything before
# it needs only the shipped seed 0, so a lane can start while later seeds still train.
set -euo pipefail
cd "$(dirname "$0")/.."
. training/lib/lanes.sh  # two_lanes
OUT=${1:-runs/rebuild}
SEEDS=${SEEDS:-0,1,2}
PY=${PYTHON:-.venv/bin/python}
export HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1
mkdir -p "$OUT" docs/results
PEERS=pact,compose-only,dice,pace,sum,pic2word,searle,lincir
step() { echo "== [$(date +%T)] $*"; }
# ship FILE...: copy reports from $OUT into docs/results/ (called only after their command succeeded)
ship() { for f in "$@"; do cp "$OUT/$f" docs/results/; done; }

world() {
  step "world: the seed-0 table (every registered method)"
  $PY -m cir_core.eval --progression --json "$OUT/eval_test.json" > "$OUT/eval_test.txt" || return
  ship eval_test.json eval_test.txt
  step "world: Chord's correction analysis"
  $PY -m studies.chord_analysis --methods $PEERS --json docs/results/chord_analysis.json \
      --plot docs/img/chord_correction.png > "$OUT/chord_analysis.txt" || return
  ship chord_analysis.txt
  step "world: CIReVL and RTD beside their peers"
  $PY -m cir_core.eval --methods sum lincir cirevl --json "$OUT/eval_cirevl.json" > "$OUT/eval_cirevl.txt" || return
  ship eval_cirevl.json eval_cirevl.txt
  local p
  for p in lincir pic2word searle; do
    $PY -m cir_core.eval --methods $p rtd-$p --json "$OUT/eval_rtd_$p.json" > "$OUT/eval_rtd_$p.txt" || return
    ship "eval_rtd_$p.json" "eval_rtd_$p.txt"
  done
  step "world: what one inverted token carries (why the peers lose, issue 25 item 6)"
  $PY -m studies.peer_capacity --benchmark world --json docs/results/peer_capacity_world.json > /dev/null || return
  step "world: seeds $SEEDS"
  $PY -m training.seed_report --seeds "$SEEDS" --json "$OUT/seeds.json" --md "$OUT/seeds.md" || return
  ship seeds.json seeds.md
}

films() {
  step "films: the seed-0 table"
  $PY -m cir_core.eval --benchmark films --progression --json "$OUT/eval_films_test.json" \
      > "$OUT/eval_films_test.txt" || return
  ship eval_films_test.json eval_films_test.txt
  step "films: Chord's correction analysis"
  $PY -m studies.chord_analysis --benchmark films --methods $PEERS \
      --json docs/results/chord_analysis_films.json --plot docs/img/chord_correction_films.png \
      > "$OUT/chord_analysis_films.txt" || return
  ship chord_analysis_films.txt
  step "films: where the prefix progression fails (by the added sentence's op family, the rank before)"
  $PY -m studies.progression_failures --benchmark films --methods pace,pact,dice,compose-only,sum \
      --json "$OUT/progression_failures_films.json" > "$OUT/progression_failures_films.txt" || return
  ship progression_failures_films.json progression_failures_films.txt
  step "films: what one inverted token carries"
  $PY -m studies.peer_capacity --benchmark films --json docs/results/peer_capacity_films.json > /dev/null || return
  step "films: seeds $SEEDS"
  $PY -m training.seed_report --benchmark films --seeds "$SEEDS" --json "$OUT/seeds_films.json" \
      --md "$OUT/seeds_films.md" || return
  ship seeds_films.json seeds_films.md
}

if [ "${LANES:-2}" = world ] || [ "${LANES:-2}" = films ]; then
  "$LANES"
elif [ "${LANES:-2}" = 2 ]; then
  two_lanes world "$OUT/eval_world.log" films "$OUT/eval_films.log" || exit $?
else
  world && films
fi
step "done: the raw outputs in docs/results/, the seed tables $OUT/seeds.md and $OUT/seeds_films.md"
