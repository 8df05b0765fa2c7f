# Two commands for a new user:  make bench   (set up + run the benchmarks)
#                                make test    (set up + run the tests)
# Variables (CI and GPU runners override them; the commands stay the same):
#   TORCH        pip requirement for torch (default: plain "torch"; CPU CI: TORCH=torch==2.13.0); changing it, or
#                TRANSFORMERS, reinstalls into the venv in place (pip moves only what changed)
#   TRANSFORMERS pip requirement that pins transformers inside the supported range (default: the newest
#                release pip finds; CI also runs TRANSFORMERS=transformers==5.17.0, the oldest)
#   VENV         virtual environment folder (default .venv)
#   PIP_ARGS     extra `pip install` arguments of the setup (CI: --no-compile, bytecode written as first imported)
#   PYTEST_ARGS  extra pytest arguments, e.g. PYTEST_ARGS="--models gpt2 --prompt-lengths 50"
#   TEST_WORKERS pytest-xdist workers of `make test` (default: one per CPU, at most 8; 0: the tests in one
#                process; PYTEST_ARGS="-n N" wins too). On a GPU machine the GPU tests of every worker share the GPU
#   RUN_JSON     where `make bench` and `make gpu-gate` write the pytest-benchmark JSON (default out/bench.json):
#                a regular file (a device, a pipe or a folder is refused), and an existing one only when it is a
#                run this tool wrote (any other file is refused before pytest runs). pytest writes a temporary file
#                beside it, renamed into place when pytest ran to its end (exit 0, or 1: some test failed); a usage
#                error, an interrupt (Ctrl-C), nothing collected or nothing measured (no GPU) keeps the previous run
#   GATE_ARGS    extra `cudagraph-bench gate` arguments for `make gpu-gate`, e.g. "--markdown out/gate.md"
#   CONFIRM      reruns that must confirm a regression the gate finds in the run (default 4; 0: none)
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch
TRANSFORMERS ?=
PIP_ARGS ?=
PYTEST_ARGS ?=
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ "$$n" -gt 8 ] && n=8; echo $$n)
RUN_JSON ?= out/bench.json
GATE_ARGS ?=
CONFIRM ?= 4
PY := $(VENV)/bin/python
# Shell lines of bench and gpu-gate: refuse a RUN_JSON that is not a regular file (`rm` or `mv` would replace a
# device node such as /dev/full), or a file that is no run this tool wrote (fsio.written_here, the rule every output
# of the tool follows, run from the checkout's src/ before anything is installed); the new run's temporary file
# beside RUN_JSON, removed on any exit (a Ctrl-C included, which says RUN_JSON was kept) unless it was renamed into
# place; after a run that wrote nothing, no empty file or folder behind
CHECK_RUN_JSON = if [ -e "$(RUN_JSON)" ] && [ ! -f "$(RUN_JSON)" ] || [ -z "$(notdir $(RUN_JSON))" ]; then \
	  echo "make $@: RUN_JSON=$(RUN_JSON) is not a regular file (a folder, a device or a pipe, which make never \
replaces): give RUN_JSON a file path such as out/bench.json"; exit 2; fi; \
	PYTHONPATH=src $(PYTHON) -c 'import sys; from cudagraph_bench.fsio import written_here; \
	  sys.exit(0 if written_here(sys.argv[1], ".json", "pytest") else 3)' "$(RUN_JSON)"; rc=$$?; if [ $$rc -eq 3 ]; then \
	  echo "make $@: RUN_JSON=$(RUN_JSON) is not a run that cudagraph-bench wrote, and make never replaces another \
file: give RUN_JSON another path, or remove that file first"; exit 2; elif [ $$rc -ne 0 ]; then exit $$rc; fi
# gpu-gate: an earlier gate's confirmation runs beside RUN_JSON (<stem>.confirm-*.json, never overwritten by `gate
# --confirm`): checked before pytest runs and removed (with the argument "remove") before the new run is gated, only
# when every one is a run this tool wrote; any other file of that name is refused, exit 2
OLD_CONFIRM_RUNS = PYTHONPATH=src $(PYTHON) -c 'import glob, os, sys; from cudagraph_bench.fsio import written_here; \
	runs = sorted(glob.glob(glob.escape(sys.argv[1]) + ".confirm-*.json")); \
	other = [p for p in runs if not written_here(p, ".json", "pytest")]; \
	other and (print(f"make gpu-gate: {other[0]} is not a run that cudagraph-bench wrote, and make never removes \
another file: move it away, or give RUN_JSON another path"), sys.exit(2)); \
	[os.remove(p) for p in runs if sys.argv[2:]]' "$(basename $(RUN_JSON))"
NEW_RUN = tmp="$(dir $(RUN_JSON)).$(notdir $(RUN_JSON)).$$$$.new"; trap 'rm -f "$$tmp"' EXIT; \
	trap '[ -e "$$tmp" ] && echo "make $@: interrupted: $(RUN_JSON) kept as it was"; exit 130' INT TERM
DROP_EMPTY_RUN = if [ ! -s "$$tmp" ]; then rm -f "$$tmp"; find .benchmarks -depth -type d -empty -delete 2>/dev/null; \
	  rmdir $(dir $(RUN_JSON)) 2>/dev/null; fi
# exit 0 or 1 (a test failed, the run is whole): the new run replaces RUN_JSON; 2 interrupted, 3 internal error,
# 4 usage error: RUN_JSON is kept as it was
KEEP_UNLESS_WHOLE = if [ $$rc -gt 1 ] && [ $$rc -ne 5 ]; then echo "make $@: pytest exit $$rc (2: interrupted, 3: internal \
error, 4: usage error): $(RUN_JSON) kept as it was"; exit $$rc; fi

.PHONY: setup bench test gpu-gate clean FORCE

# The venv remembers the TORCH and TRANSFORMERS it was installed with ($(VENV)/.requirements); other values
# reinstall it, and say so (a venv made by hand: write that file, then touch $(VENV)/.installed).
$(VENV)/.requirements: FORCE
	@mkdir -p $(VENV); printf '%s\n' 'TORCH=$(TORCH) TRANSFORMERS=$(TRANSFORMERS)' > $@.new; \
	if [ -f $@ ] && cmp -s $@ $@.new; then rm -f $@.new; else \
	  if [ -f $@ ]; then echo "make: $(VENV) was installed with $$(cat $@), now $$(cat $@.new): reinstalling"; fi; \
	  mv $@.new $@; fi

$(VENV)/.installed: pyproject.toml $(VENV)/.requirements
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PIP_ARGS) "$(TORCH)"
	$(PY) -m pip install -q $(PIP_ARGS) -e ".[dev]" $(or $(TRANSFORMERS),--upgrade transformers)
	@touch $@

setup: $(VENV)/.installed

# Benchmarks (GPU): eager vs graph replay etc.; on a machine without CUDA every benchmark skips with the reason
# and make bench fails (nothing was measured), like make gpu-gate.
# Exit status: GNU make exits 2 whenever a recipe fails; the recipe's own status, which make prints as
# "Error N" and a script can read by running the recipe's pytest line itself, is pytest's, or 1 when nothing
# was collected, 2 when nothing was measured. A failed run leaves no empty out/ or .benchmarks/ folder behind.
# Without an NVIDIA GPU (no nvidia-smi) it says so before installing anything (a CUDA torch would be downloaded
# only to skip every benchmark), unless PYTEST_ARGS runs the pipeline on the CPU (--device cpu or --device=cpu).
bench:
	@if ! command -v nvidia-smi >/dev/null 2>&1 && ! printf '%s' '$(PYTEST_ARGS)' | grep -Eq -- '--device(=| +)cpu'; then \
	  echo "make bench: no NVIDIA GPU here (nvidia-smi not found): the benchmarks need one. To try the pipeline on the CPU:"; \
	  echo "  make bench TORCH=torch==2.13.0 PYTEST_ARGS=\"--device cpu --models gpt2 --prompt-lengths 16\""; exit 2; fi
	@$(CHECK_RUN_JSON)
	@$(MAKE) --no-print-directory $(VENV)/.installed
	@mkdir -p $(dir $(RUN_JSON))
	@$(NEW_RUN); set -x; \
	$(PY) -m pytest perf_tests --benchmark-only --benchmark-json="$$tmp" --benchmark-autosave --benchmark-save-data -rfEs \
	  -W "ignore:Not saving anything" $(PYTEST_ARGS); \
	{ rc=$$?; set +x; } 2>/dev/null; $(DROP_EMPTY_RUN); $(KEEP_UNLESS_WHOLE); \
	if [ $$rc -eq 5 ]; then echo "make bench: pytest collected no benchmarks (exit 5): check PYTEST_ARGS (-k, --models)"; exit 1; fi; \
	if [ ! -s "$$tmp" ]; then if [ $$rc -eq 1 ]; then exit 1; fi; \
	  echo "make bench: no benchmark ran (see the skip reasons above; a CUDA GPU is needed): $(RUN_JSON) not written"; \
	  exit 2; fi; \
	mv -f "$$tmp" "$(RUN_JSON)" && echo "make bench: wrote $(RUN_JSON)"; exit $$rc

# Tests: CPU unit tests of the harness + GPU correctness tests (skipped without CUDA). Benchmarks are not timed here.
# With pytest-xdist (the dev extra) on TEST_WORKERS workers; --dist loadgroup keeps the tests of a module that share
# one expensive session (an xdist_group mark) in one worker.
test: $(VENV)/.installed
	$(PY) -m pytest tests perf_tests --benchmark-skip -rfEs -o faulthandler_timeout=600 \
	  $$($(PY) -c 'import xdist' 2>/dev/null && echo "-n $(TEST_WORKERS) --dist loadgroup") $(PYTEST_ARGS); \
	rc=$$?; if [ $$rc -eq 5 ]; then echo "make test: pytest collected no tests (exit 5): check PYTEST_ARGS (-k filters)"; exit 1; fi; exit $$rc

# The GPU CI job, runnable locally: every benchmark in one pytest session on a quiet GPU (each records its own
# check against eager in the JSON), then the GPU correctness tests in a second session spread over TEST_WORKERS
# xdist workers (as make test runs them), then the gate against the GPU's baseline (found in the checkout's
# baselines/, whatever the working directory); a regression found in the run is rerun CONFIRM times in separate
# processes and must show there too (rank test). Fails (exit 1) on a failed test, a wrong graph, a reduction below
# the threshold or a confirmed regression; exit 2 when nothing ran (the recipe's status, printed by make as
# "Error N"; make itself then exits 2).
gpu-gate: $(VENV)/.installed
	@$(CHECK_RUN_JSON)
	@$(OLD_CONFIRM_RUNS)
	@mkdir -p $(dir $(RUN_JSON))
	@$(NEW_RUN); set -x; \
	$(PY) -m pytest perf_tests --benchmark-only --benchmark-json="$$tmp" --benchmark-autosave --benchmark-save-data \
	  -rfEs --durations=5 -W "ignore:Not saving anything" $(PYTEST_ARGS); \
	{ rc=$$?; set +x; } 2>/dev/null; $(DROP_EMPTY_RUN); $(KEEP_UNLESS_WHOLE); \
	if [ ! -s "$$tmp" ]; then echo "make gpu-gate: no benchmark ran (pytest exit $$rc; no CUDA GPU?): nothing to gate"; exit 2; fi; \
	$(OLD_CONFIRM_RUNS) remove || exit $$?; mv -f "$$tmp" "$(RUN_JSON)"; set -x; \
	$(PY) -m pytest perf_tests --benchmark-skip -rfEs \
	  $$($(PY) -c 'import xdist' 2>/dev/null && echo "-n $(TEST_WORKERS) --dist loadgroup") $(PYTEST_ARGS); \
	{ trc=$$?; set +x; } 2>/dev/null; if [ $$trc -eq 5 ]; then trc=0; fi; \
	if [ $$trc -gt 1 ]; then echo "make gpu-gate: the correctness tests stopped (pytest exit $$trc): nothing gated"; exit $$trc; fi; \
	$(PY) -m cudagraph_bench gate $(RUN_JSON) --confirm $(CONFIRM) $(GATE_ARGS); grc=$$?; \
	if [ $$rc -ne 0 ] || [ $$trc -ne 0 ]; then if [ $$grc -ne 2 ]; then \
	  echo "make gpu-gate: pytest failed (benchmarks exit $$rc, correctness tests exit $$trc): see the failed tests above"; exit 1; fi; fi; \
	exit $$grc

clean:
	rm -rf $(VENV) out .benchmarks .pytest_cache
