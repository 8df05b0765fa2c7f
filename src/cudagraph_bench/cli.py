"""The ``cudagraph-bench`` command: a thin argparse front-end over :mod:`cudagraph_bench.commands`. No command imports
torch, so a CPU-only machine can gate a run; a UsageError is one line and exit code 2."""

from __future__ import annotations

import argparse
import contextlib
import copy
import difflib
import errno
import importlib
import os
import signal
import sys
import textwrap
import threading

from cudagraph_bench import __version__
from cudagraph_bench.errors import UsageError
from cudagraph_bench.fsio import os_error_message
from cudagraph_bench.options import AFTER_DOUBLE_DASH, PYTEST_BENCHMARK_SPELLING, add_allow_option, show_default
from cudagraph_bench.paths import STORAGE_ENV

#: sub-command -> (module, one-line help)
COMMANDS = {
    "run": ("cudagraph_bench.commands.run",
            "measure eager vs graph (and padded, bucketed, compile variants) over models x dtypes x prompt lengths "
            "through the pytest suite; table, JSON, PNGs"),
    "gate": ("cudagraph_bench.commands.gate_command",
            "fail (exit 1) when a recorded check failed, a graph cuts median latency by less than the threshold, or "
            "regressed vs the GPU's baseline"),
    "compare": ("cudagraph_bench.commands.compare_command",
            "compare two runs (JSON paths or .benchmarks saved-run ids); exit 1 on regression"),
    "baseline": ("cudagraph_bench.commands.baseline_command",
            "write a versioned per-GPU baseline file from k >= 5 run JSONs (atomically)"),
    "report": ("cudagraph_bench.commands.report",
            "render the markdown results and PNG plots of one or more run JSONs"),
    "calibrate": ("cudagraph_bench.commands.calibrate_command",
            "false-alarm and detection rates of the regression rule on repeated runs"),
    "ab": ("cudagraph_bench.commands.ab_command",
            "measure base and head commits interleaved, k runs each, and compare them"),
    "launch-report": ("cudagraph_bench.commands.launch_report",
            "write the launch-overhead page (N sweep, host vs device time, predicted vs measured saving) and its plot"),
    "selftest": ("cudagraph_bench.selftest.command",
            "plant known faults (GPU delays, a stale input, mask or position, a wrong decode) into the real pipeline "
            "and show the gate fails on each, passes on reruns"),
    "merge": ("cudagraph_bench.commands.merge_command",
            "merge the runs of the shards of one suite (CI matrix jobs) into one pytest-benchmark JSON"),
    "zoo": ("cudagraph_bench.commands.zoo_command",
            "check every causal-LM model type of transformers (tiny checkpoints): graph replay vs eager, graphed "
            "decode vs generate; docs/architectures.md"),
}


#: What ``cudagraph-bench --help`` says above the list of commands, and below it.
DESCRIPTION = (
    "Measure what CUDA graph capture/replay buys over eager PyTorch / Hugging Face transformers inference at batch 1, "
    "and guard it: measure runs, gate them against a per-GPU baseline, compare runs, and render reports from the run "
    "JSON.")
EPILOG = (
    "Run `cudagraph-bench COMMAND --help` for what a command reads, writes and exits with. The pytest suite measures "
    "the same things: `pytest perf_tests --benchmark-only --benchmark-json RUN.json`.\n\n"
    "Exit codes: 0 success; 1 the command's check failed (run, gate, compare, baseline, calibrate, ab: see each); 2 "
    "usage error or unreadable input (one line on stderr saying what to fix).")

#: Where every command that reads runs looks up a saved-run id (:func:`cudagraph_bench.paths.default_storage`).
SAVED_RUNS = ("Saved-run ids are looked up in $CUDAGRAPH_BENCH_STORAGE, else (unset, or set to an empty value) the "
              "checkout's .benchmarks/, else ./.benchmarks.")

#: sub-command -> what its ``--help`` says: what it does, what it reads, what it writes, its exit codes.
DESCRIPTIONS = {
    "run": (
        "Measure eager vs CUDA graph replay (and padded, bucketed, torch.compile variants with --variants) over "
        "models x dtypes x prompt lengths by launching the pytest suite (pytest perf_tests/test_forward_bench.py "
        "perf_tests/test_padding_bench.py --benchmark-only: same options and defaults). Each case is checked against "
        "eager on fresh random inputs, then timed on new ones (synchronized wall time and CUDA events). torch.compile "
        "variants run in their own pytest process; a test that crashes its process is recorded as failed and the rest "
        "runs in a new one. --gpus 0,1 runs one process per GPU, each a shard of the matrix, merged into one run.\n\n"
        "Input: the options below and pytest's arguments after -- (the round policy, e.g. -- --benchmark-min-rounds "
        "50 --precision-pct 0.5), or a TOML file (--config) keyed by option name (rounds, precision_pct, max_rounds, "
        "max_time_ms, warmup_rounds, warmup_ms, min_time_ms among them); the command line wins. Needs a CUDA GPU "
        "unless --device cpu (eager only). Run it from a cudagraph-bench checkout.\n\n"
        "Output, in DIR (-o, default out/run), replacing an earlier run's files: run.json (pytest-benchmark JSON; "
        "failed or skipped cases with their reason under its cudagraph_bench key), latency_comparison.png, "
        "speedup_vs_length.png and parts/ (each pytest process's JSON and log); a table on stdout.\n\n"
        "Exit codes: 0 every measured case correct; 1 a case failed, crashed or differs from its reference, or no "
        "case was measured (what was measured is still written); 2 usage error."),
    "gate": (
        "The regression gate (no GPU needed). For each forward case it pairs the eager and graph benchmarks of one or "
        "more runs of the same code and fails when: a recorded correctness check failed (forward graph, padded, "
        "bucketed, compile, compile+graph; decode graph, compile+graph; a known failure of the HF static-cache "
        "compile peer is reported, not failed); a gated graph recorded no check (unless --allow unchecked); a gated "
        "case (prompt length <= --max-gated-len tokens) cuts median latency by less than --min-reduction percent; a "
        "graph median is slower than the GPU's baseline by more than its noise-calibrated tolerance; or gated "
        "baseline cases are missing from the run while gated run cases have no baseline entry (renamed cases, unseen "
        "by the regression check; --allow missing only names them).\n\n"
        "Input: RUN, pytest-benchmark JSON paths or saved-run ids (several = separate runs of the same code); the "
        "baseline from --baseline, else <gpu_slug>.json in $CUDAGRAPH_BENCH_BASELINES or the checkout's baselines/. "
        + SAVED_RUNS + "\n\n"
        "Output: a table per case and a last line `gate PASS: ...` or `gate FAIL: ...` on stdout; --markdown FILE "
        "also writes it as a page.\n\n"
        "Exit codes: 0 pass; 1 fail; 2 usage error, unreadable run, or no baseline found (give --baseline FILE or "
        "--baseline none)."),
    "compare": (
        "Compare two runs, or two groups of separate runs (--old/--new), benchmark by benchmark (no GPU needed). A "
        "benchmark regressed when its median's change exceeds a tolerance calibrated on between-run noise (the GPU's "
        "baseline, the runs' own spread, or the --max-regression floor) and, given enough runs, a rank test agrees. "
        "Reference variants (eager, generate, the launch loop) are reported but fail only with --gate-references.\n\n"
        "Input: OLD and NEW, pytest-benchmark JSON paths or saved-run ids (e.g. 0001 0002). " + SAVED_RUNS + "\n\n"
        "Output: a table of changes and a last line `compare PASS: ...` or `compare FAIL: ...` on stdout; --markdown "
        "FILE also writes it as a page.\n\n"
        "Exit codes: 0 no gated benchmark slower beyond its tolerance; 1 a regression, a correctness check failed in "
        "NEW (any variant; a known peer failure excepted), or a gated benchmark of OLD missing in NEW (unless --allow "
        "missing); 2 usage error or runs with no benchmark in common."),
    "baseline": (
        "Build the per-GPU baseline file that gate and compare read: per forward case, the eager and graph medians of "
        "k >= 5 separate runs of the same code on one GPU type, the between-run spread of the graph median (its "
        "tolerance) and the thresholds. Cases measured in fewer than --min-runs runs are left out; runs with a failed "
        "correctness check of any variant are refused.\n\n"
        "Input: RUN, pytest-benchmark JSON paths or saved-run ids. " + SAVED_RUNS + "\n\n"
        "Output: the baseline JSON at -o FILE (by convention baselines/<gpu_slug>.json, written atomically) and a "
        "table of its cases on stdout.\n\n"
        "Exit codes: 0 written; 1 a run recorded a failed correctness check (named; nothing written); 2 usage error "
        "(fewer than --min-runs runs, runs of different GPUs, a graph without a recorded check unless --allow "
        "unchecked, an unwritable output)."),
    "report": (
        "Render the results of one or more runs as markdown and plots: per forward case the eager and graph medians, "
        "latency reduction, p95s and every other variant; failed cases with their reasons; the decode and launch "
        "suites when present. Runs are merged; a case measured in two runs is an error unless --allow overlap.\n\n"
        "Input: RUN, pytest-benchmark JSON paths (run.json of `cudagraph-bench run`, or pytest --benchmark-json) or "
        "saved-run ids, of one GPU (--allow gpu-mismatch for several). " + SAVED_RUNS + "\n\n"
        "Output, in DIR (-o, default out/report), replacing an earlier report's (its plots these runs have no data "
        "for are removed): results.md, latency_comparison.png, speedup_vs_length.png and the other plots the runs "
        "have data for; with --readme FILE, the block between its results markers is replaced.\n\n"
        "Exit codes: 0 written; 2 usage error or unreadable run."),
    "calibrate": (
        "Measure how often the regression rule raises false alarms, and which slow-downs it detects, on separate runs "
        "of the same code: gate (each run against a baseline of the others), compare (every ordered pair) and A/B (k "
        "against k), with graph slow-downs planted at --plant percent.\n\n"
        "Input: RUN, at least 6 pytest-benchmark JSON runs (paths or saved-run ids) of the same forward matrix on one "
        "GPU type. " + SAVED_RUNS + "\n\n"
        "Output: a table per case and a summary line on stdout; --markdown FILE also writes it as a page.\n\n"
        "Exit codes: 0 no false alarm; 1 some mode raised a false alarm on the unchanged runs; 2 usage error."),
    "ab": (
        "A/B comparison of two commits on one GPU, for pull requests: checks out --base and --head into temporary git "
        "worktrees, runs the forward benchmarks k times per side interleaved (base, head, head, base, ...), each run "
        "a separate pytest process, then compares the groups as `compare --old BASE-RUNS --new HEAD-RUNS` does.\n\n"
        "Input: two commits of the git repository (--repo, default this checkout); pytest's arguments after -- go to "
        "every run. Needs a CUDA GPU.\n\n"
        "Output, in DIR (-o, default out/ab, new or empty): base-<i>.json, head-<i>.json and a log per run; the "
        "comparison table and verdict on stdout (--markdown FILE also writes it).\n\n"
        "Exit codes: 0 pass; 1 a regression or a check that went from pass to fail; 2 usage error or a side without a "
        "successful run."),
    "launch-report": (
        "Write the launch-overhead page: the N-sweep table (tiny-kernel eager loop vs one graph replay), host vs "
        "device time, the speedup-vs-N plot and, with --forward runs whose eager benchmarks carry kernel counts, a "
        "graph's predicted vs measured saving on real forwards. Every number comes from the input files.\n\n"
        "Input: RUN, a pytest-benchmark JSON (path or saved-run id) with launch-suite benchmarks "
        "(perf_tests/test_launch.py); optionally --forward runs, the JSON of perf_tests/cuda/graphs.cu (--graphs-cu) "
        "and compute-sanitizer logs (--sanitizer). " + SAVED_RUNS + "\n\n"
        "Output, in DIR (-o, default out/launch): launch-overhead.md and launch_speedup_vs_n.png, both written or "
        "neither.\n\n"
        "Exit codes: 0 written; 2 usage error, a run without launch benchmarks, or a forward case found in two "
        "--forward runs."),
    "selftest": (
        "The gate's self-test on this GPU runner: runs the gated forward matrix N times unmodified (the baseline) and "
        "once per planted fault, each run a separate pytest process with --plant-fault: every gated graph replay "
        "slowed on the GPU by --delays percent of its own time (a delay kernel captured into the graph); a graph "
        "replayed without refreshing its static input; a graphed decode giving other tokens; padded and bucketed "
        "graphs keeping their first attention mask; a graphed decode never refreshing its position. Then it gates "
        "every delay run against the baseline, each unmodified run against the others, compares every pair of "
        "unmodified runs (false alarms), and gates the wrong-result runs. --ab K also measures the pull-request mode "
        "(cudagraph-bench ab): K runs each of base, head (both unmodified) and head with --ab-delay percent planted, "
        "interleaved as ab does; ab's comparison, with the baseline's noise model as ab --baseline, of base with head "
        "(A/A false alarms) and with the delayed head (detection).\n\n"
        "Input: a CUDA GPU and a checkout (or --from DIR: the runs of an earlier self-test, no GPU; its ab-* runs "
        "when it holds them).\n\n"
        "Output: the runs and their logs in DIR (-o, default out/selftest; new or empty), a table per gated case and "
        "a last line `selftest PASS: ...` or `selftest FAIL: ...` (with `ab: A/A false alarms a/N; +3% detected d/N` "
        "after --ab); --markdown FILE writes the page.\n\n"
        "Exit codes: 0 no false alarm (ab's A/A included), every case detected at +5%, every wrong result failing the "
        "gate; 1 otherwise, or when a +5% delay or an always-planted fault has no run (`missing runs: ...`; ab's "
        "detection is reported, not a target); 2 usage error."),
    "merge": (
        "Merge the runs of the shards of one suite (CI matrix jobs run with pytest --shard K/N, or any runs of "
        "disjoint tests) into one pytest-benchmark JSON that gate, report, compare and pytest-benchmark compare read "
        "as one run: benchmarks concatenated, the cudagraph_bench sections merged (memory-ledger cases, failures, "
        "kernel counts, test durations), machine_info taken from the first run with every shard (file, node, GPU, "
        "CPUs, commit, counts) under machine_info.shards. Runs of different commits are merged with a warning.\n\n"
        "Input: RUN, pytest-benchmark JSON paths or saved-run ids, all of one GPU model. " + SAVED_RUNS + "\n\n"
        "Output: the merged JSON at -o FILE (written atomically; never one of the RUNs) and one line on stdout.\n\n"
        "Exit codes: 0 written; 2 usage error: runs of different GPU models, a benchmark or test found in two runs, "
        "the same run given twice, an unreadable run, or -o naming an input."),
    "zoo": (
        "The architecture zoo: every causal-LM model type of the installed transformers (its auto mapping) as a tiny "
        "random save_pretrained checkpoint from transformers' own default config, loaded like any --models folder. "
        "Per type: the forward pass captured and replayed against eager on fresh inputs, and greedy decode with "
        "graphed steps against HF generate with an unpadded and a bucketed prefill, then timed; or, up front, why it "
        "is refused or not graphable. With --device cpu: what a CPU can classify (refusals, host work found on a meta "
        "copy, the decode steps run eagerly against generate). Runs pytest perf_tests/test_zoo.py --zoo TYPES in a "
        "watched process (a test that kills it is recorded as failed; the others run).\n\n"
        "Input: a checkout (and a CUDA GPU unless --device cpu); or --from RUN...: zoo runs (GPU and CPU runs, one or "
        "more transformers releases; a GPU run's entry wins), no GPU.\n\n"
        "Output: DIR/zoo.json (-o, default out/zoo) with its log, and the page (--markdown FILE, default "
        "DIR/architectures.md): one table, model type | forward | decode | reason, with the forward reduction and "
        "decode speedup of measured parts; the counts per status on stdout.\n\n"
        "Exit codes: 0 no part failed; 1 a part failed a check or killed its process, or no run was written; 2 usage "
        "error or a run without zoo entries."),
}


#: The commands that read runs: each takes ``--allow interrupted`` (an interrupted session's run, refused by default).
RUN_READERS = ("gate", "compare", "baseline", "report", "calibrate", "launch-report", "selftest", "merge")
#: What ``--allow interrupted`` accepts.
ALLOW_INTERRUPTED = ("read runs of an interrupted session (Ctrl-C; marked in the run JSON), whose last benchmark may "
                     "be cut short and whose later cases are missing")


class _HelpFormatter(argparse.HelpFormatter):
    """Shows tuple/list defaults as the user types them (``gpt2,bert-tiny``)."""

    def _expand_help(self, action):
        if isinstance(action.default, (tuple, list)):
            action = copy.copy(action)
            action.default = show_default(action.default)
        return super()._expand_help(action)

    def _split_lines(self, text, width):
        """An option's help keeps its line breaks; each line is wrapped."""
        split = super()._split_lines
        return [line for part in text.split("\n") for line in split(part, width)]

    def _fill_text(self, text, width, indent):
        """Descriptions and epilogs keep their blank-line paragraphs; each is wrapped."""
        wrapper = textwrap.TextWrapper(width, initial_indent=indent, subsequent_indent=indent,
                                       break_on_hyphens=False, break_long_words=False)
        return "\n\n".join(wrapper.fill(" ".join(p.split())) for p in text.split("\n\n"))


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors are one line (``PROG: error: MESSAGE (see PROG --help)``), exit code 2; sub-parsers inherit it."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)      # ``--out`` is no ``--output-dir``: one spelling per option
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="cudagraph-bench", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    parser.command_parsers = sub.choices  # name -> that command's parser, whose error names its own --help
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=DESCRIPTIONS[name])
        module.configure_parser(p)
        allowances = {**({"interrupted": ALLOW_INTERRUPTED} if name in RUN_READERS else {}),
                      **getattr(module, "ALLOWANCES", {})}
        if allowances:
            add_allow_option(p, allowances)
        p.set_defaults(_main=module.main)
    return parser


#: Options that moved -> what to give instead, for the commands that had them.
MOVED = {
    "--pytest-args": (("ab", "selftest"), "give pytest's arguments after --, e.g. -- --models gpt2"),
    "--newest-wins": (("report",), "did you mean --allow overlap?"),
    "--no-baseline": (("gate",), "did you mean --baseline none?"),
    "--model": (("run",), "did you mean --models?"),
    "--dtype": (("run",), "did you mean --dtypes?"),
    "--iters": (("run",), "give it after -- as --benchmark-min-rounds"),
    "--warmup": (("run",), "give it after -- as --benchmark-warmup-iterations"),
    "--storage": (RUN_READERS, f"saved-run ids are looked up in ${STORAGE_ENV}: set it to the folder instead"),
}


def _moved_hint(command: str, option: str, known: list[str]) -> str | None:
    """What to give instead of an ``option`` that ``command`` does not take but once did, or takes elsewhere."""
    if option in MOVED and command in MOVED[option][0]:
        return MOVED[option][1]
    if option.startswith("--allow-") and "--allow" in known:
        return f"did you mean --allow {option.removeprefix('--allow-')}?"
    if command == "run" and option in PYTEST_BENCHMARK_SPELLING:
        return f"give it after -- as {PYTEST_BENCHMARK_SPELLING[option][0]}"
    if command == "run" and (option in AFTER_DOUBLE_DASH or option.startswith("--benchmark-")):
        return f"{option} is pytest's option: give it after --, e.g. -- {option} ..."
    return None


def unrecognized_arguments_message(parser: argparse.ArgumentParser, extra: list[str], command: str = "") -> str:
    """argparse's message plus, for the first unknown option, where it went (:data:`MOVED`, run's options after
    ``--``) or the closest option (``--modles`` -> ``did you mean --models?``)."""
    message = f"unrecognized arguments: {' '.join(extra)}"
    option = next((item.split("=", 1)[0] for item in extra if item.startswith("--")), None)
    if option is None:
        return message
    known = [s for action in parser._actions for s in action.option_strings if s.startswith("--")]
    close = difflib.get_close_matches(option, known, n=1)
    hint = _moved_hint(command, option, known) or (f"did you mean {close[0]}?" if close else None)
    return f"{message}; {hint}" if hint else message


class PipeSafeStream:
    """``sys.stdout`` (``stream`` None: closed, ``>&-``) or, with ``fails=False``, ``sys.stderr`` while a command runs,
    so the exit code never depends on where output goes: once a pipe's reader has gone the rest is dropped (the Python
    docs' SIGPIPE recipe); another error on stdout (a full disk, a closed stdout) raises a one-line UsageError."""

    def __init__(self, stream, fails: bool = True):
        self._stream = stream
        self._fails = fails
        self.broken = False
        #: the first error other than a closed pipe; the command fails with it
        self.error: OSError | None = None

    def _guarded(self, method: str, *args):
        if self.broken or (self._stream is None and method == "flush"):   # a closed stdout never buffered anything
            return None
        try:
            if self._stream is None:
                raise OSError(errno.EBADF, "standard output is closed")
            return getattr(self._stream, method)(*args)
        except OSError as exc:
            self.broken = True      # the interpreter's flush at exit goes to /dev/null too: no "Exception ignored"
            with contextlib.suppress(OSError, ValueError, AttributeError):    # a stream without a file descriptor
                _devnull_onto(self._stream.fileno())
            if self._fails and not isinstance(exc, BrokenPipeError):
                self.error = exc
                raise UsageError(f"writing to standard output failed: {exc.strerror or exc}: redirect it to a "
                                 "writable file or pipe") from None
        return None

    def write(self, text: str) -> int:
        written = self._guarded("write", text)
        return len(text) if written is None else written

    def flush(self) -> None:
        self._guarded("flush")

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _devnull_onto(fd: int) -> None:
    """Point descriptor ``fd`` at ``os.devnull``; OSError as ``os.open``, ``os.dup2``."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    if devnull != fd:
        os.dup2(devnull, fd)
        os.close(devnull)


def main(argv: list[str] | None = None) -> int:
    """Entry point: 0 ok, 1 the command's check failed, 2 usage error or unwritable stdout, wherever stdout goes."""
    stdout, stderr = sys.stdout, sys.stderr
    if stdout is None:  # closed (or pythonw): descriptor 1 gets os.devnull, so no file the command opens lands there
        try:
            os.fstat(1)
        except OSError:
            with contextlib.suppress(OSError):
                _devnull_onto(1)
    guard = sys.stdout = PipeSafeStream(stdout)
    if stderr is not None:
        sys.stderr = PipeSafeStream(stderr, fails=False)
    try:
        rc = _main(argv)
        if guard.error is None:
            guard.flush()
        return 2 if guard.error is not None else rc
    except UsageError as exc:  # standard output refused the --help text, or the last buffered output
        print(f"cudagraph-bench: error: {exc}", file=sys.stderr)
        return 2
    finally:
        sys.stdout, sys.stderr = stdout, stderr


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, a cancelled CI job) raised where the command is, so it stops its pytest processes."""


def _raise_terminated(signum, frame):
    raise Terminated


def _main(argv: list[str] | None) -> int:
    if threading.current_thread() is not threading.main_thread():
        return _command(argv)
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return _command(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _command(argv: list[str] | None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's own parser: "cudagraph-bench run: error: ... (see cudagraph-bench run --help)"
        command_parser = parser.command_parsers.get(args.command, parser)
        command_parser.error(unrecognized_arguments_message(command_parser, extra, args.command))
    from cudagraph_bench.results.runfile import interrupted_runs_allowed

    try:
        with interrupted_runs_allowed(getattr(args, "allow_interrupted", False)):
            return int(args._main(args) or 0)
    except (UsageError, OSError) as exc:  # an OSError: an output path that cannot be written (or an input unread)
        why = os_error_message(exc) if isinstance(exc, OSError) else exc
        print(f"cudagraph-bench {args.command}: error: {why}", file=sys.stderr)
        return 2
    except Terminated:
        print("cudagraph-bench: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("cudagraph-bench: interrupted", file=sys.stderr)
        return 130
