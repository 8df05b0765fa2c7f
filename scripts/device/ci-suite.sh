#!/usr/bin/env bash
# The README's test command and the GPU CI job on a GPU machine without a package index: `make test`
# and `make gpu-gate` exactly as the Makefile runs them. `setup` replaces `make setup` by an editable
# install into the image's python3 (what `make setup` does, minus downloads) and a VENV whose
# bin/python runs that python3; run it once before the other steps.
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/ci-suite.sh setup|test|gpu-gate [GPU] [CPUS]
# Writes $OUT/make-test.log, or $OUT/gpu-gate.{log,json,md}; one line per step in $OUT/steps-ci.log.
set -u
step=$1
export CUDA_VISIBLE_DEVICES="${2:-0}" PYTHONUNBUFFERED=1
cpus="${3:-}"
OUT="${OUT:-out/ci}"; V=/tmp/cgb-ci-venv; mkdir -p "$OUT"
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start )) s] [$step, gpu $CUDA_VISIBLE_DEVICES] $*" | tee -a "$OUT/steps-ci.log"; }
pin() { if [ -n "$cpus" ]; then taskset -c "$cpus" "$@"; else "$@"; fi; }
case "$step" in
  setup)
    rm -rf "$V"; mkdir -p "$V/bin"
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1
    say "editable install rc=$?"
    printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > "$V/bin/python"; chmod +x "$V/bin/python"
    touch "$V/.installed" ;;
  test)
    say "make test runs: $(make -n test VENV="$V" | grep -m1 pytest)"
    pin make test VENV="$V" > "$OUT/make-test.log" 2>&1
    say "make test rc=$?: $(grep -E '(passed|failed)' "$OUT/make-test.log" | tail -1)" ;;
  gpu-gate)
    say "make gpu-gate runs: $(make -n gpu-gate VENV="$V" RUN_JSON="$OUT/gpu-gate.json" | grep -m1 pytest)"
    timeout "${CI_TIMEOUT:-540}" make gpu-gate VENV="$V" RUN_JSON="$OUT/gpu-gate.json" \
      GATE_ARGS="--markdown $OUT/gpu-gate.md" PYTEST_ARGS="${cpus:+--cpus $cpus}" > "$OUT/gpu-gate.log" 2>&1
    say "make gpu-gate rc=$?: $(grep -E '(passed|failed)' "$OUT/gpu-gate.log" | tail -1)"
    say "$(grep -E '^gate (PASS|FAIL)' "$OUT/gpu-gate.log" | cut -c1-600)" ;;
  *) echo "usage: OUT=<dir> bash scripts/device/ci-suite.sh setup|test|gpu-gate [GPU] [CPUS]" >&2; exit 2 ;;
esac
