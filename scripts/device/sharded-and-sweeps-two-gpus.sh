#!/usr/bin/env bash
# On a 2-GPU machine: the default suite sharded over both GPUs (sharded-suite.sh sharded: --gpu-workers, one
# xdist worker per GPU and half of the cores each, merged, gated, and compared with the single-GPU run in
# SINGLE), then side by side: GPU 0 (first half of the cores) the fused decode benchmarks of DECODE_MODELS
# (fused-decode.sh), GPU 1 (second half) the bfloat16 compile sweep of the default models
# (compile-sweep-bfloat16.toml; cases stop starting at the time budget).
# Usage (repo root, 2-GPU machine): SINGLE=<folder with single.json, single.wall_s> OUT=<dir> \
#   bash scripts/device/sharded-and-sweeps-two-gpus.sh
# Writes (8 files at most come back): $OUT/sharded.json, sharded.log, compare.log, fused-decode.json,
# compile-sweep-bfloat16.json, logs.tgz (every log and JSON), steps.log.
. "$(dirname "$0")/common.sh"; device_run sharded-and-sweeps 585
n_cpu=$(nproc); half=$((n_cpu / 2))
ALL="$W/all"; mkdir -p "$ALL/suite" "$ALL/decode" "$ALL/sweep"
say "default suite sharded over GPUs 0 and 1"
OUT="$ALL/suite" timeout "$(left 330)" bash scripts/device/sharded-suite.sh sharded "${SINGLE:-}"
cat /tmp/cgb-sharded-suite/steps.log >> "$W/steps.log" 2>/dev/null
decode() {
  CUDA_VISIBLE_DEVICES=0 MODELS="${DECODE_MODELS:-tinyllama-1.1b,llama-3.2-1b}" DECODE_TESTS=0 AUTOTUNE=0 \
    OUT="$ALL/decode" timeout "$(left 560)" taskset -c "0-$((half - 1))" bash scripts/device/fused-decode.sh
}
export -f decode left; export ALL half deadline
decode & p0=$!
say "[gpu 1] bfloat16 compile sweep (time budget $(left 560) s less 40)"
CUDA_VISIBLE_DEVICES=1 timeout "$(left 560)" python3 -m cudagraph_bench run --config scripts/device/compile-sweep-bfloat16.toml \
  --models "${SWEEP_MODELS:-gpt2,tinyllama-1.1b,distilgpt2,bert-tiny}" --cpus "$half-$((n_cpu - 1))" \
  --time-budget "$(( $(left 560) - 40 ))" -o "$ALL/sweep" > "$ALL/sweep/run.log" 2>&1
say "[gpu 1] compile sweep rc=$?: $(grep -cE '^ *(gpt2|tinyllama|distilgpt2|bert-tiny) ' "$ALL/sweep/run.log") table rows"
wait $p0
say "[gpu 0] fused decode: $(grep -E 'rc=' /tmp/cgb-fused-decode/steps.log 2>/dev/null | tr '\n' ' ' | cut -c1-300)"
cp "$ALL/suite/sharded.json" "$ALL/suite/sharded.log" "$ALL/suite/compare.log" "$OUT/" 2>/dev/null
cp "$ALL/sweep/run.json" "$OUT/compile-sweep-bfloat16.json" 2>/dev/null
ls "$ALL/decode"/*.json >/dev/null 2>&1 && python3 -m cudagraph_bench merge -o "$OUT/fused-decode.json" "$ALL/decode"/*.json
cp /tmp/cgb-fused-decode/steps.log "$ALL/decode/steps.log" 2>/dev/null
cp "$W/steps.log" "$OUT/steps.log"
tar czf "$OUT/logs.tgz" -C "$ALL" .
