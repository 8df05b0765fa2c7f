"""A ``--gpu-workers`` worker (``pytest perf_tests -n 2 --dist loadgroup --gpu-workers``) runs on the one
GPU and the CPUs the controller gave it: CUDA sees a single device, the one named in its plan, and the
process may run on its share of the cores only. Outside such a worker the test skips."""

import os

import pytest

from cudagraph_bench.gpu_workers import PLAN_KEY

pytestmark = pytest.mark.gpu


@pytest.fixture
def plan(request):
    plan = getattr(request.config, "workerinput", {}).get(PLAN_KEY)
    if plan is None:
        pytest.skip("runs only in a --gpu-workers worker (pytest -n N --dist loadgroup --gpu-workers)")
    return plan


def test_the_worker_sees_only_its_gpu_and_runs_on_its_cpus(plan):
    import pynvml
    import torch

    assert os.environ["CUDA_VISIBLE_DEVICES"] == plan["gpu"]
    assert sorted(os.sched_getaffinity(0)) == plan["cpus"]
    assert torch.cuda.device_count() == 1
    uuid = f"GPU-{torch.cuda.get_device_properties(0).uuid}"
    pynvml.nvmlInit()
    try:
        if plan["gpu"].startswith("GPU-"):
            assert uuid.startswith(plan["gpu"])
        elif not plan["gpu"].isdigit():
            pytest.skip(f"CUDA_VISIBLE_DEVICES entry {plan['gpu']!r} is neither an index nor a GPU UUID")
        else:
            # CUDA's default order (fastest first) ties between GPUs of one model and falls back to the PCI bus
            # order, which is NVML's: on such a host index I of both is the same GPU
            names = {pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                     for i in range(pynvml.nvmlDeviceGetCount())}
            if len(names) > 1 or os.environ.get("CUDA_DEVICE_ORDER", "FASTEST_FIRST") != "FASTEST_FIRST":
                pytest.skip("GPUs of several models: CUDA's and NVML's indices need not name the same GPU")
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(plan["gpu"]))
            assert pynvml.nvmlDeviceGetUUID(handle) == uuid
    finally:
        pynvml.nvmlShutdown()
