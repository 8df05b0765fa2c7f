#!/usr/bin/env bash
# Compile sweep on a GPU machine (fits one 10-minute slot): the `run` matrix with all four variants (eager, graph, padded
# to 1024, compile, compile+graph) at given prompt lengths, one `cudagraph-bench run` per job, each
# job with every variant of its lengths (so each reduction compares variants measured side by side).
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/compile-sweep.sh MODEL:L1,L2[:BUDGET_S] [MODEL:L3 ...]
# A job without BUDGET_S gets an equal share of the time left (call it last).
# Writes $OUT/run-<model>-L<lengths>.json and $OUT/run-<model>-L<lengths>.log per job.
. "$(dirname "$0")/common.sh"; device_run compile-sweep 575
n_left=$#
for job in "$@"; do
  IFS=: read -r m lens want <<< "$job"; tag="run-$m-L${lens//,/-}"
  avail=$(( deadline - $(date +%s) - 45 ))
  budget=$(( avail / n_left )); n_left=$((n_left - 1))
  if [ -n "${want:-}" ]; then budget=$(( want < avail ? want : avail )); fi
  say "$tag: cudagraph-bench run (time budget $budget s)"
  timeout "$((budget + 40))" python3 -m cudagraph_bench run --models "$m" --prompt-lengths "$lens" --dtypes float32 \
    --variants eager,graph,padded,compile,compile+graph --pad-to 1024 --rounds 100 --warmup-rounds 10 \
    --isolate compile,compile+graph --case-timeout 240 --time-budget "$budget" -o "$W/$tag" > "$OUT/$tag.log" 2>&1
  say "$tag: rc=$?"
  cp "$W/$tag/run.json" "$OUT/$tag.json" 2>/dev/null
  grep -E "^ *(model|$m) " "$OUT/$tag.log" | cut -c1-220 | head -40
done
say "done"
cp "$W/steps.log" "$OUT/"
