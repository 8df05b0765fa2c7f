"""The CUDA C++ launch-overhead program ``perf_tests/cuda/graphs.cu``, built and checked.

The program is compiled with ``nvcc`` for the GPU's architecture into a temporary folder, run once,
and its one JSON object on stdout is parsed (see the program's header comment for the fields).
The baked-pointer mode also runs under ``compute-sanitizer --tool memcheck`` when that tool exists.

Needs a CUDA GPU (marker ``gpu``) and ``nvcc`` (marker ``nvcc``; skipped with the reason when absent).
With ``CGB_ARTIFACT_DIR`` set, the program's JSON and the sanitizer logs are written there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cudagraph_bench.measure import launch_overhead
from cudagraph_bench.report.launch_page import parse_sanitizer_log

pytestmark = [pytest.mark.gpu, pytest.mark.nvcc]

SOURCE = Path(__file__).parent / "cuda" / "graphs.cu"
SIZES = (8, 64, 512, 4096)
BAKED_N = 8
SANITIZER_EXIT = 86


def _artifact(name: str, text: str) -> None:
    """Write ``text`` to ``$CGB_ARTIFACT_DIR/name`` when the variable is set."""
    folder = os.environ.get("CGB_ARTIFACT_DIR")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_text(text, encoding="utf-8")


def _last_json_line(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"graphs printed no JSON object; stdout was:\n{stdout[-2000:]}"
    return json.loads(lines[-1])


def _find_compute_sanitizer(nvcc: str) -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    roots = [Path(nvcc).resolve().parent.parent]
    if os.environ.get("CUDA_HOME"):
        roots.append(Path(os.environ["CUDA_HOME"]))
    for root in roots:
        for cand in (root / "bin" / "compute-sanitizer", root / "compute-sanitizer" / "compute-sanitizer"):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    return None


@pytest.fixture(scope="module")
def nvcc() -> str:
    path = shutil.which("nvcc")
    if path is None:
        pytest.skip("nvcc not found on PATH: install the CUDA toolkit or add its bin/ folder to PATH "
                    "to build perf_tests/cuda/graphs.cu")
    return path


@pytest.fixture(scope="module")
def graphs_exe(nvcc, tmp_path_factory) -> Path:
    torch = pytest.importorskip("torch")
    major, minor = torch.cuda.get_device_capability()
    exe = tmp_path_factory.mktemp("graphs_cu") / "graphs"
    cmd = [nvcc, "-O2", "-lineinfo", f"-arch=sm_{major}{minor}", "-o", str(exe), str(SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"nvcc failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
    if proc.stderr.strip():
        print(f"nvcc warnings:\n{proc.stderr}")
    return exe


@pytest.fixture(scope="module")
def graphs_run(graphs_exe) -> dict:
    """The full run: N sweep, clocks, baked pointers (default options: 50 repeats, one warmup)."""
    proc = subprocess.run([str(graphs_exe)], capture_output=True, text=True, timeout=600)
    _artifact("graphs_cu.json", proc.stdout)
    assert proc.returncode == 0, f"graphs exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return _last_json_line(proc.stdout)


def _sweep(run: dict) -> dict[int, dict]:
    return {row["n_launches"]: row for row in run["sweep"]}


def test_sweep_counts_are_exact(graphs_run, record_property):
    sweep = _sweep(graphs_run)
    record_property("graphs_cu_sweep", {n: {k: r[k] for k in ("loop_ms", "graph_ms", "speedup",
                                                              "us_per_launch_loop", "us_per_launch_graph")}
                                        for n, r in sweep.items()})
    assert sorted(sweep) == list(SIZES)
    for n, row in sweep.items():
        # 3 loops + 5 replays of n "+1" kernels from 0: exact in float below 2**24.
        assert row["count_expected"] == 8 * n
        assert row["count_observed"] == 8 * n, row
        assert row["count_ok"] is True
        assert len(row["loop_event_ms"]) == len(row["graph_event_ms"]) == graphs_run["repeats"] >= 50


def test_sweep_arithmetic(graphs_run):
    for n, row in _sweep(graphs_run).items():
        assert row["loop_ms"] == pytest.approx(launch_overhead.median_ms(row["loop_event_ms"]), rel=1e-6)
        assert row["graph_ms"] == pytest.approx(launch_overhead.median_ms(row["graph_event_ms"]), rel=1e-6)
        assert row["us_per_launch_loop"] == pytest.approx(row["loop_ms"] * 1000 / n, rel=1e-6)
        assert row["us_per_launch_graph"] == pytest.approx(row["graph_ms"] * 1000 / n, rel=1e-6)
        assert row["speedup"] == pytest.approx(row["loop_ms"] / row["graph_ms"], rel=1e-6)


@pytest.mark.parametrize("n", [512, 4096])
def test_graph_replay_beats_loop(graphs_run, n):
    row = _sweep(graphs_run)[n]
    assert row["speedup"] > 1.0, row


def test_clock_ordering(graphs_run):
    # Per repeat: issue <= synced wall (one steady_clock, same start, stop before/after the sync);
    # events <= synced wall up to the event timer resolution. Issue vs events is not guaranteed.
    for n, row in _sweep(graphs_run).items():
        for variant, c in row["clocks"].items():
            bad = launch_overhead.clock_ordering_violations(c["issue_ms_all"], c["synced_wall_ms_all"],
                                                            c["event_ms_all"])
            assert bad == [], f"N={n} {variant}: {bad[:5]}"
            assert c["issue_ms"] <= c["synced_wall_ms"]


def test_baked_pointer_keep_alive(graphs_run):
    bp = graphs_run["baked_pointer_keep_alive"]
    assert bp["old_ptr"] != bp["d2_ptr"]                # both alive: different addresses
    assert bp["value_after_first_replay"] == BAKED_N    # the graph works
    assert bp["old_value"] == 2 * BAKED_N               # the replay still writes the captured d ...
    assert bp["d2_value"] == 0                          # ... and never the new buffer
    assert bp["d2_updated"] is False


def _check_free_chain(bp: dict) -> str:
    """Assert what is guaranteed after cudaFree(d) + allocations + replay; return a one-line outcome."""
    assert bp["value_before_free"] == BAKED_N
    aliased = bp["aliased_index"]
    if bp["launch_error"] != "cudaSuccess" or bp["sync_error"] != "cudaSuccess":
        # A fault is only possible when no live allocation holds the captured address.
        assert aliased == -1, bp
        return f"replay faulted ({bp['launch_error']}/{bp['sync_error']}): it wrote the freed address"
    values = bp["chain_values"]
    assert values is not None and len(values) == len(bp["chain_ptrs"])
    if bp["d2_same_address_as_old"]:
        assert bp["d2_value"] == BAKED_N
    else:
        assert bp["d2_value"] == 0 and bp["d2_updated"] is False, "d2 is elsewhere: the replay cannot update it"
    for i, v in enumerate(values):
        assert v == (BAKED_N if i == aliased else 0), f"chain[{i}] = {v} (aliased index {aliased})"
    if aliased >= 0:
        return f"allocation #{aliased} after the free reused the captured address and was silently updated"
    return "the replay wrote freed memory that stayed mapped (no fault, nothing visible)"


def test_baked_pointer_free_then_malloc(graphs_run, record_property):
    outcome = _check_free_chain(graphs_run["baked_pointer"])
    record_property("baked_pointer_outcome", outcome)


@pytest.mark.parametrize(("d_bytes", "before"), [(4, False), (8 << 20, False), (4, True)],
                         ids=["d-4B", "d-8MiB", "d-4B-alloc-before-free"])
def test_baked_pointer_under_compute_sanitizer(graphs_exe, nvcc, d_bytes, before, tmp_path, record_property):
    """memcheck must flag the replay's write to freed memory, unless a new allocation reuses the
    address (then the write is to valid memory, invisible to memcheck, and the program sees the
    corruption instead). Whether the allocator reuses the address is its choice (on the H200 both the
    4 B and the 8 MiB d were reused by the first 4 B allocation); ``--alloc-before-free`` makes every
    allocation while d lives, so no reuse is possible and memcheck must report the write."""
    sanitizer = _find_compute_sanitizer(nvcc)
    if sanitizer is None:
        pytest.skip("compute-sanitizer not found (PATH, next to nvcc, $CUDA_HOME): install the CUDA toolkit's "
                    "sanitizer to check the baked-pointer write")
    log = tmp_path / "memcheck.log"
    cmd = [sanitizer, "--tool", "memcheck", "--log-file", str(log), "--error-exitcode", str(SANITIZER_EXIT),
           str(graphs_exe), "--baked-pointer-only", "--d-bytes", str(d_bytes), "--baked-n", str(BAKED_N),
           *(["--alloc-before-free"] if before else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    log_text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    label = f"d{d_bytes}" + ("_alloc_before_free" if before else "")
    _artifact(f"compute_sanitizer_{label}.log", log_text)
    _artifact(f"compute_sanitizer_{label}.json", proc.stdout)
    findings = parse_sanitizer_log(log_text)
    print(f"compute-sanitizer ({' '.join(cmd)}) exit {proc.returncode}\n{log_text}")
    record_property("sanitizer_exit_code", proc.returncode)
    record_property("sanitizer_findings", findings)
    record_property("sanitizer_log", log_text[-8000:])

    bp = _last_json_line(proc.stdout)["baked_pointer"]
    record_property("baked_pointer", bp)
    outcome = _check_free_chain(bp)
    record_property("baked_pointer_outcome", outcome)
    assert bp["alloc_before_free"] is before
    if before:
        assert bp["aliased_index"] == -1, "allocations made while d lived cannot hold its address"
    if bp["aliased_index"] == -1:
        # Nobody owns the captured address any more: the kernel's write is to freed memory.
        # tiny() does d[0] += 1: its read of the freed address comes first, and memcheck stops the
        # kernel at the first invalid access, so the report may be the read rather than the write.
        invalid = findings["invalid_global_writes"] + findings["invalid_global_reads"]
        assert invalid >= 1, f"memcheck did not flag the access to freed memory:\n{log_text}"
        assert proc.returncode == SANITIZER_EXIT
    else:
        # The write hit a live allocation: legal for memcheck. What is guaranteed is the corruption.
        assert bp["aliased_value"] == BAKED_N
