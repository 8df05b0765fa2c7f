"""The names and defaults every module takes, re-exported by :mod:`cudagraph_bench.options`. No torch import."""

from __future__ import annotations

from cudagraph_bench import variants as _variants

#: Variant names by suite, from the registry (:mod:`cudagraph_bench.variants`).
FORWARD_VARIANTS = _variants.FORWARD_NAMES
DECODE_VARIANTS = _variants.DECODE_NAMES
LAUNCH_VARIANTS = _variants.LAUNCH_NAMES
#: Forward variants measured by default: every one but the torch.compile ones (``--with-compile`` adds them).
DEFAULT_VARIANTS = _variants.names(_variants.FORWARD, compiled=False)
#: Decode steps per graph (a 1-step graph replays the remainder): beyond 8 the saving is lost in the noise.
DEFAULT_DECODE_STEPS_PER_GRAPH = 8
#: Devices a case can run on: ``cpu`` runs only the variants that need no CUDA GPU, to try the pipeline anywhere.
DEVICES = ("cuda", "cpu")
DTYPES = ("float32", "bfloat16", "float16")

#: Preset names (their configs live in :mod:`cudagraph_bench.models.presets`).
PRESET_NAMES = ("gpt2", "distilgpt2", "bert-tiny", "tinyllama-1.1b", "smollm2-360m", "qwen2.5-0.5b", "llama-3.2-1b",
                "gemma-2-2b", "phi-3.5-mini", "mistral-7b", "olmoe-1b-7b", "qwen3-0.6b", "qwen3-30b-a3b",
                "gemma-3-1b", "gpt-oss-20b")
#: Attention implementations ``--attn-implementation`` may name (transformers' values), checked per model.
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2", "flex_attention")
DEFAULT_MODELS = ("gpt2", "distilgpt2", "bert-tiny", "tinyllama-1.1b")
DEFAULT_PROMPT_LENGTHS = (16, 50, 128, 512, 1024)
DEFAULT_DTYPES = ("float32", "bfloat16")
#: Bucket lengths (tokens) for bucketed graphs, like serving engines' capture sizes.
DEFAULT_BUCKETS = (16, 32, 64, 128, 256, 512, 1024)
#: Decode benchmarks: prompt lengths (tokens) and new tokens per request.
DEFAULT_DECODE_PROMPT_LENGTHS = (50,)
DEFAULT_NEW_TOKENS = (64, 128)
#: The round policy's defaults (:func:`cudagraph_bench.measure.timing.plan_rounds`).
DEFAULT_ROUNDS = 20
DEFAULT_PRECISION_PCT = 1.0
DEFAULT_MAX_ROUNDS = 2000
#: Time cap (ms) of the rounds the precision target adds (0: none), against host-bound cases' drift.
DEFAULT_MAX_TIME_MS = 1000.0
DEFAULT_WARMUP_ROUNDS = 10
#: Time floors (ms) of the warmup (GPU clocks, caches) and of the measured rounds (0: the precision target decides).
DEFAULT_WARMUP_MS = 100.0
DEFAULT_MIN_TIME_MS = 0.0
#: Inductor modes of ``compile+graph`` (own graphs off): ``default`` (fast), ``max-autotune-no-cudagraphs`` (minutes).
COMPILE_GRAPH_MODES = ("default", "max-autotune-no-cudagraphs")
#: Seconds a decode compile variant may spend compiling and warming up before it is recorded as failed.
DEFAULT_COMPILE_TIMEOUT_S = 600.0
DEFAULT_COMPILE_GRAPH_MODE = "default"
#: Compiled decode step settings: ``coordinate-descent`` is gpt-fast's (tuned Triton GEMVs); ``none``: cuBLAS GEMVs.
DECODE_COMPILE_TUNINGS = {"coordinate-descent": {"coordinate_descent_tuning": True}, "none": {}}
DEFAULT_DECODE_COMPILE_TUNING = "coordinate-descent"
#: Fresh random inputs ``[1, seq_len]`` each variant is checked on against eager before it is timed.
DEFAULT_CHECK_INPUTS = 3
#: Length (tokens) the padded graph pads every prompt to, capped at the model's positions.
DEFAULT_PAD_TO = 1024

#: Smallest tolerance (percent) of the wall figure: the offset between hosts (~6% on H200; docs/gate-noise.md).
DEFAULT_FLOOR_PCT = 8.0
#: Smallest tolerance (percent) of the device-side figure, which the host does not move (docs/gate-noise.md).
DEVICE_FLOOR_PCT = 1.0
