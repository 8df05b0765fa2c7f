"""``cudagraph-bench run``: the forward matrix measured by pytest processes, merged into ``run.json`` with its table,
plots and ``parts/``, written into ``-o`` whole or not at all; options over a TOML ``--config`` (docs/running.md). No
torch in this process."""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tempfile
from pathlib import Path

from cudagraph_bench import variants
from cudagraph_bench.errors import InputFileError, UsageError
from cudagraph_bench.fsio import (check_output_folder, interrupt_after, read_input_bytes, write_files_atomic,
                                  write_text_atomic, written_here, written_verb)
from cudagraph_bench.options import (MATRIX_OPTIONS, PYTEST_ARGS_METAVAR, RUN_FLAGS, add_to_argparse, format_cpus,
                                     parse_cpus, parse_path, parse_pytest_matrix, parse_toml_path, parse_variants,
                                     show_default)
from cudagraph_bench.table import plural

DEFAULT_OUTDIR = "out/run"
RUN_JSON = "run.json"
#: pytest options that run sets itself in each process: given after ``--`` they are refused, with why.
OWN_OPTIONS = {
    "--variants": "give run's --variants",
    "--shard": "run --gpus shards the matrix",
    "--benchmark-json": "run writes run.json into -o",
    "--journal": "run keeps each process's journal",
    **{flag: "it is run's own option: give it before --" for flag in ("--config", "--gpus", "--cpus")},
}
_TOML_NAMES = {bool: "a boolean", str: "a string", int: "an integer", float: "a number", list: "a list",
               dict: "a table"}
#: Keys of a sub-matrix (top level or ``[[sweep]]``).
MATRIX_KEYS = ("models", "prompt_lengths", "dtypes", "variants")
_PARSERS = {o.dest: o.type for o in MATRIX_OPTIONS}
_TOML_TYPES = {o.dest: o.toml for o in MATRIX_OPTIONS}
_FLAGS = {o.dest: o.flag for o in MATRIX_OPTIONS}


class RecordGiven(argparse.Action):
    """argparse's store that also records the options given: they win over ``--config``."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.__dict__.setdefault("_option_names", {})[self.dest] = option_string
        setattr(namespace, self.dest, values)


def configure_parser(parser: argparse.ArgumentParser) -> None:
    add_to_argparse(parser, [o for o in MATRIX_OPTIONS if o.flag in RUN_FLAGS], action=RecordGiven)
    device = next(a for a in parser._actions if a.dest == "device")
    device.help = ("cuda, or cpu: the eager forward pass only (run measures the forward pass; the CPU's decode "
                   "variants run under pytest perf_tests --device cpu), to try the pipeline on any machine "
                   "(default: %(default)s)")
    parser.add_argument("--config", metavar="TOML", type=parse_toml_path, default=None,
                        help="TOML file with the matrix (models, prompt_lengths, dtypes, variants, [[sweep]] ...); "
                             "flags given on the command line win")
    parser.add_argument("-o", "--output-dir", dest="outdir", type=parse_path, default=DEFAULT_OUTDIR, metavar="DIR",
                        help="folder for run.json, the PNGs and each pytest process's JSON and log "
                             "(default: %(default)s)")
    parser.add_argument("--gpus", default=None, metavar="LIST",
                        help="one pytest process per GPU (e.g. 0,1, or all), each a --shard of the matrix on its own "
                             "share of the CPUs, merged into one run (default: one process, the visible GPUs)")
    parser.add_argument("--cpus", type=parse_cpus, default=None, metavar="LIST",
                        help="pin the pytest processes to these CPUs, e.g. 0-7 (split between them with --gpus)")
    parser.add_argument("pytest_args", nargs="*", metavar=PYTEST_ARGS_METAVAR,
                        help="pytest arguments for every process, after --: the suite's other matrix options "
                             "(pytest perf_tests --help), e.g. -- --pad-to 512 --benchmark-min-rounds 50 "
                             "--replay-proof --with-compile; they win over --config")


def _parse_config_table(path: str, where: str, table: dict, known) -> dict:
    """Each value of a config table parsed by its flag's parser; UsageError for a key not ``known`` or a bad value."""
    out = {}
    for key, value in table.items():
        if key not in known:
            raise UsageError(f"{path}: {where}unknown key '{key}': use one of {', '.join(known)}")
        expected = _TOML_TYPES[key]
        many = isinstance(expected, tuple)
        kind = expected[0] if many else expected
        items = value if many and isinstance(value, list) else [value]
        wrong = [v for v in items if not (type(v) is kind or (kind is float and type(v) is int))]
        if isinstance(value, list) != many or wrong:
            shown = value if isinstance(value, list) != many else wrong[0]
            want = f"a list of {_TOML_NAMES[kind].split()[-1]}s" if many else _TOML_NAMES[kind]
            raise UsageError(f"{path}: {where}key '{key}': expected {want}, got "
                             f"{_TOML_NAMES.get(type(shown), 'a date or time')} ({json.dumps(shown, default=str)})"
                             f"{' in the list' if many and isinstance(value, list) else ''}")
        try:
            out[key] = _PARSERS[key](show_default(value))
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"{path}: {where}key '{key}': {exc}") from None
    return out


#: Largest ``--config`` read, in bytes: a matrix config is a few lines; a larger file (or a device) is not one.
MAX_CONFIG_BYTES = 2**20


def load_config(path: str) -> tuple[dict, list[dict]]:
    """``(top-level settings, [sweep dicts])`` of a TOML config, each value parsed by its flag's parser. UsageError
    (naming the file and key): unreadable, invalid TOML, unknown key or bad value."""
    import tomllib

    try:
        raw = read_input_bytes(path, "config", "give a TOML matrix config (as scripts/device/compile-sweep.toml)",
                               MAX_CONFIG_BYTES)
        doc = tomllib.loads(raw.decode("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path} is not valid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text: save the TOML config as UTF-8") from None
    sweeps = doc.pop("sweep", None)
    top = _parse_config_table(path, "", doc, sorted([*_PARSERS, "sweep"]))
    if sweeps is not None and (not isinstance(sweeps, list) or not all(isinstance(s, dict) for s in sweeps)):
        raise UsageError(f"{path}: key 'sweep' must be an array of tables ([[sweep]] sections)")
    if sweeps == []:
        raise UsageError(f"{path}: 'sweep' is empty: give at least one [[sweep]] table, or remove the key")
    return top, [_parse_config_table(path, f"[[sweep]] #{i + 1}: ", t, MATRIX_KEYS) for i, t in enumerate(sweeps or [])]


def matrices(args: argparse.Namespace):
    """The sub-matrices (with the pytest arguments after ``--``): command line over ``--config`` over defaults, each
    ``[[sweep]]`` taking unset keys from the top level; the one place they are merged. UsageError: a bad config, a bad
    value after ``--``, or an option given both before and after ``--``."""
    from cudagraph_bench.runner.matrix_processes import Matrix

    after, rest = parse_pytest_matrix(list(args.pytest_args), "run --", OWN_OPTIONS)
    given = set(getattr(args, "_option_names", {}))     # argparse also parses a string default: not given
    twice = sorted(given & set(after), key=list(_PARSERS).index)
    if twice:
        raise UsageError(f"{_FLAGS[twice[0]]} given before and after --: give it once")
    explicit = (given | set(after)) & set(_PARSERS)
    values = {dest: getattr(args, dest, None) for dest in _PARSERS} | after
    with_compile = "--with-compile" in rest     # the forward variants' part of it: run splits variants by isolation
    rest = [a for a in rest if a != "--with-compile"]
    sweeps, top = [{}], {}
    if args.config:
        top, config_sweeps = load_config(args.config)
        values.update({k: v for k, v in top.items() if k not in explicit})
        sweeps = config_sweeps or [{}]
    out = []
    for sweep in sweeps:
        merged = {**values, **{k: v for k, v in sweep.items() if k not in explicit}}
        chosen = list(merged.pop("variants"))
        chosen_here = "variants" in explicit or "variants" in top or "variants" in sweep
        if merged.get("device") == "cpu" and not chosen_here:   # the defaults need a GPU: the CPU's own
            chosen = [n for n in chosen if not variants.variant(variants.FORWARD, n).needs_cuda]
        if with_compile:
            added = [v.name for v in variants.of_suite(variants.FORWARD) if v.compiled and v.name not in chosen]
            if merged.get("device") == "cpu" and any(variants.variant(variants.FORWARD, n).needs_cuda for n in added):
                raise UsageError(f"--with-compile adds the torch.compile variants ({', '.join(added)}), which need a "
                                 "CUDA GPU: --device cpu runs only --variants eager (drop --with-compile)")
            chosen += added
        out.append(Matrix(tuple((k, v) for k, v in merged.items() if v is not None),
                          tuple(parse_variants(",".join(chosen))), tuple(rest)))
    return out


def check_device(matrix_list) -> None:
    """UsageError for variants that need a CUDA GPU without one, before any process starts."""
    from cudagraph_bench.runner.process import cuda_problem

    on_cpu = [m for m in matrix_list if m.value("device", "cuda") == "cpu"]
    needs = sorted({n for m in on_cpu for n in m.variants if variants.variant(variants.FORWARD, n).needs_cuda},
                   key=lambda n: variants.display_rank(variants.FORWARD, n))
    if needs:
        raise UsageError(f"graph variants need a CUDA GPU: --device cpu runs only --variants eager "
                         f"(drop {', '.join(needs)})")
    if any("--replay-proof" in m.flags for m in on_cpu):
        raise UsageError("--replay-proof profiles graph replays on a CUDA GPU: --device cpu has none to prove "
                         "(drop --replay-proof)")
    if len(on_cpu) < len(matrix_list) and (problem := cuda_problem()) is not None:
        raise UsageError(f"no CUDA GPU ({problem}): run on a GPU machine, or try the pipeline with "
                         "--device cpu --variants eager")


def main(args: argparse.Namespace) -> int:
    """Run the matrix; write run.json and the PNGs; print the table. Returns 0 or 1; UsageError: exit 2."""
    from cudagraph_bench.paths import checkout_root
    from cudagraph_bench.runner.matrix_processes import launch, plan, visible_gpus
    from cudagraph_bench.runner.process import check_cpus

    matrix_list = matrices(args)
    check_device(matrix_list)
    cpus = list(args.cpus or [])
    check_cpus(cpus)
    device = matrix_list[0].value("device", "cuda")
    try:
        gpus = visible_gpus(args.gpus) if args.gpus is not None else ()   # an empty --gpus is an error, not "none"
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if gpus and device == "cpu":
        shards = (f"the {len(gpus)} shards run side by side on the CPU and disturb each other's timing" if len(gpus) > 1
                  else "its one shard runs on the CPU")
        print(f"note: --gpus {args.gpus} with --device cpu: {shards} (use this to try the merge only; --cpus pins one "
              "CPU run)", file=sys.stderr)
    elif len(set(gpus)) < len(gpus):
        print(f"note: --gpus {args.gpus} names a GPU twice: those shards share it and disturb each other's timing "
              "(use this to try the merge only)", file=sys.stderr)
    if gpus and cpus and len(cpus) < len(gpus):
        print(f"note: --cpus {format_cpus(cpus)} has fewer CPUs than --gpus has shards: shards share a "
              "CPU and disturb each other's timing", file=sys.stderr)
    tree = checkout_root()
    if tree is None or not (tree / "perf_tests").is_dir():
        raise UsageError("cudagraph-bench run launches the suite's perf_tests/: run it from a cudagraph-bench "
                         "checkout (an editable install), or run pytest perf_tests --benchmark-only there")
    from cudagraph_bench.report.pages import PLOT_NAMES

    outdir = Path(args.outdir)
    check_output_folder(outdir, [RUN_JSON, *PLOT_NAMES], command="run")   # before anything is measured; made once
    _check_parts(outdir)
    scratch = Path(tempfile.mkdtemp(prefix="cgb-run-"))     # the processes' JSON and logs, until the run is whole
    keep_scratch = False
    try:
        doc, outcomes = launch(tree, scratch, plan(matrix_list, gpus=gpus, cpus=cpus),
                               log=_progress)
        usage = _usage_error(outcomes) if doc is None else None
        if usage:                      # e.g. every model of --models refused: the suite's own reason, nothing made
            raise UsageError(usage)
        if doc is None:                # the -o folder keeps the earlier run, untouched; the logs stay in scratch
            keep_scratch = True
            print_skips(outcomes)
            print(f"no pytest process wrote a run (see the logs under {scratch / 'parts'}): nothing measured, "
                  f"{outdir} left as it was (exit 1)", file=sys.stderr)
            return 1
        check_output_folder(outdir, [RUN_JSON, *PLOT_NAMES], command="run", create=True)
        _check_parts(outdir)
        return _write_run(doc, outcomes, outdir, scratch)
    finally:
        if not keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def _check_parts(outdir: Path) -> None:
    """UsageError when ``outdir/parts`` holds a JSON or log, which a run replaces or removes, that is no part of the
    run cudagraph-bench wrote there: any when ``outdir`` holds no run of its own, else a JSON that is no run or a log
    whose first line is not the tool's. The parts follow the rule of every other output
    (:func:`~cudagraph_bench.fsio.written_here`)."""
    parts = outdir / "parts"
    held_run = (outdir / RUN_JSON).is_file()       # check_output_folder refused a run.json that is no run
    found = sorted(parts.rglob("*")) if parts.is_dir() else []
    foreign = [str(p.relative_to(outdir)) for p in found if p.suffix in (".json", ".log") and p.is_file()
               and not (held_run and written_here(p, p.suffix, "run"))]
    if foreign:
        these = "that file" if len(foreign) == 1 else "those files"
        raise UsageError(f"-o {outdir} holds {', '.join(foreign)}, which belong to no {RUN_JSON} that cudagraph-bench "
                         f"run wrote there, and a run replaces only its own parts: give another -o folder, or remove "
                         f"{these} first")


def _write_run(doc: dict, outcomes, outdir: Path, scratch: Path) -> int:
    """Write ``doc`` into ``outdir`` whole: ``run.json``, plots and ``parts/`` replace the earlier run's at once, its
    other plots and parts removed, so ``gate DIR/run.json`` never reads an earlier run's parts. Returns the exit
    code."""
    scratch_json = scratch / RUN_JSON
    write_text_atomic(scratch_json, json.dumps(doc, indent=4))
    files = {outdir / "parts" / p.relative_to(scratch / "parts"): p.read_bytes()
             for p in sorted((scratch / "parts").rglob("*")) if p.is_file()}
    code, plots = finish(scratch_json, outdir, outcomes)
    files.update({outdir / name: data for name, data in plots.items()})
    files[outdir / RUN_JSON] = scratch_json.read_bytes()          # last: the run the folder holds
    said = [*(f"{written_verb(outdir / name)} {outdir / name}" for name in plots),
            f"{'replaced' if (outdir / 'parts').is_dir() else 'wrote'} {outdir / 'parts'} (each pytest process's JSON "
            "and log)", f"{written_verb(outdir / RUN_JSON)} {outdir / RUN_JSON}"]
    held_a_run = (outdir / RUN_JSON).is_file()         # else its other plots are no run's: a report's, say
    with interrupt_after(f"writing {outdir}"):
        write_files_atomic(files)
        if held_a_run:
            _remove_earlier(outdir, [outdir / name for name in plots], set(files))
    print("\n".join(said), file=sys.stderr)
    if code:
        print("a model was refused, or a case failed or differs from its reference: see the refusals and reasons "
              f"above, the table and the logs under {outdir / 'parts'}", file=sys.stderr)
    return code


def _remove_earlier(outdir: Path, plots: list[Path], written: set[Path]) -> None:
    """Remove an earlier run's plots not in ``plots`` and ``parts/`` JSON and logs not in ``written``."""
    from cudagraph_bench.report import pages as report

    for path in report.stale_plots(outdir, plots):
        path.unlink(missing_ok=True)
        print(f"removed {path}: an earlier run's plot", file=sys.stderr)
    parts = outdir / "parts"
    if parts.is_dir():
        for path in sorted(parts.rglob("*"), reverse=True):
            if path.is_file() and path not in written and path.suffix in (".json", ".log"):
                path.unlink(missing_ok=True)
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()


def print_skips(outcomes) -> None:
    """One line on stderr per distinct skip reason of the processes, in the order first seen: ``skipped: REASON (N
    test(s))``."""
    for reason, n in sum((collections.Counter(o.skipped) for o in outcomes), collections.Counter()).items():
        print(f"skipped: {reason} ({n} test{'' if n == 1 else 's'})", file=sys.stderr)


#: pytest's exit code when it selected no test: a ``--gpus`` shard that no group of a small matrix fell to.
NOTHING_SELECTED = 5


def _progress(part, outcome) -> None:
    """One stderr line as a process ends, naming its log (not for a usage error)."""
    if outcome.returncode == 4:
        return
    state = "ok" if outcome.ok else f"exit {outcome.returncode}"
    if outcome.returncode == NOTHING_SELECTED:
        state = "no test of the matrix in this shard"
    crashed = f", {plural(len(outcome.crashes), 'crashed test')} recorded" if outcome.crashes else ""
    print(f"run: {part.name}: {state}{crashed} (log: parts/{part.name}.log)", file=sys.stderr, flush=True)


def _usage_error(outcomes) -> str | None:
    """A process's pytest usage error (exit 4) or argparse's refusal; None when none ended so."""
    for outcome in outcomes:
        if outcome.returncode == 4 and outcome.log_path is not None and outcome.log_path.is_file():
            text = outcome.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
            for i, line in enumerate(text):
                if line.startswith("ERROR: usage:"):   # argparse's refusal: the usage line, then what it refused
                    said = next((x for x in text[i + 1:] if ": error: " in x), None)
                    if said is not None:
                        return f"pytest: {said.split(': error: ', 1)[1]}"
                if line.startswith("ERROR: "):
                    more = [x for x in text[i + 1:] if x.startswith("  ") and not x.strip().startswith(("inifile:",
                                                                                                       "rootdir:"))]
                    return "\n".join([line[len("ERROR: "):], *more])
    return None


def finish(json_path: Path, outdir: Path, outcomes) -> tuple[int, dict[str, bytes]]:
    """Print the run's table with failures, notes, refusals and the processes' skips, and draw its plots (none without
    matplotlib). Returns ``(exit code, {plot file name: PNG bytes})``: 1 when a process failed, a case failed, a model
    was refused or nothing was measured, else 0 (skips alone do not fail a run)."""
    from cudagraph_bench.report import forward_tables
    from cudagraph_bench.report import pages as report
    from cudagraph_bench.results.runfile import load_run

    try:
        run = load_run(str(json_path))
    except InputFileError as exc:       # a run whose every case failed holds no benchmark: say why each failed
        print_skips(outcomes)
        try:
            failed = load_run(str(json_path), records_only=True).failures
        except InputFileError:
            failed = ()
        for failure in failed:
            print(f"{failure.status}: {failure.case.label}: {failure.check.reason}", file=sys.stderr)
        print(f"{outdir / RUN_JSON} holds no benchmark: every case of this run failed or was skipped (the reasons "
              f"above, the logs under {outdir / 'parts'}): fix what they name and run again" if failed else
              f"{exc}".replace(str(json_path), str(outdir / RUN_JSON)), file=sys.stderr)
        return 1, {}
    rows = forward_tables.forward_rows([run])
    print(forward_tables.render_long_table(rows, fmt="text"))
    print()
    print(forward_tables.render_summary_table(rows, fmt="text"))
    for failure in run.failures:
        print(f"{failure.status}: {failure.case.label}: {failure.check.reason}", file=sys.stderr)
    recorded = run.data.get("cudagraph_bench") or {}
    for note in recorded.get("model_notes") or []:
        print(f"note: {note}", file=sys.stderr)
    refused = recorded.get("refused") or []
    for entry in refused:      # as the suite's summary says it: a reason that names the entry is given as it is
        model, reason = str(entry.get("model")), str(entry.get("reason"))
        print(f"refused: {reason if model in reason else f'{model}: {reason}'}", file=sys.stderr)
    print_skips(outcomes)
    plots: dict[str, bytes] = {}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print(f"matplotlib is not installed: no PNGs; render them on another machine with "
              f"`cudagraph-bench report {outdir / RUN_JSON} -o DIR`", file=sys.stderr)
    else:
        plots = report.render_plots([run])
    failed = any(o.returncode not in (0, NOTHING_SELECTED) for o in outcomes)
    return (1 if failed or run.failures or refused else 0), plots
