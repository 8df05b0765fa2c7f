#!/usr/bin/env bash
# Regenerate README.md's results block and every page under docs/ from the committed raw H200 runs.
# Needs no GPU (and no torch import): run it after committing new JSON under baselines/nvidia-h200/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python; fi   # `make setup`'s venv
CG="${CG:-$PY -m cudagraph_bench}"
B=baselines/nvidia-h200
$CG report $B/forward.json $B/padding.json $B/launch.json $B/decode.json -o docs --readme README.md
# The torch.compile sweep: the second-session runs (one prompt-length range per run, all variants of a
# length side by side, cross-kernel variants checked against float64) replace the first-session ones
# length by length; what remains of the first session is gpt2 L=16.
$CG report $B/run-gpt2.json $B/run-tinyllama-1.1b.json $B/run-tinyllama-1.1b-compile-graph.json \
  $B/run-tinyllama-1.1b-L16-50-128.json $B/run-tinyllama-1.1b-L512-1024.json $B/run-gpt2-L50-128.json \
  $B/run-gpt2-L512-1024.json --newest-wins -o docs/compile
$CG report $B/smoke.json -o docs/smoke
$PY -m cudagraph_bench.launch_report $B/launch.json --forward $B/forward.json -o docs \
  --graphs-cu $B/graphs_cu.json --sanitizer $B/logs/compute_sanitizer_d4.log --sanitizer $B/logs/compute_sanitizer_d8388608.log
