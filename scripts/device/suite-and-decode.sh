#!/usr/bin/env bash
# On a 1-GPU machine (one device slot): the default suite once, timed and gated (sharded-suite.sh single:
# every benchmark and GPU test of perf_tests in one pytest session), then the fused graphed decode
# benchmarks (fused-decode.sh, DECODE_MODELS, default gpt2,tinyllama-1.1b,llama-3.2-1b) with the time left.
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/suite-and-decode.sh
# Writes (8 files at most come back): $OUT/single.json, single.log, single-gate.log, fused-decode-<model>.json,
# logs.tgz (every log, the wall time, the steps).
. "$(dirname "$0")/common.sh"; device_run suite-and-decode 590
ALL="$W/all"; mkdir -p "$ALL/suite" "$ALL/decode"
OUT="$ALL/suite" timeout "$(left 420)" bash scripts/device/sharded-suite.sh single
say "suite: $(cat "$ALL/suite/single.wall_s" 2>/dev/null) s; $(tail -1 "$ALL/suite/steps.log" 2>/dev/null)"
if [ "$(left 600)" -gt 60 ]; then
  MODELS="${DECODE_MODELS:-gpt2,tinyllama-1.1b,llama-3.2-1b}" DECODE_TESTS=0 AUTOTUNE=0 OUT="$ALL/decode" \
    timeout "$(( $(left 600) - 10 ))" bash scripts/device/fused-decode.sh
  say "fused decode rc=$?"
fi
cp "$ALL/suite/single.json" "$ALL/suite/single.log" "$ALL/suite/single-gate.log" "$ALL/decode"/*.json "$OUT/" 2>/dev/null
cp /tmp/cgb-fused-decode/steps.log "$ALL/decode/steps.log" 2>/dev/null
cp "$W/steps.log" "$ALL/steps.log"
tar czf "$OUT/logs.tgz" -C "$ALL" .
