# Shared preamble of the device scripts (source it): `device_run NAME SECONDS` sets OUT (default
# out/NAME), the scratch folder W=/tmp/cgb-NAME (emptied), the deadline SECONDS from now, and defines
# left N (N or the seconds left before the deadline, at least 5), say MSG (timestamped, into
# $W/steps.log) and PT (the pytest command line).
device_run() {
  set -u
  export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
  OUT="${OUT:-out/$1}"; W="/tmp/cgb-$1"; rm -rf "$W"; mkdir -p "$W" "$OUT"
  start=$(date +%s); deadline=$((start + $2))
  PT="python3 -m pytest -p no:cacheprovider -q -rs"
}
left() { local l=$((deadline - $(date +%s))); [ "$l" -gt "$1" ] && echo "$1" || echo "$((l > 5 ? l : 5))"; }
say() { echo "[$(( $(date +%s) - start )) s] $*" | tee -a "$W/steps.log"; }

# The image sets PYTHONDONTWRITEBYTECODE=1 and ships no .pyc files: every Python process of a run (pytest, each
# xdist worker, the kernel-count worker, the launch-count child, inductor's compile workers) compiles torch and
# transformers from source again (one import of torch, transformers and inductor took 12.9 s there, the first 17.9 s:
# results/nvidia-h200/steps/default-suite-frozen-gc-one-then-two-gpus.log).
# A pip-installed environment has them compiled at install time. precompile_bytecode gives the run the same:
# everything on sys.path (stdlib, site-packages) and the repo's src (run it from the repo root) compiled once,
# before any timed step, into a cache folder (PYTHONPYCACHEPREFIX, exported: every process of the run reads it),
# the image left as it is. Call it directly, not in $(...) or a pipe (a redirect is fine): the export must reach
# the caller's shell. Prints one line.
precompile_bytecode() {
  export PYTHONPYCACHEPREFIX="${PYCACHE:-/tmp/cgb-pycache}"
  local t0 paths n s
  t0=$(date +%s.%N)
  paths=$(PYTHONPATH="$PWD/src" python3 -c "import os, sys; print(' '.join(p for p in sys.path if os.path.isdir(p)))")
  python3 -m compileall -q -j 0 -x '/tests?/' $paths > /dev/null 2>&1
  n=$(find "$PYTHONPYCACHEPREFIX" -name '*.pyc' | wc -l)
  s=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
  echo "bytecode compiled into $PYTHONPYCACHEPREFIX ($n files) in $s s"
}
