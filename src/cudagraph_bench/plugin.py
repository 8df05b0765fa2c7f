"""pytest plugin of cudagraph-bench (loaded by the repo's root ``conftest.py``).

- options: the benchmark matrix and its round policy (:data:`cudagraph_bench.options.MATRIX_OPTIONS`,
  shared with the CLI: ``--rounds``, ``--precision-pct``, ``--max-rounds``, ``--max-time-ms``,
  ``--warmup-ms``, ``--min-time-ms``, ``--check-inputs``, ``--compile-mode`` ...) plus ``--with-compile``,
  ``--check-data-ptrs``, ``--new-tokens``, ``--decode-dtypes``, ``--decode-rounds``,
  ``--decode-steps-per-graph``, ``--cpus`` (CPU pinning, also a
  ``cudagraph-bench run`` option) and ``--keep-gc``;
- forward benchmarks are thin wrappers of :meth:`cudagraph_bench.session.Session.measure_forward`, which runs the one measurement
  pipeline of :mod:`cudagraph_bench.measure.case` (the one ``cudagraph-bench run`` runs);
- timing hygiene: the garbage collector is off while timing (pytest-benchmark's
  ``--benchmark-disable-gc``, on by default here; ``--keep-gc`` turns it back on), the process is
  pinned to ``--cpus`` at configure time, and every benchmark records the GPU's clocks, temperature,
  power and throttle reasons before and after (:mod:`cudagraph_bench.measure.gpustate`);
- GPU tests (marker ``gpu``) skip with one reason on machines without CUDA;
- ``machine_info["cuda"]``: GPU name and slug, driver, CUDA, torch and transformers versions, and one
  NVML reading ``gpu_state_at_start``, and the GPU's ``peak_memory_bandwidth`` (GB/s, NVML or datasheet,
  :func:`~cudagraph_bench.measure.roofline.peak_memory_bandwidth_gbps`); ``machine_info["gpu"]``: the
  GPU's name (``"NVIDIA H200"``, None without one); ``machine_info["cpu_affinity"]``: the CPUs the
  process may run on (pytest-benchmark's ``pytest_benchmark_update_machine_info`` hook);
- runs of different GPUs: pytest-benchmark saves (``--benchmark-save``/``--benchmark-autosave``) under
  ``<storage>/<machine id>/``, and its machine id (``utils.get_machine_id``: OS, Python implementation
  and version, word size, e.g. ``Linux-CPython-3.11-64bit``) is computed in ``BenchmarkSession``
  without any hook, so every GPU's runs share that folder. ``--benchmark-compare`` against a saved run
  of another GPU is therefore a usage error (``pytest_benchmark_compare_machine_info``, on
  ``machine_info["gpu"]``, falling back to ``["cuda"]["gpu_name"]`` for older runs); to keep the files
  apart too, give each GPU its own ``--benchmark-storage`` (e.g. ``.benchmarks/nvidia-h200``; the
  ``cudagraph-bench`` commands take the same folder as ``--storage``). ``cudagraph-bench gate`` and
  ``baseline`` refuse runs of mixed GPUs, ``gate`` another GPU's baseline, and ``compare`` notes it;
- ``--benchmark-group-by=param:NAME`` also for benchmarks without that parameter (the launch suite has
  no ``model``): they group under ``NAME=None`` (``pytest_benchmark_group_stats``);
- the ``cgb`` session fixture: models built once per session and dtype, random inputs, a
  per-case memory ledger that checks graph pools are released (reported at the end and stored in
  the JSON under ``"cudagraph_bench"``), and the cases that failed with their reasons
  (``Session.record_failure``, stored there under ``"failures"`` as ``cudagraph-bench run`` stores its own);
- the kernel-count worker starts ahead (:meth:`cudagraph_bench.session.Session.hold_profiling_worker`): when the
  first test that uses ``cgb`` is marked ``untimed`` (it measures no time: correctness checks), the worker of
  the session's first profile batch starts then and prepares (imports, CUDA context, first model) while the
  untimed tests run, and counts (then exits) before the first test that is not ``untimed`` starts, so that
  no timing overlaps it;
- a session that ran no benchmark but recorded kernel counts or failed cases (a ``--shard K/N`` of only the
  profiling tests) still writes ``--benchmark-json``, with an empty ``benchmarks`` list
  (:func:`write_records_only_json`): pytest-benchmark writes nothing when no benchmark ran;
- parametrization from the options, with plain values so that pytest-benchmark's JSON ``params`` are
  plain JSON (``{"model": "gpt2", "dtype": "float32", "seq_len": 16, "variant": "graph"}``, test id
  ``gpt2-float32-L16-graph``): the tests ask for a case fixture, whose arguments
  :func:`pytest_generate_tests` parametrizes: ``fwd_case`` (forward benchmarks; ``model, dtype,
  seq_len, variant``), ``corr_case`` (correctness; ``model, dtype, seq_len``, variant graph),
  ``count_case`` (kernel counts; ``model, dtype, seq_len``, variant eager), ``pad_case``
  (padded/bucketed benchmarks; ``model, dtype, seq_len, variant``), ``decode_case`` (decode
  benchmarks; ``model, dtype, seq_len`` = prompt tokens, ``new_tokens, variant``) and ``causal_model``
  (a causal model's name). Tools that read the JSON use ``extra_info`` (:mod:`cudagraph_bench.cases`),
  so runs saved with the older object-valued ``params`` still load;
- spreading the suite (:mod:`cudagraph_bench.sharding`: ``--shard K/N`` for CI jobs on several hosts and
  the test durations every run records; :mod:`cudagraph_bench.gpu_workers`: ``--gpu-workers``, one
  pytest-xdist worker per GPU of one host), loaded with this plugin through :data:`pytest_plugins`.
"""

from __future__ import annotations

import pytest

from cudagraph_bench.cases import Case
from cudagraph_bench.session import MIN_DECODE_ROUNDS, Session
from cudagraph_bench.options import (DECODE_COMPILE_VARIANTS, DECODE_VARIANTS,
                                     DEFAULT_COMPILE_TIMEOUT_S, DEFAULT_DECODE_COMPILE_TUNING,
                                     DEFAULT_DECODE_PROMPT_LENGTHS, DEFAULT_DECODE_STEPS_PER_GRAPH, DEFAULT_NEW_TOKENS,
                                     add_to_pytest, parse_count, parse_cpus, parse_decode_compile_tuning, parse_dtypes,
                                     parse_prompt_lengths, parse_timeout_s, parse_token_counts)

GPU_SKIP_REASON = "needs a CUDA GPU: torch.cuda.is_available() is False on this machine"
PAD_LENGTHS = (16, 50, 128, 512)
#: The plugin's other parts, loaded with it.
pytest_plugins = ["cudagraph_bench.sharding", "cudagraph_bench.gpu_workers"]


def pytest_addoption(parser):
    group = parser.getgroup("cudagraph-bench", "cudagraph-bench: eager vs CUDA graph replay")
    add_to_pytest(group)
    group.addoption("--with-compile", action="store_true", default=False,
                    help="also benchmark torch.compile variants (forward: compile, compile+graph; decode: "
                         "compile+graph, generate-static-compile); slow, off by default")
    group.addoption("--check-data-ptrs", action="store_true", default=False,
                    help="debug: before every replay check that the static buffers' data_ptr() never changed")
    group.addoption("--new-tokens", dest="new_tokens", type=parse_token_counts, default=DEFAULT_NEW_TOKENS,
                    help="decode benchmarks: new tokens per request (default: 64,128)")
    group.addoption("--decode-prompt-lengths", dest="decode_prompt_lengths", type=parse_prompt_lengths,
                    default=DEFAULT_DECODE_PROMPT_LENGTHS,
                    help="decode benchmarks: prompt lengths in tokens (default: 50); every causal model in "
                         "--models gets decode benchmarks")
    group.addoption("--decode-dtypes", dest="decode_dtypes", type=parse_dtypes, default=("bfloat16",),
                    help="decode benchmarks: dtypes (default: bfloat16)")
    group.addoption("--decode-rounds", dest="decode_rounds", type=parse_count, default=8,
                    help=f"decode benchmarks: at most this many measured requests per variant, at least "
                         f"{MIN_DECODE_ROUNDS} (or all N when N is smaller); --precision-pct decides in between "
                         "(default: 8)")
    group.addoption("--decode-steps-per-graph", dest="decode_steps_per_graph", type=parse_count,
                    default=DEFAULT_DECODE_STEPS_PER_GRAPH,
                    help=f"graphed decode: decode steps captured in one graph, the remainder replayed by a 1-step "
                         f"graph (default: {DEFAULT_DECODE_STEPS_PER_GRAPH})")
    group.addoption("--compile-timeout-s", dest="compile_timeout_s", type=parse_timeout_s,
                    default=DEFAULT_COMPILE_TIMEOUT_S,
                    help="decode compile variants (compile+graph, generate-static-compile): seconds of compiling "
                         "and warm-up before the case is recorded as failed with that reason; 0: no limit "
                         f"(default: {DEFAULT_COMPILE_TIMEOUT_S:g})")
    group.addoption("--decode-compile-tuning", dest="decode_compile_tuning", type=parse_decode_compile_tuning,
                    default=DEFAULT_DECODE_COMPILE_TUNING,
                    help="decode compile+graph: inductor settings the decode step is compiled under: "
                         "coordinate-descent (gpt-fast's: GEMVs become tuned Triton reductions fused with their "
                         "neighbours; a slower compile) or none (inductor's defaults) "
                         f"(default: {DEFAULT_DECODE_COMPILE_TUNING})")
    group.addoption("--cpus", dest="cpus", type=parse_cpus, default=None, metavar="LIST",
                    help="pin the test process to these CPUs, e.g. 0-7 or 0,2,4-6 (default: no pinning)")
    group.addoption("--keep-gc", dest="keep_gc", action="store_true", default=False,
                    help="keep Python's garbage collector on while timing (default: off while timing, "
                         "as with --benchmark-disable-gc)")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """Garbage collector off while timing (before pytest-benchmark reads its option) and CPU pinning."""
    from cudagraph_bench.envinfo import pin_cpus
    from cudagraph_bench.errors import UsageError

    config.addinivalue_line("markers", "untimed: measures no time (a correctness check): may run while the "
                                       "session's kernel-count worker is still starting")
    if not config.getoption("keep_gc", False) and hasattr(config.option, "benchmark_disable_gc"):
        config.option.benchmark_disable_gc = True
    try:
        pin_cpus(config.getoption("cpus", None))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    check_matrix_models(config)


def check_matrix_models(config) -> None:
    """Check every ``--models`` entry before collection (:func:`cudagraph_bench.models.refusals.check_models`):
    the session runs the accepted ones (``--models`` becomes them), keeps the refused ones for the terminal
    summary, the run JSON (``["cudagraph_bench"]["refused"]``) and a non-zero exit, and warns the notes (a
    classification head left out, a position limit taken from the request).

    Raises:
        pytest.UsageError: every entry was refused (one line each), or ``--attn-implementation`` is not installed.
    """
    from cudagraph_bench.errors import UsageError
    from cudagraph_bench.models.refusals import all_refused_message, check_models

    models = config.getoption("models", None) or ()
    try:
        checks = check_models(models, config.getoption("attn_implementation", None))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    if models and not checks.accepted:
        raise pytest.UsageError(all_refused_message(checks.refused))
    config.option.models = checks.accepted
    config._cgb_refused = checks.refused
    for note in checks.notes:
        config.issue_config_time_warning(pytest.PytestConfigWarning(note), stacklevel=2)


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def pytest_benchmark_update_machine_info(config, machine_info):
    """``machine_info["cuda"]`` (:func:`cudagraph_bench.envinfo.cuda_fingerprint`, the GPU's state at the
    session's start and its peak memory bandwidth), ``"gpu"`` and ``"cpu_affinity"``. A ``--gpu-workers``
    controller takes its workers' fingerprint (:func:`cudagraph_bench.gpu_workers.merged_run_cuda`)."""
    from cudagraph_bench.envinfo import cpu_affinity, machine_gpu
    from cudagraph_bench.gpu_workers import merged_run_cuda

    merged = merged_run_cuda(config)
    if merged is not None:
        machine_info["cuda"] = merged["cuda"]
    else:
        from cudagraph_bench.envinfo import cuda_fingerprint
        from cudagraph_bench.measure.gpustate import read_gpu_state
        from cudagraph_bench.measure.roofline import peak_memory_bandwidth_gbps

        machine_info["cuda"] = cuda_fingerprint()
        if machine_info["cuda"] is not None:
            machine_info["cuda"]["gpu_state_at_start"] = read_gpu_state(0)
            machine_info["cuda"]["peak_memory_bandwidth"] = peak_memory_bandwidth_gbps(0)
    machine_info["gpu"] = machine_gpu({"cuda": machine_info["cuda"]})
    machine_info["cpu_affinity"] = cpu_affinity()


def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    """``--benchmark-compare`` against a saved run of another GPU (or of none when this one has one, and
    the reverse) is a usage error: pytest-benchmark saves every GPU's runs in one machine-id folder, so
    its latest run may be another GPU's. pytest-benchmark's own hook still warns about any other
    ``machine_info`` difference."""
    from cudagraph_bench.envinfo import machine_gpu

    ours, theirs = machine_gpu(machine_info), machine_gpu(compared_benchmark.get("machine_info"))
    if ours != theirs:
        raise pytest.UsageError(
            f"--benchmark-compare: the saved run was on GPU {theirs or 'none'}, this session runs on "
            f"{ours or 'none'}: compare against a run of this GPU (--benchmark-compare=NNNN), or keep each "
            f"GPU's runs in its own --benchmark-storage")


@pytest.hookimpl(tryfirst=True)
def pytest_benchmark_group_stats(config, benchmarks, group_by):
    """``--benchmark-group-by=param:NAME`` for benchmarks without that parameter (the launch benchmarks
    have no ``model``, runs saved before the plain ``params`` have other names): they get ``NAME=None``
    instead of pytest-benchmark's KeyError. Fills the flat result dicts (new ``params`` dicts, the tests'
    own are untouched) and returns pytest-benchmark's own grouping of them. The checkout's conftest.py
    exports it, so that pytest-benchmark's standalone ``compare --group-by=param:model``, which takes this
    hook from ``./conftest.py``, groups the same way when run from the checkout."""
    from pytest_benchmark.plugin import pytest_benchmark_group_stats as group_stats

    benchmarks = list(benchmarks)   # the standalone compare passes a one-pass iterator
    names = [g[len("param:"):] for g in group_by.split(",") if g.startswith("param:")]
    for bench in benchmarks if names else ():
        params = bench.get("params") or {}
        if any(name not in params for name in names):
            bench["params"] = {**{name: None for name in names}, **params}
    return group_stats(config=config, benchmarks=benchmarks, group_by=group_by)


def pytest_benchmark_update_json(config, benchmarks, output_json):
    ledger = getattr(config, "_cgb_ledger", None)
    if ledger is not None:
        from cudagraph_bench.results.record import attach_kernel_counts

        output_json["cudagraph_bench"] = summary = ledger.summary()
        # profiled in worker processes (kernel_counts.py)
        attach_kernel_counts(output_json.get("benchmarks", []), summary["kernel_counts"])
    if getattr(config, "_cgb_refused", ()):
        from cudagraph_bench.models.refusals import refused_json

        output_json.setdefault("cudagraph_bench", {})["refused"] = refused_json(config._cgb_refused)


def benchmark_document(config, benchmarks, machine_info) -> dict:
    """What pytest-benchmark writes for ``--benchmark-json``, made through its hooks (its own
    ``commit_info``, ``pytest_benchmark_generate_json`` with ``datetime`` and ``version``, and every
    ``pytest_benchmark_update_json``: this plugin's ``cudagraph_bench`` section, the shard and durations of
    :mod:`cudagraph_bench.sharding`). ``benchmarks``: pytest-benchmark's fixtures (``[]`` for none);
    ``machine_info``: ``BenchmarkSession.get_machine_info()``."""
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    config.hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit_info)
    doc = config.hook.pytest_benchmark_generate_json(config=config, benchmarks=benchmarks, include_data=True,
                                                     machine_info=machine_info, commit_info=commit_info)
    config.hook.pytest_benchmark_update_json(config=config, benchmarks=benchmarks, output_json=doc)
    return doc


def json_path(bs) -> str | None:
    """``--benchmark-json``'s path from pytest-benchmark's session ``bs`` (pytest-benchmark < 5.3 opens the
    file itself, as ``argparse.FileType``: it is closed here and its name returned); None when not given."""
    path = bs.json
    if hasattr(path, "write"):
        path.close()
        path = path.name
    return str(path) if path else None


def records_note(records: dict[str, int]) -> str:
    """``{"kernel_counts": 38}`` as ``"38 kernel count(s)"`` (the counts of
    :func:`~cudagraph_bench.results.record.records_without_benchmarks`)."""
    names = {"kernel_counts": "kernel count(s)", "failures": "failed or skipped case(s)"}
    return " and ".join(f"{n} {names.get(key, key)}" for key, n in records.items())


def write_records_only_json(config) -> str | None:
    """``--benchmark-json PATH`` of a session that ran no benchmark but recorded kernel counts or failed
    cases (:func:`~cudagraph_bench.results.record.records_without_benchmarks` of the ledger's summary), e.g.
    a ``--shard K/N`` that held only the profiling tests: pytest-benchmark writes no file when no benchmark
    ran ("Not saving anything"), and ``cudagraph-bench merge`` would lose that shard's kernel counts.

    PATH is written atomically (:func:`cudagraph_bench.fsio.write_text_atomic`) as pytest-benchmark writes it
    (:func:`benchmark_document`: its ``machine_info``, ``commit_info``, ``datetime``, ``version``, an
    empty ``benchmarks`` list and the ``cudagraph_bench`` section with the shard), then taken off
    pytest-benchmark's session so that it does not warn that nothing was saved. Nothing is written with
    nothing recorded (every benchmark skipped, as on a machine without CUDA: no file, as before), in an
    xdist worker (the ``--gpu-workers`` controller writes the workers' records,
    :mod:`cudagraph_bench.gpu_workers`), or for ``--benchmark-save``/``--benchmark-autosave``: a saved run
    without benchmarks would be pytest-benchmark's latest run to ``--benchmark-compare`` against.

    Returns the path written, else None."""
    bs = getattr(config, "_benchmarksession", None)
    ledger = getattr(config, "_cgb_ledger", None)
    if bs is None or ledger is None or not bs.json or bs.benchmarks or hasattr(config, "workerinput"):
        return None
    from pytest_benchmark.utils import safe_dumps

    from cudagraph_bench.fsio import write_text_atomic
    from cudagraph_bench.results.record import records_without_benchmarks

    records = records_without_benchmarks(ledger.summary())
    if not records:
        return None
    doc = benchmark_document(config, [], bs.get_machine_info())
    path = json_path(bs)
    write_text_atomic(path, safe_dumps(doc, ensure_ascii=True, indent=4))
    bs.json = None
    bs.logger.info(f"No benchmark ran; wrote the session's {records_note(records)} in: {path}", purple=True)
    return path


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    """Before pytest-benchmark saves (its own wrapper, inside this one): :func:`write_records_only_json`; a session
    whose ``--models`` had refused entries exits non-zero (:func:`cudagraph_bench.models.refusals.exit_status`)."""
    from cudagraph_bench.models.refusals import exit_status

    write_records_only_json(session.config)
    session.exitstatus = exit_status(session.exitstatus, getattr(session.config, "_cgb_refused", ()))
    return (yield)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    refused = getattr(config, "_cgb_refused", ())
    if refused:
        from cudagraph_bench.models.refusals import refusal_lines

        terminalreporter.write_sep("-", f"cudagraph-bench: {len(refused)} model(s) of --models refused: the "
                                        "session exits non-zero")
        for line in refusal_lines(refused):
            terminalreporter.write_line(line)
    ledger = getattr(config, "_cgb_ledger", None)
    if ledger is None or ledger.start_mib is None:
        return
    s = ledger.summary()
    terminalreporter.write_sep("-", "cudagraph-bench GPU memory")
    terminalreporter.write_line(
        f"reserved at start {s['memory_reserved_start_mib']:.0f} MiB, at end {s['memory_reserved_end_mib']:.0f} MiB; "
        f"{s['graph_cases']} graph cases, largest growth left behind by one case "
        f"{s['max_case_growth_mib']:.0f} MiB, after the first {s['max_case_growth_after_first_mib']:.0f} MiB "
        f"(0 = every graph pool was released; the first case also keeps the warmup side stream's cuBLAS workspace; "
        f"the padded and bucketed graphs the session holds for a model's next prompt length are not counted)")


def _forward_variants(config) -> tuple[str, ...]:
    return ("eager", "graph") + (("compile", "compile+graph") if config.getoption("with_compile") else ())


def _decode_variants(config) -> tuple[str, ...]:
    """:data:`~cudagraph_bench.options.DECODE_VARIANTS`, the compile ones only with ``--with-compile``."""
    with_compile = config.getoption("with_compile")
    return tuple(v for v in DECODE_VARIANTS if with_compile or v not in DECODE_COMPILE_VARIANTS)


#: Parameter names of the forward, correctness, kernel-count and padding tests (pytest-benchmark's
#: ``params``); the case fixtures build a :class:`~cudagraph_bench.cases.Case` from them.
CASE_ARGNAMES = ("model", "dtype", "seq_len", "variant")
#: Parameter names of the decode benchmarks (``seq_len``: prompt tokens).
DECODE_ARGNAMES = ("model", "dtype", "seq_len", "new_tokens", "variant")


def _parametrize_cases(metafunc, argnames, cases: list[Case]) -> None:
    """Parametrize ``argnames`` (a prefix of ``model, dtype, seq_len, variant``) with plain str/int values,
    one parameter set per case, ids ``Case.test_id`` (``gpt2-float32-L16-graph``)."""
    metafunc.parametrize(argnames, [tuple(getattr(c, name) for name in argnames) for c in cases],
                         ids=[c.test_id for c in cases])


def pytest_generate_tests(metafunc):
    """The benchmark matrix from the options, as plain parameters (str and int), so that
    pytest-benchmark stores JSON ``params`` such as ``{"model": "gpt2", "dtype": "float32", "seq_len": 16,
    "variant": "graph"}`` and ``--benchmark-group-by=param:model`` works. A test asks for one case fixture;
    asking for two, or also parametrizing ``model``/``dtype``/``seq_len``/``variant`` itself, is a
    duplicate parametrization error."""
    opt = metafunc.config.getoption
    models, lengths, dtypes = opt("models"), opt("prompt_lengths"), opt("dtypes")
    if "fwd_case" in metafunc.fixturenames:
        cases = [Case(m, d, n, v) for m in models for d in dtypes for n in lengths
                 for v in _forward_variants(metafunc.config)]
        _parametrize_cases(metafunc, CASE_ARGNAMES, cases)
    if "corr_case" in metafunc.fixturenames:
        cases = [Case(m, d, n, "graph") for m in models for d in dtypes for n in lengths]
        _parametrize_cases(metafunc, CASE_ARGNAMES[:3], cases)
    if "count_case" in metafunc.fixturenames:
        cases = [Case(m, d, n, "eager") for m in models for d in dtypes for n in lengths]
        _parametrize_cases(metafunc, CASE_ARGNAMES[:3], cases)
    if "pad_case" in metafunc.fixturenames:
        pad_lengths = [n for n in lengths if n in PAD_LENGTHS] or [n for n in lengths if n < opt("pad_to")]
        cases = [Case(m, d, n, v) for m in models for d in dtypes for n in pad_lengths for v in ("padded", "bucketed")]
        _parametrize_cases(metafunc, CASE_ARGNAMES, cases)
    if "decode_case" in metafunc.fixturenames:
        from cudagraph_bench.models.presets import kind_of

        causal = [m for m in models if kind_of(m) == "causal"]
        cases = [(m, d, n, k, v) for m in causal for d in opt("decode_dtypes") for n in opt("decode_prompt_lengths")
                 for k in opt("new_tokens") for v in _decode_variants(metafunc.config)]
        if not causal:
            metafunc.parametrize(DECODE_ARGNAMES, [_no_causal_model(models, (None,) * len(DECODE_ARGNAMES))])
        else:
            metafunc.parametrize(DECODE_ARGNAMES, cases, ids=[f"{m}-{d}-L{n}-new{k}-{v}" for m, d, n, k, v in cases])
    if "causal_model" in metafunc.fixturenames:
        from cudagraph_bench.models.presets import kind_of

        causal = [m for m in models if kind_of(m) == "causal"]
        metafunc.parametrize("causal_model", causal or [_no_causal_model(models, None)])


def _no_causal_model(models, values):
    """The one parameter set of a decode test when ``--models`` holds no causal LM: skipped with that
    reason (pytest would otherwise say only "got empty parameter set")."""
    return pytest.param(*(values if isinstance(values, tuple) else (values,)), id="no-causal-model",
                        marks=pytest.mark.skip(reason=f"decode needs a causal LM: --models {','.join(models)} "
                                                      "holds none (encoders such as bert-tiny have no decode)"))


# The case fixtures: their arguments are parametrized directly by pytest_generate_tests (no fixture of
# those names exists), so pytest-benchmark's ``params`` hold the plain values, not these objects.
@pytest.fixture
def fwd_case(model, dtype, seq_len, variant) -> Case:
    """A forward benchmark's :class:`~cudagraph_bench.cases.Case` (variant eager, graph, [compile, compile+graph])."""
    return Case(model, dtype, seq_len, variant)


@pytest.fixture
def corr_case(model, dtype, seq_len) -> Case:
    """A correctness test's case: variant ``graph``."""
    return Case(model, dtype, seq_len, "graph")


@pytest.fixture
def count_case(model, dtype, seq_len) -> Case:
    """A kernel-count test's case: variant ``eager``."""
    return Case(model, dtype, seq_len, "eager")


@pytest.fixture
def pad_case(model, dtype, seq_len, variant) -> Case:
    """A padding benchmark's case: variant ``padded`` or ``bucketed``."""
    return Case(model, dtype, seq_len, variant)


@pytest.fixture
def decode_case(model, dtype, seq_len, new_tokens, variant) -> tuple[str, str, int, int, str]:
    """A decode benchmark's ``(model, dtype, prompt tokens, new tokens, variant)``."""
    return (model, dtype, seq_len, new_tokens, variant)

@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Before a test that is not ``untimed`` starts, the session's held kernel-count worker counts its batch
    and exits (:meth:`~cudagraph_bench.session.Session.count_with_held_worker`): no test is timed while it
    holds the GPU. Its seconds are recorded under the first profiling test (time per part, test durations),
    which reads the counts; they are outside this test's own phases."""
    session = getattr(item.config, "_cgb_session", None)
    if session is not None and item.get_closest_marker("untimed") is None:
        from cudagraph_bench.sharding import session_state

        counted = session.count_with_held_worker()
        state = session_state(item.config)
        if counted is not None and state is not None:
            from cudagraph_bench.results.shards import base_nodeid

            nodeid, seconds = counted
            state.ran_s[base_nodeid(nodeid)] = state.ran_s.get(base_nodeid(nodeid), 0.0) + seconds
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    """The session's first ``untimed`` test that uses ``cgb`` starts the held kernel-count worker
    (:meth:`~cudagraph_bench.session.Session.hold_profiling_worker`, once per session), unless benchmarks
    are skipped (the counting tests then do not run) or there is no GPU."""
    session = getattr(item, "funcargs", {}).get("cgb")
    if session is None or session.hold_tried or item.get_closest_marker("untimed") is None:
        return
    session.hold_tried = True
    if item.config.getoption("benchmark_skip", False):
        return
    import torch

    if torch.cuda.is_available():
        session.hold_profiling_worker(item.session.items)


@pytest.fixture(scope="session")
def cgb(request):
    session = Session(request.config)
    request.config._cgb_session = session
    yield session
    request.config._cgb_session = None
    session.close()


__all__ = ["Session", "GPU_SKIP_REASON"]
