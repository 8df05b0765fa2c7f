#!/usr/bin/env bash
# On a 2-GPU machine, side by side: GPU 0 (first half of the cores) runs the README's test command
# (`make test`, through ci-suite.sh); GPU 1 (second half) runs the default suite once, timed and gated
# (sharded-suite.sh single: every benchmark and GPU test of perf_tests in one pytest session), then the
# fused graphed decode benchmarks (fused-decode.sh; DECODE_MODELS, default gpt2) with the time left.
# Usage (repo root, 2-GPU machine): OUT=<dir> bash scripts/device/tests-and-suite-two-gpus.sh
# Writes (8 files at most come back): $OUT/make-test.log, single.json, single.log, single-gate.log,
# single.wall_s, fused-decode.json (when fused-decode.sh wrote one), logs.tgz (every log and JSON), steps.log.
. "$(dirname "$0")/common.sh"; device_run tests-and-suite 585
n_cpu=$(nproc); half=$((n_cpu / 2))
ALL="$W/all"; mkdir -p "$ALL/ci" "$ALL/suite" "$ALL/decode"
OUT="$ALL/ci" bash scripts/device/ci-suite.sh setup
gpu1() {
  say "[gpu 1] default suite, one GPU, CPUs $half-$((n_cpu - 1))"
  SINGLE_GPU=1 CPUS="$half-$((n_cpu - 1))" OUT="$ALL/suite" timeout "$(left 420)" bash scripts/device/sharded-suite.sh single
  say "[gpu 1] suite done: $(cat "$ALL/suite/single.wall_s" 2>/dev/null) s"
  if [ -f scripts/device/fused-decode.sh ] && [ "$(left 600)" -gt 90 ]; then
    say "[gpu 1] fused decode ($(left 600) s left)"
    CUDA_VISIBLE_DEVICES=1 MODELS="${DECODE_MODELS:-gpt2}" DECODE_TESTS=0 AUTOTUNE=0 OUT="$ALL/decode" \
      timeout "$(( $(left 600) - 15 ))" taskset -c "$half-$((n_cpu - 1))" bash scripts/device/fused-decode.sh
    say "[gpu 1] fused decode rc=$?"
  fi
}
export -f gpu1 say left; export W ALL start deadline half n_cpu
gpu1 & p1=$!
OUT="$ALL/ci" timeout "$(left 570)" bash scripts/device/ci-suite.sh test 0 "0-$((half - 1))"
say "[gpu 0] $(tail -1 "$ALL/ci/steps-ci.log")"
wait $p1
cp "$ALL/ci/make-test.log" "$ALL/suite/single.json" "$ALL/suite/single.log" "$ALL/suite/single-gate.log" \
   "$ALL/suite/single.wall_s" "$OUT/" 2>/dev/null
ls "$ALL/decode"/*.json >/dev/null 2>&1 && python3 -m cudagraph_bench merge -o "$OUT/fused-decode.json" "$ALL/decode"/*.json
cp "$W/steps.log" "$OUT/steps.log"
tar czf "$OUT/logs.tgz" -C "$ALL" .
