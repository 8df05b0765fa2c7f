#!/usr/bin/env bash
# preset-results.sh on a 2-GPU machine, one model per pytest run so that a run cut short loses one model
# only: stream i runs on GPU i, pinned to its half of the host's cores, first the decode benchmarks of each
# of its models, then, in the time left, the decode-checks of each; stream 0 then runs decode-window-moe.
# Everything ends by the deadline.
# Usage (repo root, 2-GPU machine): OUT=<dir> bash scripts/device/preset-results-two-gpus.sh SECONDS "MODEL ..." "MODEL ..."
# Writes $OUT/presets-decode.tgz (one JSON and log per model and part, steps-presets.log).
. "$(dirname "$0")/common.sh"; device_run presets "$1"
n_cpu=$(nproc); half=$((n_cpu / 2))
stream() {  # GPU CPUS "MODEL ..."
  local m part t
  for part in decode decode-checks; do
    for m in $3; do
      t=$(( deadline - $(date +%s) - 15 ))
      [ "$t" -lt 30 ] && { say "[gpu $1] no time left for $part $m"; continue; }
      OUT="$W" TIMEOUT="$t" bash scripts/device/preset-results.sh "$part" "$1" "$2" "$m"
    done
  done
  t=$(( deadline - $(date +%s) - 15 ))
  [ "$1" = 0 ] && [ "$t" -ge 30 ] && OUT="$W" TIMEOUT="$t" bash scripts/device/preset-results.sh decode-window-moe 0 "$2"
}
export -f stream say; export W start deadline
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$W/pip.log" 2>&1
stream 0 "0-$((half - 1))" "$2" & p0=$!
stream 1 "$half-$((n_cpu - 1))" "$3" & p1=$!
wait $p0 $p1
cat "$W/steps-presets.log"
tar -C "$W" -czf "$OUT/presets-decode.tgz" .
