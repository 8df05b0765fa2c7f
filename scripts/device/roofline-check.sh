#!/usr/bin/env bash
# Roofline check on a GPU machine (about 5 minutes): the raw NVML memory clock and bus width with the peak memory
# bandwidth they give next to the datasheet's, the GPU roofline tests (decode GB/s below the peak, eager busy
# time below the graph replay median), and a short benchmark run (gpt2: forward float32 at 50 tokens with its
# kernel counts and busy time, decode bfloat16 50+64 tokens) rendered by `cudagraph-bench report` with the
# decode roofline and the busy-time tables.
# Run from the repo root on the GPU machine: OUT=<dir> bash scripts/device/roofline-check.sh
. "$(dirname "$0")/common.sh"; device_run roofline 560

say "peak memory bandwidth (NVML raw values, datasheet) and gpt2 bfloat16 bytes per token (50 + 64 tokens)"
python3 -m cudagraph_bench.measure.roofline --model gpt2 --dtype bfloat16 --prompt-tokens 50 --new-tokens 64 \
  2>/dev/null | tee "$OUT/peak.json"
say "GPU roofline tests (gpt2, float32 16/50 tokens; decode bfloat16 50 + 64 tokens)"
timeout "$(left 200)" $PT -s perf_tests/test_roofline.py --models gpt2 --dtypes float32 --prompt-lengths 16,50 \
  --new-tokens 64 2>&1 | grep -vE "^\[transformers\]" | tee "$OUT/roofline-tests.log"
say "benchmarks: gpt2 forward float32 L=50 with kernel counts and busy time, decode bfloat16 50 + 64 tokens"
timeout "$(left 280)" $PT perf_tests/test_forward_bench.py perf_tests/test_kernel_counts.py perf_tests/test_decode_bench.py \
  --benchmark-only --models gpt2 --dtypes float32 --prompt-lengths 50 --new-tokens 64 --decode-rounds 3 --rounds 30 \
  --benchmark-json "$OUT/roofline.json" > "$OUT/benchmarks.log" 2>&1
echo "benchmarks rc=$?"; grep -E "passed|failed|Error" "$OUT/benchmarks.log" | tail -3
python3 -m cudagraph_bench report "$OUT/roofline.json" -o "$W/report" 2>&1 | tail -2
cp "$W/report/results.md" "$OUT/results.md" 2>/dev/null
sed -n '/^### GPU busy time and overhead/,/^### All measurements/p;/^### Decode roofline/,/^!\[/p' "$W/report/results.md"
say "done"
cp "$W/steps.log" "$OUT/" 2>/dev/null
