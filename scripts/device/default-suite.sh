#!/usr/bin/env bash
# The default suite on a GPU machine (one 10-minute slot): the default forward matrix and its kernel counts,
# two more gated runs of the gated lengths, every plain GPU test (correctness, padding,
# buckets, decode, launch, graphs.cu + compute-sanitizer), then the decode benchmarks.
# Run from the repo root on the GPU machine: OUT=<dir> bash scripts/device/default-suite.sh
. "$(dirname "$0")/common.sh"; device_run default-suite 570
mkdir -p "$W/artifacts"
CG="python3 -m cudagraph_bench"
{ nvidia-smi; python3 -c "import torch, transformers; print('torch', torch.__version__, torch.version.cuda, 'transformers', transformers.__version__)"; } > "$W/env.txt" 2>&1
head -12 "$W/env.txt" | tail -4

say "probe: graph replay == eager with the runner's capture dispatch"
if ! timeout "$(left 90)" $PT perf_tests/test_forward_correctness.py --models gpt2,bert-tiny,tinyllama-1.1b --prompt-lengths 16,50 \
     -k "tinyllama-1.1b-float32-L16 or gpt2-float32-L50 or bert-tiny-bfloat16-L16" > "$W/probe.log" 2>&1; then
  tail -5 "$W/probe.log"
  if CGB_HF_SDPA_SKIP=0 timeout "$(left 60)" $PT perf_tests/test_forward_correctness.py --models gpt2 --prompt-lengths 50 -k "gpt2-float32-L50" > "$W/probe0.log" 2>&1; then
    export CGB_HF_SDPA_SKIP=0; say "FALLBACK: CGB_HF_SDPA_SKIP=0"
  fi
fi
tail -1 "$W/probe.log"

say "forward run 1: default matrix, 100 rounds (+ kernel counts, counted in worker processes)"
timeout "$(left 270)" $PT perf_tests/test_forward_bench.py perf_tests/test_kernel_counts.py --benchmark-only \
  --benchmark-json "$OUT/forward.json" --benchmark-columns=median,min,max,rounds --benchmark-group-by=group > "$W/forward-1.log" 2>&1
tail -2 "$W/forward-1.log"
$CG baseline "$OUT/forward.json" -o "$W/artifacts/baseline.json" | tail -3
$CG gate "$OUT/forward.json" --baseline "$W/artifacts/baseline.json" --markdown "$W/artifacts/gate-1.md" > "$W/gate-1.log" 2>&1; echo "gate 1 rc=$?"
tail -1 "$W/gate-1.log"

for i in 2 3; do
  say "forward run $i: gated lengths 16,50,128"
  timeout "$(left 75)" $PT perf_tests/test_forward_bench.py --benchmark-only --prompt-lengths 16,50,128 \
    --benchmark-json "$OUT/forward-$i.json" > "$W/forward-$i.log" 2>&1
  tail -1 "$W/forward-$i.log"
  $CG gate "$OUT/forward-$i.json" --baseline "$W/artifacts/baseline.json" --markdown "$W/artifacts/gate-$i.md" > "$W/gate-$i.log" 2>&1; echo "gate $i rc=$?"
  tail -1 "$W/gate-$i.log"
done

say "plain GPU tests: correctness (full matrix), padding, buckets, decode, launch, graphs.cu"
CGB_ARTIFACT_DIR="$W/artifacts" timeout "$(left 170)" $PT perf_tests --benchmark-skip --durations=10 \
  --junitxml="$W/artifacts/junit.xml" > "$W/tests.log" 2>&1
grep -E "passed|failed|FAILED|Error" "$W/tests.log" | tail -15

say "decode benchmarks (bfloat16, 50-token prompt, 64/128 new tokens)"
timeout "$(left 120)" $PT perf_tests/test_decode_bench.py --benchmark-only --benchmark-json "$OUT/decode.json" \
  --benchmark-columns=median,min,max,rounds --benchmark-group-by=group > "$W/decode.log" 2>&1
tail -1 "$W/decode.log"
say "done"
(cd "$W" && tar czf "$OUT/logs-a.tgz" .)
cat "$W/gate-1.log" | head -60
