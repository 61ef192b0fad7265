"""Result rendering of ``lakehouse sql`` and the prompt loop (LAKEHOUSE.md, Configuration)."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from typing import Any

from rich.console import Console

from lakehouse.sql import SqlError, plain, render, shell


def test_json_shows_iso_utc_timestamps_arrays_and_hex_binary() -> None:
    rows = [(datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc), [1, 2], b"\x00\xff", None)]
    out = render(["t", "a", "b", "n"], rows, "json")
    assert isinstance(out, str)
    assert json.loads(out) == {"t": "2024-01-02T03:04:05Z", "a": [1, 2], "b": "00ff", "n": None}
    # naive datetimes are the session's UTC
    assert plain(datetime(2024, 1, 2)) == "2024-01-02T00:00:00Z"


def test_csv_has_a_header_and_quotes_what_needs_it() -> None:
    out = render(["name", "tags"], [("a,b", ["x"]), (None, None)], "csv")
    assert out == 'name,tags\n"a,b","[""x""]"\n,'


class FakeSpark:
    """Stands in for a session: knows one table, refuses the rest as the engine would."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def sql(self, statement: str) -> Any:
        self.statements.append(statement)
        if "missing" in statement:
            raise RuntimeError("Table or view not found: missing\n  at some.Frame(...)")
        return FakeFrame()


class FakeFrame:
    columns = ["x"]

    def collect(self) -> list[tuple[int]]:
        return [(1,)]


def test_the_prompt_runs_multi_line_statements_and_reports_errors_without_traceback() -> None:
    lines = iter(["SELECT 1", "  FROM t;", "", "select * from missing;", "quit"])
    spark = FakeSpark()
    buffer = io.StringIO()
    failures = shell(spark, Console(file=buffer, width=100), read=lambda _prompt: next(lines))  # type: ignore[arg-type]
    assert failures == 1
    assert spark.statements == ["SELECT 1\n  FROM t", "select * from missing"]
    text = buffer.getvalue()
    assert "Error: Table or view not found: missing" in text and "some.Frame" not in text
    assert "1 row(s)" in text


def test_sql_error_keeps_the_first_line_only() -> None:
    from lakehouse.sql import run_statement

    try:
        run_statement(FakeSpark(), "select * from missing")  # type: ignore[arg-type]
    except SqlError as exc:
        assert str(exc) == "Table or view not found: missing" and exc.code == "sql"
    else:
        raise AssertionError("no error")
