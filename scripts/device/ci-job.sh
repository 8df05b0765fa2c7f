#!/usr/bin/env bash
# The CI job on a GPU machine: `make test` and `make gpu-gate` exactly as the Makefile runs them, after an
# editable install in place of `make setup` (no downloads).
# Usage (repo root): OUT=<dir> [REPLAY_PROOF=1] bash scripts/device/ci-job.sh test|gpu-gate [GPU] [CPUS]
# REPLAY_PROOF=1: `make gpu-gate` with pytest's --replay-proof (every timed graph case proven after the last test).
# Writes $OUT/make-test.log, or $OUT/gpu-gate.{log,json.gz,md} (the run results/nvidia-h200/ci/ commits).
. "$(dirname "$0")/common.sh"
step="${1:-}"; export CUDA_VISIBLE_DEVICES="${2:-0}"; cpus="${3:-}"
editable_install || exit 1
case "$step" in
  test)
    ${cpus:+taskset -c "$cpus"} make test VENV="$VENV" > "$OUT/make-test.log" 2>&1; rc=$?
    echo "make test rc=$rc: $(grep -E '(passed|failed)' "$OUT/make-test.log" | tail -1)" ;;
  gpu-gate)
    ${cpus:+taskset -c "$cpus"} make gpu-gate VENV="$VENV" RUN_JSON="$OUT/gpu-gate.json" \
      GATE_ARGS="--markdown $OUT/gpu-gate.md" PYTEST_ARGS="${REPLAY_PROOF:+--replay-proof}" > "$OUT/gpu-gate.log" 2>&1; rc=$?
    echo "make gpu-gate rc=$rc: $(grep -E '^gate (PASS|FAIL)' "$OUT/gpu-gate.log" | cut -c1-300)"
    pack "$OUT/gpu-gate.json" ;;
  *) echo "usage: OUT=<dir> bash scripts/device/ci-job.sh test|gpu-gate [GPU] [CPUS]" >&2; exit 2 ;;
esac
exit $rc
