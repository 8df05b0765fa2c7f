"""The roofline's arithmetic on CPU: bytes per decoded token against the tensors of tiny models and their
KV-cache shapes, the peak memory bandwidth from (fake) NVML readings and the datasheet table, the GPU busy
time of profiler events, and the achieved bandwidth and overhead of recorded numbers."""

import statistics
from types import SimpleNamespace

import pytest
import torch

from cudagraph_bench.errors import CudaUnavailableError, UsageError
from cudagraph_bench.measure import gpustate
from cudagraph_bench.measure import roofline as R
from cudagraph_bench.models.hf_internals import attention_windows, cache_keyword, static_cache_for_graphs
from cudagraph_bench.models.presets import load_model
from cudagraph_bench.results import roofline_arithmetic as RR

SMALL = dict(num_hidden_layers=3, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=96,
             vocab_size=256)
TINY = {
    "gpt2": dict(n_layer=2, n_embd=64, n_head=4, vocab_size=256),
    "tinyllama-1.1b": SMALL,
    "gemma-2-2b": dict(SMALL, num_hidden_layers=4, head_dim=16, query_pre_attn_scalar=16, sliding_window=6),
    "mistral-7b": dict(SMALL, sliding_window=6),
    "olmoe-1b-7b": dict(SMALL, num_key_value_heads=4, num_experts=8, num_experts_per_tok=2),
}


def tiny(name, dtype="float32", **extra):
    return load_model(name, dtype, "cpu", overrides={**TINY[name], **extra})


# ---------------------------------------------------------------------------- weight bytes


def storage_bytes_of_parameters(model) -> int:
    """Bytes of the distinct storages behind the model's parameter entries of its state dict: a tied
    tensor appears under two names but is one storage."""
    params = {name for name, _ in model.named_parameters(remove_duplicate=False)}
    seen, total = set(), 0
    for name, tensor in model.state_dict(keep_vars=True).items():
        ptr = tensor.untyped_storage().data_ptr()
        if name in params and ptr not in seen:
            seen.add(ptr)
            total += tensor.untyped_storage().nbytes()
    return total


@pytest.mark.parametrize("name", ["gpt2", "tinyllama-1.1b", "gemma-2-2b"])
def test_dense_weight_bytes_are_every_distinct_parameter_tensor_once(name):
    model = tiny(name)
    assert R.weight_bytes(model) == storage_bytes_of_parameters(model)


def test_tied_embeddings_are_read_once():
    model = tiny("gpt2")
    assert model.lm_head.weight is model.transformer.wte.weight
    every_name = sum(p.numel() * p.element_size() for _, p in model.named_parameters(remove_duplicate=False))
    lm_head = model.lm_head.weight
    assert R.weight_bytes(model) == every_name - lm_head.numel() * lm_head.element_size()


def test_weight_bytes_scale_with_the_dtype():
    assert R.weight_bytes(tiny("tinyllama-1.1b", "bfloat16")) * 2 == R.weight_bytes(tiny("tinyllama-1.1b"))


def expert_tensors(model) -> list:
    """The parameters held by the experts modules of a mixture-of-experts model (found by module type)."""
    return [p for m in model.modules() if type(m).__name__.endswith("Experts") for p in m.parameters(recurse=True)]


def test_a_mixture_of_experts_reads_only_the_routed_share_of_its_experts():
    model = tiny("olmoe-1b-7b")
    config = model.config
    experts = expert_tensors(model)
    assert experts and all(p.shape[0] == config.num_experts for p in experts)
    expert_bytes = sum(p.numel() * p.element_size() for p in experts)
    total = storage_bytes_of_parameters(model)
    expected = total - expert_bytes + expert_bytes * config.num_experts_per_tok / config.num_experts
    assert R.weight_bytes(model) == round(expected)
    assert R.expert_fraction(model) == config.num_experts_per_tok / config.num_experts


def test_routing_to_every_expert_reads_every_weight():
    model = tiny("olmoe-1b-7b", num_experts_per_tok=TINY["olmoe-1b-7b"]["num_experts"])
    assert R.weight_bytes(model) == storage_bytes_of_parameters(model)


def test_a_dense_model_has_no_expert_fraction():
    assert R.expert_fraction(tiny("tinyllama-1.1b")) is None


def test_a_mixture_of_experts_without_an_experts_module_is_refused():
    dense = tiny("tinyllama-1.1b")
    dense.config.num_experts, dense.config.num_experts_per_tok = 4, 2
    with pytest.raises(UsageError, match="none of its parameters is under an 'experts' module"):
        R.weight_bytes(dense)
    dense.config.num_experts_per_tok = None
    with pytest.raises(UsageError, match="no num_experts_per_tok"):
        R.expert_fraction(dense)


# ---------------------------------------------------------------------------- KV bytes vs the cache


def cache_bytes_per_token(model, max_len: int = 32) -> list[int]:
    """Per layer, bytes of K and V per cached token, from the static cache the decoders use, filled by
    one forward (``keys``/``values``: ``[1, kv_heads, max_len, head_dim]``)."""
    cache = static_cache_for_graphs(model, max_len)
    with torch.inference_mode():
        model(input_ids=torch.randint(0, 256, (1, 3)), use_cache=True, **{cache_keyword(model): cache})
    out = []
    for layer in cache.layers:
        assert layer.keys.shape[2] == max_len and layer.values.shape[2] == max_len
        out.append((layer.keys.numel() * layer.keys.element_size()
                    + layer.values.numel() * layer.values.element_size()) // max_len)
    return out


@pytest.mark.parametrize("name, dtype", [("gpt2", "float32"), ("tinyllama-1.1b", "float32"),
                                         ("tinyllama-1.1b", "bfloat16"), ("olmoe-1b-7b", "float32")])
@pytest.mark.parametrize("context", [1, 7, 20])
def test_full_attention_kv_bytes_equal_the_cache_of_the_context(name, dtype, context):
    model = tiny(name, dtype)
    expected = sum(cache_bytes_per_token(model)) * context
    got = R.request_bytes_per_token(model, context, 1)      # one step: it attends to the context
    assert got["kv_bytes_per_token"] == expected
    assert got["weight_bytes"] == R.weight_bytes(model)
    assert got["bytes_per_token"] == got["weight_bytes"] + got["kv_bytes_per_token"]
    assert got["context_tokens"] == context


def sliding_windows_of_the_modules(model) -> list:
    """Per decoder layer, the window its attention module applies (None: full attention)."""
    return [getattr(layer.self_attn, "sliding_window", None) for layer in model.model.layers]


@pytest.mark.parametrize("context", [3, 6, 20])
def test_sliding_window_layers_read_at_most_their_window(context):
    model = tiny("gemma-2-2b")
    windows = sliding_windows_of_the_modules(model)
    assert None in windows and any(windows)                  # alternating sliding and full layers
    assert attention_windows(model.config) == windows
    expected = sum(b * (context if w is None else min(context, w))
                   for b, w in zip(cache_bytes_per_token(model), windows))
    assert R.request_bytes_per_token(model, context, 1)["kv_bytes_per_token"] == expected


@pytest.mark.parametrize("name", ["gemma-2-2b", "mistral-7b", "tinyllama-1.1b"])
@pytest.mark.parametrize("shape", ["one dict", "one dict per layer"])
def test_windows_read_either_shape_of_the_layer_kwargs(monkeypatch, name, shape):
    """transformers < 5.24 returns one kwargs dict for all layers, >= 5.24 one dict per layer: the windows
    are those of the attention modules whichever shape the installed release's function returns."""
    import transformers.cache_utils as cache_utils

    model = tiny(name)
    real = cache_utils.get_layer_types_and_kwargs

    def reshaped(config):
        layer_types, kwargs = real(config)
        if shape == "one dict per layer" and isinstance(kwargs, dict):
            return layer_types, [{"sliding_window": kwargs["sliding_window"]} if t == "sliding_attention" else {}
                                 for t in layer_types]
        if shape == "one dict" and isinstance(kwargs, list):
            return layer_types, {k: v for layer_kwargs in kwargs for k, v in layer_kwargs.items()}
        return layer_types, kwargs

    # Mistral's attention modules keep no window: every layer slides over the config's
    expected = (sliding_windows_of_the_modules(model) if name != "mistral-7b"
                else [model.config.sliding_window] * model.config.num_hidden_layers)
    monkeypatch.setattr(cache_utils, "get_layer_types_and_kwargs", reshaped)
    assert attention_windows(model.config) == expected


def test_every_layer_of_a_sliding_window_model_reads_its_window():
    model = tiny("mistral-7b")
    window = model.config.sliding_window
    per_layer = cache_bytes_per_token(model)
    assert R.request_bytes_per_token(model, 4 * window, 1)["kv_bytes_per_token"] == sum(per_layer) * window
    assert R.request_bytes_per_token(model, window - 1, 1)["kv_bytes_per_token"] == sum(per_layer) * (window - 1)


@pytest.mark.parametrize("name, prompt, new", [("tinyllama-1.1b", 5, 9), ("gemma-2-2b", 2, 12), ("mistral-7b", 4, 1)])
def test_a_request_averages_the_kv_bytes_over_its_steps(name, prompt, new):
    model = tiny(name)
    steps = [R.request_bytes_per_token(model, prompt + k, 1)["kv_bytes_per_token"] for k in range(new)]
    got = R.request_bytes_per_token(model, prompt, new)
    assert got["kv_bytes_per_token"] == pytest.approx(statistics.fmean(steps), rel=1e-12)
    assert got["context_tokens"] == statistics.fmean(prompt + k for k in range(new))
    assert got["bytes_per_token"] == got["weight_bytes"] + got["kv_bytes_per_token"]


def test_without_a_binding_window_the_request_reads_the_kv_of_its_mean_context():
    model = tiny("tinyllama-1.1b")
    got = R.request_bytes_per_token(model, 50, 64)
    per_token = sum(nbytes for nbytes, window in R.kv_bytes_per_context_token(model) if window is None)
    assert per_token and len(R.kv_bytes_per_context_token(model)) == model.config.num_hidden_layers
    assert got["kv_bytes_per_token"] == pytest.approx(per_token * got["context_tokens"], rel=1e-12)


def test_bytes_of_a_preset_on_the_meta_device_equal_those_of_the_built_model():
    on_cpu, on_meta = tiny("gemma-2-2b", "bfloat16"), load_model("gemma-2-2b", "bfloat16", "meta",
                                                                 overrides=TINY["gemma-2-2b"])
    assert R.request_bytes_per_token(on_meta, 7, 9) == R.request_bytes_per_token(on_cpu, 7, 9)


@pytest.mark.parametrize("call", [lambda m: R.request_bytes_per_token(m, 0, 4),
                                  lambda m: R.request_bytes_per_token(m, 4, 0)])
def test_empty_contexts_and_requests_are_usage_errors(call):
    with pytest.raises(UsageError):
        call(tiny("gpt2"))


# ---------------------------------------------------------------------------- peak memory bandwidth


class FakeNvml:
    """The few pynvml calls the peak reads; distinct SM and memory clocks so that a wrong clock id shows."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 2

    def __init__(self, max_mem_mhz, bus_bits, mem_mhz=None, max_sm_mhz=1):
        self.values = {"max": {self.NVML_CLOCK_MEM: max_mem_mhz, self.NVML_CLOCK_SM: max_sm_mhz},
                       "now": {self.NVML_CLOCK_MEM: mem_mhz, self.NVML_CLOCK_SM: max_sm_mhz}}
        self.bus_bits = bus_bits

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        assert handle == "handle"
        return self.values["max"][clock]

    def nvmlDeviceGetClockInfo(self, handle, clock):
        if self.values["now"][clock] is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return self.values["now"][clock]

    def nvmlDeviceGetMemoryBusWidth(self, handle):
        if self.bus_bits is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return self.bus_bits


def readings_for(gbps: float, bus_bits: int = 4096) -> float:
    """The maximum memory clock (MHz) at which a ``bus_bits`` bus moves ``gbps`` GB/s at double data rate."""
    return gbps * 1e9 / (2 * bus_bits / 8) / 1e6


@pytest.fixture
def fake_gpu(monkeypatch):
    """A CUDA device named as a datasheet GPU whose NVML handle is a :class:`FakeNvml`."""
    def install(name, nvml):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: name)
        monkeypatch.setattr(gpustate, "nvml_handle", lambda device=None: None if nvml is None else (nvml, "handle"))
    return install


GPU, TABLE_GBPS = next(iter(RR.DATASHEET_PEAK_GBPS.items()))


def test_nvml_readings_that_match_the_datasheet_give_an_nvml_peak(fake_gpu):
    clock = readings_for(TABLE_GBPS)
    fake_gpu(GPU.upper(), FakeNvml(clock, 4096, mem_mhz=clock / 2))
    peak = R.peak_memory_bandwidth_gbps(0)
    assert peak["source"] == "nvml" and peak["gbps"] == pytest.approx(TABLE_GBPS, rel=1e-12)
    assert peak["table_gbps"] == TABLE_GBPS and peak["nvml_gbps"] == peak["gbps"]
    assert (peak["nvml_max_mem_clock_mhz"], peak["nvml_bus_width_bits"], peak["nvml_mem_clock_mhz"]) == (
        clock, 4096, clock / 2)


def test_the_peak_doubles_with_the_memory_clock_and_the_bus_width():
    base = RR.nvml_peak_gbps(1000, 1024)
    assert RR.nvml_peak_gbps(2000, 1024) == 2 * base == RR.nvml_peak_gbps(1000, 2048)


@pytest.mark.parametrize("factor", [0.5, 2.0, 1 + 2 * RR.NVML_TABLE_TOLERANCE])
def test_nvml_far_from_the_datasheet_gives_the_table_and_records_both(fake_gpu, factor):
    fake_gpu(GPU, FakeNvml(readings_for(TABLE_GBPS * factor), 4096))
    peak = R.peak_memory_bandwidth_gbps(0)
    assert (peak["source"], peak["gbps"]) == ("table", TABLE_GBPS)
    assert peak["nvml_gbps"] == pytest.approx(TABLE_GBPS * factor, rel=1e-12)
    assert peak["nvml_mem_clock_mhz"] is None                    # the fake does not support the current clock


def test_a_gpu_outside_the_table_takes_nvml_and_one_without_either_has_none(fake_gpu):
    fake_gpu("Some Future GPU", FakeNvml(1500, 2048))
    peak = R.peak_memory_bandwidth_gbps(0)
    assert (peak["source"], peak["table_gbps"]) == ("nvml", None)
    assert peak["gbps"] == RR.nvml_peak_gbps(1500, 2048)
    fake_gpu("Some Future GPU", FakeNvml(1500, None))            # no bus width
    assert R.peak_memory_bandwidth_gbps(0) is None
    fake_gpu(GPU, None)                                          # no NVML at all: the table
    assert R.peak_memory_bandwidth_gbps(0)["source"] == "table"


def test_no_cuda_gives_no_peak(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert R.peak_memory_bandwidth_gbps() is None


@pytest.mark.parametrize("clock, bits", [(0, 1024), (1000, 0), (-1, 1024), (float("nan"), 1024), (None, 1024),
                                         (True, 1024)])
def test_unusable_nvml_values_are_refused(clock, bits):
    with pytest.raises(ValueError):
        RR.nvml_peak_gbps(clock, bits)
    assert RR.choose_peak("no such gpu", clock, bits) is None


def test_the_table_is_looked_up_by_torchs_device_name():
    assert RR.table_peak_gbps(f"  {GPU.upper()} ") == TABLE_GBPS
    assert RR.table_peak_gbps("no such gpu") is None and RR.table_peak_gbps(None) is None


def test_run_peak_prefers_the_recorded_value_then_the_table():
    recorded = RR.choose_peak("Some Future GPU", 1500, 2048)
    assert RR.run_peak({"cuda": {"gpu_name": GPU, "peak_memory_bandwidth": recorded}}) == recorded
    assert RR.run_peak({"cuda": {"gpu_name": GPU}})["gbps"] == TABLE_GBPS
    assert RR.run_peak({"cuda": {"gpu_name": GPU, "peak_memory_bandwidth": {"gbps": 0}}})["gbps"] == TABLE_GBPS
    assert RR.run_peak({"cuda": None}) is None and RR.run_peak({}) is None


def test_plugin_records_the_peak_in_machine_info(monkeypatch):
    from cudagraph_bench import envinfo
    from cudagraph_bench.plugin.output import pytest_benchmark_update_machine_info

    peak = RR.choose_peak(GPU)
    monkeypatch.setattr(envinfo, "cuda_fingerprint", lambda: {"gpu_name": GPU})
    monkeypatch.setattr(gpustate, "read_gpu_state", lambda device=None: None)
    monkeypatch.setattr(R, "peak_memory_bandwidth_gbps", lambda device=None: peak)
    machine_info = {}
    pytest_benchmark_update_machine_info(None, machine_info)
    assert machine_info["cuda"]["peak_memory_bandwidth"] == peak
    assert RR.run_peak(machine_info) == peak


# ---------------------------------------------------------------------------- GPU busy time


def event(name, start_us, end_us, device="CUDA", activity=None):
    return SimpleNamespace(name=name, device_type=device, activity_type=activity,
                           time_range=SimpleNamespace(elapsed_us=lambda: end_us - start_us))


def test_busy_time_sums_the_kernels_only():
    kernels = [event("ampere_sgemm", 0, 40, activity="kernel"), event("elementwise", 45, 52, activity="kernel")]
    others = [event("Memcpy HtoD", 52, 90, activity="gpu_memcpy"), event("aten::mm", 0, 100, device="CPU"),
              event("Memset (Device)", 90, 95)]
    expected_ms = sum(e.time_range.elapsed_us() for e in kernels) / 1e3
    assert R.kernel_busy_ms(kernels + others) == pytest.approx(expected_ms)
    assert R.kernel_busy_ms(others) == 0


def test_profiling_needs_a_cuda_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(CudaUnavailableError):
        R.profile_forward(lambda: None)


# ---------------------------------------------------------------------------- recorded numbers


def test_achieved_bandwidth_and_its_share_of_the_peak():
    nbytes, ms = 2.5e9, 0.5
    gbps = RR.achieved_gbps(nbytes, ms)
    assert gbps * 1e9 == pytest.approx(nbytes / (ms / 1e3))            # bytes per second
    assert RR.pct_of_peak(gbps, TABLE_GBPS) == pytest.approx(100 * gbps / TABLE_GBPS)
    assert RR.bandwidth_floor_ms(nbytes, gbps) == pytest.approx(ms)     # at the achieved rate: the measured time
    assert RR.achieved_gbps(nbytes, 0) is None and RR.achieved_gbps(None, ms) is None
    assert RR.pct_of_peak(gbps, None) is None and RR.bandwidth_floor_ms(nbytes, None) is None


def test_overhead_above_the_busy_time_in_total_and_per_kernel():
    over, per_node = RR.overhead(3.0, 1.75, 250)
    assert over == pytest.approx(3.0 - 1.75) and per_node == pytest.approx(over * 1000 / 250)
    assert RR.overhead(3.0, 1.75, None) == (pytest.approx(over), None)
    assert RR.overhead(None, 1.75, 250) == (None, None) and RR.overhead(3.0, 0.0, 250) == (None, None)
