"""``cudagraph-bench run``'s measurement: the matrix as pytest processes of the suite, merged into one run: isolated
variants in a process of their own, one shard per GPU with ``gpus``, a process per ``[[sweep]]``."""

from __future__ import annotations

import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.runner.process import (PytestRun, RunOutcome, allow_new_children, run_pytest,
                                            stop_children)

#: The benchmark modules a run measures: forward variants at the prompt's length, and at padded lengths.
FORWARD_MODULE = "perf_tests/test_forward_bench.py"
PADDING_MODULE = "perf_tests/test_padding_bench.py"


@dataclass(frozen=True)
class Matrix:
    """One sub-matrix: ``(dest, value)`` pairs given (parsed, lists as tuples; omitted: pytest's default), forward
    variants, and value-less pytest flags; :meth:`pytest_args` is the one way to pytest arguments."""

    values: tuple[tuple[str, object], ...]
    variants: tuple[str, ...]
    flags: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "values", tuple((dest, tuple(v) if isinstance(v, list) else v)
                                                 for dest, v in self.values))

    def replaced(self, **values) -> "Matrix":
        """This matrix with the given options' values in place of its own."""
        kept = tuple((dest, v) for dest, v in self.values if dest not in values)
        return Matrix((*kept, *values.items()), self.variants, self.flags)

    def value(self, dest: str, default=None):
        """The value given for ``dest``, else ``default``."""
        return dict(self.values).get(dest, default)

    def pytest_args(self) -> list[str]:
        """The values as pytest arguments, then the flags; not the variants (a run splits them by isolation)."""
        from cudagraph_bench.options import matrix_arguments

        return [*matrix_arguments(dict(self.values)), *self.flags]


@dataclass(frozen=True)
class Part:
    """One pytest process: name (file stem), arguments, environment, pinned CPUs."""

    name: str
    args: tuple[str, ...]
    env: dict = field(default_factory=dict)
    cpus: tuple[int, ...] = ()


def cpu_shares(cpus: list[int], n: int) -> list[list[int]]:
    """``cpus`` in ``n`` contiguous near-equal shares, at least one CPU each (repeated when too few)."""
    if not cpus:
        return [[] for _ in range(n)]
    if len(cpus) < n:
        return [[cpus[i % len(cpus)]] for i in range(n)]
    size, extra = divmod(len(cpus), n)          # the first ``extra`` shares take one more
    return [cpus[i * size + min(i, extra):(i + 1) * size + min(i + 1, extra)] for i in range(n)]


def plan(matrices: list[Matrix], *, gpus: tuple[str, ...] = (), cpus: list[int] | None = None) -> list[list[Part]]:
    """Steps run one after another, each a process per GPU side by side (``--shard K/N``, a share of ``cpus``): per
    sub-matrix, the non-isolated variants, then the isolated, each in the benchmark modules that hold them."""
    steps = []
    for m_index, matrix in enumerate(matrices):
        kinds = [variants.variant(variants.FORWARD, n) for n in matrix.variants]
        groups = [("", [v for v in kinds if not v.isolated]), ("-isolated", [v for v in kinds if v.isolated])]
        for suffix, group in groups:
            if not group:
                continue
            modules = [m for m, wanted in ((FORWARD_MODULE, any(not v.lengths for v in group)),
                                           (PADDING_MODULE, any(v.lengths for v in group))) if wanted]
            base = [*modules, "--benchmark-only", "--variants", ",".join(v.name for v in group), *matrix.pytest_args()]
            stem = f"part{m_index + 1}{suffix}" if len(matrices) > 1 else f"part{suffix or '-main'}"
            if not gpus:
                steps.append([Part(stem.replace("part-", ""), tuple(base), cpus=tuple(cpus or ()))])
                continue
            shares = cpu_shares(sorted(cpus or []), len(gpus))
            steps.append([Part(f"{stem}-gpu{gpu}-shard{k + 1}", (*base, "--shard", f"{k + 1}/{len(gpus)}"),
                               {"CUDA_VISIBLE_DEVICES": str(gpu)}, tuple(shares[k]))
                          for k, gpu in enumerate(gpus)])
    return steps


def launch(tree: Path, outdir: Path, steps: list[list[Part]], *, log) -> tuple[dict | None, list[RunOutcome]]:
    """Run the plan with output under ``outdir/parts/``; returns the merged document (None when none was written) and
    each outcome; ``log(part, outcome)`` as each ends. A Ctrl-C stops and waits for every pytest process, then goes
    on."""
    from cudagraph_bench.results.merge import merge_runs

    parts_dir = outdir / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    outcomes: list[tuple[Part, RunOutcome]] = []
    for step in steps:
        results: dict[str, RunOutcome] = {}

        def one(part: Part):
            results[part.name] = run_pytest(PytestRun(tree, parts_dir / f"{part.name}.json", part.args, part.env,
                                                          cpus=part.cpus))

        alone = len(step) == 1         # one process: waited for in this thread
        threads = [] if alone else [threading.Thread(target=one, args=(p,)) for p in step]
        try:
            if alone:
                one(step[0])
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        except KeyboardInterrupt:
            print("interrupted: stopping the pytest processes", file=sys.stderr, flush=True)
            stop_children()
            for thread in threads:
                thread.join()
            allow_new_children()
            raise
        for part in step:
            outcomes.append((part, results[part.name]))
            log(part, results[part.name])
    docs = [(p.name, json.loads(o.json_path.read_text(encoding="utf-8"))) for p, o in outcomes
            if o.json_path is not None]
    merged = merge_runs(docs, entries_key="parts") if len(docs) > 1 else docs[0][1] if docs else None
    return merged, [o for _, o in outcomes]


def visible_gpus(text: str) -> tuple[str, ...]:
    """``"0,1"`` -> ``("0", "1")`` (twice allowed, to try the merge); ``"all"``: every GPU of ``CUDA_VISIBLE_DEVICES``,
    else ``nvidia-smi -L``. ValueError for non-indices, or ``all`` finding no GPU."""
    import subprocess

    text = text.strip()
    if text != "all":
        items = [t.strip() for t in text.split(",")]
        if not text or any(not t.isdigit() for t in items):
            raise ValueError(f"--gpus {text!r}: give GPU indices such as 0,1 or 'all'")
        return tuple(items)
    env = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if env:
        return tuple(t.strip() for t in env.split(",") if t.strip())
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found = tuple(str(i) for i, line in enumerate(out.splitlines()) if line.startswith("GPU "))
    if not found:
        raise ValueError("--gpus all: no GPU found (nvidia-smi -L lists none): give GPU indices, e.g. 0")
    return found
