#!/usr/bin/env bash
# graphs.cu under compute-sanitizer on a GPU machine (~2 min): perf_tests/test_graphs_cu.py (graphs.cu built with nvcc for this GPU:
# N sweep, clocks, baked pointers) with compute-sanitizer memcheck on the baked-pointer mode, including
# --alloc-before-free, where no allocation can take the freed address and memcheck must flag the write.
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/graphs-cu-sanitizer.sh
# Writes $OUT/graphs-cu-tests.log, $OUT/steps.log and $OUT/artifacts-g.tgz (graphs.cu JSON, sanitizer logs).
. "$(dirname "$0")/common.sh"; device_run graphs-cu-sanitizer 300
mkdir -p "$W/artifacts"
say "graphs.cu tests with compute-sanitizer"
CGB_ARTIFACT_DIR="$W/artifacts" timeout "$(left 250)" $PT perf_tests/test_graphs_cu.py --benchmark-skip \
  --junitxml="$W/artifacts/junit-graphs-cu.xml" > "$OUT/graphs-cu-tests.log" 2>&1
say "pytest rc=$?: $(tail -1 "$OUT/graphs-cu-tests.log")"
grep -h "ERROR SUMMARY" "$W"/artifacts/compute_sanitizer_*.log | sort | uniq -c
ls "$W/artifacts"
say "done"
cp "$W/steps.log" "$OUT/"
(cd "$W/artifacts" && tar czf "$OUT/artifacts-g.tgz" .)
