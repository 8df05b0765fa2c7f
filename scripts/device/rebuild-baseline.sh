#!/usr/bin/env bash
# Separate runs of the gated forward matrix for the gate's baseline (eager and graph of the default models and dtypes
# at LENGTHS tokens, default the gated 16,50,128), each a new pytest process pinned to CPUS and measured by the
# suite's one pipeline, so the baseline stores the device-side graph figure. With PLAIN=N each of the first N runs is
# followed by a process of the plain capture/replay loop (scripts/device/plain_loop) on the same cases:
# the floor the harness's spread between processes is held against (docs/gate-noise.md).
# Usage (repo root, GPU machine):
#   OUT=<dir> [LENGTHS=16,50,128] [FIRST=1] [PLAIN=N] [DEADLINE_S=480] bash scripts/device/rebuild-baseline.sh RUNS [GPU] [CPUS]
# Writes $OUT/forward-repeats/forward-<N>.json.gz (and plain-<N>.json.gz) for N = FIRST .. FIRST+RUNS-1, starting no
# run after DEADLINE_S seconds, and packs them into $OUT/forward-repeats.tar (one file for a device call to bring
# back). Each run records its GPU's UUID, so runs of several machines can be told apart; build the baseline from the
# runs of at least two machines, on any machine:
#   cudagraph-bench baseline results/<gpu-slug>/forward-repeats/forward-*.json.gz -o baselines/<gpu-slug>.json
. "$(dirname "$0")/common.sh"
runs="${1:?usage: rebuild-baseline.sh RUNS [GPU] [CPUS]}"; first="${FIRST:-1}"
export CUDA_VISIBLE_DEVICES="${2:-0}"; cpus="${3:-0-$(($(nproc) - 1))}"
dir="$OUT/forward-repeats"; mkdir -p "$dir"; started=$SECONDS
for i in $(seq "$first" $((first + runs - 1))); do
  if [ $((SECONDS - started)) -ge "${DEADLINE_S:-480}" ]; then echo "deadline: runs from $i on not started"; break; fi
  run="$dir/forward-$i.json"
  taskset -c "$cpus" python3 -m pytest perf_tests/test_forward_bench.py --benchmark-only -q -p no:cacheprovider \
    --variants eager,graph --prompt-lengths "${LENGTHS:-16,50,128}" --benchmark-json "$run" > "${run%.json}.log" 2>&1
  echo "run $i rc=$? ($((SECONDS - started)) s): $(tail -1 "${run%.json}.log")"; pack "$run"
  if [ -n "${PLAIN:-}" ] && [ "$i" -lt $((first + PLAIN)) ]; then
    plain="$dir/plain-$i.json"
    taskset -c "$cpus" python3 -m pytest --noconftest -p cudagraph_bench.plugin.output -q -p no:cacheprovider \
      scripts/device/plain_loop --benchmark-only --benchmark-json "$plain" > "${plain%.json}.log" 2>&1
    echo "plain $i rc=$? ($((SECONDS - started)) s): $(tail -1 "${plain%.json}.log")"; pack "$plain"
  fi
done
tar -C "$OUT" -cf "$OUT/forward-repeats.tar" forward-repeats && echo "packed $OUT/forward-repeats.tar"
