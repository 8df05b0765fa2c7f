# Sourced by the scripts of scripts/device/ (run them from the repo root of a GPU machine that may have no
# package index). Sets OUT (default out/device; what a device call brings back) and defines:
#   editable_install    `make setup` without downloads: an editable install into the image's python3 and a
#                       VENV (/tmp/cgb-venv) whose bin/python runs that python3, for `make ... VENV=$VENV`
#   precompile_bytecode every module on sys.path compiled once into a cache all processes of the run read
#                       (PYTHONPYCACHEPREFIX), as a pip install leaves them: the image sets
#                       PYTHONDONTWRITEBYTECODE=1 and ships no .pyc, so each process would compile torch and
#                       transformers again. Call it directly (not in $(...)): the export must reach the caller.
#   pack FILE           gzip FILE (-9 -n) into FILE.gz, the form results/nvidia-h200/ commits a run in
set -u
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
OUT="${OUT:-out/device}"; mkdir -p "$OUT"
VENV=/tmp/cgb-venv

editable_install() {
  [ -f "$VENV/.installed" ] && return 0
  python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > "$OUT/pip.log" 2>&1 ||
    { echo "editable install failed (see $OUT/pip.log)" >&2; return 1; }
  mkdir -p "$VENV/bin"
  printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" > "$VENV/bin/python"; chmod +x "$VENV/bin/python"
  printf '%s\n' 'TORCH=torch TRANSFORMERS=' > "$VENV/.requirements"    # what the Makefile's defaults record
  touch "$VENV/.installed"
}

precompile_bytecode() {
  export PYTHONPYCACHEPREFIX="${PYCACHE:-/tmp/cgb-pycache}"
  local paths
  paths=$(python3 -c "import os, sys; print(' '.join(p for p in sys.path if os.path.isdir(p)))")
  python3 -m compileall -q -j 0 -x '/tests?/' $paths > /dev/null 2>&1
  echo "bytecode compiled into $PYTHONPYCACHEPREFIX ($(find "$PYTHONPYCACHEPREFIX" -name '*.pyc' | wc -l) files)"
}

pack() { [ -s "$1" ] && gzip -9 -n -f "$1" && echo "wrote $1.gz"; }
