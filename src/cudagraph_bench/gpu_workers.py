"""pytest plugin of cudagraph-bench that runs the suite on several GPUs of one host with pytest-xdist
(loaded by :mod:`cudagraph_bench.plugin`):

    pytest perf_tests -n 2 --dist loadgroup --gpu-workers --benchmark-json OUT.json   # -n auto: one per GPU

- The controller hands worker ``gwI`` GPU slot I through xdist's ``workerinput``
  (``pytest_configure_node``): one GPU of the visible ones (``CUDA_VISIBLE_DEVICES`` entries, else NVML
  indices) and a contiguous share of the controller's CPUs (``--cpus``, else its affinity), since eager
  is host-bound and two workers must not share cores.
- The worker sets ``CUDA_VISIBLE_DEVICES`` to its GPU in ``pytest_configure``, before any test module is
  imported (nothing the plugins import at start-up calls CUDA; a CUDA context already made is a usage
  error), pins itself to its CPUs (:func:`cudagraph_bench.envinfo.pin_cpus`), and puts pytest-benchmark
  back on (:func:`reenable_benchmarks`).
- The tests of one model and dtype (else of one module) carry one ``xdist_group`` mark, and
  ``--dist loadgroup`` keeps each group on one worker, so each model is built once per worker. The
  scheduler is xdist's ``LoadGroupScheduling`` with two changes (``pytest_xdist_make_scheduler``): it
  reads each test's group from a file the first worker writes when it has collected (xdist itself reads
  the group from a ``@group`` suffix it appends to node ids, which pytest 9.2's structured node ids no
  longer take: pytest-dev/pytest-xdist#1386), and a free worker takes the group with the most recorded
  seconds (``--shard-durations``; else the most tests), greedy longest-processing-time.
- The forward-profiles group (:data:`cudagraph_bench.session.FORWARD_PROFILES_GROUP`: kernel counts and GPU
  busy times, one batch of profiles) is pinned to the worker of slot 0 (:data:`PROFILES_SLOT`), which
  takes it as its second group (its first when nothing else is left), after the heaviest group that starts
  with an ``untimed`` test; no other worker takes it while that one runs. That worker knows it ahead (``holds_profiles`` in its plan), so it starts the kernel-count
  worker during its first ``untimed`` tests and lets it count before its first timed test, as a session
  without workers does (:meth:`cudagraph_bench.session.Session.hold_profiling_worker`), instead of starting
  a fresh one when the first profiling test asks.
- Each worker sends its pytest-benchmark document back through ``workeroutput``
  (``pytest_testnodedown``); the controller merges them (:func:`cudagraph_bench.results.merge.merge_runs`)
  into ``--benchmark-json`` (atomically), with its own ``machine_info`` (its ``"cuda"`` fingerprint from the
  slot-0 worker's document: the controller imports no torch, :func:`merged_run_cuda`) plus
  ``machine_info["workers"]`` (worker, GPU, CPUs, tests, benchmarks, wall seconds), saves it for ``--benchmark-save`` /
  ``--benchmark-autosave``, and shows pytest-benchmark's table of all of them. Every worker sends its
  document, benchmarks or none, so kernel counts profiled in one worker reach the eager benchmarks of
  another; a session whose workers ran no benchmark but recorded kernel counts or failed cases still gets
  its ``--benchmark-json`` (as :func:`cudagraph_bench.plugin.write_records_only_json` in one process).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

import pytest

#: ``workerinput`` key of a worker's plan: ``{"slot", "gpu", "cpus", "groups_dir", "holds_profiles"}``.
PLAN_KEY = "cudagraph_bench_gpu_worker"
#: The slot whose worker runs the forward-profiles group (the first worker: there is one on every run).
PROFILES_SLOT = 0
#: How a worker's summary (``error``) starts when its document could not be built or sent.
RESULTS_NOT_SENT = "its results could not be sent"
#: ``workeroutput`` keys: the worker's pytest-benchmark document (JSON text) and its summary.
JSON_KEY = "cudagraph_bench_json"
INFO_KEY = "cudagraph_bench_worker"


class GpuPlan:
    """The controller's plan: GPU and CPUs of each slot, the worker in each slot, what workers sent back."""

    def __init__(self, gpus: list[str], cpus: list[list[int]], benchmark_only: bool, groups_dir: str | None = None):
        self.gpus = gpus
        self.cpus = cpus
        self.benchmark_only = benchmark_only
        self.groups_dir = groups_dir        # where workers write {node id: group} once they have collected
        self.slot_of: dict[str, int] = {}   # live worker id -> slot
        self.parts: list[dict] = []         # {"info": worker summary, "doc": its document or None}
        self.workers_cuda: dict | None = None   # machine_info["cuda"] for the merged run (_merge_results)


PLAN = pytest.StashKey[GpuPlan]()


def pytest_addoption(parser):
    parser.getgroup("cudagraph-bench").addoption(
        "--gpu-workers", dest="gpu_workers", action="store_true", default=False,
        help="with pytest-xdist -n N --dist loadgroup: worker I runs alone on GPU I and its own share of the "
             "CPUs with benchmarks on, and --benchmark-json gets the workers' merged results (-n auto: one "
             "worker per visible GPU)")


def visible_gpus() -> list[str]:
    """The GPUs this process may hand out: the entries of ``CUDA_VISIBLE_DEVICES`` when it is set (indices or
    UUIDs, as CUDA reads them), else NVML's device indices (``"0"``, ``"1"``, ...); ``[]`` without NVML."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [token.strip() for token in env.split(",") if token.strip()]
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return [str(i) for i in range(pynvml.nvmlDeviceGetCount())]
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no nvidia-ml-py, no driver
        return []


def cpu_shares(cpus, n: int) -> list[list[int]]:
    """``cpus`` (CPU numbers) split into ``n`` contiguous shares whose sizes differ by at most one:
    ``range(8), 2`` -> ``[[0, 1, 2, 3], [4, 5, 6, 7]]``. Raises ValueError with fewer CPUs than shares."""
    cpus = sorted(cpus)
    if n < 1 or len(cpus) < n:
        raise ValueError(f"{len(cpus)} CPU(s) cannot give {n} worker(s) one each")
    size, extra = divmod(len(cpus), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(cpus[start:end])
        start = end
    return out


def is_worker(config) -> bool:
    return hasattr(config, "workerinput")


def holds_forward_profiles(config) -> bool:
    """Whether this process runs the forward-profiles group whenever it is selected: a session without
    xdist workers, or the ``--gpu-workers`` worker it is pinned to (:data:`PROFILES_SLOT`). False in any
    other xdist worker, which may never get the group."""
    if not is_worker(config):
        return True
    plan = config.workerinput.get(PLAN_KEY)
    return bool(plan and plan.get("holds_profiles"))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    """``--gpu-workers``: plan the GPUs and CPUs (controller) or take this worker's (worker), before any
    CUDA call; usage errors name the fix."""
    if not config.getoption("gpu_workers", False):
        if (getattr(config.option, "benchmark_only", False) and config.getoption("dist", "no") != "no"
                and not is_worker(config)):
            # pytest-benchmark would refuse this with "Can't have both --benchmark-only and --benchmark-disable"
            raise pytest.UsageError("pytest-xdist (-n/--dist) turns pytest-benchmark's timing off, so --benchmark-only "
                                    "would time nothing: drop -n to time in one process, or add --dist loadgroup "
                                    "--gpu-workers on a host with several GPUs (one worker per GPU)")
        return
    from cudagraph_bench.errors import UsageError

    try:
        # pytest-benchmark makes --benchmark-only a usage error in an xdist session (it turns benchmarks off
        # there); it is restored once they are on again (pytest_sessionstart)
        benchmark_only = bool(getattr(config.option, "benchmark_only", False))
        config.option.benchmark_only = False
        # and pytest-benchmark < 5.3 warns in every process that they are off, which is not so here
        warnings.filterwarnings("ignore", message="Benchmarks are automatically disabled because xdist",
                                category=pytest.PytestWarning)
        if is_worker(config):
            _take_gpu(config)
            config.stash[PLAN] = GpuPlan([], [], benchmark_only)
        else:
            plan = config.stash[PLAN] = _plan(config, benchmark_only)
            plan.groups_dir = tempfile.mkdtemp(prefix="cudagraph-bench-groups-")
            config.add_cleanup(lambda: shutil.rmtree(plan.groups_dir, ignore_errors=True))
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def _take_gpu(config) -> None:
    """Worker: ``CUDA_VISIBLE_DEVICES`` = this worker's GPU, pinned to its CPUs."""
    from cudagraph_bench.envinfo import pin_cpus
    from cudagraph_bench.errors import UsageError

    plan = config.workerinput.get(PLAN_KEY)
    if plan is None:
        raise UsageError("--gpu-workers: this xdist worker got no GPU from the controller: give -n N --dist "
                         "loadgroup --gpu-workers on the command line")
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        raise UsageError("--gpu-workers: CUDA was initialised before pytest_configure, so this worker cannot get "
                         "its own GPU: find the plugin or conftest that calls CUDA when it is imported")
    os.environ["CUDA_VISIBLE_DEVICES"] = plan["gpu"]
    config.option.cpus = tuple(plan["cpus"])   # the plugin's own --cpus pinning then pins this share too
    pin_cpus(config.option.cpus, flag="--gpu-workers")


def _plan(config, benchmark_only: bool) -> GpuPlan:
    """Controller: check the xdist options and split the GPUs and CPUs over the workers."""
    from cudagraph_bench.envinfo import format_cpus
    from cudagraph_bench.errors import UsageError

    dist = config.getoption("dist", "no")
    if dist == "no":
        raise UsageError("--gpu-workers needs pytest-xdist workers: add -n N --dist loadgroup (N at most the "
                         "GPUs; -n auto starts one per GPU)")
    if dist != "loadgroup":
        raise UsageError(f"--gpu-workers needs --dist loadgroup (it keeps each model and dtype on one worker), "
                         f"got --dist {dist}")
    try:   # xdist's own reading of --tx: "2*popen" is two local workers
        from xdist.workermanage import parse_tx_spec_config

        specs = [str(spec) for spec in parse_tx_spec_config(config)]
    except (ImportError, pytest.UsageError):
        specs = [str(spec) for spec in config.getoption("tx") or ()]
    if any(not spec.startswith("popen") for spec in specs):
        raise UsageError("--gpu-workers runs local workers only: drop --tx and give -n N")
    if getattr(config.option, "benchmark_compare", None) or getattr(config.option, "benchmark_compare_fail", None):
        raise UsageError("--benchmark-compare is not applied to a --gpu-workers run: compare its --benchmark-json "
                         "afterwards (pytest-benchmark compare, cudagraph-bench compare)")
    gpus = visible_gpus()
    where = (f"CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']!r}" if "CUDA_VISIBLE_DEVICES" in os.environ
             else "NVML")
    if not gpus:
        raise UsageError(f"--gpu-workers: no GPU visible ({where}): run without -n and --gpu-workers")
    twice = sorted({gpu for gpu in gpus if gpus.count(gpu) > 1})
    if twice:
        raise UsageError(f"--gpu-workers: {where} names GPU {', '.join(map(repr, twice))} more than once, so two "
                         "workers would time on one GPU: name each GPU once")
    if len(specs) > len(gpus):
        raise UsageError(f"--gpu-workers: {len(specs)} workers but {len(gpus)} GPU(s) visible ({where}): give "
                         f"-n {len(gpus)} or fewer (-n auto: one per GPU)")
    base = list(config.getoption("cpus", None) or sorted(os.sched_getaffinity(0)))
    try:
        shares = cpu_shares(base, len(specs))
    except ValueError as exc:
        raise UsageError(f"--gpu-workers: {exc} (CPUs {format_cpus(base)}): give fewer workers (-n) or more "
                         "CPUs (--cpus)") from None
    return GpuPlan(gpus[:len(specs)], shares, benchmark_only)


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` with ``--gpu-workers``: one worker per visible GPU (tryfirst: before xdist's own answer, the
    CPU count, whatever order the plugins were registered in)."""
    if config.getoption("gpu_workers", False):
        return len(visible_gpus()) or None
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Controller: give a starting worker the lowest free slot (a restarted worker takes the slot of the
    one that went down): its GPU and CPUs, through ``workerinput``."""
    plan = node.config.stash.get(PLAN, None)
    if plan is None or not plan.gpus:
        return
    busy = set(plan.slot_of.values())
    slot = next((i for i in range(len(plan.gpus)) if i not in busy), len(plan.slot_of) % len(plan.gpus))
    plan.slot_of[node.workerinput["workerid"]] = slot
    node.workerinput[PLAN_KEY] = {"slot": slot, "gpu": plan.gpus[slot], "cpus": plan.cpus[slot],
                                  "groups_dir": plan.groups_dir, "holds_profiles": slot == PROFILES_SLOT}


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """Controller: keep what the worker sent back (its document and summary) and free its slot."""
    plan = node.config.stash.get(PLAN, None)
    if plan is None or not plan.gpus:
        return
    worker = node.workerinput["workerid"]
    slot = plan.slot_of.pop(worker, None)
    out = getattr(node, "workeroutput", None) or {}
    info = dict(out.get(INFO_KEY) or {"worker": worker, "slot": slot,
                                      "gpu": plan.gpus[slot] if slot is not None else None})
    if error is not None:
        info["error"] = str(error)
    text = out.get(JSON_KEY)
    doc = json.loads(text) if text else None
    _take_worker_durations(node.config, doc)
    plan.parts.append({"info": info, "doc": doc})


def _take_worker_durations(config, doc: dict | None) -> None:
    """Controller: the seconds per test that a worker recorded (its document's
    ``cudagraph_bench.test_durations_s``) replace what the controller summed from that worker's reports, so
    that the terminal's time per part is the merged run's: a worker also records time spent between tests
    for a test (the held kernel-count worker's count, under the first profiling test)."""
    from cudagraph_bench.results.shards import DURATIONS_KEY
    from cudagraph_bench.sharding import session_state

    state = session_state(config)
    if state is None or not doc:
        return
    durations = (doc.get("cudagraph_bench") or {}).get(DURATIONS_KEY)
    if isinstance(durations, dict):
        state.ran_s.update({str(k): float(v) for k, v in durations.items()})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--gpu-workers``: xdist's loadgroup scheduling with the groups the workers wrote
    (:func:`pytest_collection_finish`) and the longest remaining group first (recorded seconds from
    ``--shard-durations``, else the number of tests), except the forward-profiles group, which goes to the
    worker of :data:`PROFILES_SLOT` only: as its second group (its first is the heaviest group that starts
    with an ``untimed`` test, if one does), or its first when it is all that is left; a
    worker of another slot that would get only that group is shut down (xdist's own end of work), unless
    the profiles worker is gone (it went down): then any worker takes it. With more workers than groups the
    profiles worker is never among those xdist shuts down at the start. A worker that crashes (xdist
    restarts it unless ``--max-worker-restart=0``) has its unfinished tests handed out again, but not the
    test it crashed in, which xdist reports as failed, nor its finished groups (xdist's loadgroup would
    send them as empty work and then wait for ever)."""
    plan = config.stash.get(PLAN, None)
    if plan is None or not plan.gpus:
        return None
    from xdist.scheduler import LoadGroupScheduling

    from cudagraph_bench.results.shards import group_seconds, typical_seconds
    from cudagraph_bench.session import FORWARD_PROFILES_GROUP
    from cudagraph_bench.sharding import session_state

    if not all(hasattr(LoadGroupScheduling, name) for name in ("_assign_work_unit", "_split_scope")):
        return None   # an xdist whose scheduler works otherwise: its own loadgroup
    state = session_state(config)
    durations = state.durations if state is not None else None
    default_s = typical_seconds(durations)
    groups: dict[str, str] = {}
    untimed: set[str] = set()

    class LongestGroupFirst(LoadGroupScheduling):
        def _split_scope(self, nodeid):
            if not groups:
                read, read_untimed = read_groups(plan.groups_dir)
                groups.update(read)
                untimed.update(read_untimed)
            return groups.get(nodeid) or super()._split_scope(nodeid)

        def _heaviest(self, scopes):
            return max(scopes, key=lambda scope: group_seconds(self.workqueue[scope], durations, default_s))

        def schedule(self):
            if self.collection is None:
                # the first distribution: with more workers than groups xdist shuts down the nodes added last;
                # the profiles worker goes first so that it is not one of them
                first = sorted(self.assigned_work, key=lambda n: not self._holds_profiles(n))
                self.assigned_work = {n: self.assigned_work[n] for n in first}
            super().schedule()

        def remove_node(self, node):
            # xdist's loadgroup puts a crashed worker's whole workload back in the queue: its finished groups
            # too (sent again as "run nothing", after which the worker is never given more: the session hangs)
            # and the test it crashed in (run again, on the next worker). That test is the crash's failure
            # (xdist reports it), as with --dist load: it is marked done first, finished groups are dropped
            # when work is handed out.
            workload = self.assigned_work.get(node, {})
            crashitem = next((nodeid for unit in workload.values() for nodeid, done in unit.items() if not done),
                             None)
            for unit in workload.values():
                if crashitem in unit:
                    unit[crashitem] = True
            super().remove_node(node)
            return crashitem

        def _assign_work_unit(self, node):
            for scope in [scope for scope, unit in self.workqueue.items() if all(unit.values())]:
                del self.workqueue[scope]                            # finished (a crashed worker's, put back)
            if not self.workqueue:
                node.shutdown()
                return
            others = [scope for scope in self.workqueue if scope != FORWARD_PROFILES_GROUP]
            if FORWARD_PROFILES_GROUP not in self.workqueue:
                pick = self._heaviest(others)
            elif self._holds_profiles(node):
                if others and not self.assigned_work.get(node):
                    # its first group: the heaviest that starts with an untimed test, during which the
                    # kernel-count worker prepares (Session.hold_profiling_worker), else the heaviest
                    starts_untimed = [scope for scope in others if next(iter(self.workqueue[scope])) in untimed]
                    pick = self._heaviest(starts_untimed or others)
                else:
                    pick = FORWARD_PROFILES_GROUP
            elif any(self._holds_profiles(n) and not n.shutting_down for n in self.nodes):
                if not others:                       # the profiles group is all that is left: slot 0's
                    node.shutdown()
                    return
                pick = self._heaviest(others)
            else:                                    # the profiles worker went down: any worker takes it, last
                pick = self._heaviest(others) if others else FORWARD_PROFILES_GROUP
            self.workqueue.move_to_end(pick, last=False)   # xdist hands out the first unit of its queue
            super()._assign_work_unit(node)
            # an xdist worker runs a test only once it knows the next one (or its shutdown): with at most 2 tests
            # pending it gets more now, as xdist's first distribution gives every worker, or its shutdown when
            # nothing is left (a worker given one test and no more, as after a crash, would wait for ever)
            if self._pending_of(self.assigned_work[node]) <= 2:
                self._assign_work_unit(node)

        def _holds_profiles(self, node) -> bool:
            return plan.slot_of.get(node.workerinput["workerid"]) == PROFILES_SLOT

    return LongestGroupFirst(config, log)


def read_groups(folder: str | None) -> tuple[dict[str, str], set[str]]:
    """``({node id: group}, {node ids of untimed tests})`` that the workers wrote into ``folder`` (they collect
    the same tests)."""
    groups: dict[str, str] = {}
    untimed: set[str] = set()
    for path in sorted(Path(folder).glob("*.json")) if folder else ():
        written = json.loads(path.read_text(encoding="utf-8"))
        groups.update(written["groups"])
        untimed.update(written["untimed"])
    return groups, untimed


@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session):
    """Worker: write ``{node id: group}`` and which tests are ``untimed`` for the controller's scheduler,
    before xdist tells the controller that this worker has collected."""
    config = session.config
    plan = getattr(config, "workerinput", {}).get(PLAN_KEY)
    if plan is None or not plan.get("groups_dir"):
        return
    from cudagraph_bench.fsio import write_text_atomic
    from cudagraph_bench.sharding import item_group

    written = {"groups": {item.nodeid: item_group(item) for item in session.items},
               "untimed": [item.nodeid for item in session.items if item.get_closest_marker("untimed")]}
    write_text_atomic(Path(plan["groups_dir"]) / f"{config.workerinput['workerid']}.json", json.dumps(written))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session, config, items):
    """One ``xdist_group`` per model and dtype (else module), before xdist's worker turns the marks into
    node-id suffixes."""
    if not config.getoption("gpu_workers", False):
        return
    from cudagraph_bench.sharding import item_group

    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(name=item_group(item)))


def pytest_sessionstart(session):
    config = session.config
    plan = config.stash.get(PLAN, None)
    if plan is not None:
        reenable_benchmarks(config, plan.benchmark_only, is_worker(config))


def reenable_benchmarks(config, benchmark_only: bool, worker: bool) -> None:
    """pytest-benchmark disables benchmarks in every process of an xdist session (``BenchmarkSession``:
    ``disabled = True`` when ``--dist`` is not ``no`` or ``PYTEST_XDIST_WORKER`` is set; its changelog:
    "When xdist is on ... --benchmark-disable is automatically activated"), because benchmarks that
    run in parallel disturb each other. A ``--gpu-workers`` worker has a GPU and CPUs of its own, so its
    ``disabled`` flag is set back to what the documented options alone say (``--benchmark-disable``
    without ``--benchmark-enable``), its xdist warning is dropped and ``--benchmark-only`` is restored.
    Writing and saving are left to the controller, which merges the workers' documents (each worker
    would write the same ``--benchmark-json``)."""
    bs = getattr(config, "_benchmarksession", None)
    if bs is None:
        return
    bs.only = benchmark_only
    config.option.benchmark_only = benchmark_only
    if not worker:
        return
    bs.disabled = bool(config.getoption("benchmark_disable")) and not config.getoption("benchmark_enable")
    if hasattr(bs, "xdist_warning"):
        bs.xdist_warning = False
    if hasattr(bs.json, "close"):   # pytest-benchmark < 5.3 opened it (argparse.FileType); the controller writes it
        bs.json.close()
    bs.json = None
    bs.save = bs.autosave = None
    bs.histogram = None


def pytest_sessionfinish(session, exitstatus):
    """Worker: send its document and summary to the controller. Controller: merge and write them."""
    config = session.config
    plan = config.stash.get(PLAN, None)
    if plan is None:
        return
    if is_worker(config):
        _send_results(config)
    elif plan.gpus:
        _fail_on_lost_results(session, plan)
        _merge_results(session, plan)


def _fail_on_lost_results(session, plan: GpuPlan) -> None:
    """Controller: a worker that ran its tests but sent no document (building it failed: ``error`` in its
    summary) fails the session, with one warning per worker naming it and the reason; the other workers'
    results are still merged. A worker that went down is xdist's own failure (its test is reported)."""
    for part in plan.parts:
        info = part["info"]
        if part["doc"] is None and str(info.get("error", "")).startswith(RESULTS_NOT_SENT):
            session.config._benchmarksession.logger.warning(
                f"--gpu-workers: worker {info.get('worker')} (GPU {info.get('gpu')}): {info['error']}; its "
                f"{info.get('benchmarks')} benchmark(s) are not in the merged run: fix the error and run again")
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _send_results(config) -> None:
    from pytest_benchmark.utils import safe_dumps

    from cudagraph_bench.envinfo import cpu_affinity
    from cudagraph_bench.plugin import benchmark_document
    from cudagraph_bench.results.shards import base_nodeid
    from cudagraph_bench.sharding import session_state

    bs = config._benchmarksession
    state = session_state(config)
    plan = config.workerinput[PLAN_KEY]
    info = {"worker": config.workerinput["workerid"], "slot": plan["slot"], "gpu": plan["gpu"],
            "cpu_affinity": cpu_affinity(), "tests": state.tests_run if state else None,
            "benchmarks": len(bs.benchmarks), "wall_s": round(state.wall_s, 3) if state else None}
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():   # what this worker's CUDA saw
        info["device_count"] = torch.cuda.device_count()
        uuid = getattr(torch.cuda.get_device_properties(0), "uuid", None)
        info["gpu_uuid"] = f"GPU-{uuid}" if uuid is not None else None   # as nvidia-smi -L names it
    try:
        doc = benchmark_document(config, bs.benchmarks, bs.get_machine_info())
        for bench in doc["benchmarks"]:   # the node id as a run without xdist names it (no @group suffix)
            bench["fullname"] = base_nodeid(bench["fullname"])
        config.workeroutput[JSON_KEY] = safe_dumps(doc, ensure_ascii=True)
    except Exception as exc:   # the controller fails the session, naming this worker and the reason
        info["error"] = f"{RESULTS_NOT_SENT}: {type(exc).__name__}: {exc}"
    config.workeroutput[INFO_KEY] = info


def merged_run_cuda(config) -> dict | None:
    """``{"cuda": ...}``: what the merged run of a ``--gpu-workers`` controller records as
    ``machine_info["cuda"]``, set by :func:`_merge_results` before it asks pytest-benchmark for the
    controller's ``machine_info``: the fingerprint of the slot-0 worker (GPU model, driver, versions; its GPU
    state at its start), ``device_count`` the GPUs the controller sees (:func:`visible_gpus`). The workers
    have read it already, so the controller imports no torch and makes no CUDA context after they end (the
    run's wall time). None in any other process: it reads its own."""
    plan = config.stash.get(PLAN, None) if config is not None else None
    if plan is None or is_worker(config) or plan.workers_cuda is None:
        return None
    return plan.workers_cuda


def _workers_cuda(plan: GpuPlan) -> dict:
    """:func:`merged_run_cuda`'s value from the workers' documents (``{"cuda": None}`` when none saw a GPU)."""
    docs = sorted((p for p in plan.parts if p["doc"] is not None),
                  key=lambda p: (p["info"].get("slot") != PROFILES_SLOT, str(p["info"].get("worker"))))
    for part in docs:
        cuda = (part["doc"].get("machine_info") or {}).get("cuda")
        if isinstance(cuda, dict):
            return {"cuda": {**cuda, "device_count": len(visible_gpus()) or cuda.get("device_count")}}
    return {"cuda": None}


def _controller_wall_time(config, merged: dict) -> None:
    """The merged run's ``cudagraph_bench.wall_s`` is the controller's session so far (seconds): the workers'
    start-up and collection included, as the terminal's time per part prints it. The merge's own value, the
    slowest worker's session, is kept as ``slowest_worker_wall_s``."""
    from cudagraph_bench.sharding import session_state

    state = session_state(config)
    section = merged.get("cudagraph_bench")
    if state is None or not isinstance(section, dict):
        return
    if section.get("wall_s") is not None:
        section["slowest_worker_wall_s"] = section["wall_s"]
    section["wall_s"] = round(state.wall_s, 3)


def _merge_results(session, plan: GpuPlan) -> None:
    """Controller: merge the workers' documents into ``--benchmark-json`` and the saved run, and give
    pytest-benchmark the merged benchmarks to show. A merge that is refused (workers on different GPU
    models) is a usage error of the session. When no worker ran a benchmark but one recorded kernel counts or
    failed cases (the session of a ``--shard K/N`` that held only the profiling tests), ``--benchmark-json``
    still gets the merged records, as :func:`cudagraph_bench.plugin.write_records_only_json` writes them in a
    session without workers; nothing is saved to the storage then."""
    from pytest_benchmark.utils import safe_dumps

    from cudagraph_bench.errors import UsageError
    from cudagraph_bench.fsio import write_text_atomic
    from cudagraph_bench.plugin import benchmark_document, json_path, records_note
    from cudagraph_bench.results.merge import merge_runs
    from cudagraph_bench.results.record import records_without_benchmarks

    config = session.config
    bs = config._benchmarksession
    parts = [(f"worker {p['info'].get('worker')}", p["doc"]) for p in plan.parts if p["doc"] is not None]
    parts.sort(key=lambda part: part[0])
    entries = sorted((p["info"] for p in plan.parts), key=lambda info: str(info.get("worker")))
    measured = any(doc.get("benchmarks") for _, doc in parts)
    recorded = any(records_without_benchmarks(doc.get("cudagraph_bench")) for _, doc in parts)
    if not measured and not (recorded and bs.json):
        if (bs.json or bs.save or bs.autosave) and len(parts) < len(entries):
            bs.logger.warning(f"Not saving anything: {len(entries) - len(parts)} of {len(entries)} --gpu-workers "
                              "workers sent no results and the others ran no benchmark")
        elif bs.json or bs.save or bs.autosave:
            bs.logger.warning("Not saving anything, no benchmarks have been run in the --gpu-workers workers!")
        return
    plan.workers_cuda = _workers_cuda(plan)
    try:
        merged = merge_runs(parts, envelope=benchmark_document(config, [], bs.get_machine_info()),
                            entries_key="workers", entries=entries)
    except UsageError as exc:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        bs.logger.warning(f"--gpu-workers: the workers' results were not merged: {exc}")
        return
    _controller_wall_time(config, merged)
    if bs.json:
        path = json_path(bs)
        write_text_atomic(path, safe_dumps(merged, ensure_ascii=True, indent=4))
        workers = (f"{len(entries)} --gpu-workers workers" if len(parts) == len(entries) else
                   f"{len(parts)} of {len(entries)} --gpu-workers workers (the others sent no results)")
        what = (f"benchmark data of {workers}" if measured else
                f"no benchmark but the {records_note(records_without_benchmarks(merged.get('cudagraph_bench')))} "
                f"of {workers}")
        bs.logger.info(f"Wrote {what} in: {path}", purple=True)
    if not measured:
        if bs.save or bs.autosave:
            bs.logger.warning("Not saving anything, no benchmarks have been run in the --gpu-workers workers!")
        return
    if bs.save or bs.autosave:
        saved = json.loads(json.dumps(merged))
        if not bs.save_data:
            for bench in saved["benchmarks"]:
                bench["stats"].pop("data", None)
        bs.storage.save(saved, bs.save or bs.autosave)
    flat = []
    for bench in merged["benchmarks"]:
        row = {key: value for key, value in bench.items() if key != "stats"}
        row.update({key: value for key, value in bench["stats"].items() if key != "data"})
        row.update(path=None, source=None)
        flat.append(row)
    bs.groups = config.hook.pytest_benchmark_group_stats(config=config, benchmarks=flat, group_by=bs.group_by)
