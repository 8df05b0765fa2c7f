#!/usr/bin/env bash
# Regenerate README.md's results block and every page under docs/ from the committed raw H200 runs.
# Needs no GPU (and no torch import): run it after committing new JSON under baselines/nvidia-h200/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python; fi   # `make setup`'s venv
CG="${CG:-$PY -m cudagraph_bench}"
B=baselines/nvidia-h200
# The forward and padding benchmarks of session 3 record each benchmark's check against eager (the
# session-1 forward.json/padding.json did not; forward.json keeps the kernel counts the launch model uses).
$CG report $B/forward-checked.json $B/padding-checked.json $B/launch.json $B/decode.json -o docs --readme README.md
# The torch.compile sweep: later runs (one prompt-length range per run, all variants of a length side by
# side, cross-kernel variants checked against float64) replace earlier ones length by length. Session 3
# (2-GPU machine, `scripts/device/run_e.sh`) measured the lengths whose compile+graph was still missing.
$CG report $B/run-gpt2.json $B/run-tinyllama-1.1b.json $B/run-tinyllama-1.1b-compile-graph.json \
  $B/run-tinyllama-1.1b-L16-50-128.json $B/run-tinyllama-1.1b-L512-1024.json $B/run-gpt2-L50-128.json \
  $B/run-gpt2-L512-1024.json $B/run-gpt2-L128-1024.json $B/run-tinyllama-1.1b-L128-call1.json \
  $B/run-tinyllama-1.1b-L512.json $B/run-tinyllama-1.1b-L1024.json $B/run-tinyllama-1.1b-L128.json \
  $B/run-gpt2-L16.json --newest-wins -o docs/compile
$CG report $B/smoke.json -o docs/smoke
# Current small LLMs (presets), bfloat16 forward: gemma-2-2b was measured again once it ran eager attention
# (its soft-capping; SDPA cannot) with a capture-safe mask, so its prompt lengths come from that run.
P=results/nvidia-h200/presets
$CG report $P/forward-bfloat16.json $P/forward-bfloat16-gemma-2-2b.json --newest-wins -o docs/presets
$PY -m cudagraph_bench.launch_report $B/launch.json --forward $B/forward.json -o docs \
  --graphs-cu $B/graphs_cu.json --sanitizer $B/logs/compute_sanitizer_d4.log --sanitizer $B/logs/compute_sanitizer_d8388608.log \
  --sanitizer $B/logs/compute_sanitizer_d4_alloc_before_free.log
# The gate's regression rule measured on the separate runs of the default forward matrix (the repeats and
# the GPU CI job's run). Exit 1 means the rule raised false alarms on those runs: the page reports them,
# so that is not an error here.
$CG calibrate results/nvidia-h200/forward-repeats/forward-*.json results/nvidia-h200/ci/gpu-gate.json --ab-runs 4 \
  --markdown docs/gate-noise.md > /dev/null || [ $? -eq 1 ]
