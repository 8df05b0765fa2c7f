#!/usr/bin/env bash
# Regenerate README.md's results block and every page under docs/ from the committed raw H200 runs.
# Needs no GPU (and no torch import): run it after committing new runs under results/nvidia-h200/
# (results/nvidia-h200/README.md lists every file, what it is and the command that made it).
# tests/test_docs_current.py runs these same commands (without the PNGs) and compares the pages.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python; fi   # `make setup`'s venv
CG="${CG:-$PY -m cudagraph_bench}"
R=results/nvidia-h200
# The headline: the default forward matrix and the padded/bucketed graphs, each graph checked against eager; the
# launch suite; the fused graphed decode (gpt2; tinyllama-1.1b and llama-3.2-1b with coordinate-descent tuning and a
# prefill graph); the time per part of the whole default suite on one GPU.
SUITE=$R/suite/default-suite-one-gpu.json.gz
$CG report $R/forward/forward-checked.json.gz $R/padding/padding-checked.json.gz $R/launch/launch.json.gz \
  $R/decode/decode-fused-gpt2.json.gz $R/decode/decode-fused-tuned-tinyllama-1.1b.json.gz \
  $R/decode/decode-fused-tuned-llama-3.2-1b.json.gz --suite-timing $SUITE -o docs --readme README.md
# The default models' decode, each decoder checked against generate (64 and 128 new tokens).
$CG report $R/decode/decode-checked.json.gz -o docs/decode
# The whole default suite in one session: its forward cases with their GPU busy time and overhead, padding,
# decode and launch benchmarks, time per part.
$CG report $SUITE --suite-timing $SUITE -o docs/suite
# The torch.compile sweep: later runs (one prompt-length range per run, all variants of a length side by side)
# replace earlier ones length by length; bfloat16: the small models and tinyllama-1.1b, 16-128 tokens.
C=$R/compile-sweep
$CG report $C/run-tinyllama-1.1b-L16-50-128.json.gz $C/run-gpt2-L50-128.json.gz $C/run-gpt2-L512-1024.json.gz \
  $C/run-gpt2-L128-1024.json.gz $C/run-tinyllama-1.1b-L512.json.gz $C/run-tinyllama-1.1b-L1024.json.gz \
  $C/run-tinyllama-1.1b-L128.json.gz $C/run-gpt2-L16.json.gz $C/run-bfloat16-small-models.json.gz \
  $C/run-bfloat16-tinyllama-1.1b.json.gz --allow overlap -o docs/compile
$CG report $R/smoke/smoke.json.gz -o docs/smoke
# Current small LLMs (presets), bfloat16 forward: gemma-2-2b measured again with eager attention (its soft-capping;
# SDPA cannot), so its prompt lengths come from that run. Decode: one run per preset, checked against generate.
P=$R/presets
# The presets of what is served now (qwen3, gemma-3, gpt-oss, qwen3-moe): forward at 16 and 128 tokens, decode with
# the compiled graph, one run per model.
$CG report $P/forward-bfloat16.json.gz $P/forward-bfloat16-gemma-2-2b.json.gz $P/decode-bfloat16-*.json.gz \
  $P/served-forward-bfloat16.json.gz $P/served-decode-bfloat16-*.json.gz --allow overlap -o docs/presets
L=$R/launch
$CG launch-report $L/launch.json.gz --forward $R/forward/forward.json.gz -o docs \
  --graphs-cu $L/graphs_cu.json --sanitizer $L/compute_sanitizer_d4.log --sanitizer $L/compute_sanitizer_d8388608.log \
  --sanitizer $L/compute_sanitizer_d4_alloc_before_free.log
# The gate's regression rule measured on the separate runs of the default forward matrix (the repeats of two
# machines, beside the plain capture/replay loop's runs of the same jobs). Exit 1 means the rule raised false alarms
# on those runs: the page reports them, so that is not an error here.
$CG calibrate $R/forward-repeats/forward-*.json.gz --plain $R/forward-repeats/plain-*.json.gz --ab-runs 4 \
  --markdown docs/gate-noise.md > /dev/null || [ $? -eq 1 ]
# The gate's self-test on a GPU runner outside the baseline's machines: unmodified reruns, planted delays, a stale
# input and a wrong decode, each gated against the committed baseline. Exit 1 means it missed a target: the page says
# which.
$CG selftest --from $R/selftest --baseline baselines/nvidia-h200.json --markdown docs/gate-selftest.md > /dev/null \
  || [ $? -eq 1 ]
# The architecture zoo: every causal-LM model type, from the CPU classification of each supported transformers release
# and, where committed, the GPU zoo runs (results/nvidia-h200/zoo/), whose cells replace the CPU ones. Exit 1 means a
# part failed: the page says which, so that is not an error here.
Z=$(ls $R/zoo/*.json* 2>/dev/null || true)
$CG zoo --from results/cpu/zoo/cpu-transformers-*.json.gz $Z --markdown docs/architectures.md || [ $? -eq 1 ]
