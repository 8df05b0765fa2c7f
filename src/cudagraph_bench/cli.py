"""The ``cudagraph-bench`` command: thin argparse front-end over library functions.

Each sub-command lives in its own module, which provides ``configure_parser(parser)`` and
``main(args) -> int``. Modules for ``gate``, ``compare``, ``baseline`` and ``report`` import no
torch, so a CPU-only machine can gate a run. Errors of type
:class:`~cudagraph_bench.errors.UsageError` print one line and exit with code 2.
"""

from __future__ import annotations

import argparse
import copy
import importlib
import os
import sys

from cudagraph_bench import __version__
from cudagraph_bench.errors import UsageError
from cudagraph_bench.options import show_default

#: sub-command -> (module, one-line help)
COMMANDS = {
    "run": ("cudagraph_bench.runcmd", "measure eager vs graph (and compile variants) for one model; table, JSON, PNGs"),
    "gate": ("cudagraph_bench.gate", "fail (exit 1) when a graph is wrong, cuts median latency by less than the "
                                     "threshold, or regressed vs the GPU's baseline"),
    "compare": ("cudagraph_bench.compare", "compare two runs (JSON paths or .benchmarks saved-run ids); exit 1 on regression"),
    "baseline": ("cudagraph_bench.baseline", "write a versioned per-GPU baseline file from k >= 5 run JSONs (atomically)"),
    "report": ("cudagraph_bench.report", "render the markdown table and PNG plots of a run JSON"),
    "calibrate": ("cudagraph_bench.calibrate", "false-alarm and detection rates of the regression rule on repeated runs"),
    "ab": ("cudagraph_bench.ab", "measure base and head commits interleaved, k runs each, and compare them"),
    "launch-report": ("cudagraph_bench.launch_report", "write the launch-overhead page (N sweep, host vs device "
                                                       "time, predicted vs measured saving) and its plot"),
}


class _HelpFormatter(argparse.HelpFormatter):
    """Shows tuple/list defaults as the user types them (``gpt2,bert-tiny``), not as Python tuples."""

    def _expand_help(self, action):
        if isinstance(action.default, (tuple, list)):
            action = copy.copy(action)
            action.default = show_default(action.default)
        return super()._expand_help(action)


class OneLineErrorParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line (``PROG: error: MESSAGE (see PROG --help)``)
    and exit code 2, like every other usage error of the tool, instead of the usage block first.
    Sub-command parsers inherit it (``add_subparsers`` uses the parent's class)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="cudagraph-bench", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_text) in COMMANDS.items():
        module = importlib.import_module(module_name)
        p = sub.add_parser(name, help=help_text, description=help_text)
        module.configure_parser(p)
        p.set_defaults(_main=module.main)
    return parser


class PipeSafeStdout:
    """Stands in for ``sys.stdout`` while a command runs, so that the exit code never depends on where
    stdout goes: when the reader of a pipe has gone (``cudagraph-bench compare A B | head -1``), the
    first write or flush that hits the closed pipe points file descriptor 1 at ``os.devnull`` and the
    rest of the output is dropped (the Python docs' SIGPIPE recipe), instead of a ``BrokenPipeError``
    turning the command's verdict into exit code 2. Everything else is delegated to ``stream``."""

    def __init__(self, stream):
        self._stream = stream
        self.broken = False

    def write(self, text: str) -> int:
        if not self.broken:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._drop_output()
        return len(text)

    def flush(self) -> None:
        if not self.broken:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._drop_output()

    def _drop_output(self) -> None:
        # from here on, writes (and the interpreter's flush at exit) go to /dev/null: no second
        # BrokenPipeError, no "Exception ignored" message, no changed exit status
        self.broken = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, self._stream.fileno())
            finally:
                os.close(devnull)
        except (OSError, ValueError, AttributeError):  # a stream without a file descriptor
            pass

    def __getattr__(self, name):
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Entry point. Returns the exit code: 0 ok, 1 gate/compare failure, 2 usage error; the same
    whether stdout is a terminal, a file or a pipe closed early (:class:`PipeSafeStdout`)."""
    stdout = sys.stdout
    if stdout is None:  # pythonw, or a closed stdout: nothing to guard
        return _main(argv)
    guard = PipeSafeStdout(stdout)
    sys.stdout = guard
    try:
        return _main(argv)
    finally:
        guard.flush()
        sys.stdout = stdout


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._main(args) or 0)
    except UsageError as exc:
        print(f"cudagraph-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # an output path that cannot be written (or an input that cannot be read)
        where = f" {exc.filename}" if exc.filename else ""
        print(f"cudagraph-bench {args.command}: error: cannot access{where}: {exc.strerror or exc}: "
              f"choose a path in a writable folder", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("cudagraph-bench: interrupted", file=sys.stderr)
        return 130
