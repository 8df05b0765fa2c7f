#!/usr/bin/env bash
# Smoke validation on a lent GPU: every GPU code path once, at small sizes, in one call.
# Usage (repo root, no network needed): OUT=/some/dir bash scripts/device/smoke.sh
set -u
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-out/smoke}"          # only the files named below land here (the device tool returns <= 8 files)
W=/tmp/cgb-smoke; rm -rf "$W"; mkdir -p "$W/launch" "$OUT"
F="$OUT"
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee "$F/env.txt"
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)" | tee -a "$F/env.txt"
{ which nvcc compute-sanitizer; nvcc --version | tail -1; } 2>&1 | tee -a "$F/env.txt"
timeout 60 python3 scripts/device/cupti_check.py 2>&1 | tail -3 | tee "$F/cupti.txt"
CGB_ARTIFACT_DIR="$W/launch" timeout 250 python3 -m pytest perf_tests -p no:cacheprovider -q -rs --durations=15 \
  --models gpt2,bert-tiny,tinyllama-1.1b --prompt-lengths 16,50 --dtypes float32,bfloat16 \
  --rounds 10 --warmup-rounds 2 --decode-rounds 2 --new-tokens 64 \
  --benchmark-json "$F/smoke.json" --benchmark-columns=median,mean,min,max,rounds --benchmark-group-by=group \
  2>&1 | tee "$F/pytest.log" | grep -v "^perf_tests.*PASSED"
echo "pytest wall: $(( $(date +%s) - start )) s"
t1=$(date +%s)
timeout 170 python3 -m cudagraph_bench run --time-budget 140 --case-timeout 120 --models gpt2 --prompt-lengths 50 --dtypes float32 \
  --variants eager,graph,compile,compile+graph --rounds 20 --warmup-rounds 3 -o "$W/run" 2>&1 | tail -40 | tee "$F/run.log"
echo "run wall: $(( $(date +%s) - t1 )) s"
cp "$W/run/run.json" "$F/compile-run.json" 2>/dev/null
(cd "$W" && tar czf "$F/dirs.tgz" run launch 2>/dev/null)
echo "total wall: $(( $(date +%s) - start )) s"
