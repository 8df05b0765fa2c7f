#!/usr/bin/env bash
# The gate's baseline of one GPU type, from separate runs of the gated forward matrix (eager and graph of the
# default models and dtypes at LENGTHS tokens, default the gated 16,50,128), each a new pytest process pinned to
# CPUS and measured by the suite's one pipeline (so the baseline stores the device-side graph figure).
# Usage (repo root, GPU machine): OUT=<dir> [LENGTHS=16,50,128] bash scripts/device/rebuild-baseline.sh TAG RUNS [GPU] [CPUS]
# Writes $OUT/forward-repeats/forward-<TAG>-<i>.json.gz and, once $OUT/forward-repeats holds 5 or more runs
# (calls on other GPUs or hosts may add theirs under other TAGs), $OUT/<gpu-slug>.json built from all of them:
# copy it to baselines/ and the runs to results/<gpu-slug>/forward-repeats/.
. "$(dirname "$0")/common.sh"
tag="${1:?usage: rebuild-baseline.sh TAG RUNS [GPU] [CPUS]}"; runs="${2:?RUNS}"
export CUDA_VISIBLE_DEVICES="${3:-0}"; cpus="${4:-0-$(($(nproc) - 1))}"
mkdir -p "$OUT/forward-repeats"
for i in $(seq 1 "$runs"); do
  run="$OUT/forward-repeats/forward-$tag-$i.json"
  python3 -m pytest perf_tests/test_forward_bench.py --benchmark-only -q -p no:cacheprovider --variants eager,graph \
    --prompt-lengths "${LENGTHS:-16,50,128}" --cpus "$cpus" --benchmark-json "$run" > "${run%.json}.log" 2>&1
  echo "run $i rc=$?: $(tail -1 "${run%.json}.log")"; pack "$run"
done
set -- "$OUT"/forward-repeats/forward-*.json.gz
[ -e "$1" ] && [ "$#" -ge 5 ] || { echo "$OUT/forward-repeats holds fewer than 5 runs: no baseline built"; exit 1; }
slug=$(python3 -c 'import gzip, json, sys; print(json.load(gzip.open(sys.argv[1]))["machine_info"]["cuda"]["gpu_slug"])' "$1")
python3 -m cudagraph_bench baseline "$@" -o "$OUT/$slug.json"
