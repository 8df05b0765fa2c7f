#!/usr/bin/env bash
# Separate runs of the default forward matrix on one GPU, each a new pytest process pinned to CPUS (so two
# streams on a 2-GPU host share no cores), then the gate's baseline from every run in $OUT/forward-repeats
# once there are at least 5 (several calls or GPUs may add runs under different TAGs).
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/rebuild-baseline.sh TAG RUNS [GPU] [CPUS]
# Writes $OUT/forward-repeats/forward-<TAG>-<i>.json.gz (commit them to results/nvidia-h200/forward-repeats/)
# and $OUT/nvidia-h200.json (copy it to baselines/); starts no run with less than 150 s of the 560 s left.
. "$(dirname "$0")/common.sh"
tag="${1:?usage: rebuild-baseline.sh TAG RUNS [GPU] [CPUS]}"; runs="${2:?RUNS}"
export CUDA_VISIBLE_DEVICES="${3:-0}"; cpus="${4:-0-$(($(nproc) - 1))}"
mkdir -p "$OUT/forward-repeats"; end=$(($(date +%s) + ${BUDGET_S:-560}))
for i in $(seq 1 "$runs"); do
  left=$((end - $(date +%s))); [ "$left" -lt 150 ] && { echo "stop before run $i: $left s left"; break; }
  run="$OUT/forward-repeats/forward-$tag-$i.json"
  timeout "$left" taskset -c "$cpus" python3 -m pytest perf_tests/test_forward_bench.py --benchmark-only -q \
    -p no:cacheprovider --cpus "$cpus" --benchmark-json "$run" > "${run%.json}.log" 2>&1
  echo "run $i rc=$?: $(tail -1 "${run%.json}.log")"; pack "$run"
done
set -- "$OUT"/forward-repeats/forward-*.json.gz
if [ -e "$1" ] && [ "$#" -ge 5 ]; then python3 -m cudagraph_bench baseline "$@" -o "$OUT/nvidia-h200.json"
else echo "$OUT/forward-repeats holds fewer than 5 runs: no baseline built"; fi
