#!/usr/bin/env bash
# The MovieNet identity campaign rehearsed end to end on the film world, offline:
#
#   film world --export movienet-release--> meta/, annotation/, keyframes/ (MovieNet's layout)
#     --> python -m cir_core.benchmarks.movienet build --preset identity-200 (references.jsonl)
#     --> python -m training.build_itt (rules, scene edits from the scenes' place tags)
#     --> the same build with --edits (queries.jsonl)
#     --> python -m db.pooling --gallery movienet:SET with every registered method, cosine and Chord
#     --> python -m db.simulate: simulated annotators with known error rates, overlap 2, gold,
#         through the real annotation service; db.report; the checks that its intervals hold the
#         simulated truth; the automatic-vs-human table
#
#   training/rehearse_movienet.sh [OUT]          identity-200 as in Table 15 (66 test films, 6,162 frames)
#   REHEARSAL_SCALE=tiny training/rehearse_movienet.sh OUT   a few films (minutes)
#
# Environment: PYTHON (default python), REHEARSAL_SCALE (full | tiny), SEED (default 0),
# ERROR_RATES (default 0.02,0.05,0.1,0.15,0.2,0.3). Output: OUT/report.txt (docs/ANNOTATION.md
# quotes the full run), OUT/report.json, OUT/ann.sqlite, OUT/set/.
set -euo pipefail

OUT=${1:-runs/rehearse-movienet}
PY=${PYTHON:-python}
SCALE=${REHEARSAL_SCALE:-full}
SEED=${SEED:-0}
ERRORS=${ERROR_RATES:-0.02,0.05,0.1,0.15,0.2,0.3}
export HF_HUB_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False
cd "$(dirname "$0")/.."

case "$SCALE" in
  full) SPLIT=test; FILMS=66; SCALING=() ;;
  tiny) SPLIT=val; FILMS=6
        SCALING=(--n-queries 40 --n-references 40 --n-ref-films 5 --n-gallery 400 --n-gallery-films 6) ;;
  *) echo "REHEARSAL_SCALE must be full or tiny, got $SCALE" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
step() { echo; echo "== [$(date +%T), ${SECONDS}s] $*"; }

step "1. the film world in MovieNet's release layout ($FILMS $SPLIT films)"
[ -f "$OUT/release/world_export.json" ] || \
  $PY -m cir_core.world.export movienet-release --split "$SPLIT" --n-films "$FILMS" --n-queries 10 --out "$OUT/release" --quiet

step "2. the identity-200 set: references and gallery, then edits from the scene tags (ITT rules), then the queries"
BUILD=($PY -m cir_core.benchmarks.movienet build --release "$OUT/release" --out "$OUT/set" --preset identity-200
       --seed "$SEED" "${SCALING[@]}" --quiet)
"${BUILD[@]}"
rm -f "$OUT/set/itt.jsonl"
$PY -m training.build_itt --manifest "$OUT/set/references.jsonl" --out "$OUT/set/itt.jsonl" --types scene,short \
    --per-caption 1 --seed "$SEED" --quiet
"${BUILD[@]}" --edits "$OUT/set/itt.jsonl"

step "3. pooling: every registered method, cosine and Chord, top 5, overlap 2, 10 % gold"
rm -f "$OUT/ann.sqlite"*
$PY -m db.pooling --gallery "movienet:$OUT/set" --cache-dir "$OUT/cache" --db "$OUT/ann.sqlite" --name movienet-200 \
    --queries 100000 --k 5 --overlap 2 --gold 0.1 --seed "$SEED" \
    --methods pact dice pace compose-only pic2word searle lincir sum text-only image-only

step "4. the simulated campaign through the annotation service, db.report, and the recovery checks"
set +e
$PY -m db.simulate --db "$OUT/ann.sqlite" --set movienet-200 --error-rates "$ERRORS" --seed "$SEED" \
    --json "$OUT/report.json" | tee "$OUT/report.txt"
rc=${PIPESTATUS[0]}
set -e
{ echo; echo "date: $(date -u +%FT%TZ)  machine: $(nproc) cores, uptime: $(uptime)"; echo "scale: $SCALE  seed: $SEED"; } \
  | tee -a "$OUT/report.txt"
step "done (exit $rc): $OUT/report.txt"
exit "$rc"
