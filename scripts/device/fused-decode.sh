#!/usr/bin/env bash
# Fused graphed decode on a GPU machine (one device slot, about 6 minutes): the decode benchmarks with
# --with-compile (generate, static-eager, graph, compile+graph, generate-static-compile) for gpt2,
# tinyllama-1.1b and llama-3.2-1b in bfloat16 (50-token prompt, 128 new tokens, 3 requests per variant; compile+graph
# under --decode-compile-tuning, by default coordinate-descent, which compiles longer), one
# pytest session and one JSON per model; then the GPU decode tests of the fused loop (compiled graphed decode vs
# generate, multi-step graph vs 1-step graph vs the eager loop, graphed decode vs generate) for gpt2; then, if
# time is left, gpt2's compile+graph again with the autotuned inductor mode, to compare its compile time.
# Run from the repo root on the GPU machine: OUT=<dir> bash scripts/device/fused-decode.sh
# Env: MODELS (default gpt2,tinyllama-1.1b,llama-3.2-1b), DECODE_COMPILE_MODE (default: the suite's default),
# DECODE_COMPILE_TUNING (--decode-compile-tuning; default: the suite's default),
# COMPILE_TIMEOUT_S (--compile-timeout-s of the compile variants; default: the suite's),
# DECODE_TESTS=0 skips the GPU decode tests (make test runs them too), AUTOTUNE=0 skips the autotuned gpt2 run.
# Writes at most 8 files (what the device tool returns): $OUT/fused-decode-<model>.json,
# $OUT/fused-decode-gpt2-max-autotune.json, $OUT/bench.log (every benchmark session), $OUT/tests.log and
# $OUT/steps.log (environment, steps, the decode table).
. "$(dirname "$0")/common.sh"; device_run fused-decode 560
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python3 -c "import torch, transformers as t; print('torch', torch.__version__, torch.version.cuda, 'transformers', t.__version__)"
} 2>&1 | tee -a "$W/steps.log"
mode_args=(${DECODE_COMPILE_MODE:+--compile-mode "$DECODE_COMPILE_MODE"}
           ${DECODE_COMPILE_TUNING:+--decode-compile-tuning "$DECODE_COMPILE_TUNING"}
           ${COMPILE_TIMEOUT_S:+--compile-timeout-s "$COMPILE_TIMEOUT_S"})
DECODE_ARGS=(--with-compile --decode-dtypes bfloat16 --decode-prompt-lengths 50 --new-tokens 128 --decode-rounds 3
             --benchmark-only --benchmark-columns=median,rounds --benchmark-group-by=group -rxs
             -W "ignore:Not saving anything")
jsons=()
models="${MODELS:-gpt2,tinyllama-1.1b,llama-3.2-1b}"
for m in ${models//,/ }; do
  budget=$(left "$([ "$m" = gpt2 ] && echo 150 || echo 280)")
  say "decode benchmarks $m (--with-compile ${mode_args[*]}; at most $budget s)"
  timeout "$budget" $PT perf_tests/test_decode_bench.py --models "$m" "${DECODE_ARGS[@]}" "${mode_args[@]}" \
    --benchmark-json "$OUT/fused-decode-$m.json" > "$W/bench-$m.log" 2>&1
  say "$m rc=$?: $(grep -E '(passed|failed|xfailed|error)' "$W/bench-$m.log" | tail -1)"
  grep -E "XFAIL|FAILED|Error" "$W/bench-$m.log" | cut -c1-300 | head -5 | tee -a "$W/steps.log"
  [ -s "$OUT/fused-decode-$m.json" ] && jsons+=("$OUT/fused-decode-$m.json")
done

if [ "${DECODE_TESTS:-1}" = 1 ]; then
  say "GPU decode tests of the fused loop (gpt2 and a small Llama config; at most $(left 150) s)"
  timeout "$(left 150)" $PT perf_tests/test_decode.py --models gpt2 --benchmark-skip -s "${mode_args[@]}" \
    -k "compiled_graphed_decode or multi_step_graph or graphed_decode_equals_generate" > "$W/tests.log" 2>&1
  say "tests rc=$?: $(grep -E '(passed|failed|error)' "$W/tests.log" | tail -1)"
  grep -E "compiled|FAILED|Error" "$W/tests.log" | cut -c1-300 | head -12 | tee -a "$W/steps.log"
fi

if [ "${AUTOTUNE:-1}" = 1 ] && [ "$(( deadline - $(date +%s) ))" -gt 150 ]; then
  say "gpt2 compile+graph with --compile-mode max-autotune-no-cudagraphs (at most $(left 200) s)"
  timeout "$(left 200)" $PT perf_tests/test_decode_bench.py --models gpt2 "${DECODE_ARGS[@]}" -k "compile+graph" \
    --compile-mode max-autotune-no-cudagraphs --benchmark-json "$OUT/fused-decode-gpt2-max-autotune.json" \
    > "$W/bench-gpt2-max-autotune.log" 2>&1
  say "max-autotune rc=$?: $(grep -E '(passed|failed|error)' "$W/bench-gpt2-max-autotune.log" | tail -1)"
fi

if [ "${#jsons[@]}" -gt 0 ]; then
  say "decode table of ${jsons[*]}"
  if python3 -m cudagraph_bench report "${jsons[@]}" -o "$W/report" > "$W/report.log" 2>&1; then
    sed -n '/^## Decode/,/^## /p' "$W/report/results.md" | tee -a "$W/steps.log"
  else
    tee -a "$W/steps.log" < "$W/report.log"
  fi
fi
say "done"
cat "$W"/bench-*.log > "$OUT/bench.log" 2>/dev/null
cp "$W/tests.log" "$W/steps.log" "$OUT/" 2>/dev/null
