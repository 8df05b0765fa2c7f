#!/usr/bin/env bash
# Separate runs of the default forward matrix on one GPU (each a new pytest process, correctness check
# recorded per benchmark), the input of `cudagraph-bench baseline` (>= 5 runs) and `cudagraph-bench
# calibrate`. The process is pinned to CPUS (taskset and the plugin's --cpus), so two streams on a
# 2-GPU host do not share cores.
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/repeat-forward.sh GPU CPUS RUNS TAG [SECONDS]
# Writes $OUT/forward-<TAG>-<i>.json and .log, and $OUT/steps-<TAG>.log; starts no run with < 150 s left.
set -u
gpu=$1 cpus=$2 runs=$3 tag=$4 budget=${5:-560}
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES="$gpu"
OUT="${OUT:-out/repeat}"; mkdir -p "$OUT"
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start )) s] [gpu $gpu] $*" | tee -a "$OUT/steps-$tag.log"; }
for i in $(seq 1 "$runs"); do
  left=$((start + budget - $(date +%s)))
  if [ "$left" -lt 150 ]; then say "stop before run $i: ${left} s left"; break; fi
  t0=$(date +%s)
  timeout "$left" taskset -c "$cpus" python3 -m pytest perf_tests/test_forward_bench.py --benchmark-only \
    -p no:cacheprovider -q --cpus "$cpus" --benchmark-json "$OUT/forward-$tag-$i.json" \
    --benchmark-columns=median,rounds > "$OUT/forward-$tag-$i.log" 2>&1
  say "run $i rc=$? in $(( $(date +%s) - t0 )) s: $(tail -1 "$OUT/forward-$tag-$i.log")"
done
