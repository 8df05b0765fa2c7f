#!/usr/bin/env bash
# The recorded checks that need a GPU to be proven, in one device command: the GPU tests of the replay proof, of the
# stale-buffer checks and of the eager-layer fault; then the padded and bucketed benchmarks with the replay proof,
# unmodified and with a stale mask planted, and the forward graph with its output layer run eagerly, each gated on its
# JSON alone (the unmodified run must pass, the planted ones must fail).
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/verify-checks.sh
# Writes $OUT/gpu-tests.log and $OUT/<name>.{log,json.gz} for name = padded, stale-mask, eager-layer.
. "$(dirname "$0")/common.sh"
editable_install || exit 1
PT="python3 -m pytest -p no:cacheprovider -q -rfEs"
$PT perf_tests/test_replay_proof.py perf_tests/test_stale_buffer_checks.py perf_tests/test_eager_layer_fault.py -s \
  > "$OUT/gpu-tests.log" 2>&1
echo "GPU tests rc=$?: $(grep -E '(passed|failed)' "$OUT/gpu-tests.log" | tail -1)"
# The gate judges a padded graph beside the eager and graph forward of its case, so both suites run in one session.
m="--models bert-tiny,gpt2 --dtypes bfloat16,float32"
pad="perf_tests/test_forward_bench.py perf_tests/test_padding_bench.py --benchmark-only $m --prompt-lengths 16,50"
fwd="perf_tests/test_forward_bench.py --benchmark-only $m --variants eager,graph --prompt-lengths 16,50,128"
for name in padded stale-mask eager-layer; do
  case "$name" in
    padded) args="$pad" ;;
    stale-mask) args="$pad --plant-fault stale-mask" ;;
    eager-layer) args="$fwd --plant-fault eager-layer" ;;
  esac
  $PT $args --replay-proof --benchmark-json="$OUT/$name.json" > "$OUT/$name.log" 2>&1
  python3 -m cudagraph_bench gate "$OUT/$name.json" --baseline none >> "$OUT/$name.log" 2>&1
  echo "$name: gate rc=$?: $(grep -E '^gate (PASS|FAIL)' "$OUT/$name.log" | cut -c1-300)"
  pack "$OUT/$name.json" > /dev/null
done
