"""Does profiling (kernel counting) slow later eager launches in the same process? (pytorch#144455)

Times gpt2 float32 eager at 50 tokens before and after one torch.profiler session; prints medians.
"""
import numpy as np
import torch

from cudagraph_bench.measure.launch import count_kernel_launches
from cudagraph_bench.models.presets import load_model, model_forward, random_input_ids
from cudagraph_bench.measure.timing import time_call

model = load_model("gpt2", "float32", "cuda")
ids = random_input_ids(model, 50)
with torch.inference_mode():
    before = time_call(lambda: model_forward(model, ids), rounds=100, warmup=10)
    n = count_kernel_launches(lambda: model_forward(model, ids))
    after = time_call(lambda: model_forward(model, ids), rounds=100, warmup=10)
print(f"kernels={n} eager median wall before profiling {np.median(before.wall_ms):.3f} ms, "
      f"after {np.median(after.wall_ms):.3f} ms (events {np.median(before.event_ms):.3f} / {np.median(after.event_ms):.3f})")
