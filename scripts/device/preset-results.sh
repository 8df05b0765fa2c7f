#!/usr/bin/env bash
# Results of the current-LLM presets on a GPU machine: the forward matrix in bfloat16 (16, 50, 128, 512
# tokens; eager and graph, each checked against eager) and greedy decode (50-token prompt, 128 new tokens;
# generate, static-eager, graph, tokens checked), as pytest-benchmark JSON with the environment fingerprint;
# `decode-checks` runs the graphed-decode-equals-generate tests (bfloat16 and float16, unpadded and bucketed
# prefill) on the same presets; `decode-window-moe` the sliding-window and mixture-of-experts decode tests
# (small configs of those architectures, MODELS unused). TIMEOUT (seconds, optional) stops pytest after that long.
# Usage (repo root, GPU machine, after `scripts/device/ci-suite.sh setup`):
#   OUT=<dir> [TIMEOUT=<s>] bash scripts/device/preset-results.sh forward|decode|decode-checks|decode-window-moe [GPU] [CPUS] [MODELS]
# Writes $OUT/presets-<part>[-<models>].json and .log (models named when given); one line per step in $OUT/steps-presets.log.
set -u
part=$1
export CUDA_VISIBLE_DEVICES="${2:-0}" PYTHONUNBUFFERED=1
cpus="${3:-}"
models="${4:-smollm2-360m,qwen2.5-0.5b,llama-3.2-1b,gemma-2-2b,phi-3.5-mini,mistral-7b,olmoe-1b-7b}"
OUT="${OUT:-out/presets}"; mkdir -p "$OUT"; name="presets-$part${4:+-${4//,/-}}"
start=$(date +%s)
say() { echo "[$(( $(date +%s) - start )) s] [$part, gpu $CUDA_VISIBLE_DEVICES] $*" | tee -a "$OUT/steps-presets.log"; }
case "$part" in
  forward) tests=perf_tests/test_forward_bench.py
           args=(--dtypes bfloat16 --prompt-lengths 16,50,128,512) ;;
  decode)  tests=perf_tests/test_decode_bench.py
           args=(--decode-dtypes bfloat16 --decode-prompt-lengths 50 --new-tokens 128 --decode-rounds 3) ;;
  decode-checks) tests=perf_tests/test_decode.py
           args=(-k test_graphed_decode_equals_generate -s) ;;
  decode-window-moe) tests=perf_tests/test_decode.py; models=gpt2; name="presets-$part"
           args=(-k test_sliding_window_and_moe_decode_equal_generate -s) ;;
  *) echo "usage: OUT=<dir> bash scripts/device/preset-results.sh forward|decode|decode-checks|decode-window-moe [GPU] [CPUS] [MODELS]" >&2; exit 2 ;;
esac
case "$part" in
  decode-checks|decode-window-moe) mode=(--benchmark-skip) ;;
  *) mode=(--benchmark-only --benchmark-json="$OUT/$name.json" -W "ignore:Not saving anything") ;;
esac
say "pytest $tests --models $models ${args[*]}"
timeout "${TIMEOUT:-100000}" python3 -m pytest "$tests" -rs -p no:cacheprovider --models "$models" "${args[@]}" \
  ${cpus:+--cpus "$cpus"} "${mode[@]}" > "$OUT/$name.log" 2>&1
say "rc=$?: $(grep -E '(passed|failed|skipped)' "$OUT/$name.log" | tail -1)"
