#!/usr/bin/env bash
# The bfloat16 compile sweep (scripts/device/compile-sweep-bfloat16.toml) on a 2-GPU machine: one
# `cudagraph-bench run` per GPU, each on its own half of the cores, GPU 0 the small models (gpt2,
# distilgpt2, bert-tiny), GPU 1 tinyllama-1.1b; each run stops starting cases at its time budget.
# Usage (repo root, 2-GPU machine): OUT=<dir> bash scripts/device/compile-sweep-bfloat16.sh [BUDGET_S]
# Writes $OUT/run-bfloat16-gpu<N>.json and .log, $OUT/steps.log.
. "$(dirname "$0")/common.sh"; device_run compile-sweep-bfloat16 "${1:-300}"
n_cpu=$(nproc); half=$((n_cpu / 2))
sweep() {  # GPU CPUS MODELS
  local tag="run-bfloat16-gpu$1"
  say "[gpu $1] cudagraph-bench run --models $3 (budget $(left 1000) s)"
  CUDA_VISIBLE_DEVICES=$1 timeout "$(( $(left 1000) + 60 ))" python3 -m cudagraph_bench run \
    --config scripts/device/compile-sweep-bfloat16.toml --models "$3" --cpus "$2" \
    --time-budget "$(left 1000)" -o "$W/$tag" > "$OUT/$tag.log" 2>&1
  say "[gpu $1] rc=$?"
  cp "$W/$tag/run.json" "$OUT/$tag.json" 2>/dev/null
}
sweep 0 "0-$((half - 1))" gpt2,distilgpt2,bert-tiny & p0=$!
sweep 1 "$half-$((n_cpu - 1))" tinyllama-1.1b
wait $p0
cp "$W/steps.log" "$OUT/steps.log"
