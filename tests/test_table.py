"""Terminal and markdown tables."""

import pytest

from cudagraph_bench.table import Column, render_table

pytestmark = pytest.mark.transformers_free

COLS = [Column("model", "model"), Column("median_ms", "median ms", ".2f"), Column("note", "note")]
ROWS = [{"model": "gpt2", "median_ms": 1.2345, "note": "a|b"},
        {"model": "tinyllama-1.1b", "median_ms": 12.5, "note": None}]


def test_text_table_is_aligned_literal():
    assert render_table(COLS, ROWS).splitlines() == [
        "model           median ms  note",
        "--------------  ---------  ----",
        "gpt2                 1.23  a|b",
        "tinyllama-1.1b      12.50  -",
    ]


def test_markdown_table_escapes_pipes_and_aligns_numbers_right():
    assert render_table(COLS, ROWS, fmt="markdown").splitlines() == [
        "| model | median ms | note |",
        "|:---|---:|:---|",
        "| gpt2 | 1.23 | a\\|b |",
        "| tinyllama-1.1b | 12.50 | - |",
    ]


def test_tuple_and_key_columns_missing_keys_nan_and_callable_format():
    cols = ["name", ("value", "value %", "+.1f"), Column("flag", "flag", lambda v: "yes" if v else "no")]
    text = render_table(cols, [{"name": "x", "value": float("nan"), "flag": True}, {"name": "y", "value": -2.0}])
    lines = text.splitlines()
    assert lines[0] == "name  value %  flag"
    assert lines[2] == "x           -  yes"
    assert lines[3] == "y        -2.0  -"


def test_empty_rows_still_give_the_header_and_unknown_format_raises():
    assert render_table(COLS, []).splitlines()[0] == "model  median ms  note"
    with pytest.raises(ValueError, match="markdown"):
        render_table(COLS, ROWS, fmt="html")
