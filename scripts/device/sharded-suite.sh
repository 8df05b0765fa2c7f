#!/usr/bin/env bash
# The default suite (every benchmark and GPU test of perf_tests in one pytest session, as `make gpu-gate`
# runs it) on one GPU, and sharded over the two GPUs of the host with pytest-xdist and --gpu-workers; each
# run is gated, and the sharded run is compared with the single-GPU one. One step per 10-minute command:
#   OUT=<dir> bash scripts/device/sharded-suite.sh single              # GPU 0 (SINGLE_GPU), every core (CPUS)
#   OUT=<dir> bash scripts/device/sharded-suite.sh sharded [SINGLE]    # GPUs 0 and 1, half the cores each
# SINGLE: a folder holding the single step's single.json and single.wall_s (carried to this machine): its
# recorded test durations order the workers' groups longest first, and the sharded run is compared with
# it: wall time (target <= 0.55 x) and, per benchmark, `cudagraph-bench compare` (median change against
# the gate's tolerance; graph rows printed).
# Writes $OUT/<step>.json, <step>.log (pytest), <step>.wall_s, <step>-gate.log, compare.log (sharded with
# SINGLE), steps.log.
. "$(dirname "$0")/common.sh"; device_run sharded-suite 590
step="${1:-}"; single="${2:-}"
CG="python3 -m cudagraph_bench"

suite() {   # suite NAME PYTEST-ARGS...: the default suite into $OUT/NAME.json, its wall time into NAME.wall_s
  local name=$1; shift
  local t0; t0=$(date +%s.%N)
  timeout "$(left 540)" $PT perf_tests --benchmark-json "$OUT/$name.json" --durations=10 \
    -W "ignore:Not saving anything" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  python3 -c "print(round($(date +%s.%N) - $t0, 1))" > "$OUT/$name.wall_s"
  say "$name: pytest rc=$rc, wall $(cat "$OUT/$name.wall_s") s: $(tail -1 "$OUT/$name.log")"
}

gate() {
  $CG gate "$OUT/$1.json" > "$OUT/$1-gate.log" 2>&1
  say "$1: gate rc=$?: $(grep -E '^gate (PASS|FAIL)' "$OUT/$1-gate.log" | cut -c1-400)"
}

case "$step" in
  single)
    CUDA_VISIBLE_DEVICES="${SINGLE_GPU:-0}" suite single ${CPUS:+--cpus "$CPUS"}
    gate single ;;
  sharded)
    durations=()
    if [ -n "$single" ] && [ -s "$single/single.json" ]; then durations=(--shard-durations "$single/single.json"); fi
    CUDA_VISIBLE_DEVICES=0,1 suite sharded -n 2 --dist loadgroup --gpu-workers "${durations[@]}"
    [ -s "$OUT/sharded.json" ] && python3 - "$OUT/sharded.json" <<'PY' | tee -a "$W/steps.log"
import json, sys
doc = json.load(open(sys.argv[1]))
for w in doc["machine_info"]["workers"]:
    print(f"  worker {w['worker']}: GPU {w['gpu']} ({w.get('gpu_uuid')}, CUDA sees {w.get('device_count')}), "
          f"CPUs {w['cpu_affinity']}, {w['tests']} tests, {w['benchmarks']} benchmarks, {w['wall_s']} s"
          + (f", error {w['error']}" if w.get("error") else ""))
PY
    gate sharded
    if [ -s "$single/single.json" ]; then
      say "wall time: sharded $(cat "$OUT/sharded.wall_s") s / single $(cat "$single/single.wall_s") s = $(python3 -c \
        "print(round($(cat "$OUT/sharded.wall_s") / $(cat "$single/single.wall_s"), 3))") (target <= 0.55)"
      $CG compare "$single/single.json" "$OUT/sharded.json" > "$OUT/compare.log" 2>&1
      say "compare single -> sharded rc=$?: $(tail -1 "$OUT/compare.log" | cut -c1-400)"
      head -3 "$OUT/compare.log"; grep -E ' graph ' "$OUT/compare.log"
    fi ;;
  *) echo "usage: OUT=<dir> bash scripts/device/sharded-suite.sh single | sharded [SINGLE-FOLDER]" >&2; exit 2 ;;
esac
cp "$W/steps.log" "$OUT/steps.log"
