#!/usr/bin/env bash
# Two job streams on a 2-GPU machine (one 10-minute slot): two job streams in parallel, stream i on GPU i
# (CUDA_VISIBLE_DEVICES=i) and pinned to its own half of the host's cores (taskset), so one stream's
# torch.compile workers do not steal the other's host time. Each job is one of
#   MODEL:L1,L2[:BUDGET_S]  compile-sweep.sh's job: `cudagraph-bench run`, every variant of those lengths side by side
#                           (no BUDGET_S: an equal share of the stream's time left; call it last)
#   bench                   the forward and padding pytest benchmarks with each benchmark's check against
#                           eager recorded, then the 30% gate on the forward run against baselines/nvidia-h200.json
# Usage (repo root, 2-GPU machine): OUT=<dir> bash scripts/device/two-gpu-streams.sh "JOB [JOB ...]" "JOB [JOB ...]"
# Writes $OUT/run-<model>-L<lengths>.json, $OUT/forward-checked.json, $OUT/padding-checked.json,
# $OUT/steps.log and $OUT/logs-e.tgz (every job's log and the compile workers' logs).
. "$(dirname "$0")/common.sh"; device_run two-gpu-streams 575
n_cpu=$(nproc); half=$((n_cpu / 2))
{ nvidia-smi -L; echo "cores: $n_cpu"; python3 -c "import torch; print('torch', torch.__version__, 'GPUs', torch.cuda.device_count())"; } > "$W/env.txt" 2>&1
cat "$W/env.txt"

run_job() {  # MODEL:LENGTHS[:BUDGET_S] JOBS_LEFT_IN_STREAM
  local m lens want tag avail budget
  IFS=: read -r m lens want <<< "$1"; tag="run-$m-L${lens//,/-}"
  avail=$(( deadline - $(date +%s) - 40 )); budget=$(( avail / $2 ))
  if [ -n "${want:-}" ]; then budget=$(( want < avail ? want : avail )); fi
  say "[gpu $GPU] $tag: cudagraph-bench run (time budget $budget s)"
  timeout "$((budget + 30))" python3 -m cudagraph_bench run --models "$m" --prompt-lengths "$lens" --dtypes float32 \
    --variants eager,graph,padded,compile,compile+graph --pad-to 1024 --rounds 100 --warmup-rounds 10 \
    --isolate compile,compile+graph --case-timeout "$budget" --time-budget "$budget" -o "$W/$tag" > "$W/$tag.log" 2>&1
  say "[gpu $GPU] $tag: rc=$?"
  cp "$W/$tag/run.json" "$OUT/$tag.json" 2>/dev/null
  cp "$W/$tag/workers.log" "$W/$tag-workers.log" 2>/dev/null
}

bench_job() {
  say "[gpu $GPU] forward benchmarks (default matrix, checks recorded)"
  timeout "$(left 230)" $PT perf_tests/test_forward_bench.py --benchmark-only --benchmark-json "$OUT/forward-checked.json" \
    --benchmark-columns=median,min,max,rounds --benchmark-group-by=group > "$W/forward-checked.log" 2>&1
  say "[gpu $GPU] forward: $(tail -1 "$W/forward-checked.log")"
  python3 -m cudagraph_bench gate "$OUT/forward-checked.json" --baseline baselines/nvidia-h200.json \
    --markdown "$W/gate-checked.md" > "$W/gate-checked.log" 2>&1
  say "[gpu $GPU] gate rc=$?: $(tail -1 "$W/gate-checked.log")"
  say "[gpu $GPU] padded vs bucketed benchmarks (checks recorded)"
  timeout "$(left 150)" $PT perf_tests/test_padding_bench.py --benchmark-only --models gpt2,tinyllama-1.1b \
    --benchmark-json "$OUT/padding-checked.json" --benchmark-columns=median,min,max,rounds --benchmark-group-by=group \
    > "$W/padding-checked.log" 2>&1
  say "[gpu $GPU] padding: $(tail -1 "$W/padding-checked.log")"
}

stream() {  # GPU "JOB JOB ..."
  export GPU=$1 CUDA_VISIBLE_DEVICES=$1
  local jobs=($2) n=${#jobs[@]} job
  for job in "${jobs[@]}"; do
    if [ "$job" = bench ]; then bench_job; else run_job "$job" "$n"; fi
    n=$((n - 1))
  done
  say "[gpu $GPU] stream done"
}

export -f stream run_job bench_job say left; export W OUT PT start deadline
pids=()
[ $# -ge 1 ] && { taskset -c "0-$((half - 1))" bash -c 'stream 0 "$1"' _ "$1" & pids+=($!); }
[ $# -ge 2 ] && { taskset -c "$half-$((n_cpu - 1))" bash -c 'stream 1 "$1"' _ "$2" & pids+=($!); }
wait "${pids[@]}"
say "done"
for f in "$W"/run-*.log; do grep -E "^[a-z0-9.-]+ float32 L=" "$f" | cut -c1-160; done
grep -hE "^(model|gpt2|tinyllama)" "$W"/run-*.log | grep -E "compile\+graph|^model" | cut -c1-200 | sort -u
cp "$W/steps.log" "$OUT/"
(cd "$W" && tar czf "$OUT/logs-e.tgz" --exclude='run-*/*.png' --exclude='run-*/run.json' .)
