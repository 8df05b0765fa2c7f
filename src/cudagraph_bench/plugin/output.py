"""What the plugin adds to pytest-benchmark's output through its public hooks: ``machine_info``, the run JSON's
``cudagraph_bench`` section, a run JSON for a session with failures but no benchmark, and the terminal summary."""

from __future__ import annotations

import os
import warnings
from dataclasses import asdict

import pytest

from cudagraph_bench.models.refusals import exit_status, refusal_lines
from cudagraph_bench.plugin.pytest_options import model_checks
from cudagraph_bench.plugin.session import session_of
from cudagraph_bench.table import plural


def pytest_benchmark_update_machine_info(config, machine_info):
    """``machine_info["cuda"]`` (GPU, versions, ``gpu_state_at_start``, ``peak_memory_bandwidth`` in GB/s), ``["gpu"]``
    and ``["cpu_affinity"]``; ``cuda`` is None for ``--device cpu``, so its run is never gated as that GPU's."""
    from cudagraph_bench.envinfo import cpu_affinity, cuda_fingerprint
    from cudagraph_bench.results.merge import machine_gpu

    on_cpu = config is not None and config.getoption("device", "cuda") == "cpu"
    machine_info["cuda"] = None if on_cpu else cuda_fingerprint()
    if machine_info["cuda"] is not None:
        from cudagraph_bench.measure.gpustate import read_gpu_state
        from cudagraph_bench.measure.roofline import peak_memory_bandwidth_gbps

        machine_info["cuda"]["gpu_state_at_start"] = read_gpu_state(0)
        machine_info["cuda"]["peak_memory_bandwidth"] = peak_memory_bandwidth_gbps(0)
    machine_info["gpu"] = machine_gpu({"cuda": machine_info["cuda"]})
    machine_info["cpu_affinity"] = cpu_affinity()


def pytest_benchmark_compare_machine_info(config, benchmarksession, machine_info, compared_benchmark):
    """``--benchmark-compare`` against another GPU's run (or none's) is a usage error."""
    from cudagraph_bench.results.merge import machine_gpu

    ours, theirs = machine_gpu(machine_info), machine_gpu(compared_benchmark.get("machine_info"))
    if ours != theirs:
        raise pytest.UsageError(
            f"--benchmark-compare: the saved run was on GPU {theirs or 'none'}, this session runs on "
            f"{ours or 'none'}: compare against a run of this GPU (--benchmark-compare=NNNN), or keep each "
            f"GPU's runs in its own --benchmark-storage")


@pytest.hookimpl(tryfirst=True)
def pytest_benchmark_group_stats(config, benchmarks, group_by):
    """``--benchmark-group-by=param:NAME`` for benchmarks without it groups under ``NAME=None`` instead of a KeyError
    (exported by conftest.py for standalone ``compare``)."""
    from pytest_benchmark.plugin import pytest_benchmark_group_stats as group_stats

    benchmarks = list(benchmarks)   # the standalone compare passes a one-pass iterator
    names = [g[len("param:"):] for g in group_by.split(",") if g.startswith("param:")]
    for bench in benchmarks if names else ():
        params = bench.get("params") or {}
        if any(name not in params for name in names):
            bench["params"] = {**{name: None for name in names}, **params}
    return group_stats(config=config, benchmarks=benchmarks, group_by=group_by)


#: Why the session ended early, when it was interrupted (set as it finishes, before pytest-benchmark writes).
_INTERRUPTED = pytest.StashKey[str]()
#: Set when a run document of an interrupted session got its mark (the summary's last line says whether one did).
_MARKED = pytest.StashKey[bool]()
#: Errors while collecting: pytest then stops the session with the exit status of a Ctrl-C (2), before any test.
_COLLECT_ERRORS = pytest.StashKey[int]()


def pytest_collection_finish(session):
    """Count the collection's errors, so that the session they stop is not called a Ctrl-C."""
    session.config.stash[_COLLECT_ERRORS] = session.testsfailed


def pytest_benchmark_update_json(config, benchmarks, output_json):
    """The ``cudagraph_bench`` section: interruption, refused models and notes, and the ``cgb`` session's records."""
    from cudagraph_bench.results.record import attach_kernel_counts
    from cudagraph_bench.results.runfile import INTERRUPTED

    checks, session, fault = model_checks(config), session_of(config), config.getoption("plant_fault", None)
    section = {**({INTERRUPTED: config.stash[_INTERRUPTED]} if _INTERRUPTED in config.stash else {}),
               **({"refused": [asdict(r) for r in checks.refused]} if checks.refused else {}),
               **({"model_notes": list(checks.notes)} if checks.notes else {})}
    if _INTERRUPTED in config.stash:
        config.stash[_MARKED] = True
    if session is not None:     # a test used ``cgb``
        section.update({**session.ledger.summary(), **session.records.summary(),
                        **({"planted_fault": fault.label} if fault is not None else {})})
    if section:
        output_json.setdefault("cudagraph_bench", {}).update(section)
    if session is not None:
        attach_kernel_counts(output_json.get("benchmarks", []), section["kernel_counts"])


def json_option_path(config) -> str | None:
    """pytest-benchmark < 5.3 gives an open file: its name; or None."""
    value = config.getoption("benchmark_json", None)
    if value is None:
        return None
    return os.fspath(value) if isinstance(value, (str, os.PathLike)) else str(value.name)


def records_only_path(config) -> str | None:
    """``--benchmark-json PATH`` when the session recorded failed cases or kernel counts and pytest-benchmark wrote no
    benchmark there (not in an xdist worker), else None: where :func:`write_records_only_json` writes."""
    path = json_option_path(config)
    session = session_of(config)
    if path is None or session is None or not session.records or hasattr(config, "workerinput"):
        return None
    return None if os.path.exists(path) and os.path.getsize(path) > 0 else path


def write_records_only_json(config) -> str | None:
    """Atomically write ``--benchmark-json PATH`` with no benchmarks for a session that recorded failed cases or kernel
    counts, so they reach reports and ``merge``; not in an xdist worker. Returns the path, else None."""
    path = records_only_path(config)
    if path is None:
        return None
    from pytest_benchmark.utils import safe_dumps

    from cudagraph_bench.fsio import write_text_atomic

    # what pytest-benchmark writes for --benchmark-json, made through its public hooks
    machine_info = config.hook.pytest_benchmark_generate_machine_info(config=config)
    config.hook.pytest_benchmark_update_machine_info(config=config, machine_info=machine_info)
    commit_info = config.hook.pytest_benchmark_generate_commit_info(config=config)
    config.hook.pytest_benchmark_update_commit_info(config=config, commit_info=commit_info)
    doc = config.hook.pytest_benchmark_generate_json(config=config, benchmarks=[], include_data=True,
                                                     machine_info=machine_info, commit_info=commit_info)
    config.hook.pytest_benchmark_update_json(config=config, benchmarks=[], output_json=doc)
    write_text_atomic(path, safe_dumps(doc, ensure_ascii=True, indent=4))
    return path


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    """Mark a Ctrl-C run; exit non-zero on refused models or failed proofs; write records-only JSON."""
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:     # marked before it is written
        benchmarks = getattr(getattr(session.config, "_benchmarksession", None), "benchmarks", None) or []
        benchmarks[:] = [b for b in benchmarks if b.stats.data]   # one cut off before its first round has no figure
        errors = session.config.stash.get(_COLLECT_ERRORS, 0)
        session.config.stash[_INTERRUPTED] = (f"stopped by {plural(errors, 'error')} during collection" if errors and
                                              not session.config.option.continue_on_collection_errors else
                                              f"Ctrl-C after {plural(len(benchmarks), 'benchmark')}")
    session.exitstatus = exit_status(session.exitstatus, model_checks(session.config).refused)
    cgb = session_of(session.config)
    if cgb is not None and cgb.proofs is not None and cgb.proofs.failures and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    with warnings.catch_warnings():
        if cgb is not None and cgb.records and json_option_path(session.config) is not None:
            warnings.filterwarnings("ignore", message="Not saving anything")
        result = yield
    path = write_records_only_json(session.config)
    if path is not None:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"No benchmark ran; wrote the session's failed cases and kernel counts in: {path}")
    return result


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Refused models, the memory ledger, failed replay proofs and the cases not measured, each with its reasons (the
    refused models' line says what the others did and the session's exit status, --collect-only too); last, after
    a Ctrl-C, whether the run JSON is marked, since the commands refuse a marked run."""
    refused, session = model_checks(config).refused, session_of(config)
    others = "were collected" if config.getoption("collectonly", False) else "ran"
    proofs = session.proofs.failures if session is not None and session.proofs is not None else []
    ledger = session is not None and (session.ledger.start_mib or session.ledger.cases)
    sections = [  # (title, lines): a section is written when it has lines
        (f"cudagraph-bench: {plural(len(refused), 'model')} of --models refused (the others {others}; exit status "
         f"{exit_status(exitstatus, refused)})",
         refusal_lines(refused)),
        ("cudagraph-bench GPU memory", [session.ledger.line()] if ledger else []),
        (f"cudagraph-bench: {plural(len(proofs), 'replay proof')} failed, taken after the session's timing (recorded "
         "in the run JSON; exit status 1)", [f"{nodeid}: {reason}" for nodeid, reason in proofs]),
        ("cudagraph-bench cases not measured", [f"{e['status']}: {e['fullname']}: {e['reason']}"
                                                for e in (session.records.failures if session is not None else [])]),
    ]
    if _INTERRUPTED in config.stash:
        path = json_option_path(config)
        marked = (f"its run JSON{f' {path}' if path else ''} is marked interrupted, which cudagraph-bench's commands "
                  "refuse unless given --allow interrupted" if config.stash.get(_MARKED, False)
                  or records_only_path(config) else "no run JSON was written")
        sections.append(("cudagraph-bench interrupted",
                         [f"session interrupted ({config.stash[_INTERRUPTED]}): {marked}"]))
    for title, lines in sections:
        if lines:
            terminalreporter.write_sep("-", title)
            for line in lines:
                terminalreporter.write_line(line)
