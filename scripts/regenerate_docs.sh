#!/usr/bin/env bash
# Regenerate README.md's results block and every page under docs/ from the committed raw H200 runs.
# Needs no GPU (and no torch import): run it after committing new JSON under results/nvidia-h200/
# (results/nvidia-h200/README.md says which file is the canonical run of what).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then PY=python3; [ -x .venv/bin/python ] && PY=.venv/bin/python; fi   # `make setup`'s venv
CG="${CG:-$PY -m cudagraph_bench}"
R=results/nvidia-h200
# forward-checked.json and padding-checked.json record each benchmark's check against eager (the first
# forward.json/padding.json did not; forward.json keeps the kernel counts the launch model uses).
# Decode: the fused graphed decode runs (gpt2, tinyllama-1.1b, llama-3.2-1b, 128 new tokens, with the compile variants, the
# HF static-cache + compile peer and the bytes per token of the roofline); tinyllama-1.1b and llama-3.2-1b from the
# runs with coordinate-descent tuning and a prefill graph (decode-fused-tuned-*; their runs in inductor's default
# settings with an eager prefill stay committed as decode-fused-<model>.json); the default models' earlier decode
# run (64 and 128 new tokens, distilgpt2 too) has its own page, docs/decode/results.md.
# The suite's time per part: the whole default suite on one GPU (the first run), then one GPU and two GPUs (one
# command, fresh host) after the releases between cases stopped rescanning the whole heap, then one GPU and two
# GPUs again (one command, fresh host) with every module precompiled to bytecode first, as a pip install leaves
# them (the image ships none), and the padded and bucketed graphs captured once per model and dtype, then one GPU
# (one-GPU host) with the kernel-count worker started by the first correctness test and counting before the first
# timed test, three times: that tree on two hosts, the second one's host-bound work (launch loop, eager) slower, and
# the tree with the profiles group pinned to one GPU worker on a third host. The runs between (two GPUs before the heap fix, one GPU with one profiler window, one GPU with the
# counting worker idle during the benchmarks) stay committed and listed in results/nvidia-h200/README.md.
SUITE_TIMING="--suite-timing $R/suite/default-suite-one-gpu.json
  --suite-timing $R/suite/default-suite-one-gpu-frozen-gc.json
  --suite-timing $R/suite/default-suite-two-gpu-workers-frozen-gc.json
  --suite-timing $R/suite/default-suite-one-gpu-precompiled-bytecode.json
  --suite-timing $R/suite/default-suite-two-gpu-workers-precompiled-bytecode.json
  --suite-timing $R/suite/default-suite-one-gpu-held-count-worker.json
  --suite-timing $R/suite/default-suite-one-gpu-held-count-worker-slow-host.json
  --suite-timing $R/suite/default-suite-one-gpu-profiles-group-pinned.json
  --suite-timing $R/suite/default-suite-one-gpu-profiles-group-pinned-fourth-host.json"
$CG report $R/forward/forward-checked.json $R/padding/padding-checked.json $R/launch/launch.json \
  $R/decode/decode-fused-gpt2.json $R/decode/decode-fused-tuned-tinyllama-1.1b.json \
  $R/decode/decode-fused-tuned-llama-3.2-1b.json $SUITE_TIMING -o docs --readme README.md
$CG report $R/decode/decode-checked.json -o docs/decode
# The whole default suite in one session (one GPU, the newest run): its forward cases with their GPU busy time and overhead
# (profiled in worker processes, never in the timing one), padding, decode and launch benchmarks, time per part.
$CG report $R/suite/default-suite-one-gpu-held-count-worker.json $SUITE_TIMING -o docs/suite
# The torch.compile sweep: later runs (one prompt-length range per run, all variants of a length side by
# side, cross-kernel variants checked against float64) replace earlier ones length by length; the last
# ones (2-GPU machine, `scripts/device/two-gpu-streams.sh`) measured the lengths whose compile+graph was
# still missing. bfloat16: one run per GPU of a 2-GPU host (`scripts/device/compile-sweep-bfloat16.sh`), the
# small models on one, tinyllama-1.1b on the other, 16-128 tokens, compile+graph in inductor's default mode.
C=$R/compile-sweep
$CG report $C/run-gpt2.json $C/run-tinyllama-1.1b.json $C/run-tinyllama-1.1b-compile-graph.json \
  $C/run-tinyllama-1.1b-L16-50-128.json $C/run-tinyllama-1.1b-L512-1024.json $C/run-gpt2-L50-128.json \
  $C/run-gpt2-L512-1024.json $C/run-gpt2-L128-1024.json $C/run-tinyllama-1.1b-L128-superseded.json \
  $C/run-tinyllama-1.1b-L512.json $C/run-tinyllama-1.1b-L1024.json $C/run-tinyllama-1.1b-L128.json \
  $C/run-gpt2-L16.json $C/run-bfloat16-small-models.json $C/run-bfloat16-tinyllama-1.1b.json --newest-wins -o docs/compile
$CG report $R/smoke/smoke.json -o docs/smoke
# Current small LLMs (presets), bfloat16 forward: gemma-2-2b was measured again once it ran eager attention
# (its soft-capping; SDPA cannot) with a capture-safe mask, so its prompt lengths come from that run. Decode:
# one run per preset (2-GPU host), each graph case checked against generate and a float64 run.
P=$R/presets
$CG report $P/forward-bfloat16.json $P/forward-bfloat16-gemma-2-2b.json $P/decode-bfloat16-*.json --newest-wins \
  -o docs/presets
L=$R/launch
$CG launch-report $L/launch.json --forward $R/forward/forward.json -o docs \
  --graphs-cu $L/graphs_cu.json --sanitizer $L/compute_sanitizer_d4.log --sanitizer $L/compute_sanitizer_d8388608.log \
  --sanitizer $L/compute_sanitizer_d4_alloc_before_free.log
# The gate's regression rule measured on the separate runs of the default forward matrix (the repeats and
# the GPU CI job's run). Exit 1 means the rule raised false alarms on those runs: the page reports them,
# so that is not an error here.
$CG calibrate $R/forward-repeats/forward-*.json $R/ci/gpu-gate.json --ab-runs 4 \
  --markdown docs/gate-noise.md > /dev/null || [ $? -eq 1 ]
