#!/usr/bin/env bash
# Both steps of sharded-suite.sh in one 10-minute command, when the one-GPU suite takes ~5 minutes: a probe of
# how this image imports (bytecode caching off or on, the seconds one process takes to import torch,
# transformers, inductor and the plugin, before and after), the image's site-packages compiled to bytecode as a
# pip install would have (common.sh: precompile_bytecode; BYTECODE=0 leaves the image as it is), then `sharded-suite.sh
# single`, then `sharded-suite.sh sharded` against it (its wall time cut to what is left of the 585 s), both under
# the same bytecode. Usage (repo root, 2-GPU machine):
#   OUT=<dir> [BYTECODE=0] bash scripts/device/suite-one-then-two-gpus.sh
# Writes what the two steps write (the *.wall_s files folded into steps.log, which starts with the probe).
set -u
OUT="${OUT:-out/suite-one-then-two-gpus}"; mkdir -p "$OUT"
T0=$(date +%s)
. "$(dirname "$0")/common.sh"
P=$(python3 -c "import sysconfig;print(sysconfig.get_paths()['purelib'])")
IMPORTS="import torch, transformers, cudagraph_bench.plugin, transformers.generation.utils, torch._inductor.compile_fx"
IMPORTS="$IMPORTS, torch._dynamo; from transformers import GPT2LMHeadModel, LlamaForCausalLM, BertModel"
timed_import() {   # timed_import LABEL: seconds of one fresh process importing $IMPORTS
  local t; t=$(date +%s.%N)
  PYTHONPATH=src python3 -c "$IMPORTS" 2>&1 | tail -2
  echo "$1 $(python3 -c "print(round($(date +%s.%N) - $t, 1))") s"
}
{
  echo "purelib $P"; ls -ld "$P" | cut -c1-80
  echo "torch pyc files: $(ls "$P"/torch/__pycache__ 2>/dev/null | wc -l)"
  python3 -c "import sys;print('dont_write_bytecode', sys.dont_write_bytecode, 'pycache_prefix', sys.pycache_prefix)"
  env | grep -i '^PYTHON' || true
  timed_import "import, no bytecode"
} > /tmp/pyc.txt 2>&1
if [ "${BYTECODE:-1}" = 1 ]; then
  precompile_bytecode >> /tmp/pyc.txt 2>&1
  timed_import "import with the bytecode cache" >> /tmp/pyc.txt 2>&1
fi
OUT=$OUT bash "$(dirname "$0")/sharded-suite.sh" single
mv "$OUT/steps.log" /tmp/steps-single.log
L=$((585 - ($(date +%s) - T0))); [ "$L" -gt 5 ] || L=5    # timeout 0 would mean no limit
echo "left for sharded: $L s" >> /tmp/pyc.txt
timeout -s KILL "$L" env OUT=$OUT bash "$(dirname "$0")/sharded-suite.sh" sharded "$OUT"
cat /tmp/pyc.txt /tmp/steps-single.log "$OUT/steps.log" > /tmp/steps-all.log 2>/dev/null; mv /tmp/steps-all.log "$OUT/steps.log"
rm -f "$OUT/single.wall_s" "$OUT/sharded.wall_s"
cat "$OUT/steps.log"
