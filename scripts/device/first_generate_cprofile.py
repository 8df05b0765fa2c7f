"""Where the first HF ``generate`` request of a model goes: gpt2 in bfloat16, then float16, 50-token prompt, 128
new tokens, the first request under cProfile (by own time, then cumulative) and the second one timed.
Usage (repo root, GPU): PYTHONPATH=src python3 <this file>
"""
import cProfile
import pstats
import time

import torch

from cudagraph_bench.models.presets import load_model
from cudagraph_bench.session import generate_reference

torch.zeros(1, device="cuda")
for dtype in ("bfloat16", "float16"):
    model = load_model("gpt2", dtype, "cuda")
    ids = torch.randint(1, 1000, (1, 50), device="cuda")
    prof = cProfile.Profile()
    t = time.perf_counter()
    prof.enable()
    generate_reference(model, ids, 128)
    torch.cuda.synchronize()
    prof.disable()
    print(dtype, "1st", time.perf_counter() - t)
    t = time.perf_counter()
    generate_reference(model, ids, 128)
    torch.cuda.synchronize()
    print("2nd", time.perf_counter() - t)
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
