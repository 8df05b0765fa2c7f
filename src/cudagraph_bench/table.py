"""Aligned terminal tables and GitHub markdown tables from rows of dicts (no torch).

Used by ``gate``, ``compare``, ``baseline`` and ``report``::

    cols = [Column("model", "model"), Column("median_ms", "median ms", ".3f")]
    print(render_table(cols, [{"model": "gpt2", "median_ms": 1.234}]))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

#: What a missing value (None or NaN) is shown as.
MISSING = "-"


@dataclass(frozen=True)
class Column:
    """One column: ``key`` into each row dict, ``title`` shown in the header, ``fmt`` a format spec
    (``".2f"``, ``"+.1f"``) or a callable ``value -> str``, ``align`` ``"left"``/``"right"``
    (default: right when ``fmt`` is a format spec, i.e. for numbers)."""

    key: str
    title: str
    fmt: str | Callable[[Any], str] | None = None
    align: str | None = None

    def format(self, value: Any) -> str:
        if value is None or (isinstance(value, float) and value != value):
            return MISSING
        if callable(self.fmt):
            return self.fmt(value)
        if self.fmt:
            return format(value, self.fmt)
        return str(value)

    @property
    def right(self) -> bool:
        return self.align == "right" if self.align else isinstance(self.fmt, str)


def _as_columns(columns: Sequence[Column | tuple | str]) -> list[Column]:
    out = []
    for c in columns:
        if isinstance(c, Column):
            out.append(c)
        elif isinstance(c, str):
            out.append(Column(c, c))
        else:
            out.append(Column(*c))
    return out


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_table(columns: Sequence[Column | tuple | str], rows: Iterable[dict], fmt: str = "text") -> str:
    """Render ``rows`` (dicts; missing keys show as ``-``) as an aligned text table (``fmt="text"``,
    header, dashes, one line per row) or a GitHub markdown table (``fmt="markdown"``, ``|`` escaped).

    ``columns`` items are :class:`Column`, ``(key, title[, fmt[, align]])`` tuples or plain keys.
    Returns the table without a trailing newline. Raises ``ValueError`` for an unknown ``fmt``.
    """
    cols = _as_columns(columns)
    cells = [[c.format(row.get(c.key)) for c in cols] for row in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(_md_cell(c.title) for c in cols) + " |",
                 "|" + "|".join("---:" if c.right else ":---" for c in cols) + "|"]
        lines += ["| " + " | ".join(_md_cell(v) for v in r) + " |" for r in cells]
        return "\n".join(lines)
    if fmt != "text":
        raise ValueError(f"unknown table format {fmt!r}: use 'text' or 'markdown'")
    widths = [max([len(c.title)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if c.right else v.ljust(w) for v, w, c in zip(values, widths, cols)]
        return "  ".join(parts).rstrip()

    return "\n".join([line([c.title for c in cols]), line(["-" * w for w in widths])] + [line(r) for r in cells])
