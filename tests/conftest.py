"""Fixtures shared by the CPU tests."""

import _imp
import contextlib
import os
import sys
import threading
import warnings

import pytest

try:
    # pytester (tests/test_plugin.py, test_sharding.py, ...) restores sys.modules after each of its tests,
    # so a module first imported inside one is imported again later in the same process. Importing
    # torch.distributed._functional_collectives twice registers its wait_tensor autograd kernel twice, which
    # torch refuses ("already a kernel registered from python overriding wait_tensor"), and every later
    # import of transformers' generation utilities (which pull in torch.distributed.tensor) fails in that
    # process. Importing it once here, before any pytester test, keeps it out of the restored snapshot (the
    # pytester fixture below keeps every other module that a pytester test imports).
    import torch.distributed.tensor  # noqa: F401
except ImportError:   # a torch build without distributed support: nothing to register twice
    pass

#: A tiny GPT-2 (2 layers of width 32, 128 tokens of vocabulary, 64 positions): what the suite measures on CPU.
TINY_GPT2 = {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 128, "n_positions": 64, "bos_token_id": 0,
             "eos_token_id": 0, "initializer_range": 0.2}


def pytest_configure(config):
    """Under ``pytest -n N`` each worker's torch (and the processes it starts) uses its share of the CPUs: N
    workers of torch's default intra-op thread count (every CPU) oversubscribe the machine, and a spinning
    OpenMP thread that waits for a descheduled one makes a small forward several times slower. The
    ``xdist_group`` mark is known also without pytest-xdist (one process: nothing to group)."""
    config.addinivalue_line("markers", "xdist_group(name): the tests run in one pytest-xdist worker (--dist loadgroup)")
    workers = getattr(config, "workerinput", {}).get("workercount")
    if workers:
        import torch

        threads = max(1, len(os.sched_getaffinity(0)) // int(workers))
        torch.set_num_threads(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)


@pytest.fixture(autouse=True)
def no_xdist_worker_environment(monkeypatch):
    """A pytest session that a test starts (in a subprocess or in-process) must not look like an xdist worker
    when the tests themselves run under ``pytest -n N``: pytest-benchmark disables every benchmark in a process
    whose environment has ``PYTEST_XDIST_WORKER``, and a child inherits that environment."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def import_lock_released():
    """After each test the main thread holds no global import lock. An exception that a signal handler raises (Ctrl-C,
    SIGTERM, SIGALRM: the tests of interrupts and time limits) can land in ``importlib``'s
    ``_ImportLockContext.__exit__`` before it releases the lock; the main thread still imports (the lock is
    reentrant), but the first import in any other thread of this worker then waits forever (the launcher's shard
    threads of a later test did). The lock is released here and the test that leaked it named in a warning."""
    yield
    if threading.current_thread() is not threading.main_thread() or not _imp.lock_held():
        return
    released = 0
    with contextlib.suppress(RuntimeError):       # held by another thread, which is importing: not leaked here
        while _imp.lock_held():
            _imp.release_lock()
            released += 1
    if released:
        warnings.warn(f"the main thread still held the global import lock after this test ({released} level(s)): "
                      "released", RuntimeWarning, stacklevel=1)


@pytest.fixture
def no_gpu(monkeypatch):
    """``torch.cuda.is_available()`` is False in this process, also on a GPU machine: for the pytest sessions a
    test runs in-process that must see no GPU (``CUDA_VISIBLE_DEVICES`` no longer matters once torch is
    imported)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def cpu_affinity_restored():
    """The test process's CPU affinity put back after the test (an in-process session with ``--cpus`` pins the
    test process itself)."""
    before = os.sched_getaffinity(0)
    yield
    os.sched_setaffinity(0, before)


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory):
    """A ``save_pretrained`` folder of a :data:`TINY_GPT2` causal LM (fixed seed), made once per test process:
    what ``--models`` takes to run the suite's real pipeline on CPU in seconds."""
    import torch
    import transformers

    from cudagraph_bench.models.presets import preset_config

    folder = tmp_path_factory.mktemp("models") / "tiny-gpt2"
    torch.manual_seed(0)
    config = preset_config("gpt2", TINY_GPT2)
    config.architectures = ["GPT2LMHeadModel"]
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return str(folder)


@pytest.fixture
def _modules_kept_after_pytester():
    """Set up before pytester and torn down after it: puts back the modules that the test imported and that
    pytester's restore of its sys.modules snapshot dropped (see :func:`pytester`)."""
    imported: dict = {}
    yield imported
    for name, module in imported.items():
        sys.modules.setdefault(name, module)


@pytest.fixture
def pytester(_modules_kept_after_pytester, pytester):
    """pytester, but a module first imported during its test stays imported: pytester restores sys.modules
    after each test, and a second import of some modules fails in the same process (torch registers a
    kernel twice; transformers' lazy modules then raise "Could not import module" in every later test of
    that pytest-xdist worker). The test's own files (its test modules and conftest, in its folder) are not
    kept: another pytester test may have a module of the same name."""
    before = set(sys.modules)
    yield pytester
    own = str(pytester.path)
    _modules_kept_after_pytester.update({name: module for name, module in sys.modules.items()
                                         if name not in before and not (getattr(module, "__file__", None) or "")
                                         .startswith(own)})


@pytest.fixture
def in_process_pytest(monkeypatch):
    """The launcher's pytest processes run as sessions in this process (:func:`in_process.run_process_in_process`):
    no interpreter, torch or transformers start per process."""
    from cudagraph_bench.runner import process
    from in_process import run_process_in_process

    monkeypatch.setattr(process, "run_process", run_process_in_process)
