#!/usr/bin/env bash
# Launch, padding and compile runs on a GPU machine (one 10-minute slot): launch-overhead benchmarks, padded/bucketed
# benchmarks, then the standalone `run` command with torch.compile variants.
# Run from the repo root on the GPU machine: OUT=<dir> bash scripts/device/launch-padding-compile.sh [gpt2 tinyllama-1.1b]
. "$(dirname "$0")/common.sh"; device_run launch-padding-compile 575
MODELS="${*:-gpt2}"

say "launch-overhead benchmarks"
timeout "$(left 90)" $PT perf_tests/test_launch.py --benchmark-only --benchmark-json "$OUT/launch.json" \
  --benchmark-columns=median,min,max,rounds > "$W/launch.log" 2>&1
tail -1 "$W/launch.log"
say "padded vs bucketed benchmarks"
timeout "$(left 170)" $PT perf_tests/test_padding_bench.py --benchmark-only --models gpt2,tinyllama-1.1b --benchmark-json "$OUT/padding.json" \
  --benchmark-columns=median,min,max,rounds --benchmark-group-by=group > "$W/padding.log" 2>&1
tail -1 "$W/padding.log"
n_left=$(echo $MODELS | wc -w)
for m in $MODELS; do
  budget=$(( ((deadline - $(date +%s)) - 25) / n_left )); n_left=$((n_left - 1))
  say "cudagraph-bench run --model $m (time budget $budget s)"
  timeout "$((budget + 20))" python3 -m cudagraph_bench run --config scripts/device/compile-sweep.toml --model "$m" \
    --time-budget "$budget" -o "$W/run-$m" > "$W/run-$m.log" 2>&1; echo "run rc=$?"
  cp "$W/run-$m/run.json" "$OUT/run-$m.json" 2>/dev/null
  grep -A 40 "fastest" "$W/run-$m.log" | head -30
done
say "done"
(cd "$W" && tar czf "$OUT/logs-b.tgz" .)
