#!/usr/bin/env bash
# The README's test command and the default forward benchmarks side by side on a 2-GPU machine: GPU 0
# (first half of the cores) runs `make test` through ci-suite.sh; GPU 1 (second half) runs the forward
# benchmarks of the default matrix with each graph's check recorded, then reads that run with
# pytest-benchmark's own `compare --group-by=param:model` and with `cudagraph-bench gate`, then the decode
# benchmarks of the default models with each decoder's check against generate recorded.
# Usage (repo root, 2-GPU machine): OUT=<dir> bash scripts/device/tests-and-forward-two-gpus.sh
# Writes $OUT/make-test.log, $OUT/steps-ci.log, $OUT/forward-plain-params.json and $OUT/forward-plain-params.log
# (pytest, then pytest-benchmark compare, then the gate), $OUT/decode-checked.json and .log, $OUT/steps.log.
. "$(dirname "$0")/common.sh"; device_run tests-and-forward 580
n_cpu=$(nproc); half=$((n_cpu / 2))
OUT="$OUT" bash scripts/device/ci-suite.sh setup
forward() {
  export CUDA_VISIBLE_DEVICES=1
  local log="$OUT/forward-plain-params.log"
  say "[gpu 1] forward benchmarks, default matrix, checks recorded"
  timeout "$(left 400)" taskset -c "$half-$((n_cpu - 1))" python3 -m pytest perf_tests/test_forward_bench.py \
    --benchmark-only -p no:cacheprovider -rs --cpus "$half-$((n_cpu - 1))" \
    --benchmark-json "$OUT/forward-plain-params.json" --benchmark-group-by=param:model \
    --benchmark-columns=median,min,max,rounds -W "ignore:Not saving anything" > "$log" 2>&1
  say "[gpu 1] forward rc=$?: $(grep -E '(passed|failed)' "$log" | tail -1)"
  echo "== pytest-benchmark compare --group-by=param:model" >> "$log"
  python3 -m pytest_benchmark \
    compare "$OUT/forward-plain-params.json" --group-by=param:model \
    --columns=median,rounds >> "$log" 2>&1
  say "[gpu 1] pytest-benchmark compare rc=$?"
  echo "== cudagraph-bench gate" >> "$log"
  python3 -m cudagraph_bench gate "$OUT/forward-plain-params.json" --baseline baselines/nvidia-h200.json >> "$log" 2>&1
  say "[gpu 1] gate rc=$?: $(grep -E '^gate (PASS|FAIL)' "$log" | cut -c1-300)"
  log="$OUT/decode-checked.log"
  say "[gpu 1] decode benchmarks, default models, each decoder checked against generate and float64"
  timeout "$(left 300)" taskset -c "$half-$((n_cpu - 1))" python3 -m pytest perf_tests/test_decode_bench.py \
    --benchmark-only -p no:cacheprovider -rs --cpus "$half-$((n_cpu - 1))" \
    --benchmark-json "$OUT/decode-checked.json" -W "ignore:Not saving anything" > "$log" 2>&1
  say "[gpu 1] decode rc=$?: $(grep -E '(passed|failed)' "$log" | tail -1)"
}
export -f forward say left; export W OUT start deadline half n_cpu
forward & pf=$!
OUT="$OUT" timeout "$(left 560)" bash scripts/device/ci-suite.sh test 0 "0-$((half - 1))"
wait $pf
cp "$W/steps.log" "$OUT/steps.log"
