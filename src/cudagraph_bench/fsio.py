"""Reading input files and writing output files, and checking their paths: the one place every command
reads runs and baselines through and writes through (no torch).

An input is read only when it is a regular file of at most :data:`MAX_INPUT_BYTES` (a device such as
``/dev/zero``, a pipe or a huge file would fill the memory), and its JSON only when it is at most
:data:`MAX_JSON_BYTES` long, nests at most :data:`MAX_JSON_DEPTH` levels and holds no number outside a
float's range (:func:`read_input_bytes`, :func:`parse_json`): each problem is a one-line
:class:`~cudagraph_bench.errors.InputFileError` (exit 2) that names where in the file it is.

Every file is written atomically: its bytes go to a hidden temporary file in the target's folder, which
then replaces the target with ``os.replace``. An error (a failing serializer, a full disk) leaves the old
file as it was and no temporary file behind; a reader never sees a half-written file. Several files can
be written all or nothing (:func:`write_files_atomic`); a Ctrl-C while they are moved into place takes effect
once the last one is (:func:`interrupt_after`), so an interrupted command leaves the old files or the new ones.

Output paths are checked before any work is done (a benchmark sweep can take many minutes), each problem
as a one-line :class:`~cudagraph_bench.errors.UsageError` naming the fix (the CLI exits 2):

- an output that is one of the command's inputs (:func:`refuse_overwriting_inputs`);
- an output file that is a folder, under a parent that is a file, or in a folder that takes no new files
  (:func:`check_output_file`);
- an output folder that is a file or under one, holding a folder where an output file goes, or (it, or
  the folder it would be made in) not writable (:func:`check_output_folder`);
- an output whose folders would be made anywhere but one level under a folder that exists, or under
  the working directory (a relative path): a mistyped ``/nonexistent/dir/gate.md`` never makes folders at
  the file system's root (:func:`check_new_folders`).

Missing folders that pass that check are created on write, each named on stderr (``created folder X``).
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from cudagraph_bench.errors import InputFileError, OutputWriteError, UsageError

#: Permissions of every written file (temporary files start as 0600).
FILE_MODE = 0o644
#: Largest input file read, in bytes: the committed whole-suite runs with per-round data are a few MB.
MAX_INPUT_BYTES = 512 * 2**20
#: Deepest JSON nesting read: pytest-benchmark runs and baselines nest fewer than 10 levels; a deeper file is
#: not one (and 200,000 levels would overflow the parser's recursion).
MAX_JSON_DEPTH = 64
#: Longest JSON text parsed (a gzip-compressed run inflated): the committed whole-suite runs with per-round data
#: are under 4 MB; parsing takes up to tens of times the text's size in memory, so a larger text is refused unread.
MAX_JSON_BYTES = 64 * 2**20
#: Largest magnitude of a JSON number read: beyond a float's range no run or baseline holds a number.
_FLOAT_MAX = sys.float_info.max
_FLOAT_MAX_INT = int(_FLOAT_MAX)
#: Digits of the largest float (1.8e308 has 309): a longer integer literal is never converted (Python refuses
#: to convert one of more than 4,300 digits, and a smaller one of more than 309 is out of range anyway).
_MAX_INT_DIGITS = len(str(_FLOAT_MAX_INT))

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"),
          (stat.S_ISSOCK, "a socket"))


def check_input_file(path: str | os.PathLike, what: str, fix: str, max_bytes: int = MAX_INPUT_BYTES) -> int:
    """Check, before reading it, that ``path`` (``what`` names it, e.g. ``"baseline"``) is a regular file of
    at most ``max_bytes`` bytes; returns its size in bytes.

    Raises :class:`~cudagraph_bench.errors.InputFileError` (one line ending with ``fix``) when it is missing,
    a folder, not a regular file (``/dev/zero``, a pipe: reading it would never end) or larger than
    ``max_bytes``, or cannot be looked at."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputFileError(f"no such {what} file: {path}: {fix}") from None
    except OSError as exc:
        raise InputFileError(f"cannot read {what} {path}: {exc.strerror or exc}: {fix}") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputFileError(f"{what} {path} is a folder: {fix}")
    if not stat.S_ISREG(info.st_mode):
        kind = next((name for test, name in _KINDS if test(info.st_mode)), "not a file")
        raise InputFileError(f"{what} {path} is not a regular file ({kind}, which is never read): {fix}")
    if info.st_size > max_bytes:
        raise InputFileError(f"{what} {path} is {info.st_size:,} bytes, larger than the {max_bytes:,} bytes "
                             f"({max_bytes / 2**20:g} MiB) read at most: {fix}")
    return info.st_size


def read_input_bytes(path: str | os.PathLike, what: str, fix: str, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of the input file ``path``, checked first by :func:`check_input_file` (same errors), and
    read at most ``max_bytes`` of (a file that grows while it is read is refused the same way).
    Raises InputFileError when it cannot be read."""
    check_input_file(path, what, fix, max_bytes)
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise InputFileError(f"cannot read {what} {path}: {exc.strerror or exc}: {fix}") from None
    if len(data) > max_bytes:
        raise InputFileError(f"{what} {path} is larger than the {max_bytes:,} bytes ({max_bytes / 2**20:g} MiB) "
                             f"read at most: {fix}")
    return data


class _OutOfRange:
    """An integer literal of a JSON text too long for a float (more digits than the largest float has), kept as
    written (never converted: Python refuses to convert one of more than 4,300 digits) until :func:`parse_json`
    names where it is."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


def _int_literal(text: str):
    return int(text) if len(text.lstrip("-")) <= _MAX_INT_DIGITS else _OutOfRange(text)


class _Constant(float):
    """A ``NaN``, ``Infinity`` or ``-Infinity`` token of a JSON text: a float the writer meant, unlike the
    infinity that a literal beyond a float's range (``1e999``) reads as. The readers judge where it stands."""


def _shown(value) -> str:
    """A number beyond a float's range as an error message shows it: whole when short, else its start and length."""
    if type(value) is float:
        return "a literal read as infinity"
    text = value.text if type(value) is _OutOfRange else str(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def _beyond_float(value) -> bool:
    """Whether a parsed JSON value is a number no float holds: an integer beyond a float's range, or an infinity
    that came from a literal (``1e999``), not from an ``Infinity`` token (:class:`_Constant`)."""
    kind = type(value)
    if kind is float:
        return value - value != 0.0          # only infinity (a literal's NaN does not exist: NaN is a _Constant)
    if kind is int:
        return value > _FLOAT_MAX_INT or value < -_FLOAT_MAX_INT
    return kind is _OutOfRange


def json_path(parts) -> str:
    """Where a value is in a JSON document, as a user finds it: ``("benchmarks", 3, "stats", "median")`` ->
    ``"benchmarks[3].stats.median"``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the top level"


def _path_to(entry, value) -> list:
    """The keys from the document's top to ``value``, a child of the container of the walk's ``entry`` (``(node,
    depth, parent entry)``): found by identity, only when an error names it."""
    keys = []
    while entry is not None:
        node = entry[0]
        items = node.items() if type(node) is dict else enumerate(node)
        keys.append(next(key for key, child in items if child is value))
        value, entry = node, entry[2]
    return keys[::-1]


def parse_json(raw: bytes | str, path: str | os.PathLike, what: str, fix: str, max_depth: int = MAX_JSON_DEPTH,
               max_bytes: int = MAX_JSON_BYTES):
    """``json.loads(raw)`` of the input file ``path``; raises :class:`~cudagraph_bench.errors.InputFileError`
    (one line ending with ``fix``) when ``raw`` is longer than ``max_bytes`` (refused before parsing: parsing
    takes many times its size in memory), nests deeper than ``max_depth`` arrays and objects, or holds a
    number outside a float's range (``1e999``, a 400-digit integer: the message names its place, e.g.
    ``benchmarks[3].stats.median``). ``NaN`` and ``Infinity`` tokens are read as floats, for the reader to
    judge where they stand. Invalid JSON raises ``json.JSONDecodeError`` / ``UnicodeDecodeError`` as
    ``json.loads`` does, for the caller to phrase."""
    if len(raw) > max_bytes:
        raise InputFileError(f"{what} {path} holds {len(raw):,} bytes of JSON, more than the {max_bytes:,} bytes "
                             f"({max_bytes / 2**20:g} MiB) read at most (no {what} is that large): {fix}")
    too_deep = InputFileError(f"{what} {path} nests JSON deeper than {max_depth} levels, which no {what} does: {fix}")
    try:
        data = json.loads(raw, parse_int=_int_literal, parse_constant=lambda text: _Constant(text))
    except RecursionError:
        raise too_deep from None

    def refuse(keys, bad):
        return InputFileError(f"{what} {path}: {json_path(keys)} is {_shown(bad)}, a number outside the range of a "
                              f"float (at most about 1.8e308), which no {what} holds: {fix}")

    if _beyond_float(data):
        raise refuse((), data)
    stack = [(data, 1, None)] if type(data) in (dict, list) else []
    while stack:
        entry = stack.pop()
        node, depth = entry[0], entry[1]
        if depth > max_depth:
            raise too_deep
        if type(node) is list and _plain_numbers(node):
            continue
        for child in (node.values() if type(node) is dict else node):
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, depth + 1, entry))
            elif (kind is float or kind is int or kind is _OutOfRange) and _beyond_float(child):
                raise refuse(_path_to(entry, child), child)
    return data


def _plain_numbers(values: list) -> bool:
    """True for a list of numbers within a float's range (per-round data: thousands of them), told by two passes
    in C; False when the list may hold anything else, which the walk then looks at one by one."""
    try:
        return -_FLOAT_MAX <= min(values) and max(values) <= _FLOAT_MAX
    except (TypeError, ValueError):   # other values than numbers (objects, strings), or no values
        return False


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is a file (no folder can be made under it), else None."""
    for folder in path.parents:
        if folder.exists():
            return None if folder.is_dir() else folder
    return None


def _nearest_existing_folder(path: Path) -> Path:
    """The nearest ancestor of ``path`` that exists (the current folder for a relative path)."""
    return next(p for p in path.parents if p.exists() or p == Path(p.anchor or "."))


def missing_folders(folder: str | os.PathLike) -> list[Path]:
    """The folders that writing into ``folder`` would create, outermost first (``[]`` when it exists)."""
    folder, out = Path(folder), []
    for p in (folder, *folder.parents):
        if p.exists() or p == Path(p.anchor or "."):
            break
        out.append(p)
    return out[::-1]


def check_new_folders(folder: str | os.PathLike, flag: str, target: str | os.PathLike) -> None:
    """Raise :class:`UsageError` when writing ``target`` (given with ``flag``) would create the missing
    ``folder`` anywhere but one level under a folder that exists or, for a relative path, under the
    working directory: a mistyped absolute path (``/nonexistent/dir/gate.md``) never makes folders at the
    root of the file system. Creates nothing."""
    missing = missing_folders(folder)
    if len(missing) <= 1:
        return
    base = missing[0].parent.resolve()
    if not Path(folder).is_absolute() and (base == Path.cwd() or Path.cwd() in base.parents):
        return
    raise UsageError(f"{flag} {target}: folder {missing[0]} does not exist (only the last folder of a path, or "
                     f"folders under the working directory, are created): create it first (mkdir -p {missing[-1]}) "
                     "or give a path in an existing folder")


def make_folders(folder: str | os.PathLike) -> list[Path]:
    """Create ``folder`` and its missing parents, naming each created one on stderr (``created folder X``);
    returns them, outermost first. Raises OSError as ``Path.mkdir`` does."""
    made = []
    for p in missing_folders(folder):
        p.mkdir(exist_ok=True)
        made.append(p)
        print(f"created folder {p}", file=sys.stderr)
    return made


def write_files_atomic(files: dict[str | os.PathLike, bytes | str], ready: Callable[[], None] | None = None) -> None:
    """Write ``{path: content}`` all or nothing; ``str`` content is written as UTF-8.

    Each content goes to a temporary file in its target's folder (missing folders are created, each named
    on stderr by :func:`make_folders`); only
    when every one is written are they moved into place with ``os.replace``, in the given order.

    A target that exists and is neither a regular file nor a folder (``/dev/stdout``, a named pipe) is
    written through, after the temporary files, never replaced.

    ``ready`` (e.g. printing the command's verdict or its "merged ... into FILE" line) is called once every
    content is written, before the files are moved into place: a line that says a file was written is never
    printed before a write that fails (``-o /dev/full``), and an error of ``ready`` itself (a standard output
    that cannot be written) leaves every file as it was.

    Raises UsageError when a target is a folder or a parent of it is a file (nothing is written);
    OSError (e.g. a full disk) or any other error while writing leaves every target as it was and
    removes the temporary files; an OSError is raised as :class:`~cudagraph_bench.errors.OutputWriteError`
    whose ``filename`` is the target being written (not its temporary file).
    """
    targets = {Path(p): (c.encode("utf-8") if isinstance(c, str) else c) for p, c in files.items()}
    for path in targets:
        if path.is_dir():
            raise UsageError(f"{path} is a folder: give a file path to write")
        blocker = _blocking_file(path)
        if blocker is not None:
            raise UsageError(f"{blocker} is a file, not a folder: choose another path for {path.name}")
    streams = {p: d for p, d in targets.items() if _is_stream(p)}
    targets = {p: d for p, d in targets.items() if p not in streams}
    temps: list[tuple[str, Path]] = []
    path = next(iter(targets), next(iter(streams), None))
    try:
        for path, data in targets.items():
            make_folders(path.parent)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, FILE_MODE)
        for path, data in streams.items():      # never replaced: written through, after the files are written
            with open(path, "wb") as fh:
                fh.write(data)
        if ready is not None:
            ready()
        with interrupt_after("writing the output files"):     # all replaced, or none: never a mix on Ctrl-C
            for tmp, path in temps:
                os.replace(tmp, path)
    except BaseException as exc:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputWriteError) and path is not None:
            # name the file the user asked for, never the hidden temporary file (or folder) it failed on
            raise OutputWriteError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise


@contextlib.contextmanager
def interrupt_after(what: str):
    """Hold a Ctrl-C (SIGINT) back while the block runs and raise it as ``KeyboardInterrupt`` when the block
    ends, so that files replaced together are all replaced (``what`` names the work on stderr: ``interrupted:
    finishing writing the output files first``). Why: a Ctrl-C between two ``os.replace`` calls would leave
    an output folder with old and new files mixed. Outside the main thread, or where SIGINT is ignored, the
    block runs as it is (only the main thread can handle a signal); within another such block, the outer one
    holds the Ctrl-C."""
    current = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if current in (signal.SIG_IGN, None) or getattr(current, "holds_interrupt", False):   # nested: the outer holds
        yield
        return
    caught = []

    def hold(signum, frame):
        if not caught:
            print(f"interrupted: finishing {what} first", file=sys.stderr, flush=True)
        caught.append(signum)

    hold.holds_interrupt = True

    previous = signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def _is_stream(path: Path) -> bool:
    """True for an existing target that is not a regular file or folder (``/dev/stdout``, a named pipe, a
    character device): replacing it would put a regular file in its place, so it is written through."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def written_verb(path: str | os.PathLike) -> str:
    """``"replaced"`` when ``path`` is an existing file (an earlier output that the next write replaces
    atomically), else ``"wrote"``: call it before writing, so that a command's "wrote FILE" line says when
    an existing file was replaced."""
    return "replaced" if os.path.isfile(path) else "wrote"


def write_text_atomic(path: str | os.PathLike, text: str, ready: Callable[[], None] | None = None) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; ``ready`` and errors as :func:`write_files_atomic`."""
    write_files_atomic({path: text}, ready)


def write_bytes_atomic(path: str | os.PathLike, data: bytes, ready: Callable[[], None] | None = None) -> None:
    """Write ``data`` to ``path`` atomically; ``ready`` and errors as :func:`write_files_atomic`."""
    write_files_atomic({path: data}, ready)


def figure_png(fig, dpi: int) -> bytes:
    """A matplotlib figure rendered as PNG bytes at ``dpi`` dots per inch."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Write ``fig`` as PNG (``dpi`` dots per inch) to ``path`` atomically (rendered first, so a failing
    render writes nothing). Returns the path; errors as :func:`write_files_atomic`."""
    path = Path(path)
    write_bytes_atomic(path, figure_png(fig, dpi))
    return path


def refuse_overwriting_inputs(output: str | os.PathLike | None, flag: str, inputs: list) -> None:
    """Raise :class:`UsageError` when ``output`` (given with ``flag``) is one of the ``inputs`` files
    (None entries are skipped; the same file by another name counts): an output option must never
    replace a run or baseline it reads. ``output`` None or empty: nothing to check."""
    if not output:
        return
    out = Path(output)
    for src in inputs:
        if src is None:
            continue
        src = Path(src)
        same = out.exists() and src.exists() and os.path.samefile(out, src)
        if same or out.resolve() == src.resolve():
            raise UsageError(f"{flag} {output} is the input file {src}: write the output somewhere else")


def probe_folder(folder: Path) -> None:
    """Create and remove a hidden temporary file in ``folder`` (``os.access`` says yes to root even on
    ``/proc``). Raises OSError when the folder takes no new file."""
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".cudagraph-bench.", suffix=".probe")
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | os.PathLike, flag: str, example: str) -> None:
    """Raise :class:`UsageError` (one line, before anything is printed or written) when ``path`` (given
    with ``flag``) cannot be written by :func:`write_text_atomic`: it is a folder (``example``: a file
    name to suggest inside it), a parent is a file, its missing folders may not be created
    (:func:`check_new_folders`), or the nearest existing folder (missing ones are created on write)
    refuses a new file. Creates nothing."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{flag} {out} is a directory: give a file such as {out / example}")
    folder = _nearest_existing_folder(out)
    if not folder.is_dir():
        raise UsageError(f"{flag} {out}: {folder} is a file, not a folder: choose another path for {out.name}")
    check_new_folders(out.parent, flag, out)
    try:
        probe_folder(folder)
    except OSError as exc:
        raise UsageError(f"{flag} {out} cannot be written: {folder} does not take new files "
                         f"({exc.strerror or exc}): choose a path in a writable folder") from None


def check_output_folder(folder: str | os.PathLike, names: list[str], flag: str = "-o", *,
                        create: bool = False) -> Path:
    """Check the output folder ``folder`` (given with ``flag``) that the files ``names`` will be written
    into, before any work is done; returns it as a Path.

    Raises :class:`UsageError` (one line) when ``folder`` or a parent of it is a file, when one of
    ``names`` is a folder there, when its missing folders may not be created (:func:`check_new_folders`),
    when the folder (or, while it is missing, the nearest folder it would be made in) takes no new file (a
    read-only file system), or, with ``create``, when the folder cannot be created (``create`` makes the
    folder, missing parents included, each named on stderr, and probes it). Without ``create`` nothing is
    made: a missing folder is created on write.
    """
    folder = Path(folder)
    blocker = folder if folder.exists() and not folder.is_dir() else _blocking_file(folder)
    if blocker is not None:
        raise UsageError(f"{flag} {folder}: {blocker} is a file, not a folder: give {flag} a folder for "
                         f"{' and '.join(names) or 'its files'}")
    for name in names:
        if (folder / name).is_dir():
            raise UsageError(f"{folder / name} is a folder: remove it or give another {flag} folder")
    check_new_folders(folder, flag, folder)
    if not create:
        nearest = folder if folder.is_dir() else _nearest_existing_folder(folder)
        try:
            probe_folder(nearest)
        except OSError as exc:
            raise UsageError(f"{flag} {folder} cannot be written: {nearest} does not take new files "
                             f"({exc.strerror or exc}): give a writable {flag} folder") from None
    if create:
        try:
            make_folders(folder)
            probe_folder(folder)
        except OSError as exc:
            raise UsageError(f"cannot write to output folder {folder}: {exc.strerror or exc}: give a writable "
                             f"{flag} folder") from None
    return folder


#: errno -> what to do about a file that cannot be written (the rest: choose a writable folder).
_FIXES = {
    errno.ENOSPC: "free space on that disk or write somewhere else",
    errno.EDQUOT: "free space within your quota or write somewhere else",
    errno.EROFS: "the file system is read-only: choose a path in a writable folder",
    errno.ENAMETOOLONG: "choose a shorter path",
}


def os_error_message(exc: OSError) -> str:
    """One line for an OSError that reached the command line: what failed on which path (for an
    :class:`~cudagraph_bench.errors.OutputWriteError`, the target the user gave, never a temporary
    file), the system's reason and what to do, e.g. ``cannot write /proc/x.md: No such file or
    directory: choose a path in a writable folder``."""
    reason = exc.strerror or str(exc) or exc.__class__.__name__
    fix = _FIXES.get(exc.errno, "choose a path in a writable folder")
    verb = "cannot write" if isinstance(exc, OutputWriteError) else "cannot access"
    where = exc.filename if exc.filename else "a file"
    return f"{verb} {where}: {reason}: {fix}"
