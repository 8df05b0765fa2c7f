"""pytest plugin of cudagraph-bench (loaded by the repo's root ``conftest.py``).

- options: the benchmark matrix and its round policy (:data:`cudagraph_bench.options.MATRIX_OPTIONS`,
  shared with the CLI: ``--rounds``, ``--precision-pct``, ``--max-rounds``, ``--warmup-ms``,
  ``--min-time-ms``, ``--check-inputs``, ``--compile-mode`` ...) plus ``--with-compile``,
  ``--check-data-ptrs``, ``--new-tokens``, ``--decode-dtypes``, ``--decode-rounds``,
  ``--decode-steps-per-graph``, ``--cpus`` (CPU pinning, also a
  ``cudagraph-bench run`` option) and ``--keep-gc``;
- forward benchmarks are thin wrappers of :meth:`Session.measure_forward`, which runs the one measurement
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

import os

import pytest

from cudagraph_bench.cases import Case
from cudagraph_bench.options import (DECODE_COMPILE_VARIANTS, DECODE_VARIANTS, DEFAULT_DECODE_PROMPT_LENGTHS,
                                     DEFAULT_DECODE_STEPS_PER_GRAPH, DEFAULT_NEW_TOKENS, add_to_pytest, parse_count,
                                     parse_cpus, parse_dtypes, parse_prompt_lengths, parse_token_counts)

GPU_SKIP_REASON = "needs a CUDA GPU: torch.cuda.is_available() is False on this machine"
#: Fewest measured requests of a decode benchmark (``--decode-rounds`` is the most; the precision target
#: decides in between).
MIN_DECODE_ROUNDS = 3
#: Largest share of GPU memory that the session's cached models may hold before the oldest is dropped.
MODEL_CACHE_SHARE = 0.3
#: Static KV cache of the decode benchmarks: at least this many tokens (a multiple of it).
DECODE_CACHE_STEP = 256
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
                         f"{MIN_DECODE_ROUNDS}; --precision-pct decides in between (default: 8)")
    group.addoption("--decode-steps-per-graph", dest="decode_steps_per_graph", type=parse_count,
                    default=DEFAULT_DECODE_STEPS_PER_GRAPH,
                    help=f"graphed decode: decode steps captured in one graph, the remainder replayed by a 1-step "
                         f"graph (default: {DEFAULT_DECODE_STEPS_PER_GRAPH})")
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

    if not config.getoption("keep_gc", False) and hasattr(config.option, "benchmark_disable_gc"):
        config.option.benchmark_disable_gc = True
    try:
        pin_cpus(config.getoption("cpus", None))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    check_model_directories(config.getoption("models", None) or ())


def check_model_directories(models) -> None:
    """Read the ``config.json`` of every ``save_pretrained`` directory in ``--models`` before collection,
    so that a checkpoint the suite cannot measure (an encoder-decoder such as T5, a config transformers
    cannot read) is one usage error with its reason, not a collection traceback.

    Raises:
        pytest.UsageError: the reason of :func:`~cudagraph_bench.models.presets.directory_config`.
    """
    import os

    from cudagraph_bench.errors import UnknownModelError
    from cudagraph_bench.models.presets import directory_config

    for name in models:
        if os.path.isdir(name):
            try:
                directory_config(name)
            except UnknownModelError as exc:
                raise pytest.UsageError(f"--models: {exc}") from None


def pytest_collection_modifyitems(config, items):
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


def pytest_benchmark_update_machine_info(config, machine_info):
    from cudagraph_bench.envinfo import cpu_affinity, cuda_fingerprint, machine_gpu
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
    have no ``model``): they get ``NAME=None`` instead of pytest-benchmark's KeyError. Fills the flat
    result dicts (new ``params`` dicts, the tests' own are untouched) and lets pytest-benchmark group."""
    names = [g[len("param:"):] for g in group_by.split(",") if g.startswith("param:")]
    for bench in benchmarks if names else ():
        params = bench.get("params") or {}
        if any(name not in params for name in names):
            bench["params"] = {**{name: None for name in names}, **params}
    return None


def pytest_benchmark_update_json(config, benchmarks, output_json):
    ledger = getattr(config, "_cgb_ledger", None)
    if ledger is None:
        return
    output_json["cudagraph_bench"] = ledger.summary()
    for bench in output_json.get("benchmarks", []):   # profiled in worker processes (kernel_counts.py)
        info = bench.get("extra_info", {})
        if info.get("suite") == "forward" and info.get("variant") == "eager":
            key = (info.get("model"), info.get("dtype"), info.get("seq_len"))
            info.update(ledger.kernel_counts.get(key, {}))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    ledger = getattr(config, "_cgb_ledger", None)
    if ledger is None or ledger.start_mib is None:
        return
    s = ledger.summary()
    terminalreporter.write_sep("-", "cudagraph-bench GPU memory")
    terminalreporter.write_line(
        f"reserved at start {s['memory_reserved_start_mib']:.0f} MiB, at end {s['memory_reserved_end_mib']:.0f} MiB; "
        f"{s['graph_cases']} graph cases, largest growth left behind by one case "
        f"{s['max_case_growth_mib']:.0f} MiB, after the first {s['max_case_growth_after_first_mib']:.0f} MiB "
        f"(0 = every graph pool was released; the first case also keeps the warmup side stream's cuBLAS workspace)")


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
        metafunc.parametrize(DECODE_ARGNAMES, cases, ids=[f"{m}-{d}-L{n}-new{k}-{v}" for m, d, n, k, v in cases])
    if "causal_model" in metafunc.fixturenames:
        from cudagraph_bench.models.presets import kind_of

        causal = [m for m in models if kind_of(m) == "causal"]
        metafunc.parametrize("causal_model", causal)


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


class MemoryLedger:
    """Reserved GPU memory at the start and end of the session and around each graph case; also what the
    session's JSON lists besides the benchmarks: kernel counts, and the cases that failed
    (``failures``, :meth:`Session.record_failure`)."""

    def __init__(self):
        self.start_mib = None
        self.end_mib = None
        self.cases: list[tuple[str, float, float]] = []   # (case id, reserved before, after release) MiB
        # (model, dtype, seq_len) -> fields of its eager forward benchmark (n_kernels, gpu_busy_ms)
        self.kernel_counts: dict[tuple[str, str, int], dict] = {}
        self.failures: list[dict] = []

    @staticmethod
    def reserved_mib() -> float:
        import torch

        return torch.cuda.memory_reserved() / 2**20

    def record(self, case_id: str, before_mib: float, after_mib: float) -> None:
        self.cases.append((case_id, before_mib, after_mib))

    def summary(self) -> dict:
        growth = [after - before for _, before, after in self.cases]
        return {"memory_reserved_start_mib": self.start_mib,
                "memory_reserved_end_mib": self.end_mib if self.end_mib is not None else self.start_mib,
                "graph_cases": len(self.cases),
                "max_case_growth_mib": max(growth, default=0.0),
                # the first graph case creates the one reused warmup side stream (and its cuBLAS
                # workspace): growth after it is what a leak per case would show
                "max_case_growth_after_first_mib": max(growth[1:], default=0.0),
                "kernel_counts": [{"model": m, "dtype": d, "seq_len": n, **fields}
                                  for (m, d, n), fields in sorted(self.kernel_counts.items())],
                "cases": [{"case": c, "reserved_before_mib": b, "reserved_after_mib": a} for c, b, a in self.cases],
                "failures": list(self.failures)}


class Session:
    """The ``cgb`` fixture: options, a model cache (one build per model and dtype), inputs, memory ledger."""

    def __init__(self, config):
        self.config = config
        self._models = {}
        self._generated = {}
        self._fp64_logits = {}
        self.ledger = MemoryLedger()
        config._cgb_ledger = self.ledger
        self.ledger.start_mib = self.ledger.reserved_mib()

    def option(self, name: str):
        return self.config.getoption(name)

    def position_limit(self, model_name: str) -> int:
        """The model's position limit (tokens), read from its config without building the model."""
        from types import SimpleNamespace

        from cudagraph_bench.models.presets import directory_config, max_positions, preset_config

        if model_name in self._models_by_name():
            return max_positions(self._models_by_name()[model_name])
        config = directory_config(model_name) if os.path.isdir(model_name) else preset_config(model_name)
        return max_positions(SimpleNamespace(config=config))   # the same limit as the built model's

    def _models_by_name(self) -> dict:
        return {name: m for (name, _), m in self._models.items()}

    def skip_if_too_long(self, model_name: str, seq_len: int) -> None:
        limit = self.position_limit(model_name)
        if seq_len > limit:
            pytest.skip(f"{model_name} has {limit} positions: a {seq_len}-token prompt does not fit")

    def model(self, name: str, dtype: str):
        """The model ``name`` in ``dtype`` on cuda:0, built once per session."""
        from cudagraph_bench.models.presets import load_model

        key = (name, dtype)
        if key not in self._models:
            self._evict_for(name)
            self._models[key] = load_model(name, dtype, "cuda")
        self._models[key] = self._models.pop(key)   # most recently used last
        return self._models[key]

    def _evict_for(self, name: str, share: float = MODEL_CACHE_SHARE) -> None:
        """Drop the least recently used models (never ``name``'s other dtypes first) while the cached
        weights take more than ``share`` of the GPU's memory, so that large presets (7B in float32 is
        29 GB) fit one after another in one session."""
        import torch

        total = torch.cuda.get_device_properties(0).total_memory

        def cached_bytes():
            return sum(p.numel() * p.element_size() for m in self._models.values() for p in m.parameters())

        while self._models and cached_bytes() > share * total:
            victim = next((k for k in self._models if k[0] != name), next(iter(self._models)))
            del self._models[victim]
            self.release()

    def generate_tokens(self, model_name: str, dtype: str, input_ids, new_tokens: int):
        """HF ``generate(do_sample=False)`` after ``input_ids`` ``[1, L]``: its tokens ``[1, new_tokens]`` int64
        and per-step logits (``new_tokens`` tensors ``[1, vocab]``), computed once per (model, dtype, prompt,
        new tokens): the reference of the decode checks."""
        key = (model_name, dtype, tuple(input_ids.flatten().tolist()), new_tokens)
        if key not in self._generated:
            self._generated[key] = generate_reference(self.model(model_name, dtype), input_ids, new_tokens)
        return self._generated[key]

    def fp64_decode_logits(self, model_name: str, dtype: str, input_ids, tokens):
        """:func:`~cudagraph_bench.measure.correctness.fp64_decode_logits` of the session's model: ``[n, vocab]``
        float64 on the CPU for the greedy steps of ``tokens`` ``[1, n]`` after ``input_ids`` ``[1, L]``,
        computed once per (model, dtype, prompt, tokens)."""
        from cudagraph_bench.measure.correctness import fp64_decode_logits

        key = (model_name, dtype, tuple(input_ids.flatten().tolist()), tuple(tokens.flatten().tolist()))
        if key not in self._fp64_logits:
            self._fp64_logits[key] = fp64_decode_logits(self.model(model_name, dtype), input_ids, tokens)
        return self._fp64_logits[key]

    def inputs(self, model, seq_len: int, n: int, seed: int = 0) -> list:
        """``n`` fresh random ``input_ids [1, seq_len]`` int64 on the GPU (fixed seed)."""
        import torch

        from cudagraph_bench.models.presets import random_input_ids

        gen = torch.Generator(device="cuda").manual_seed(seed)
        return [random_input_ids(model, seq_len, device="cuda", generator=gen) for _ in range(n)]

    def case_spec(self, case: Case):
        """The :class:`~cudagraph_bench.measure.case.CaseSpec` of a forward case from the session's options
        (rounds policy, check inputs, ``--pad-to``, ``--buckets``, ``--check-data-ptrs``), the same spec
        ``cudagraph-bench run`` builds from the same options."""
        from cudagraph_bench.measure.case import CaseSpec

        opt = self.option
        return CaseSpec(model=case.model, dtype=case.dtype, seq_len=case.seq_len, variant=case.variant,
                        rounds=opt("rounds"), warmup_rounds=opt("warmup_rounds"), precision_pct=opt("precision_pct"),
                        max_rounds=opt("max_rounds"), warmup_ms=opt("warmup_ms"), min_time_ms=opt("min_time_ms"),
                        pad_to=opt("pad_to"), buckets=tuple(opt("buckets")), check_inputs=opt("check_inputs"),
                        check_data_ptrs=opt("check_data_ptrs"), compile_mode=opt("compile_mode"))

    def measure_forward(self, benchmark, case: Case) -> None:
        """A forward benchmark (eager, graph, padded, bucketed, compile, compile+graph) through the one
        pipeline of :mod:`cudagraph_bench.measure.case`: :func:`~cudagraph_bench.measure.case.prepare_case`
        (build, check against eager, timing inputs), :func:`benchmark_call` (pytest-benchmark's pedantic
        over the round policy), :meth:`~cudagraph_bench.measure.case.PreparedCase.finish`, close.

        A model that cannot be graphed and a prompt longer than the model's positions or the padded
        length are skips with the reason; a build or check that raises fails this test only (with the
        phase and reason); a numerical mismatch is timed and recorded (``correct: false``), and the
        correctness tests are the ones that fail on it.
        """
        from cudagraph_bench.errors import NotGraphableError, RequestTooLongError
        from cudagraph_bench.measure.case import CaseFailed, prepare_case

        self.skip_if_too_long(case.model, case.seq_len)
        model = self.model(case.model, case.dtype)
        spec = self.case_spec(case)
        before = self.ledger.reserved_mib()
        try:
            prepared = prepare_case(spec, model)
        except CaseFailed as exc:
            if isinstance(exc.cause, (NotGraphableError, RequestTooLongError)):
                pytest.skip(f"{case.model} {case.variant}: {exc.reason}")
            pytest.fail(f"{case.test_id}: {exc.phase} failed: {exc.reason}", pytrace=False)
        try:
            benchmark_call(benchmark, self, prepared.call, group=case.group,
                           extra_info={**case.extra_info(), **prepared.info}, policy=spec.round_policy())
            notes = prepared.finish()
            if notes:
                benchmark.extra_info["notes"] = notes
        finally:
            prepared.close()
            prepared = None
            self.release()
        if case.variant != "eager":
            self.ledger.record(case.test_id, before, self.ledger.reserved_mib())

    def record_failure(self, fullname: str, key: dict, reason: str, *, status: str = "failed", **details) -> dict:
        """List a case that produced no measurement under ``["cudagraph_bench"]["failures"]`` of the session's
        JSON, as ``cudagraph-bench run`` lists its failed cases, so that the report shows it with its reason.

        Args:
            fullname: the test's node id (pytest-benchmark's ``fullname`` of the benchmark it would have
                been: ``report --newest-wins`` replaces a failure and a benchmark of one name by the newer).
            key: the case's ``extra_info`` key: ``suite`` plus that suite's fields (decode: ``model, dtype,
                seq_len, new_tokens, variant``); other fields are kept too.
            reason: one line, e.g. :func:`~cudagraph_bench.capture.graphed.root_cause` of the exception.
            status: ``failed`` (default) or ``skipped``.
            details: more JSON values to keep (``compile_ms``, ``phase``).

        Returns the entry recorded."""
        entry = {**key, "status": status, "reason": reason, "fullname": fullname, **details}
        self.ledger.failures.append(entry)
        return entry

    def release(self) -> None:
        """Free cached blocks (after a case's graph and pool were dropped)."""
        import gc

        import torch

        gc.collect()
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    def close(self) -> None:
        self.release()
        self.ledger.end_mib = self.ledger.reserved_mib()


@pytest.fixture(scope="session")
def cgb(request):
    session = Session(request.config)
    yield session
    session.close()


def generate_reference(model, input_ids, new_tokens: int):
    """HF ``generate(do_sample=False, eos_token_id=None)``: tokens ``[1, new_tokens]`` int64 after
    ``input_ids`` ``[1, L]`` and the per-step logits (a tuple of ``[1, vocab]``)."""
    import torch

    with torch.inference_mode():
        out = model.generate(input_ids, attention_mask=torch.ones_like(input_ids), do_sample=False,
                             max_new_tokens=new_tokens, eos_token_id=None, pad_token_id=0,
                             return_dict_in_generate=True, output_logits=True)
    return out.sequences[:, input_ids.shape[1]:], out.logits


def decode_cache_len(prompt_len: int, new_tokens, positions: int) -> int:
    """Static KV cache length (tokens) of the decode benchmarks: prompt + the most new tokens, rounded up
    to a multiple of :data:`DECODE_CACHE_STEP`, at most the model's ``positions``."""
    need = prompt_len + max(new_tokens)
    return min(-(-need // DECODE_CACHE_STEP) * DECODE_CACHE_STEP, positions)


def round_policy(cgb: Session, *, rounds: int | None = None, warmup: int | None = None,
                 max_rounds: int | None = None):
    """The session's :class:`~cudagraph_bench.measure.timing.RoundPolicy`, with ``rounds`` / ``warmup`` /
    ``max_rounds`` replacing ``--rounds`` / ``--warmup-rounds`` / ``--max-rounds`` where given."""
    from cudagraph_bench.measure.timing import RoundPolicy

    opt = cgb.option
    return RoundPolicy(rounds=rounds or opt("rounds"), warmup=opt("warmup_rounds") if warmup is None else warmup,
                       warmup_ms=opt("warmup_ms"), min_time_ms=opt("min_time_ms"), precision_pct=opt("precision_pct"),
                       max_rounds=max_rounds or opt("max_rounds"))


def benchmark_call(benchmark, cgb: Session, fn, *, group: str, extra_info: dict, policy=None):
    """Time ``fn`` with ``benchmark.pedantic``: every call ends with a synchronize (wall time includes the
    GPU work) and CUDA-event ms of each measured round go to ``extra_info["cuda_event_ms"]``.

    Rounds (``policy``, default :func:`round_policy` of the session's options): a pilot of a few calls
    (:func:`~cudagraph_bench.measure.timing.pilot_call_ms`) plans them
    (:meth:`~cudagraph_bench.measure.timing.RoundPolicy.plan`): at least ``--rounds`` measured rounds, more
    until the median's 95% interval is expected within ``--precision-pct``, enough for ``--min-time-ms``,
    at most ``--max-rounds``; warmup rounds at least ``--warmup-rounds`` and enough for ``--warmup-ms``. The
    garbage collector is off while timing unless ``--keep-gc``.

    ``extra_info`` also gets the timing's fields (:func:`~cudagraph_bench.measure.case.timing_record`:
    ``warmup_rounds``, ``pilot_ms``, ``precision_target_pct``, ``median_ci95_pct`` of the measured rounds),
    ``gpu_state`` (``{"before", "after"}`` NVML readings, :func:`~cudagraph_bench.measure.gpustate.read_gpu_state`;
    None without NVML) and, when either reading has a throttling reason, ``throttled`` (reason names) plus a
    :class:`~cudagraph_bench.measure.gpustate.GpuThrottledWarning`.

    Returns the CUDA-event ms of the measured rounds.
    """
    import numpy as np
    import torch

    from cudagraph_bench.measure.case import timing_record
    from cudagraph_bench.measure.gpustate import read_gpu_state, warn_if_throttled
    from cudagraph_bench.measure.timing import CallTimer

    policy = policy or round_policy(cgb)
    benchmark.group = group
    benchmark.extra_info.update(extra_info)
    before = read_gpu_state()
    with torch.inference_mode():
        rounds, warmup, pilot = policy.plan(fn, torch.cuda.synchronize)
        timer = CallTimer(fn, capacity=rounds + warmup)
        benchmark.pedantic(timer, rounds=rounds, warmup_rounds=warmup, iterations=1)
    after = read_gpu_state()
    events = timer.event_ms(last=rounds)
    stats = getattr(getattr(benchmark, "stats", None), "stats", None)
    wall_ms = [x * 1e3 for x in stats.data] if stats is not None and getattr(stats, "data", None) else events
    benchmark.extra_info["cuda_event_ms"] = events
    benchmark.extra_info["event_median_ms"] = float(np.median(events))
    benchmark.extra_info.update(timing_record(rounds, warmup, pilot, wall_ms, policy.precision_pct))
    benchmark.extra_info["gpu_state"] = {"before": before, "after": after}
    throttled = warn_if_throttled(getattr(benchmark, "name", None) or group, before, after)
    if throttled:
        benchmark.extra_info["throttled"] = throttled
    return events


__all__ = ["Session", "MemoryLedger", "benchmark_call", "round_policy", "decode_cache_len", "generate_reference", "GPU_SKIP_REASON"]
