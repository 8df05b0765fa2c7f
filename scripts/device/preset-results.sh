#!/usr/bin/env bash
# Results of the LLM presets on a GPU machine, as pytest-benchmark JSON with the environment fingerprint, from which
# docs/presets/results.md is regenerated (`cudagraph-bench report $OUT/presets-*.json -o docs/presets`).
#   forward            the forward matrix in bfloat16 (16, 50, 128, 512 tokens; eager and graph, each checked against
#                      eager) of the presets below;
#   decode             greedy decode (50-token prompt, 128 new tokens; generate, static-eager, graph; tokens checked);
#   decode-checks      the graphed-decode-equals-generate tests (bfloat16 and float16, unpadded and bucketed prefill);
#   decode-window-moe  the sliding-window and mixture-of-experts decode tests (small configs, MODELS unused);
#   served-forward     the presets of what is served now (qwen3-0.6b, gemma-3-1b, gpt-oss-20b, qwen3-30b-a3b) in
#                      bfloat16 at 16 and 128 tokens: eager and graph replay, graph checked == eager (a few rounds);
#   served-decode      the same presets: 50-token prompt, 64 new tokens, generate / static-eager / graph /
#                      compile+graph (inductor default mode, no tuning: a short compile), each checked against
#                      generate (graph: tokens == static-eager; compile+graph: or a rounding tie), 3 requests each.
# TIMEOUT (seconds, optional) stops pytest after that long. qwen3-30b-a3b holds 61 GB of bfloat16 weights and
# gpt-oss-20b 42 GB (random weights, initialised on the GPU): one H200 takes them one after the other.
# Usage (repo root, GPU machine, after `scripts/device/ci-suite.sh setup`):
#   OUT=<dir> [TIMEOUT=<s>] bash scripts/device/preset-results.sh PART [GPU] [CPUS] [MODELS]
# Writes $OUT/presets-<part>[-<models>].json and .log (models named when given); one line per step in $OUT/steps-presets.log.
set -u
part=${1:-}
export CUDA_VISIBLE_DEVICES="${2:-0}" PYTHONUNBUFFERED=1
cpus="${3:-}"
case "$part" in
  served-*) models="${4:-qwen3-0.6b,gemma-3-1b,gpt-oss-20b,qwen3-30b-a3b}" ;;
  *) models="${4:-smollm2-360m,qwen2.5-0.5b,llama-3.2-1b,gemma-2-2b,phi-3.5-mini,mistral-7b,olmoe-1b-7b}" ;;
esac
OUT="${OUT:-out/presets}"; name="presets-$part${4:+-${4//,/-}}"
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
  served-forward) tests=perf_tests/test_forward_bench.py
           args=(--dtypes bfloat16 --prompt-lengths 16,128 --rounds 10 --max-rounds 50 --max-time-ms 200
                 --warmup-rounds 3 --warmup-ms 20) ;;
  served-decode) tests=perf_tests/test_decode_bench.py
           args=(--decode-dtypes bfloat16 --decode-prompt-lengths 50 --new-tokens 64 --decode-rounds 3 --with-compile
                 --compile-mode default --decode-compile-tuning none -k "not generate-static-compile") ;;
  *) echo "usage: OUT=<dir> bash scripts/device/preset-results.sh forward|decode|decode-checks|decode-window-moe|served-forward|served-decode [GPU] [CPUS] [MODELS]" >&2; exit 2 ;;
esac
mkdir -p "$OUT"
case "$part" in
  decode-checks|decode-window-moe) mode=(--benchmark-skip) ;;
  *) mode=(--benchmark-only --benchmark-json="$OUT/$name.json" -W "ignore:Not saving anything") ;;
esac
say "pytest $tests --models $models ${args[*]}"
timeout "${TIMEOUT:-100000}" python3 -m pytest "$tests" -rs -p no:cacheprovider --models "$models" "${args[@]}" \
  ${cpus:+--cpus "$cpus"} "${mode[@]}" > "$OUT/$name.log" 2>&1
say "rc=$?: $(grep -E '(passed|failed|skipped)' "$OUT/$name.log" | tail -1)"
# what the checks recorded, per case: correct (forward: replay == eager), matches/generate_check_passed (decode)
if [ -f "$OUT/$name.json" ]; then
  python3 - "$OUT/$name.json" <<'EOF' | tee -a "$OUT/steps-presets.log"
import json, sys
doc = json.load(open(sys.argv[1]))
for b in doc["benchmarks"]:
    e = b["extra_info"]
    key = f"{e['model']} {e['dtype']} L={e['seq_len']}" + (f" +{e['new_tokens']}" if "new_tokens" in e else "")
    checks = {k: e[k] for k in ("attn_implementation", "correct", "check", "matches_generate", "generate_check_passed",
                                "static_eager_check_passed") if k in e}
    print(f"  {key} {e['variant']}: median {b['stats']['median'] * 1e3:.3f} ms {checks}")
section = doc.get("cudagraph_bench", {})
for f in section.get("failures", []):
    print(f"  {f.get('model')} {f.get('variant')}: {f.get('status')}: {f.get('reason')}")
for r in section.get("refused", []):
    print(f"  refused {r['model']}: {r['reason']}")
EOF
fi
