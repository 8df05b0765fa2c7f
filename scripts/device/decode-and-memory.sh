#!/usr/bin/env bash
# Decode benchmarks and the memory ledger on a GPU machine (one 10-minute slot): decode (bfloat16, 50-token prompt,
# 64 and 128 new tokens, 8 requests per variant) and a short forward run that checks the per-case
# memory ledger after the one-side-stream-per-device fix (max_case_growth_mib should be ~0).
# Run from the repo root on the GPU machine: OUT=<dir> bash scripts/device/decode-and-memory.sh
. "$(dirname "$0")/common.sh"; device_run decode-and-memory 570
{ nvidia-smi; python3 -c "import torch, transformers; print('torch', torch.__version__, torch.version.cuda, 'transformers', transformers.__version__)"; } > "$W/env.txt" 2>&1

say "decode benchmarks (bfloat16, 50-token prompt, 64/128 new tokens, 8 requests)"
timeout "$(left 330)" $PT perf_tests/test_decode_bench.py --benchmark-only --benchmark-json "$OUT/decode.json" \
  --benchmark-columns=median,min,max,rounds --benchmark-group-by=group > "$W/decode-bench.log" 2>&1
echo "decode rc=$?"; grep -E "passed|failed|Error" "$W/decode-bench.log" | tail -3
say "report of the decode run"
python3 -m cudagraph_bench report "$OUT/decode.json" -o "$W/decode-report" > "$W/decode-report.log" 2>&1; cat "$W/decode-report.log" | head -40

say "memory ledger check: forward bench, gpt2 + tinyllama, float32, L 16/50, 20 rounds"
timeout "$(left 150)" $PT perf_tests/test_forward_bench.py --benchmark-only --models gpt2,tinyllama-1.1b --dtypes float32 \
  --prompt-lengths 16,50 --rounds 20 --warmup-rounds 3 --benchmark-json "$OUT/forward-memory-ledger.json" > "$W/forward-memory-ledger.log" 2>&1
echo "memory ledger rc=$?"; grep -iE "passed|failed|reserved|MiB" "$W/forward-memory-ledger.log" | tail -5
say "done"
cp "$W/decode-bench.log" "$W/forward-memory-ledger.log" "$W/steps.log" "$W/env.txt" "$OUT/" 2>/dev/null
