"""Aligned text and GitHub markdown tables from rows of dicts, and the wording of the commands' verdict lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

#: What a missing value (None or NaN) is shown as.
MISSING = "-"


@dataclass(frozen=True)
class Column:
    """``key`` of a row, header ``title``, ``fmt`` (spec or ``value -> str``), ``align`` (spec default: right)."""

    key: str
    title: str
    fmt: str | Callable[[Any], str] | None = None
    align: str | None = None

    def format(self, value: Any) -> str:
        if value is None or (isinstance(value, float) and value != value):
            return MISSING
        if callable(self.fmt):
            return self.fmt(value)
        return format(value, self.fmt) if self.fmt else str(value)

    @property
    def right(self) -> bool:
        return self.align == "right" if self.align else isinstance(self.fmt, str)


def _md_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_table(columns: Sequence[Column | tuple | str], rows: Iterable[dict], fmt: str = "text") -> str:
    """``rows`` (missing keys: ``-``) as aligned text (``fmt="text"``) or GitHub markdown (``|`` escaped), without a
    trailing newline; ``columns``: Column, ``(key, title[, fmt[, align]])`` or keys. ValueError for an unknown
    ``fmt``."""
    cols = [c if isinstance(c, Column) else Column(c, c) if isinstance(c, str) else Column(*c) for c in columns]
    cells = [[c.format(row.get(c.key)) for c in cols] for row in rows]
    if fmt == "markdown":
        lines = ["| " + " | ".join(_md_cell(v) for v in r) + " |" for r in [[c.title for c in cols], *cells]]
        lines.insert(1, "|" + "|".join("---:" if c.right else ":---" for c in cols) + "|")
        return "\n".join(lines)
    if fmt != "text":
        raise ValueError(f"unknown table format {fmt!r}: use 'text' or 'markdown'")
    widths = [max([len(c.title)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if c.right else v.ljust(w) for v, w, c in zip(values, widths, cols)]
        return "  ".join(parts).rstrip()

    return "\n".join([line([c.title for c in cols]), line(["-" * w for w in widths])] + [line(r) for r in cells])


#: Items named in a summary line before "..." (the table shows every one).
SHOWN_ITEMS = 3


def plural(n: int, noun: str) -> str:
    """``"1 case"``, ``"2 cases"``."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def first_items(items: Sequence[str], shown: int = SHOWN_ITEMS) -> str:
    """The first ``shown`` items joined with ", ", then ", ..." when there are more."""
    return ", ".join(items[:shown]) + (", ..." if len(items) > shown else "")


def listed(items: Sequence[str]) -> str:
    """``"a"``, ``"a and b"``, ``"a, b and c"``: every item, as a sentence lists them."""
    return " and ".join(filter(None, [", ".join(items[:-1]), *items[-1:]]))


def verdict_line(command: str, passed: bool, parts: Iterable[str]) -> str:
    """E.g. ``"gate PASS: 3 gated cases ...; ..."`` (parts joined by "; ")."""
    return f"{command} {'PASS' if passed else 'FAIL'}: " + "; ".join(parts)


def verdict_heading(command: str, passed: bool) -> str:
    """E.g. ``"## cudagraph-bench gate: PASS"``."""
    return f"## cudagraph-bench {command}: {'PASS' if passed else 'FAIL'}"
