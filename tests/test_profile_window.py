"""The forward profile on CPU: all profiled calls in one CUDA-only profiler window, told apart by marker
kernels (:func:`cudagraph_bench.measure.roofline.split_at_markers` on fake profiler events, and
:func:`~cudagraph_bench.measure.roofline.profile_forward` against a fake profiler and fake CUDA calls)."""

import random
from types import SimpleNamespace

import pytest
import torch

from cudagraph_bench.measure import kernel_counts as K
from cudagraph_bench.measure import roofline as R

#: The marker's name as the profiler shows it (ATen's ``spin_kernel`` of ``aten/src/ATen/cuda/Sleep.cu``,
#: demangled by the profiler).
MARKER = "at::cuda::(anonymous namespace)::spin_kernel(long)"


def span(start_us, end_us):
    return SimpleNamespace(start=start_us, end=end_us, elapsed_us=lambda: end_us - start_us)


def device_event(name, start_us, end_us, activity="kernel"):
    return SimpleNamespace(name=name, device_type="CUDA", activity_type=activity, is_user_annotation=False,
                           time_range=span(start_us, end_us))


class Timeline:
    """Device records laid out one after another on a fake µs clock, as one stream runs them."""

    def __init__(self):
        self.events, self.now_us = [], 0.0

    def add(self, name, duration_us, activity="kernel"):
        self.events.append(device_event(name, self.now_us, self.now_us + duration_us, activity))
        self.now_us += duration_us + 1.5      # a launch gap

    def call(self, kernels_us):
        """One forward: a host-to-device copy, then its kernels, with a memset and a host runtime call that
        never count."""
        self.add("Memcpy HtoD (Pageable -> Device)", 3.0, activity="gpu_memcpy")
        for i, us in enumerate(kernels_us):
            self.add(f"kernel_{i}", us)
        self.add("Memset (Device)", 0.5, activity="gpu_memset")
        self.events.append(SimpleNamespace(name="cudaLaunchKernel", device_type="CPU", activity_type="cuda_runtime",
                                           time_range=span(self.now_us, self.now_us + 2)))

    def marker(self):
        self.add(MARKER, 0.6)


def forward_kernels_us(call: int, n: int = 6) -> list[float]:
    """Kernel durations (µs) of the forward numbered ``call``: the same count every call, other times."""
    return [10.0 + 3 * k + 0.25 * call for k in range(n)]


def window(calls: list[list[float]]) -> list:
    """The events of one profiled window: each forward followed by a marker; shuffled."""
    line = Timeline()
    for kernels_us in calls:
        line.call(kernels_us)
        line.marker()
    events = list(line.events)
    random.Random(7).shuffle(events)
    return events


def expected(calls: list[list[float]]) -> list[tuple[int, float]]:
    """``(kernels, busy ms)`` of every call after the warm-up one."""
    return [(len(c), sum(c) / 1e3) for c in calls[1:]]


def assert_profiled(got, calls):
    """``got`` (``[(kernels, busy ms)]``) is :func:`expected` of ``calls``: counts exact, busy times to rounding."""
    want = expected(calls)
    assert [n for n, _ in got] == [n for n, _ in want]
    assert [ms for _, ms in got] == pytest.approx([ms for _, ms in want])


# ---------------------------------------------------------------------------- split_at_markers


@pytest.mark.parametrize("repeats", [1, 5])
def test_split_counts_each_call_between_markers_without_markers_copies_or_the_warm_up(repeats):
    calls = [forward_kernels_us(c, n=9 if c == 0 else 6) for c in range(1 + repeats)]
    assert_profiled(R.split_at_markers(window(calls), repeats=repeats), calls)


def test_split_gives_the_same_calls_when_the_start_of_the_warm_up_was_dropped():
    calls = [forward_kernels_us(c) for c in range(4)]
    events = sorted(window(calls), key=lambda e: e.time_range.start)
    warm_up_kernels = [e for e in events if e.name.startswith("kernel_")][:len(calls[0])]
    lost = {id(e) for e in warm_up_kernels[:4]}                           # kineto lost the trace's first records
    dropped = [e for e in events if id(e) not in lost]
    got = R.split_at_markers(dropped, repeats=3)
    assert_profiled(got, calls)


def test_split_reads_events_without_an_activity_type():
    calls = [forward_kernels_us(c) for c in range(3)]
    events = window(calls)
    for e in events:
        del e.activity_type                   # older profilers: decided by name (memcpy/memset excluded)
    assert_profiled(R.split_at_markers(events, repeats=2), calls)


@pytest.mark.parametrize("lost", [0, 2, -1])
def test_split_refuses_a_window_with_a_marker_missing(lost):
    events = window([forward_kernels_us(c) for c in range(4)])
    markers = sorted((e for e in events if e.name == MARKER), key=lambda e: e.time_range.start)
    events.remove(markers[lost])
    with pytest.raises(RuntimeError, match=r"recorded 3 of the 4 marker kernels"):
        R.split_at_markers(events, repeats=3)


def test_split_refuses_extra_markers_and_kernels_after_the_last_marker():
    calls = [forward_kernels_us(c) for c in range(3)]
    with pytest.raises(RuntimeError, match=r"recorded 3 of the 2 marker kernels"):
        R.split_at_markers(window(calls), repeats=1)
    line = Timeline()
    for c in calls:
        line.call(c)
        line.marker()
    line.add("stray_kernel", 4.0)
    with pytest.raises(RuntimeError, match="1 kernels after the last marker"):
        R.split_at_markers(line.events, repeats=2)
    with pytest.raises(ValueError, match="repeats"):
        R.split_at_markers(window(calls), repeats=0)


def test_split_of_a_window_without_kernels_reports_zero_kernels_per_call():
    # CUPTI unavailable: only host records arrive; the worker then names the cause (no kernels seen)
    calls = [forward_kernels_us(c) for c in range(3)]
    host_only = [e for e in window(calls) if e.device_type == "CPU"]
    assert host_only and R.split_at_markers(host_only, repeats=2) == [(0, 0.0), (0, 0.0)]


@pytest.mark.parametrize("name, marker", [
    (MARKER, True),
    ("spin_kernel", True),
    ("_ZN2at4cuda12_GLOBAL__N_111spin_kernelEl", True),       # mangled, as CUPTI names it
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int)", False),
    ("my_spin_kernel(int)", False),
    ("spin_kernel_v2(long)", False),
])
def test_marker_name(name, marker):
    assert R.is_marker_kernel(name) is marker


# ---------------------------------------------------------------------------- profile_forward


class KinetoEvent:
    """A fake ``torch._C._autograd._KinetoEvent`` of a :class:`Timeline` record (its methods, ns clock);
    ``activity_type`` only where ``with_activity`` (torch 2.11's kineto events lack it)."""

    def __init__(self, record, with_activity: bool):
        self._r = record
        if with_activity:
            self.activity_type = lambda: record.activity_type

    def name(self):
        return self._r.name

    def device_type(self):
        return self._r.device_type

    def is_user_annotation(self):
        return bool(getattr(self._r, "is_user_annotation", False))

    def start_ns(self):
        return round(self._r.time_range.start * 1000)

    def end_ns(self):
        return round(self._r.time_range.end * 1000)


class FakeCuda:
    """Fake ``torch.profiler.profile`` (CUDA activity only), ``torch.cuda.synchronize`` and
    ``torch.cuda._sleep``: device records land on one timeline, and only those made while the window is
    open reach the window's results, less the first ``drop_first`` records of the window. ``kineto``: the
    window has ``profiler.kineto_results.events()`` (:class:`KinetoEvent`, ``"with_activity"`` or
    ``"without_activity"``); None: only ``events()`` (FunctionEvent-like), as a profiler without that result."""

    def __init__(self, drop_first: int = 0, kineto: str | None = "without_activity"):
        self.line, self.open_at, self.drop_first, self.kineto = Timeline(), None, drop_first, kineto
        self.windows, self.host = 0, []          # host: the order of calls, syncs and markers

    def profile(self, *, activities, **kwargs):
        assert list(activities) == [torch.profiler.ProfilerActivity.CUDA] and not kwargs, (activities, kwargs)
        fake = self

        class Window:
            def __enter__(self):
                fake.windows += 1
                fake.open_at = len(fake.line.events)
                return self

            def __exit__(self, *exc):
                self.recorded = fake.line.events[fake.open_at + fake.drop_first:]
                fake.open_at = None
                if fake.kineto:
                    kineto = [KinetoEvent(r, fake.kineto == "with_activity") for r in reversed(self.recorded)]
                    self.profiler = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: kineto))

            def events(self):
                assert not fake.kineto, "FunctionEvents built although kineto's result was there"
                return list(reversed(self.recorded))

        return Window()

    def forward(self):
        call = len([h for h in self.host if h == "fn"])
        self.host.append("fn")
        self.line.call(forward_kernels_us(call))

    def sleep(self, cycles):
        assert cycles == R.MARKER_CYCLES
        self.host.append("marker")
        self.line.marker()

    def install(self, monkeypatch):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: self.host.append("sync"))
        monkeypatch.setattr(torch.cuda, "_sleep", self.sleep)
        monkeypatch.setattr(torch.profiler, "profile", self.profile)
        return self


@pytest.mark.parametrize("kineto", ["without_activity", "with_activity", None])
@pytest.mark.parametrize("repeats, warmup", [(5, 1), (2, 0)])
def test_profile_forward_profiles_every_call_in_one_window(monkeypatch, repeats, warmup, kineto):
    fake = FakeCuda(kineto=kineto).install(monkeypatch)
    got = R.profile_forward(fake.forward, repeats=repeats, warmup=warmup)
    assert fake.windows == 1
    assert fake.host == ["fn"] * warmup + ["marker", "sync"] + ["fn", "sync", "marker", "sync"] * (1 + repeats)
    profiled_calls = [forward_kernels_us(c) for c in range(warmup, warmup + 1 + repeats)]
    assert_profiled(got, profiled_calls)


def test_profile_forward_survives_a_lost_start_and_refuses_a_lost_marker(monkeypatch):
    one_call = Timeline()
    one_call.call(forward_kernels_us(0))
    n_warm_up_records = len(one_call.events)                      # all of the warm-up call, not its marker
    got = R.profile_forward(FakeCuda(drop_first=n_warm_up_records).install(monkeypatch).forward, repeats=3)
    assert_profiled(got, [forward_kernels_us(c) for c in range(1, 5)])
    with pytest.raises(RuntimeError, match="marker"):             # the warm-up's marker lost too
        R.profile_forward(FakeCuda(drop_first=n_warm_up_records + 1).install(monkeypatch).forward, repeats=3)


@pytest.fixture(scope="module")
def tiny_gpt2():
    """``get_model(name, dtype)`` of :func:`~cudagraph_bench.measure.kernel_counts.count_case` giving a one-layer
    gpt2 on the CPU: its forward runs for real and launches no fake kernel, so a window holds only the markers."""
    from cudagraph_bench.models.presets import load_model

    model = load_model("gpt2", "float32", "cpu", overrides=dict(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    return lambda name, dtype: model


def test_a_profile_without_kernels_fails_the_count_naming_cupti(monkeypatch, tiny_gpt2):
    FakeCuda(drop_first=10 ** 6).install(monkeypatch)                 # every device record lost
    monkeypatch.setattr(K, "device_problem", lambda device: None)     # the fake profiles on the CPU
    got = K.count_case("gpt2", "float32", 8, tiny_gpt2, repeats=2)
    assert (got.status, got.phase, got.n_kernels) == ("failed", "count", None) and "CUPTI" in got.reason


def test_a_lost_marker_fails_the_count_with_the_reason(monkeypatch, tiny_gpt2):
    FakeCuda(drop_first=1).install(monkeypatch)                       # the window's first record: a marker
    monkeypatch.setattr(K, "device_problem", lambda device: None)
    got = K.count_case("gpt2", "float32", 8, tiny_gpt2, repeats=2)
    assert (got.status, got.phase, got.n_kernels) == ("failed", "count", None)
    assert got.reason.startswith("RuntimeError") and "recorded 2 of the 3 marker kernels" in got.reason


def test_on_the_h200_one_window_counted_every_case_like_the_scheduled_profiler():
    """The committed default-suite run (one profiler window per case) and the first forward run (counted
    before the profile became one window): every forward case has the same kernel count, and the suite run
    recorded a GPU busy time for each."""
    from h200_fixture import committed_doc

    def counts(name):
        doc = committed_doc(name)
        return {(c["model"], c["dtype"], c["seq_len"]): c for c in doc["cudagraph_bench"]["kernel_counts"]}

    scheduled, window = counts("forward"), counts("suite-one-gpu")
    assert scheduled.keys() == window.keys() and scheduled
    for key, before in scheduled.items():
        assert window[key]["n_kernels"] == before["n_kernels"], key
        assert window[key]["gpu_busy_ms"] > 0, key
