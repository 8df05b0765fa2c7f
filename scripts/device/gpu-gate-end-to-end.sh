#!/usr/bin/env bash
# The GPU CI job end to end on a GPU machine (one 10-minute slot): the GPU CI job's own step, `make gpu-gate`, end to end on a
# real GPU: benchmarks -> pytest-benchmark JSON (+ autosave) -> gate against baselines/nvidia-h200.json.
# The machine has no package index, so `make setup` is replaced by `pip install --no-deps -e .` into the
# image's python3 (what `make setup` does, minus downloads) and a VENV whose bin/python runs that python3.
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/gpu-gate-end-to-end.sh ["PYTEST_ARGS"]
. "$(dirname "$0")/common.sh"; device_run gpu-gate-end-to-end 570
ARGS="${1:---models gpt2,bert-tiny --prompt-lengths 16,50,128}"
say "pip install --no-deps -e . into the image's python3 (itself a venv); VENV's python runs it"
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$W/pip.log" 2>&1
say "pip rc=$?"; mkdir -p "$W/venv/bin"; printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > "$W/venv/bin/python"
chmod +x "$W/venv/bin/python"; touch "$W/venv/.installed"
say "make gpu-gate PYTEST_ARGS=\"$ARGS\""
timeout "$(left 520)" make gpu-gate VENV="$W/venv" RUN_JSON="$OUT/gpu-gate.json" PYTEST_ARGS="$ARGS" \
  GATE_ARGS="--baseline baselines/nvidia-h200.json --markdown $OUT/gpu-gate.md" > "$W/make.log" 2>&1
say "make gpu-gate rc=$?"
grep -E "passed|failed|skipped|gate (PASS|FAIL)|no benchmark|Saved benchmark" "$W/make.log" | tail -8
ls .benchmarks/*/ 2>/dev/null | head -3
say "done"
cp "$W/make.log" "$W/pip.log" "$W/steps.log" "$OUT/"
