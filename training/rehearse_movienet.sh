#!/usr/bin/env bash
# The MovieNet identity campaign rehearsed end to end on the film world, offline:
#
#   film world --export movienet-release--> meta/, annotation/, keyframes/ (MovieNet's layout)
#     --> python -m cir_core.benchmarks.movienet build --preset identity-200 (references.jsonl)
#     --> python -m training.build_itt (rules, scene edits from the scenes' place tags)
#     --> the same build with --edits (queries.jsonl)
#     --> python -m db.pooling --gallery movienet:SET with every registered method, cosine and Chord
#     --> python -m db.simulate: simulated annotators with known error rates, overlap 2, gold,
#         through the real annotation service; then a simulated reviewer adjudicates every
#         disagreement and a 5 % audit share of agreed pairs (0 open ties); db.report; the checks
#         that its intervals hold the simulated truth; raw-majority vs adjudicated rates
#     --> python -m db.publish: the labels as a Hugging Face dataset pushed to a folder remote
#         (OUT/hub), tagged v1, read back at its commit
#     --> a method left out of the pool (LEFT_OUT, default rtd-lincir) ranked by python -m
#         cir_core.eval --dump-rankings beside a pooled one, scored against the published qrels
#         pulled at v1 (python -m cir_core.eval.qrels): R@k with unjudged counted not relevant,
#         condensed and counted relevant, and the figure of its unjudged share
#
#   training/rehearse_movienet.sh [OUT]          identity-200 as in Table 15 (66 test films, 6,162 frames)
#   REHEARSAL_SCALE=tiny training/rehearse_movienet.sh OUT   a few films (minutes)
#
# Environment: PYTHON (default python), REHEARSAL_SCALE (full | tiny), SEED (default 0),
# ERROR_RATES (default 0.02,0.05,0.1,0.15,0.2,0.3), REVIEWER_ERROR (default 0.05), LEFT_OUT
# (default rtd-lincir). Output: OUT/report.txt (docs/ANNOTATION.md quotes the full run),
# OUT/report.json, OUT/ann.sqlite, OUT/set/, OUT/hub/ (the published dataset), OUT/left_out.txt,
# OUT/left_out.json and OUT/left_out_unjudged.png (the left-out method on the qrels).
set -euo pipefail

OUT=${1:-runs/rehearse-movienet}
PY=${PYTHON:-python}
SCALE=${REHEARSAL_SCALE:-full}
SEED=${SEED:-0}
ERRORS=${ERROR_RATES:-0.02,0.05,0.1,0.15,0.2,0.3}
REVIEWER_ERROR=${REVIEWER_ERROR:-0.05}
LEFT_OUT=${LEFT_OUT:-rtd-lincir}
POOLED=(pact dice pace compose-only pic2word searle lincir sum text-only image-only)
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

step "3. pooling: ${POOLED[*]}, cosine and Chord, top 5, overlap 2, 10 % gold, 5 % audit ($LEFT_OUT left out)"
rm -f "$OUT/ann.sqlite"*
$PY -m db.pooling --gallery "movienet:$OUT/set" --cache-dir "$OUT/cache" --db "$OUT/ann.sqlite" --name movienet-200 \
    --queries 100000 --k 5 --overlap 2 --gold 0.1 --audit 0.05 --seed "$SEED" --methods "${POOLED[@]}"

step "4. the simulated campaign and its review through the annotation service, db.report, the recovery checks"
set +e
$PY -m db.simulate --db "$OUT/ann.sqlite" --set movienet-200 --error-rates "$ERRORS" --seed "$SEED" \
    --reviewer-error "$REVIEWER_ERROR" --json "$OUT/report.json" | tee "$OUT/report.txt"
rc=${PIPESTATUS[0]}
set -e

step "5. the labels published as a Hugging Face dataset to a folder remote (tag v1), read back at its commit"
rm -rf "$OUT/hub" "$OUT/published" "$OUT/pulled"
$PY -m db.publish --db "$OUT/ann.sqlite" --set movienet-200 --repo local/movienet-200-labels --tag v1 \
    --local-hub "$OUT/hub" --pool-depth 5 --out "$OUT/published" | tee -a "$OUT/report.txt"
$PY -m cir_core.hub pull labels local/movienet-200-labels@v1 --local-hub "$OUT/hub" --out "$OUT/pulled" >/dev/null

step "6. $LEFT_OUT (never pooled) and pact (pooled) ranked, scored on the published qrels"
$PY -m cir_core.eval --benchmark movienet --root "$OUT/set" --cache-dir "$OUT/cache" --methods "$LEFT_OUT" pact \
    --scoring cosine --dump-rankings "$OUT/rankings.jsonl" > "$OUT/left_out_eval.txt"
$PY -m cir_core.eval.qrels --qrels "$OUT/pulled/qrels_pool5.txt" --rankings "$OUT/rankings.jsonl" --k 1,5,10,50 \
    --json "$OUT/left_out.json" --plot "$OUT/left_out_unjudged.png" | tee "$OUT/left_out.txt"

{ echo; echo "date: $(date -u +%FT%TZ)  machine: $(nproc) cores, uptime: $(uptime)"; echo "scale: $SCALE  seed: $SEED"; } \
  | tee -a "$OUT/report.txt"
step "done (exit $rc): $OUT/report.txt, $OUT/left_out.txt, $OUT/left_out_unjudged.png"
exit "$rc"
