#!/usr/bin/env bash
# The gate's self-test on this GPU machine, continuing the committed one: its runs (results/<gpu-slug>/selftest/) are
# copied into $OUT/selftest and kept (--resume), and the runs it lacks are made, against the committed baseline, until
# DEADLINE_S seconds have passed (a stopped self-test continues in the next call: bring $OUT/selftest.tar back, unpack
# it into an ignored folder, carry it and give FROM=<that folder>/selftest).
# Usage (repo root, GPU machine):
#   OUT=<dir> [FROM=results/nvidia-h200/selftest] [DEADLINE_S=560] bash scripts/device/selftest.sh [SELFTEST ARGS...]
# e.g. `bash scripts/device/selftest.sh --ab 4` adds the pull-request mode's runs. Writes $OUT/selftest.log and
# $OUT/selftest.tar (the folder, every run gzipped as results/ commits them).
. "$(dirname "$0")/common.sh"
from="${FROM:-results/nvidia-h200/selftest}"; deadline="${DEADLINE_S:-560}"
editable_install || exit 1
precompile_bytecode
mkdir -p "$OUT/selftest" && cp "$from"/*.json* "$OUT/selftest/" 2>/dev/null
timeout "$deadline" python3 -m cudagraph_bench selftest -o "$OUT/selftest" --resume \
  --baseline baselines/nvidia-h200.json --runs 2 --delays 3,5 "$@" > "$OUT/selftest.log" 2>&1; rc=$?
echo "selftest rc=$rc: $(grep -E '^selftest (PASS|FAIL)' "$OUT/selftest.log" | cut -c1-400)"
for f in "$OUT"/selftest/*.json; do [ -s "$f" ] && gzip -9 -n -f "$f"; done
(cd "$OUT" && tar cf selftest.tar selftest && rm -rf selftest)
exit $rc
