"""Launch-overhead arithmetic, clock-ordering checks and kernel-event classification (CPU only)."""

from types import SimpleNamespace

import pytest

from cudagraph_bench.measure import launch_overhead
from cudagraph_bench.results import launch_model
from cudagraph_bench.errors import CudaUnavailableError, UsageError


def test_us_per_launch_literal():
    assert launch_model.us_per_launch(2.0, 512) == 3.90625
    assert launch_model.us_per_launch(0.0, 8) == 0.0
    with pytest.raises(ValueError, match="n_launches"):
        launch_model.us_per_launch(1.0, 0)
    with pytest.raises(ValueError, match="total_ms"):
        launch_model.us_per_launch(float("nan"), 8)
    with pytest.raises(ValueError, match="total_ms"):
        launch_model.us_per_launch(-1.0, 8)


def test_speedup_literal_and_zero_graph_time():
    assert launch_model.speedup(10.0, 4.0) == 2.5
    with pytest.raises(ValueError, match="> 0"):
        launch_model.speedup(1.0, 0.0)


def test_predicted_saving_literal():
    # 400 kernels x (6.0 - 1.5) µs = 1800 µs = 1.8 ms
    assert launch_model.predicted_saving_ms(400, 6.0, 1.5) == pytest.approx(1.8)
    assert launch_model.predicted_saving_ms(0, 6.0, 1.5) == 0.0
    # a graph slower per launch predicts a loss
    assert launch_model.predicted_saving_ms(100, 1.0, 3.0) == pytest.approx(-0.2)


@pytest.mark.parametrize("args", [(-1, 6.0, 1.5), (10, float("nan"), 1.0), (10, 2.0, float("inf"))])
def test_predicted_saving_rejects_bad_input(args):
    with pytest.raises(ValueError):
        launch_model.predicted_saving_ms(*args)


def test_median_ms_even_and_odd_and_empty():
    assert launch_model.median_ms([3.0, 1.0, 2.0, 10.0]) == 2.5
    assert launch_model.median_ms([5.0, 1.0, 3.0]) == 3.0
    with pytest.raises(ValueError):
        launch_model.median_ms([])


def test_expected_count_stays_exact_in_float32():
    assert launch_model.expected_count(4096, 110) == 450560
    assert launch_model.expected_count(4096, 4096) == 2**24          # 2**24 itself is still exact
    with pytest.raises(UsageError, match="2\\*\\*24"):
        launch_model.expected_count(4096, 4097)


def test_clock_ordering_accepts_valid_and_reports_each_violation():
    assert launch_model.clock_ordering_violations([0.5, 0.6], [1.0, 1.0], [0.9, 1.03]) == []
    bad = launch_model.clock_ordering_violations([0.5, 1.2, 0.1], [1.0, 1.0, 1.0], [0.9, 0.9, 1.2])
    assert len(bad) == 2
    assert bad[0].startswith("repeat 1: issue")
    assert bad[1].startswith("repeat 2: CUDA events")
    # tolerance: 1.0 ms wall allows events up to 1.0 * 1.02 + 0.02 = 1.04 ms
    assert launch_model.clock_ordering_violations([0.1], [1.0], [1.039]) == []
    assert len(launch_model.clock_ordering_violations([0.1], [1.0], [1.041])) == 1
    assert launch_model.clock_ordering_violations([0.1], [1.0], [1.2], tol_ms=0.0, tol_rel=0.25) == []


def test_clock_ordering_needs_equal_lengths():
    with pytest.raises(ValueError, match="same"):
        launch_model.clock_ordering_violations([1.0], [1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        launch_model.clock_ordering_violations([], [], [])


def test_sweep_result_derived_numbers_literal():
    r = launch_overhead.SweepResult(n_launches=512, loop_event_ms=(6.0, 4.0, 5.0), graph_event_ms=(1.0, 3.0, 2.0),
                           count_expected=3072, count_observed=3072.0)
    assert r.loop_ms == 5.0 and r.graph_ms == 2.0
    assert r.speedup == 2.5
    assert r.us_per_launch_loop == 9.765625
    assert r.us_per_launch_graph == 3.90625
    assert r.count_ok
    d = r.as_dict()
    assert d["loop_event_ms"] == [6.0, 4.0, 5.0] and d["speedup"] == 2.5
    assert not launch_overhead.SweepResult(8, (1.0,), (1.0,), 64, 63.0).count_ok


def test_clock_result_medians_and_violations():
    c = launch_overhead.ClockResult(n_launches=8, variant="graph", issue_ms=(0.01, 0.02, 0.03),
                           synced_wall_ms=(0.2, 0.1, 0.3), event_ms=(0.05, 0.06, 0.5))
    assert c.medians() == {"issue_ms": 0.02, "synced_wall_ms": 0.2, "event_ms": 0.06}
    assert len(c.violations()) == 1     # repeat 2: events 0.5 > 0.3 * 1.02 + 0.02


def test_baked_pointer_result_expectations():
    r = launch_overhead.BakedPointerResult(n_launches=8, old_ptr=1024, new_ptr=2048, old_value=16.0, new_value=0.0,
                                  freed_ptr=4096, realloc_ptr=4096, realloc_value=8.0)
    assert r.rebind_ok and r.same_address
    r2 = launch_overhead.BakedPointerResult(8, 1024, 2048, 8.0, 8.0, 4096, 8192, 0.0)
    assert not r2.rebind_ok and not r2.same_address
    assert r2.as_dict()["same_address"] is False


CUDA = SimpleNamespace(name="CUDA")       # stands in for torch.autograd.DeviceType.CUDA
CPU = SimpleNamespace(name="CPU")


@pytest.mark.parametrize("device, activity, name, annotation, expected", [
    (CUDA, "kernel", "void at::native::vectorized_elementwise_kernel<4>(...)", False, True),
    (CUDA, "Kernel", "ampere_sgemm_128x64_tn", False, True),                  # legacy capitalisation
    (CUDA, "gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", False, False),
    (CUDA, "gpu_memset", "Memset (Device)", False, False),
    (CUDA, "gpu_user_annotation", "ProfilerStep#1", True, False),
    (CUDA, "cuda_sync", "Stream Sync", False, False),
    (CPU, "cuda_runtime", "cudaLaunchKernel", False, False),
    (CPU, "kernel", "not a device event", False, False),
    # no activity type: decided by device type, annotation flag and name
    (CUDA, None, "void at::native::vectorized_elementwise_kernel<4>(...)", False, True),
    (CUDA, None, "Memcpy DtoH (Device -> Pinned)", False, False),
    (CUDA, "", "Memset (Device)", False, False),
    (CUDA, None, "ProfilerStep#3", False, False),
    (CUDA, None, "my_range", True, False),
    ("DeviceType.CUDA", None, "gemv2T_kernel", False, True),
    ("DeviceType.CPU", None, "aten::add_", False, False),
])
def test_is_kernel_event(device, activity, name, annotation, expected):
    event = SimpleNamespace(device_type=device, activity_type=activity, name=name, is_user_annotation=annotation)
    assert launch_overhead.is_kernel_event(event) is expected


def test_count_kernel_events_on_fake_profiler_events():
    events = [
        SimpleNamespace(device_type=CPU, name="aten::add_", activity_type="cpu_op", is_user_annotation=False),
        SimpleNamespace(device_type=CPU, name="cudaLaunchKernel", activity_type="cuda_runtime"),
        SimpleNamespace(device_type=CUDA, name="elementwise_kernel", activity_type="kernel"),
        SimpleNamespace(device_type=CUDA, name="elementwise_kernel", activity_type="kernel"),
        SimpleNamespace(device_type=CUDA, name="Memcpy HtoD (Pageable -> Device)", activity_type="gpu_memcpy"),
        SimpleNamespace(device_type=CUDA, name="gemm_kernel"),                # no activity_type attribute
        SimpleNamespace(device_type=CUDA, name="ProfilerStep#1", is_user_annotation=True),
    ]
    assert launch_overhead.count_kernel_events(events) == 3
    assert launch_overhead.count_kernel_events([]) == 0


def test_gpu_entry_points_refuse_without_cuda(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(CudaUnavailableError, match="GPU"):
        launch_overhead.count_kernel_launches(lambda: None)
    with pytest.raises(CudaUnavailableError):
        launch_overhead.TinyKernelSequence(8)
    with pytest.raises(CudaUnavailableError):
        launch_overhead.measure_loop_vs_graph(8)
    with pytest.raises(CudaUnavailableError):
        launch_overhead.baked_pointer_demo()


def test_measure_arguments_are_checked_before_touching_the_gpu():
    with pytest.raises(UsageError, match="repeats"):
        launch_overhead.measure_loop_vs_graph(8, repeats=0)
    with pytest.raises(UsageError, match="repeats"):
        launch_overhead.measure_clocks(8, repeats=1, warmup=-1)
    with pytest.raises(UsageError, match="2\\*\\*24"):
        launch_overhead.measure_loop_vs_graph(4096, repeats=5000, warmup=0)
