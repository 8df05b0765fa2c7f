"""How long reading one profiler window takes: torch's FunctionEvent list (``prof.events()``) against the records
read straight from kineto's result (:func:`cudagraph_bench.measure.roofline.window_records`), for the window
:func:`~cudagraph_bench.measure.roofline.profile_forward` opens (one warm-up and five eager forwards, a marker
kernel after each). Prints, per case and twice, the seconds of entering, the forwards, leaving, and each way of
reading, with the ``(kernels, busy ms)`` both give. Usage (repo root, GPU): PYTHONPATH=src python3 <this file>
"""
import time

import torch
from torch.profiler import ProfilerActivity, profile

from cudagraph_bench.measure import roofline
from cudagraph_bench.models.presets import load_model, model_forward, random_input_ids

torch.zeros(1, device="cuda")
for name, dtype, seq_len in (("tinyllama-1.1b", "float32", 16), ("tinyllama-1.1b", "bfloat16", 1024),
                             ("gpt2", "float32", 50)):
    model = load_model(name, dtype, "cuda")
    ids = random_input_ids(model, seq_len, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))

    def forward():
        return model_forward(model, ids)

    for _ in range(2):
        forward()
        torch.cuda._sleep(roofline.MARKER_CYCLES)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        prof = profile(activities=[ProfilerActivity.CUDA])
        prof.__enter__()
        t1 = time.perf_counter()
        for _ in range(6):
            forward()
            torch.cuda.synchronize()
            torch.cuda._sleep(roofline.MARKER_CYCLES)
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        prof.__exit__(None, None, None)
        t3 = time.perf_counter()
        from_kineto = roofline.split_at_markers(roofline.window_records(prof), repeats=5)
        t4 = time.perf_counter()
        from_events = roofline.split_at_markers(prof.events(), repeats=5)
        t5 = time.perf_counter()
        print(f"{name} {dtype} L{seq_len}: enter {t1 - t0:.3f} s, forwards {t2 - t1:.3f} s, exit {t3 - t2:.3f} s, "
              f"kineto records + split {t4 - t3:.3f} s, FunctionEvents + split {t5 - t4:.3f} s", flush=True)
        print("  kineto records", [(n, round(ms, 4)) for n, ms in from_kineto])
        print("  FunctionEvents", [(n, round(ms, 4)) for n, ms in from_events], flush=True)
    del model
    torch.cuda.empty_cache()
