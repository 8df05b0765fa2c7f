"""When a kernel-count worker reports each case: the default suite's 40 forward cases (gpt2, distilgpt2, bert-tiny,
tinyllama-1.1b; float32 and bfloat16; 16-1024 tokens as the model's positions allow) sent to one real worker
(``python -m cudagraph_bench.measure.kernel_counts --worker``), each protocol line printed with the seconds since
the worker was started. Usage (repo root, GPU): PYTHONPATH=src python3 <this file>
"""
import json
import subprocess
import time

from cudagraph_bench.measure.kernel_counts import count_spec, worker_command

specs = [count_spec(m, d, n) for m in ("gpt2", "distilgpt2", "bert-tiny", "tinyllama-1.1b")
         for d in ("float32", "bfloat16") for n in (16, 50, 128, 512, 1024) if not (m == "bert-tiny" and n > 512)]
t0 = time.perf_counter()
proc = subprocess.Popen(worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
proc.stdin.write(json.dumps({"cases": specs}) + "\n")
proc.stdin.close()
for line in proc.stdout:
    msg = json.loads(line)
    case = ""
    if msg.get("cgb") == "result":
        r = msg["result"]
        case = (f"{r['model']} {r['dtype']} L{r['seq_len']} {r['status']} n={r.get('n_kernels')} "
                f"busy={r.get('gpu_busy_ms')}")
    print(f"{time.perf_counter() - t0:7.2f} {msg.get('cgb')} {msg.get('index', '')} {case}", flush=True)
print("total", round(time.perf_counter() - t0, 2), "rc", proc.wait())
