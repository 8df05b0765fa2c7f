"""Writing output files and checking output paths: the one place every command writes through (no torch).

Every file is written atomically: its bytes go to a hidden temporary file in the target's folder, which
then replaces the target with ``os.replace``. An error (a failing serializer, a full disk) leaves the old
file as it was and no temporary file behind; a reader never sees a half-written file. Several files can
be written all or nothing (:func:`write_files_atomic`).

Output paths are checked before any work is done (a benchmark sweep can take many minutes), each problem
as a one-line :class:`~cudagraph_bench.errors.UsageError` naming the fix (the CLI exits 2):

- an output that is one of the command's inputs (:func:`refuse_overwriting_inputs`);
- an output file that is a folder, under a parent that is a file, or in a folder that takes no new files
  (:func:`check_output_file`);
- an output folder that is a file or under one, holding a folder where an output file goes, or not
  writable (:func:`check_output_folder`).

Missing parent folders are not an error: they are created on write.
"""

from __future__ import annotations

import errno
import io
import os
import stat
import tempfile
from pathlib import Path

from cudagraph_bench.errors import OutputWriteError, UsageError

#: Permissions of every written file (temporary files start as 0600).
FILE_MODE = 0o644


def _blocking_file(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is a file (no folder can be made under it), else None."""
    for folder in path.parents:
        if folder.exists():
            return None if folder.is_dir() else folder
    return None


def _nearest_existing_folder(path: Path) -> Path:
    """The nearest ancestor of ``path`` that exists (the current folder for a relative path)."""
    return next(p for p in path.parents if p.exists() or p == Path(p.anchor or "."))


def write_files_atomic(files: dict[str | os.PathLike, bytes | str]) -> None:
    """Write ``{path: content}`` all or nothing; ``str`` content is written as UTF-8.

    Each content goes to a temporary file in its target's folder (missing folders are created); only
    when every one is written are they moved into place with ``os.replace``, in the given order.

    A target that exists and is neither a regular file nor a folder (``/dev/stdout``, a named pipe) is
    written through, after the files, never replaced.

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
    path = next(iter(targets), None)
    try:
        for path, data in targets.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            temps.append((tmp, path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.chmod(tmp, FILE_MODE)
        for tmp, path in temps:
            os.replace(tmp, path)
        for path, data in streams.items():      # never replaced: written through, after the files
            with open(path, "wb") as fh:
                fh.write(data)
    except BaseException as exc:
        for tmp, _ in temps:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and not isinstance(exc, OutputWriteError) and path is not None:
            # name the file the user asked for, never the hidden temporary file (or folder) it failed on
            raise OutputWriteError(exc.errno, exc.strerror or str(exc), str(path)) from exc
        raise


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


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; errors as :func:`write_files_atomic`."""
    write_files_atomic({path: text})


def write_bytes_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; errors as :func:`write_files_atomic`."""
    write_files_atomic({path: data})


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


def _probe(folder: Path) -> None:
    """Create and remove a hidden temporary file in ``folder`` (``os.access`` says yes to root even on
    ``/proc``). Raises OSError when the folder takes no new file."""
    fd, probe = tempfile.mkstemp(dir=folder, prefix=".cudagraph-bench.", suffix=".probe")
    os.close(fd)
    os.unlink(probe)


def check_output_file(path: str | os.PathLike, flag: str, example: str) -> None:
    """Raise :class:`UsageError` (one line, before anything is printed or written) when ``path`` (given
    with ``flag``) cannot be written by :func:`write_text_atomic`: it is a folder (``example``: a file
    name to suggest inside it), a parent is a file, or the nearest existing folder (missing ones are
    created on write) refuses a new file. Creates nothing."""
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"{flag} {out} is a directory: give a file such as {out / example}")
    folder = _nearest_existing_folder(out)
    if not folder.is_dir():
        raise UsageError(f"{flag} {out}: {folder} is a file, not a folder: choose another path for {out.name}")
    try:
        _probe(folder)
    except OSError as exc:
        raise UsageError(f"{flag} {out} cannot be written: {folder} does not take new files "
                         f"({exc.strerror or exc}): choose a path in a writable folder") from None


def check_output_folder(folder: str | os.PathLike, names: list[str], flag: str = "-o", *,
                        create: bool = False) -> Path:
    """Check the output folder ``folder`` (given with ``flag``) that the files ``names`` will be written
    into, before any work is done; returns it as a Path.

    Raises :class:`UsageError` (one line) when ``folder`` or a parent of it is a file, when one of
    ``names`` is a folder there, or, with ``create``, when the folder cannot be created or takes no new
    file (``create`` makes the folder, missing parents included, and probes it). Without ``create``
    nothing is made: a missing folder is created on write.
    """
    folder = Path(folder)
    blocker = folder if folder.exists() and not folder.is_dir() else _blocking_file(folder)
    if blocker is not None:
        raise UsageError(f"{flag} {folder}: {blocker} is a file, not a folder: give {flag} a folder for "
                         f"{' and '.join(names)}")
    for name in names:
        if (folder / name).is_dir():
            raise UsageError(f"{folder / name} is a folder: remove it or give another {flag} folder")
    if create:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _probe(folder)
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
