#!/usr/bin/env bash
# Measure one part of the published H200 results again: the run that results/nvidia-h200/ holds for it
# (results/nvidia-h200/README.md says which file is which), written as $OUT/<folder>/<name>.json.gz. Commit the
# files over the old ones and run scripts/regenerate_docs.sh. Each part takes under ten minutes on one H200.
# Usage (repo root, GPU machine): OUT=<dir> [GPU=0] [CPUS=...] bash scripts/device/reproduce-results.sh PART [ARG]
#   forward | padding | launch | decode | suite | smoke
#   fused-decode MODEL                   (gpt2, tinyllama-1.1b, llama-3.2-1b; the suite's default tuning)
#   compile-sweep MODEL:L1,L2            (float32: eager, graph, padded, compile, compile+graph side by side)
#   compile-sweep-bfloat16 MODELS        (scripts/device/compile-sweep-bfloat16.toml)
#   presets-forward [MODELS] | presets-decode MODEL
#   served-forward [MODELS] | served-decode [MODELS]   (qwen3-0.6b, gemma-3-1b, gpt-oss-20b, qwen3-30b-a3b; bfloat16:
#                                        forward graph == eager at 16/128 tokens; decode tokens == generate, 64 new)
. "$(dirname "$0")/common.sh"
part="${1:-}"; arg="${2:-}"; export CUDA_VISIBLE_DEVICES="${GPU:-0}"
PRESETS=smollm2-360m,qwen2.5-0.5b,llama-3.2-1b,gemma-2-2b,phi-3.5-mini,mistral-7b,olmoe-1b-7b
SERVED=qwen3-0.6b,gemma-3-1b,gpt-oss-20b,qwen3-30b-a3b   # presets of what is served now
DECODE=(--decode-dtypes bfloat16 --decode-prompt-lengths 50 --new-tokens 128 --decode-rounds 3)
bench() {  # bench FOLDER/NAME PYTEST-ARGS...: one pytest session into $OUT/FOLDER/NAME.json.gz (+ .log)
  local run="$OUT/$1.json"; shift; mkdir -p "$(dirname "$run")"
  ${CPUS:+taskset -c "$CPUS"} python3 -m pytest -p no:cacheprovider -q -rs --benchmark-json "$run" \
    -W "ignore:Not saving anything" "$@" > "${run%.json}.log" 2>&1
  echo "$part rc=$?: $(tail -1 "${run%.json}.log")"; pack "$run"
}
sweep() {  # sweep NAME cudagraph-bench-run-ARGS...: one `cudagraph-bench run` (the torch.compile variants in a pytest
           # process of their own) into $OUT/compile-sweep/NAME.json.gz
  local name=$1; shift; mkdir -p "$OUT/compile-sweep"
  python3 -m cudagraph_bench run ${CPUS:+--cpus "$CPUS"} -o "/tmp/cgb-$name" "$@" > "$OUT/compile-sweep/$name.log" 2>&1
  echo "$part rc=$?"; cp "/tmp/cgb-$name/run.json" "$OUT/compile-sweep/$name.json" && pack "$OUT/compile-sweep/$name.json"
}
case "$part" in
  forward) bench forward/forward-checked perf_tests/test_forward_bench.py perf_tests/test_kernel_counts.py --benchmark-only ;;
  padding) bench padding/padding-checked perf_tests/test_padding_bench.py --benchmark-only --models gpt2,tinyllama-1.1b ;;
  launch)  mkdir -p "$OUT/launch"   # graphs.cu's stdout and the compute-sanitizer logs land beside the run
           CGB_ARTIFACT_DIR="$OUT/launch" bench launch/launch perf_tests/test_launch.py perf_tests/test_graphs_cu.py ;;
  decode)  bench decode/decode-checked perf_tests/test_decode_bench.py --benchmark-only ;;
  fused-decode) bench "decode/decode-fused-${arg:?MODEL}" perf_tests/test_decode_bench.py --benchmark-only \
                  --models "$arg" --with-compile "${DECODE[@]}" ;;
  suite)   precompile_bytecode   # as a pip install leaves the modules; the committed suite run had it
           bench suite/default-suite-one-gpu perf_tests --durations=10 ;;
  smoke)   bench smoke/smoke perf_tests --models gpt2,bert-tiny,tinyllama-1.1b --prompt-lengths 16,50 \
             --dtypes float32,bfloat16 --benchmark-min-rounds 10 --benchmark-warmup-iterations 2 --decode-rounds 2 --new-tokens 64 ;;
  compile-sweep) IFS=: read -r m lens <<< "${arg:?MODEL:LENGTHS}"
                 sweep "run-$m-L${lens//,/-}" --models "$m" --prompt-lengths "$lens" --dtypes float32 \
                   --variants eager,graph,padded,compile,compile+graph \
                   -- --pad-to 1024 --benchmark-min-rounds 100 --benchmark-warmup-iterations 10 ;;
  compile-sweep-bfloat16) sweep "run-bfloat16-${arg//,/-}" --config scripts/device/compile-sweep-bfloat16.toml \
                            --models "${arg:?MODELS}" ;;
  presets-forward) bench presets/forward-bfloat16 perf_tests/test_forward_bench.py --benchmark-only \
                     --models "${arg:-$PRESETS}" --dtypes bfloat16 --prompt-lengths 16,50,128,512 ;;
  presets-decode) bench "presets/decode-bfloat16-${arg:?MODEL}" perf_tests/test_decode_bench.py --benchmark-only \
                    --models "$arg" "${DECODE[@]}" ;;
  served-forward) bench presets/served-forward-bfloat16 perf_tests/test_forward_bench.py --benchmark-only \
                    --models "${arg:-$SERVED}" --dtypes bfloat16 --prompt-lengths 16,128 --variants eager,graph \
                    --benchmark-min-rounds 10 --max-rounds 50 --benchmark-max-time 0.2 --benchmark-warmup-iterations 3 --warmup-ms 20 ;;
  served-decode) bench "presets/served-decode-bfloat16${arg:+-${arg//,/-}}" perf_tests/test_decode_bench.py \
                   --benchmark-only --models "${arg:-$SERVED}" --decode-dtypes bfloat16 --decode-prompt-lengths 50 \
                   --new-tokens 64 --decode-rounds 3 --with-compile --compile-mode default \
                   --decode-compile-tuning none -k "not generate-static-compile" ;;
  *) sed -n '5,10p' "$0" >&2; exit 2 ;;
esac
