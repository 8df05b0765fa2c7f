#!/usr/bin/env bash
# A short check of a tree on a GPU machine (~2 min): a short forward benchmark
# (gpt2, 16 and 50 tokens, 20 rounds) through pytest, the standalone run (eager, graph, padded, bucketed),
# then gate (against the committed baseline) and report on both outputs.
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/tree-check.sh
. "$(dirname "$0")/common.sh"; device_run tree-check 300
CG="python3 -m cudagraph_bench"
say "pytest forward benchmarks (gpt2, 16/50 tokens, 20 rounds)"
timeout "$(left 120)" $PT perf_tests/test_forward_bench.py --benchmark-only --models gpt2 --prompt-lengths 16,50 \
  --rounds 20 --benchmark-json "$OUT/forward-short.json" > "$W/pytest.log" 2>&1
say "pytest rc=$?: $(tail -1 "$W/pytest.log")"
$CG gate "$OUT/forward-short.json" --baseline baselines/nvidia-h200.json > "$W/gate.log" 2>&1
say "gate rc=$?: $(tail -1 "$W/gate.log")"
say "cudagraph-bench run (gpt2, 50 tokens: eager, graph, padded, bucketed)"
timeout "$(left 120)" $CG run --models gpt2 --prompt-lengths 50 --variants eager,graph,padded,bucketed -o "$W/run" \
  > "$W/run.log" 2>&1
say "run rc=$?"
grep -E "^gpt2 " "$W/run.log" | cut -c1-170
cp "$W/run/run.json" "$OUT/run-short.json" 2>/dev/null
$CG report "$W/run/run.json" -o "$W/report" > "$W/report.log" 2>&1
say "report rc=$?: $(tail -1 "$W/report.log")"
say "done"
cp "$W/steps.log" "$W/pytest.log" "$W/gate.log" "$W/run.log" "$OUT/"
