"""What the first call of scaled_dot_product_attention at a new shape costs, by backend: 128 new key lengths
(51-178, one decode query, 64-dim heads) with the default backend choice, again (cached), with cuDNN left out,
and with one backend only; the kernel the default choice runs; and the first HF ``generate`` request (128 new
tokens) of tinyllama-1.1b with the default choice (bfloat16) and without cuDNN (float16: shapes not seen yet).
Usage (repo root, GPU): PYTHONPATH=src python3 <this file>
"""
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.profiler import ProfilerActivity, profile

from cudagraph_bench.models.presets import load_model
from cudagraph_bench.session import generate_reference

b = torch.backends.cuda
print("cudnn_sdp", b.cudnn_sdp_enabled(), "flash", b.flash_sdp_enabled(), "mem_efficient",
      b.mem_efficient_sdp_enabled(), "math", b.math_sdp_enabled(), flush=True)
torch.zeros(1, device="cuda")
NO_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def sweep(dtype, backends, heads=12, note=""):
    q = torch.randn(1, heads, 1, 64, device="cuda", dtype=dtype)
    t = time.perf_counter()
    for kv in range(51, 179):
        k = torch.randn(1, heads, kv, 64, device="cuda", dtype=dtype)
        if backends is None:
            F.scaled_dot_product_attention(q, k, k)
        else:
            with sdpa_kernel(backends):
                F.scaled_dot_product_attention(q, k, k)
    torch.cuda.synchronize()
    print(f"{note} {dtype} {backends}: 128 new key lengths {time.perf_counter() - t:.2f} s", flush=True)


sweep(torch.bfloat16, None, note="default")
sweep(torch.bfloat16, None, note="default again")
sweep(torch.float16, NO_CUDNN, note="no cudnn")
sweep(torch.float16, None, note="default (after no-cudnn)")
sweep(torch.bfloat16, [SDPBackend.CUDNN_ATTENTION], heads=16, note="cudnn only")
sweep(torch.bfloat16, [SDPBackend.FLASH_ATTENTION], heads=8, note="flash only")
sweep(torch.bfloat16, [SDPBackend.EFFICIENT_ATTENTION], heads=4, note="efficient only")
q = torch.randn(1, 12, 1, 64, device="cuda", dtype=torch.bfloat16)
k = torch.randn(1, 12, 300, 64, device="cuda", dtype=torch.bfloat16)
F.scaled_dot_product_attention(q, k, k)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA]) as p:
    F.scaled_dot_product_attention(q, k, k)
    torch.cuda.synchronize()
print("kernels:", [e.name[:90] for e in p.events() if e.device_type.name == "CUDA"])
ids = torch.randint(1, 1000, (1, 50), device="cuda")
for dtype, backends in (("bfloat16", None), ("float16", NO_CUDNN)):
    model = load_model("tinyllama-1.1b", dtype, "cuda")
    t = time.perf_counter()
    if backends:
        with sdpa_kernel(backends):
            generate_reference(model, ids, 128)
    else:
        generate_reference(model, ids, 128)
    torch.cuda.synchronize()
    print("tinyllama", dtype, "nocudnn" if backends else None, "generate 1st", round(time.perf_counter() - t, 2),
          flush=True)
    del model
