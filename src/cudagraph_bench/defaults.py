"""The names and defaults every module takes: variant, dtype, device and preset names, default models, prompt
lengths, dtypes, buckets, rounds and time floors. No torch import. Read them through
:mod:`cudagraph_bench.options`, which re-exports them beside the option table."""

from __future__ import annotations

from cudagraph_bench import variants as _variants

#: Variant names by suite, from the registry (:mod:`cudagraph_bench.variants`), which says what each one is.
FORWARD_VARIANTS = _variants.FORWARD_NAMES
DECODE_VARIANTS = _variants.DECODE_NAMES
LAUNCH_VARIANTS = _variants.LAUNCH_NAMES
#: Forward variants measured by default: every one but the torch.compile ones (``--with-compile`` adds them).
DEFAULT_VARIANTS = _variants.names(_variants.FORWARD, compiled=False)
#: Decode steps captured in one graph (a 1-step graph replays the remainder). Unrolling removes the host's
#: replay call and the GPU's gap between two graphs for all but one step in this many: gaps of the order
#: of one kernel launch against a step of hundreds of kernels, so beyond 8 the saving per token is lost in
#: the noise while capture time and graph size keep growing with it.
DEFAULT_DECODE_STEPS_PER_GRAPH = 8
#: Devices a case can run on: ``cpu`` runs only the variants that need no CUDA GPU (eager forward, HF
#: ``generate`` and the eager static-cache decode), to try the pipeline on any machine.
DEVICES = ("cuda", "cpu")
DTYPES = ("float32", "bfloat16", "float16")

#: Preset names (their configs live in :mod:`cudagraph_bench.models.presets`).
PRESET_NAMES = ("gpt2", "distilgpt2", "bert-tiny", "tinyllama-1.1b", "smollm2-360m", "qwen2.5-0.5b", "llama-3.2-1b",
                "gemma-2-2b", "phi-3.5-mini", "mistral-7b", "olmoe-1b-7b", "qwen3-0.6b", "qwen3-30b-a3b",
                "gemma-3-1b", "gpt-oss-20b")
#: Attention implementations ``--attn-implementation`` may name (transformers' ``attn_implementation`` values);
#: which are installed and which a model class runs is checked per model
#: (:mod:`cudagraph_bench.models.attention`). Without the option each model runs its own.
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flex_attention")
DEFAULT_MODELS = ("gpt2", "distilgpt2", "bert-tiny", "tinyllama-1.1b")
DEFAULT_PROMPT_LENGTHS = (16, 50, 128, 512, 1024)
DEFAULT_DTYPES = ("float32", "bfloat16")
#: Bucket lengths (tokens) for bucketed graphs, like serving engines' capture sizes.
DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024)
#: Decode benchmarks: prompt lengths (tokens) and new tokens per request.
DEFAULT_DECODE_PROMPT_LENGTHS = (50,)
DEFAULT_NEW_TOKENS = (64, 128)
#: Measured rounds per benchmark: at least ``DEFAULT_ROUNDS``, more until the median's 95% interval is
#: within ``DEFAULT_PRECISION_PCT`` % of the median, at most ``DEFAULT_MAX_ROUNDS`` and at most
#: ``DEFAULT_MAX_TIME_MS`` of calls (:func:`cudagraph_bench.measure.timing.plan_rounds`); unmeasured warmup rounds.
DEFAULT_ROUNDS = 20
DEFAULT_PRECISION_PCT = 1.0
DEFAULT_MAX_ROUNDS = 2000
#: Time cap (ms) of the rounds the precision target adds beyond ``DEFAULT_ROUNDS`` (0: none): host-bound eager
#: cases with a wide, drifting spread would otherwise take up to ``DEFAULT_MAX_ROUNDS`` slow calls each, most of
#: a session's time, for an interval their drift keeps wide anyway. 1 s per benchmark keeps the default suite
#: within minutes on one GPU (pytest-benchmark's ``--benchmark-max-time`` has the same role).
DEFAULT_MAX_TIME_MS = 1000.0
DEFAULT_WARMUP_ROUNDS = 10
#: Time floors (ms): warm up for at least ``DEFAULT_WARMUP_MS`` (GPU clocks, caches); measure for at least
#: ``DEFAULT_MIN_TIME_MS`` (0: the precision target decides).
DEFAULT_WARMUP_MS = 100.0
DEFAULT_MIN_TIME_MS = 0.0
#: Inductor modes of the ``compile+graph`` variants, forward and decode (inductor's own CUDA graphs off in both:
#: the suite captures): ``default`` (fusion, cuBLAS GEMMs, no autotuning; the kernels ``reduce-overhead`` runs,
#: compiled in seconds) and ``max-autotune-no-cudagraphs`` (also autotunes GEMM templates and fusions: minutes
#: per forward case in the committed float32 compile sweep, its "compile s" column in docs/compile/results.md).
COMPILE_GRAPH_MODES = ("default", "max-autotune-no-cudagraphs")
#: Seconds a decode compile variant may spend compiling and warming up before it is recorded as failed.
DEFAULT_COMPILE_TIMEOUT_S = 600.0
DEFAULT_COMPILE_GRAPH_MODE = "default"
#: Inductor settings the compiled decode step is compiled under (``--decode-compile-tuning``), by name:
#: ``coordinate-descent`` is gpt-fast's (``torch._inductor.config.coordinate_descent_tuning = True`` in its
#: generate.py): inductor then lowers a matmul with one row, the decode step's GEMVs, to Triton reductions
#: fused with the elementwise work around them, and tunes every kernel's launch configuration by coordinate
#: descent ("our matrix vector multiplies only achieve peak bandwidth with coordinate descent tuning",
#: torch/_inductor/decomposition.py); it makes the compile slower (tuning benchmarks every kernel). ``none``: inductor's
#: defaults (cuBLAS GEMVs). The forward variants never use it (a prompt's matmuls have more than one row).
DECODE_COMPILE_TUNINGS = {"coordinate-descent": {"coordinate_descent_tuning": True}, "none": {}}
DEFAULT_DECODE_COMPILE_TUNING = "coordinate-descent"
#: Fresh random inputs ``[1, seq_len]`` each variant is checked on against eager before it is timed.
DEFAULT_CHECK_INPUTS = 3
#: Length (tokens) the padded graph pads every prompt to, capped at the model's positions.
DEFAULT_PAD_TO = 1024
