"""Reading input files, writing output files and checking their paths (no torch): inputs as bounded regular files and
bounded, finite JSON; every write atomic; output paths checked before any work. Each problem is one line naming the fix
(exit 2)."""

from __future__ import annotations

import contextlib
import errno
import io
import itertools
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
#: Deepest JSON nesting read: runs and baselines nest fewer than 10 levels (200,000 would overflow the parser).
MAX_JSON_DEPTH = 64
#: Longest JSON text parsed (a gzip-compressed run inflated); parsing takes up to tens of times its size.
MAX_JSON_BYTES = 64 * 2**20
#: Largest magnitude of a JSON number read: beyond a float's range no run or baseline holds a number.
_FLOAT_MAX = sys.float_info.max
_FLOAT_MAX_INT = int(_FLOAT_MAX)
#: Digits of the largest float (1.8e308 has 309): a longer integer literal is never converted.
_MAX_INT_DIGITS = len(str(_FLOAT_MAX_INT))

_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe"),
          (stat.S_ISSOCK, "a socket"))


def check_input_file(path: str | os.PathLike, what: str, fix: str, max_bytes: int = MAX_INPUT_BYTES) -> int:
    """Check before reading that ``path`` (``what`` names it) is a regular file of at most ``max_bytes``; returns its
    size in bytes. Raises InputFileError (one line ending with ``fix``): missing, a folder, not a regular file
    (``/dev/zero``, a pipe), larger than ``max_bytes``, or cannot be looked at."""
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
    """The bytes of ``path`` (at most ``max_bytes``). Raises InputFileError as :func:`check_input_file`, or when it
    cannot be read or grew past ``max_bytes``."""
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


class _OutOfRange(str):
    """A JSON integer literal longer than any float, kept until :func:`parse_json` names where it is."""


class _Constant(float):
    """A ``NaN``/``Infinity``/``-Infinity`` token: a float the writer meant, unlike ``1e999``'s infinity."""


def _shown(value) -> str:
    if type(value) is float:
        return "a literal read as infinity"
    text = str(value)
    return text if len(text) <= 24 else f"{text[:12]}... ({len(text)} characters)"


def _beyond_float(value) -> bool:
    kind = type(value)
    if kind is float:
        return value - value != 0.0          # only infinity (a literal's NaN does not exist: NaN is a _Constant)
    if kind is int:
        return value > _FLOAT_MAX_INT or value < -_FLOAT_MAX_INT
    return kind is _OutOfRange


def json_path(parts) -> str:
    """``("benchmarks", 3, "stats", "median")`` -> ``"benchmarks[3].stats.median"``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the top level"


def parse_json(raw: bytes | str, path: str | os.PathLike, what: str, fix: str, max_depth: int = MAX_JSON_DEPTH,
               max_bytes: int = MAX_JSON_BYTES):
    """``json.loads(raw)`` of the input file ``path``; ``NaN`` and ``Infinity`` are read as floats. Raises
    InputFileError (one line ending with ``fix``) when ``raw`` is longer than ``max_bytes`` (unparsed), nests deeper
    than ``max_depth`` or holds a number beyond a float (named by its place); JSONDecodeError, UnicodeDecodeError as
    ``json.loads`` does."""
    if len(raw) > max_bytes:
        raise InputFileError(f"{what} {path} holds {len(raw):,} bytes of JSON, more than the {max_bytes:,} bytes "
                             f"({max_bytes / 2**20:g} MiB) read at most (no {what} is that large): {fix}")
    too_deep = InputFileError(f"{what} {path} nests JSON deeper than {max_depth} levels, which no {what} does: {fix}")
    try:
        data = json.loads(raw, parse_constant=_Constant,
                          parse_int=lambda t: int(t) if len(t.lstrip("-")) <= _MAX_INT_DIGITS else _OutOfRange(t))
    except RecursionError:
        raise too_deep from None

    def refuse(keys, bad):
        return InputFileError(f"{what} {path}: {json_path(keys)} is {_shown(bad)}, a number outside the range of a "
                              f"float (at most about 1.8e308), which no {what} holds: {fix}")

    if _beyond_float(data):
        raise refuse((), data)
    stack = [(data, ())] if type(data) in (dict, list) else []     # (a container, the keys from the top to it)
    while stack:
        node, keys = stack.pop()
        if len(keys) >= max_depth:
            raise too_deep
        if type(node) is list and _plain_numbers(node):
            continue
        for key, child in (node.items() if type(node) is dict else enumerate(node)):
            kind = type(child)
            if kind is dict or kind is list:
                stack.append((child, (*keys, key)))
            elif (kind is float or kind is int or kind is _OutOfRange) and _beyond_float(child):
                raise refuse((*keys, key), child)
    return data


def _plain_numbers(values: list) -> bool:
    """True for a list of numbers within a float's range, told by two passes in C."""
    try:
        return -_FLOAT_MAX <= min(values) and max(values) <= _FLOAT_MAX
    except (TypeError, ValueError):   # other values than numbers (objects, strings), or no values
        return False


def _nearest_existing(path: Path) -> Path:
    """``path`` if it exists, else its nearest existing ancestor: its anchor or the current folder at the latest."""
    top = Path(path.anchor or ".")
    return next((p for p in (path, *path.parents) if p.exists() or p == top), top)


def _blocking_file(path: Path) -> Path | None:
    """:func:`_nearest_existing` of ``path`` when it is a file, else None."""
    nearest = _nearest_existing(path)
    return nearest if nearest.exists() and not nearest.is_dir() else None


def missing_folders(folder: str | os.PathLike) -> list[Path]:
    """Outermost first (``[]`` when ``folder`` exists)."""
    folder = Path(folder)
    nearest = _nearest_existing(folder)
    return list(itertools.takewhile(lambda p: p != nearest, (folder, *folder.parents)))[::-1]


def check_new_folders(folder: str | os.PathLike, flag: str, target: str | os.PathLike) -> None:
    """UsageError when writing ``target`` (given with ``flag``) would create ``folder`` anywhere but one level under an
    existing folder (or the working directory), so a mistyped ``/nonexistent/dir/gate.md`` never makes folders at the
    root. Creates nothing."""
    missing = missing_folders(folder)
    if len(missing) <= 1:
        return
    base = missing[0].parent.resolve()
    if not Path(folder).is_absolute() and (base == Path.cwd() or Path.cwd() in base.parents):
        return
    raise UsageError(f"{flag} {target}: folder {missing[0]} does not exist (only the last folder of a path, or "
                     f"folders under the working directory, are created): create it first (mkdir -p {missing[-1]}) "
                     "or give a path in an existing folder")


def make_folders(folder: str | os.PathLike) -> None:
    """Create ``folder`` and missing parents, naming each on stderr. OSError as ``mkdir``."""
    for p in missing_folders(folder):
        p.mkdir(exist_ok=True)
        print(f"created folder {p}", file=sys.stderr)


def write_files_atomic(files: dict[str | os.PathLike, bytes | str], ready: Callable[[], None] | None = None) -> None:
    """Write ``{path: content}`` all or nothing (``str`` as UTF-8): hidden temporary files beside the targets, moved
    into place with ``os.replace`` under :func:`interrupt_after`; a target that is no regular file or folder
    (``/dev/stdout``) is written through. ``ready`` runs once all is written, before the move, so its error leaves every
    file as it was. UsageError when a target is a folder or a parent a file (nothing written); OutputWriteError for an
    OSError (``filename``: the target); on any error every target is left as it was and the temporary files removed."""
    targets = {Path(p): (c.encode("utf-8") if isinstance(c, str) else c) for p, c in files.items()}
    for path in targets:
        if path.is_dir():
            raise UsageError(f"{path} is a folder: give a file path to write")
        blocker = _blocking_file(path.parent)
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
    """Hold a Ctrl-C back while the block runs and raise it as ``KeyboardInterrupt`` at the end (``what`` names the work
    on stderr), so files replaced together are never left mixed. Outside the main thread, or nested, a no-op."""
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
    """An existing target that is not a regular file or folder (``/dev/stdout``, a named pipe)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def written_verb(path: str | os.PathLike) -> str:
    """``"replaced"`` when ``path`` is an existing file, else ``"wrote"``: call it before writing."""
    return "replaced" if os.path.isfile(path) else "wrote"


def write_text_atomic(path: str | os.PathLike, text: str, ready: Callable[[], None] | None = None) -> None:
    """Errors as :func:`write_files_atomic`."""
    write_files_atomic({path: text}, ready)


def print_verdict(text: str, markdown: str | os.PathLike | None, page: str | None) -> None:
    """Print a command's verdict ``text`` and flush stdout; with ``markdown``, print it once ``page`` is written there
    and before the file is replaced (a stdout that cannot be written leaves the file as it was), then ``wrote`` or
    ``replaced`` ``markdown`` on stderr. Errors as :func:`write_files_atomic`."""
    if not markdown:
        print(text, flush=True)
        return
    verb = written_verb(markdown)
    write_text_atomic(markdown, page, lambda: print(text, flush=True))
    print(f"{verb} {markdown}", file=sys.stderr)


def figure_png(fig, dpi: int) -> bytes:
    """A matplotlib figure rendered as PNG bytes at ``dpi`` dots per inch."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """``fig`` as PNG at ``path`` (rendered before any write); returns the path. Errors: :func:`write_files_atomic`."""
    write_files_atomic({path: figure_png(fig, dpi)})
    return Path(path)


def refuse_overwriting_inputs(output: str | os.PathLike | None, flag: str, inputs: list) -> None:
    """UsageError when ``output`` (given with ``flag``) is one of ``inputs``, under any name."""
    if not output:
        return
    out = Path(output)
    for src in (Path(src) for src in inputs if src is not None):
        same = out.exists() and src.exists() and os.path.samefile(out, src)
        if same or out.resolve() == src.resolve():
            raise UsageError(f"{flag} {output} is the input file {src}: write the output somewhere else")


def probe_folder(folder: Path) -> None:
    """Create and remove a file in ``folder`` (``os.access`` says yes to root even on ``/proc``); OSError if refused."""
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".cudagraph-bench.", suffix=".probe")
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | os.PathLike | None, flag: str, example: str, inputs: list = ()) -> None:
    """UsageError when ``path`` (given with ``flag``; None: not given) cannot be written: a folder (``example``: a file
    name to suggest inside it), a parent is a file, its missing folders may not be created, the nearest existing folder
    refuses a new file, or it is one of ``inputs`` under any name. Creates nothing."""
    if not path:
        return
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{flag} {out} is a directory: give a file such as {out / example}")
    folder = _nearest_existing(out.parent)
    if not folder.is_dir():
        raise UsageError(f"{flag} {out}: {folder} is a file, not a folder: choose another path for {out.name}")
    check_new_folders(out.parent, flag, out)
    try:
        probe_folder(folder)
    except OSError as exc:
        raise UsageError(f"{flag} {out} cannot be written: {folder} does not take new files "
                         f"({exc.strerror or exc}): choose a path in a writable folder") from None
    refuse_overwriting_inputs(path, flag, inputs)


def check_output_folder(folder: str | os.PathLike, names: list[str], flag: str = "-o", *,
                        create: bool = False) -> Path:
    """Check the output folder (given with ``flag``) for ``names`` before any work; returns it as a Path. ``create``:
    make it now, else nothing is made. Raises UsageError: it or a parent is a file, one of ``names`` is a folder there,
    its missing folders may not be created, it takes no new file, or with ``create`` it cannot be made."""
    folder = Path(folder)
    blocker = _blocking_file(folder)
    if blocker is not None:
        raise UsageError(f"{flag} {folder}: {blocker} is a file, not a folder: give {flag} a folder for "
                         f"{' and '.join(names) or 'its files'}")
    for name in names:
        if (folder / name).is_dir():
            raise UsageError(f"{folder / name} is a folder: remove it or give another {flag} folder")
    check_new_folders(folder, flag, folder)
    nearest = folder if create else _nearest_existing(folder)
    try:
        if create:
            make_folders(folder)
        probe_folder(nearest)
    except OSError as exc:
        raise UsageError((f"cannot write to output folder {folder}: {exc.strerror or exc}" if create else
                          f"{flag} {folder} cannot be written: {nearest} does not take new files "
                          f"({exc.strerror or exc})") + f": give a writable {flag} folder") from None
    return folder


#: errno -> what to do about a file that cannot be written (the rest: choose a writable folder).
_FIXES = {
    errno.ENOSPC: "free space on that disk or write somewhere else",
    errno.EDQUOT: "free space within your quota or write somewhere else",
    errno.EROFS: "the file system is read-only: choose a path in a writable folder",
    errno.ENAMETOOLONG: "choose a shorter path",
}


def os_error_message(exc: OSError) -> str:
    """One line for an OSError: what failed on which path, the system's reason and what to do."""
    reason = exc.strerror or str(exc) or exc.__class__.__name__
    fix = _FIXES.get(exc.errno, "choose a path in a writable folder")
    verb = "cannot write" if isinstance(exc, OutputWriteError) else "cannot access"
    return f"{verb} {exc.filename or 'a file'}: {reason}: {fix}"
