#!/usr/bin/env bash
# One device slot on a 1-GPU machine: the peak memory bandwidth (NVML and datasheet), the forward benchmarks
# of the default matrix (eager, graph) gated against the baseline, then the decode benchmarks with the
# compile variants (generate, static-eager, graph, compile+graph, generate-static-compile; bfloat16, 50-token
# prompt, 128 new tokens) for gpt2 and tinyllama-1.1b, each step under a hard time limit.
# Usage (repo root, GPU machine): OUT=<dir> bash scripts/device/forward-gate-and-decode.sh
# Writes $OUT/peak.json, forward.json, forward.log, gate.log, decode-<model>.json and .log (8 files).
set -o pipefail; export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1; S=$(date +%s); el(){ echo $(( $(date +%s) - S )); }
python3 -m cudagraph_bench.measure.roofline --model gpt2 --dtype bfloat16 --prompt-tokens 50 --new-tokens 128 > $OUT/peak.json 2>/dev/null; cat $OUT/peak.json | head -30
timeout -s KILL 230 python3 -m pytest -p no:cacheprovider -q perf_tests/test_forward_bench.py --benchmark-only --benchmark-json $OUT/forward.json --durations=12 -W "ignore:Not saving anything" > $OUT/forward.log 2>&1; echo "[$(el) s] forward rc=$?"; grep -v transformers $OUT/forward.log | tail -32
python3 -m cudagraph_bench gate $OUT/forward.json > $OUT/gate.log 2>&1; echo "gate rc=$?"; grep -E "^gate|^baseline" $OUT/gate.log | cut -c1-400
for m in gpt2 tinyllama-1.1b; do t=$(( 575 - $(el) )); [ $t -gt 200 ] && t=200; [ $t -lt 30 ] && break
timeout -s KILL $t python3 -m pytest -p no:cacheprovider -q -rxs perf_tests/test_decode_bench.py --models $m --with-compile --new-tokens 128 --decode-rounds 3 --benchmark-only --benchmark-json $OUT/decode-$m.json --benchmark-columns=median,rounds -W "ignore:Not saving anything" > $OUT/decode-$m.log 2>&1; echo "[$(el) s] decode $m rc=$?"; grep -E "passed|failed|XFAIL|Error" $OUT/decode-$m.log | cut -c1-300 | tail -6; done
