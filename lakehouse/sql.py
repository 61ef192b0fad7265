"""Spark SQL for analysts: one statement, or an interactive prompt (``make sql``).

LAKEHOUSE.md (Who uses it and how, Configuration): results as tables, ``--format csv|json`` for
one statement (JSON: timestamps in ISO-8601 UTC, arrays as arrays, binary as hex), errors as one
message without a traceback. Analysts read; only the pipelines write: a statement is run only when
sqlglot (Spark dialect) reads it as one query or one ``SHOW`` / ``DESCRIBE`` / ``EXPLAIN`` /
``USE`` (:func:`check_read_only`).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
from collections.abc import Callable, Iterable
from contextlib import suppress
from datetime import date, datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.table import Table

from lakehouse.errors import LakehouseError, SqlError

logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "falling back to a command" notes are not for users

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Format = Literal["table", "csv", "json"]
MAX_TABLE_ROWS = 1000


READ_COMMANDS = frozenset({"SHOW", "EXPLAIN"})
"""Statements sqlglot keeps as a bare command that only read."""
JVM_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
"""Apache Spark's SQL functions that call any static Java method: not run in a statement that reads."""


def read_only_error(what: str) -> SqlError:
    """The error for a statement or request that would not only read: ``not run: <what>``, and why."""
    return SqlError(f"not run: {what}, and analysts read; only the pipelines write (make ingest, make materialize, "
                    "make revert)", code="read_only")


def check_read_only(statement: str) -> Any:
    """Refuse anything but one statement that reads: a query (``SELECT``, ``WITH``, set operations,
    ``VALUES``, time travel included), ``SHOW``, ``DESCRIBE``, ``EXPLAIN`` or ``USE``.

    Decided on sqlglot's parse of the statement in the Spark dialect, not on its words.

    Returns:
        The statement as sqlglot parsed it.

    Raises:
        SqlError: code ``read_only`` with what the statement is, or ``not_understood`` when it
            does not parse (it is not run: only what is known to read is).
    """
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        parsed = [s for s in sqlglot.parse(statement, dialect="spark") if s is not None]
    except ParseError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "a parse error"
        raise SqlError(f"not run: the statement could not be read as a query ({first}); only queries, SHOW, "
                       "DESCRIBE and EXPLAIN are run here", code="not_understood") from None
    if len(parsed) != 1:
        raise SqlError(f"not run: one statement at a time ({len(parsed)} given)", code="read_only")
    tree = parsed[0]
    reads = isinstance(tree, (exp.Query, exp.Values, exp.Describe, exp.Use)) or (
        isinstance(tree, exp.Command) and str(tree.this).upper() in READ_COMMANDS)
    if not reads:
        what = str(tree.this).upper() if isinstance(tree, exp.Command) else tree.key.upper()
        raise read_only_error(f"{what} changes the lake or the session")
    calls = sorted({f.name.lower() for f in tree.find_all(exp.Anonymous)} & JVM_FUNCTIONS)
    if calls:
        raise read_only_error(f"{', '.join(calls)} calls into the engine's JVM")
    return tree


def _described_table(tree: Any) -> str | None:
    """The table a ``DESCRIBE [TABLE] name`` (parsed by :func:`check_read_only`) names, else None
    (a query, a database, a function)."""
    from sqlglot import exp

    if isinstance(tree, exp.Describe) and isinstance(tree.this, exp.Table) and tree.args.get("kind") in (None, "TABLE"):
        return str(tree.this.sql(dialect="spark"))
    return None


def run_statement(spark: SparkSession, statement: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one statement that reads (:func:`check_read_only`) and collect its result.

    Returns:
        (column names, rows).

    Raises:
        SqlError: the statement does not only read, or the engine refused it (its message,
            without the traceback).
    """
    tree = check_read_only(statement)
    try:
        df = spark.sql(statement.strip().rstrip(";"))
        rows = df.collect()
        described = _described_table(tree) if not rows else None
        if described is not None:  # Sail names some tables without their columns (docs/engines.md)
            fields = spark.table(described).schema.fields
            return ["col_name", "data_type", "comment"], [(f.name, f.dataType.simpleString(), None) for f in fields]
        return list(df.columns), [tuple(r) for r in rows]
    except LakehouseError:
        raise
    except Exception as exc:  # the engine's errors come in many classes; keep their message only
        text = str(exc).strip().splitlines()
        raise SqlError(text[0] if text else type(exc).__name__) from None


def plain(value: Any) -> Any:
    """A value as JSON shows it: ISO-8601 UTC timestamps, hex binary, lists and dicts kept."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return plain(value.asDict())
    return value


def render(columns: list[str], rows: Iterable[tuple[Any, ...]], fmt: Format) -> str | Table:
    """The result as CSV text, JSON lines (one object per row), or a rich table.

    Raises:
        SqlError: code ``duplicate_columns`` for JSON of a result with two columns of one name (an
            object keeps one key: a value would be lost); the message says to alias them.
    """
    if fmt == "json":
        repeated = sorted({c for c in columns if columns.count(c) > 1})
        if repeated:
            raise SqlError(f"the result has more than one column named {', '.join(repeated)}: a JSON object keeps "
                           f"one key each; give them distinct names (... AS {repeated[0]}_2), or use --format csv",
                           code="duplicate_columns")
        return "\n".join(json.dumps(dict(zip(columns, (plain(v) for v in row), strict=True)), ensure_ascii=False)
                         for row in rows)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else json.dumps(plain(v)) if isinstance(v, (list, dict)) else plain(v)
                             for v in row])
        return out.getvalue().rstrip("\n")
    table = Table(*columns, show_lines=False)
    for n, row in enumerate(rows):
        if n == MAX_TABLE_ROWS:
            table.caption = f"first {MAX_TABLE_ROWS} rows shown"
            break
        table.add_row(*("NULL" if v is None else str(plain(v)) for v in row))
    return table


def shell(spark: SparkSession, console: Console, *, read: Callable[[str], str] = input,
          history: Path | None = None) -> int:
    """The interactive prompt: statements end with ``;``, ``quit`` or Ctrl-D leaves; Ctrl-C clears
    the line being typed, or cancels the running statement, and returns to the prompt.

    Args:
        read: reads one line after showing a prompt (``input``; tests pass their own).
        history: the readline history file (None: no history).

    Returns:
        The number of statements that failed.
    """
    if history is not None:
        _load_history(history)
    failures = 0
    console.print("Spark SQL over the lake: bronze.*, silver.*, gold.*; end statements with ';', quit with "
                  "Ctrl-D or 'quit'. Try: SHOW TABLES IN gold;")
    buffer: list[str] = []
    while True:
        try:
            line = read("sql> " if not buffer else "...> ")
        except EOFError:
            console.print()
            break
        except KeyboardInterrupt:
            console.print()
            buffer = []
            continue
        if not buffer and line.strip().lower() in ("quit", "exit", "\\q"):
            break
        buffer.append(line)
        text = "\n".join(buffer).strip()
        if not text:
            buffer = []
            continue
        if not text.endswith(";"):
            continue
        buffer = []
        try:
            columns, rows = run_statement(spark, text)
        except SqlError as exc:
            failures += 1
            console.print(f"[red]Error:[/] {exc}", soft_wrap=True)
            continue
        except KeyboardInterrupt:
            _interrupt(spark)
            console.print("\ncancelled")
            continue
        if columns:
            console.print(render(columns, rows, "table"))
        console.print(f"{len(rows)} row(s)")
    if history is not None:
        _save_history(history)
    return failures


def _interrupt(spark: SparkSession) -> None:
    """Cancel what the session runs (Ctrl-C at the prompt), so the next statement does not wait
    behind it; an engine that cannot is left to finish on its own."""
    with suppress(Exception):
        spark.interruptAll()


def _load_history(path: Path) -> None:
    try:
        import readline

        if path.exists():
            readline.read_history_file(str(path))
    except (ImportError, OSError):
        pass


def _save_history(path: Path) -> None:
    try:
        import readline

        path.parent.mkdir(parents=True, exist_ok=True)
        readline.set_history_length(1000)
        readline.write_history_file(str(path))
    except (ImportError, OSError):
        pass


def history_file() -> Path:
    """Where the prompt keeps its history (``$LAKEHOUSE_SQL_HISTORY`` or ``~/.lakehouse_sql_history``)."""
    return Path(os.environ.get("LAKEHOUSE_SQL_HISTORY", Path.home() / ".lakehouse_sql_history"))
