#!/usr/bin/env bash
# The speed benchmarks of docs/BENCHMARKS.md, in one go, each line appended to OUT (JSON lines;
# every script records the date and the load average itself). Run on an idle machine.
#   bench/run_speed.sh [OUT=docs/results/bench.jsonl]
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-docs/results/bench.jsonl}
PY=${PYTHON:-.venv/bin/python}
export HF_HUB_OFFLINE=1 GRADIO_ANALYTICS_ENABLED=False
run() { echo "+ $*" >&2; "$PY" "$@" | tee -a "$OUT"; }
run bench/bench_topk.py --n 10000,100000,1000000 --queries 1,7,16 --k 50 --repeats 9
run bench/bench_compare.py --repeats 15
run bench/bench_compare.py --backbone ViT-B-32 --skip-world --random-n 100000 --repeats 9
run bench/bench_compare.py --backbone ViT-L-14 --skip-world --random-n 100000 --repeats 5
run bench/bench_ingest.py --model local-dir:assets/backbone/cir-tiny-vit --n 512 --batch-size 64 --format png --repeats 3
run bench/bench_ingest.py --model ViT-B-32 --image-size 384 --format jpg --n 256 --batch-size 32 --repeats 3
run bench/bench_ingest.py --model ViT-B-32 --image-size 384 --format png --n 256 --batch-size 32 --repeats 3
run bench/bench_first_start.py --repeats 3
