"""Spark SQL for analysts: one statement, or an interactive prompt (``make sql``).

LAKEHOUSE.md (Who uses it and how, Configuration): results as tables, ``--format csv|json`` for
one statement (JSON: timestamps in ISO-8601 UTC, arrays as arrays, binary as hex), errors as one
message without a traceback. Analysts read; only the pipelines write: a statement is run only when
sqlglot (Spark dialect) reads it as one query or one ``SHOW`` / ``DESCRIBE`` / ``EXPLAIN`` /
``USE`` / temporary view of a query (:func:`check_read_only`). And they read the lake: every table
a statement reads is a table of the lake's catalog or a Delta table under the lake root, never a
file path or another data source (:func:`check_table_name`), since ``serve`` answers clients that
may not read the server's files.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import os
import posixpath
import re
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


LAKE_NAMESPACES = frozenset({"bronze", "silver", "gold", "default"})
"""The databases a statement may name: the lake's layers, and the engine's default database."""
CATALOGS = frozenset({"spark_catalog", "sail"})
"""The catalogs a statement may name: the engine's own, where the lake's tables are named (Apache
Spark's ``spark_catalog``, Sail's ``sail``)."""
TABLE_FUNCTIONS = frozenset({"range", "explode", "explode_outer", "inline", "inline_outer", "posexplode",
                             "posexplode_outer", "json_tuple", "stack"})
"""Table-valued functions that make rows from their arguments; any other (``read_files``,
``IDENTIFIER(...)``, an engine's own) might read something other than the lake, and is refused."""
_GLOB = frozenset("*?[]{}\\")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def outside_error(what: str) -> SqlError:
    """The error for a read of something that is not a table of the lake: ``not run: <what>``."""
    return SqlError(f"not run: {what}; statements here read the lake's tables (bronze.*, silver.*, gold.*) "
                    "and nothing else", code="outside_lake")


def path_in_lake(path: str, lake_root: str | None) -> bool:
    """Whether ``path`` (an absolute local path, ``file:`` URI or a URI of the lake root's scheme)
    names the lake root or something under it, once ``..`` and symbolic links are resolved. Relative
    paths (their meaning depends on the engine's working folder), glob patterns (a pattern can
    climb out of the folder it starts in) and paths when no lake root is known are not."""
    if lake_root is None or not path or _GLOB & set(path):
        return False
    root = lake_root.rstrip("/")
    if "://" in root and not root.startswith("file://"):
        scheme = root.split("://", 1)[0]
        if not path.startswith(f"{scheme}://"):
            return False
        inside = posixpath.normpath(path[len(scheme) + 3:])
        base = posixpath.normpath(root[len(scheme) + 3:])
        return inside == base or inside.startswith(base + "/")
    local = path.removeprefix("file://") if path.startswith("file://") else path.removeprefix("file:")
    if not local.startswith("/"):
        return False
    base = os.path.realpath(root.removeprefix("file://"))
    inside = os.path.realpath(local)
    return os.path.commonpath([inside, base]) == base


def check_table_name(parts: list[str], lake_root: str | None) -> None:
    """Refuse a table name (its parts, ``[catalog, ][database, ]name``) that does not name a table
    of the lake's catalog: a path read such as ``text.`/etc/passwd``` (Spark reads ``<format>.`<path>```
    as a file), a database or catalog the lake does not have. ``delta.`<path>``` is a table of the
    lake when the path lies under the lake root (:func:`path_in_lake`).

    Raises:
        SqlError: code ``outside_lake``, naming the table.
    """
    shown = ".".join(p if _PLAIN_NAME.fullmatch(p) else f"`{p}`" for p in parts)
    if len(parts) > 3:
        raise outside_error(f"{shown} is not a table of the lake")
    if len(parts) == 3:
        if parts[0].lower() not in CATALOGS:
            raise outside_error(f"{shown} names the catalog {parts[0]}, not the lake's")
        parts = parts[1:]
    if len(parts) == 1 and ("/" in parts[0] or ":" in parts[0]):
        raise outside_error(f"{shown} is a path, not a table of the lake")
    if len(parts) == 2:
        space, name = parts
        if space.lower() == "delta" and path_in_lake(name, lake_root):
            return
        if space.lower() not in LAKE_NAMESPACES:
            raise outside_error(f"{shown} is not a table of the lake (a path, or a database other than "
                                f"{', '.join(sorted(LAKE_NAMESPACES))})")


def table_name_parts(identifier: str) -> list[str]:
    """The parts of a table name as Spark writes it (``gold.x``, ``spark_catalog.gold.x``,
    ``text.`/etc/passwd```).

    Raises:
        SqlError: ``not_understood`` when it is not a table name.
    """
    from sqlglot import exp
    from sqlglot.errors import ParseError

    try:
        parsed = exp.to_table(identifier, dialect="spark")
    except (ParseError, ValueError) as exc:
        raise SqlError(f"not run: {identifier!r} is not a table name ({parse_error_text(exc)})", code="not_understood") from None
    return [part.name for part in parsed.parts]


def check_table_function(name: str) -> None:
    """Refuse a table-valued function other than :data:`TABLE_FUNCTIONS`.

    Raises:
        SqlError: code ``outside_lake``.
    """
    if name.lower() not in TABLE_FUNCTIONS:
        raise outside_error(f"the table function {name} may read other than the lake's tables")


def _check_tables(tree: Any, lake_root: str | None, *, skip: Any = None) -> None:
    """Every table a parsed statement reads (:func:`check_table_name`, :func:`check_table_function`),
    but ``skip`` (the name a statement defines, such as a temporary view's)."""
    from sqlglot import exp

    for node in tree.find_all(exp.Table):
        if node is skip:
            continue
        if isinstance(node.this, exp.Func):
            check_table_function(node.this.name if isinstance(node.this, exp.Anonymous) else node.this.sql_name())
            continue
        check_table_name([part.name for part in node.parts], lake_root)


def check_read_only(statement: str, lake_root: str | None = None) -> Any:
    """Refuse anything but one statement that reads the lake: a query (``SELECT``, ``WITH``, set
    operations, ``VALUES``, time travel included), ``SHOW``, ``DESCRIBE``, ``EXPLAIN``, ``USE``, or
    ``CREATE [OR REPLACE] TEMPORARY VIEW <name> AS <query>`` (the session's own name for a query;
    not a global one, and not one over a data source). Every table it reads must be a table of the
    lake (:func:`check_table_name`): no file paths, no other data source, no table function but
    :data:`TABLE_FUNCTIONS`.

    Decided on sqlglot's parse of the statement in the Spark dialect, not on its words.

    Args:
        lake_root: the lake's root, under which ``delta.`<path>``` may read; None: no path at all.

    Returns:
        The statement as sqlglot parsed it.

    Raises:
        SqlError: code ``read_only`` with what the statement is, ``outside_lake`` for a read of
            something other than the lake's tables, or ``not_understood`` when it does not parse
            (it is not run: only what is known to read is).
    """
    from sqlglot import exp

    if not statement.strip().rstrip(";").strip():
        raise SqlError("not run: the statement is empty", code="not_understood")
    tree = _parse_one(statement)
    view = _temporary_view(tree)
    reads = view is not None or isinstance(tree, (exp.Query, exp.Values, exp.Describe, exp.Use)) or (
        isinstance(tree, exp.Command) and str(tree.this).upper() in READ_COMMANDS)
    if not reads:
        what = str(tree.this).upper() if isinstance(tree, exp.Command) else statement.split(None, 1)[0].upper()
        raise read_only_error(f"{what} changes the lake or the session")
    calls = sorted({f.name.lower() for f in tree.find_all(exp.Anonymous)} & JVM_FUNCTIONS)
    if calls:
        raise read_only_error(f"{', '.join(calls)} calls into the engine's JVM")
    if isinstance(tree, exp.Command):
        _check_command(str(tree.this).upper(), str(tree.expression.name if tree.expression else ""), lake_root)
    elif not isinstance(tree, exp.Use):  # USE names a database, which reads nothing
        _check_tables(tree, lake_root, skip=view)
    return tree


_TOKEN = re.compile(r"<Token token_type: [\w.]+, text: (.*?), line: \d+, col: \d+, start: \d+, end: \d+, "
                    r"comments: \[.*?\]>")


def parse_error_text(exc: Exception) -> str:
    """sqlglot's parse error as a user reads it: what was expected, the word found (its token's text,
    not the token's ``repr``) and where, as ``Expected table name but got 'select' (line 1, column 25)``.

    Args:
        exc: a ``sqlglot.errors.ParseError`` (its ``errors`` list), or any exception (its first line).
    """
    errors = getattr(exc, "errors", None) or []
    if not errors:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "a parse error"
        return _TOKEN.sub(lambda m: repr(m.group(1)), first)
    error = errors[0]
    text = _TOKEN.sub(lambda m: repr(m.group(1)), str(error.get("description") or "a parse error"))
    where = f" (line {error['line']}, column {error['col']})" if error.get("line") else ""
    return f"{text}{where}"


def _parse_one(statement: str) -> Any:
    """sqlglot's parse of one statement (Spark dialect).

    Raises:
        SqlError: ``not_understood`` when it does not parse, ``read_only`` for more than one statement.
    """
    import sqlglot
    from sqlglot.errors import ParseError

    try:
        parsed = [s for s in sqlglot.parse(statement, dialect="spark") if s is not None]
    except ParseError as exc:
        raise SqlError(f"not run: the statement could not be read as a query ({parse_error_text(exc)}); only "
                       "queries, SHOW, DESCRIBE and EXPLAIN are run here", code="not_understood") from None
    if len(parsed) != 1:
        raise SqlError(f"not run: one statement at a time ({len(parsed)} given)", code="read_only")
    return parsed[0]


def _temporary_view(tree: Any) -> Any:
    """The name (a sqlglot ``Table``) a ``CREATE [OR REPLACE] TEMPORARY VIEW name [(columns)] AS
    <query>`` defines, else None (any other statement, a global or qualified view, a view over a
    data source: ``USING text OPTIONS (path ...)`` reads a file)."""
    from sqlglot import exp

    if not (isinstance(tree, exp.Create) and str(tree.args.get("kind", "")).upper() == "VIEW"
            and isinstance(tree.expression, exp.Query)):
        return None
    properties = tree.args.get("properties")
    kinds = [type(p) for p in (properties.expressions if properties else [])]
    name = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    if kinds != [exp.TemporaryProperty] or not isinstance(name, exp.Table) or len(name.parts) != 1:
        return None
    return name


def _check_command(command: str, text: str, lake_root: str | None) -> None:
    """The tables a ``SHOW`` or ``EXPLAIN`` (sqlglot keeps both as text) names or reads: an explained
    statement is parsed and checked as a statement is; a ``SHOW`` has its dotted names checked
    (``SHOW COLUMNS IN text.`/etc/passwd``` names a file), a leading catalog allowed."""
    if command == "EXPLAIN":
        words = text.split(None, 1)
        inner = words[1] if words and words[0].upper() in ("EXTENDED", "CODEGEN", "COST", "FORMATTED") and \
            len(words) > 1 else text
        explained = _parse_one(inner)
        if _temporary_view(explained) is None:
            _check_tables(explained, lake_root)
        return
    from sqlglot.dialects.spark import Spark
    from sqlglot.tokenizer_core import TokenType

    tokens = Spark().tokenize(text)
    n = 0
    while n < len(tokens):
        chain = [tokens[n].text]
        while n + 2 < len(tokens) and tokens[n + 1].token_type == TokenType.DOT:
            chain.append(tokens[n + 2].text)
            n += 2
        if len(chain) > 1:
            check_table_name(chain[1:] if chain[0].lower() in CATALOGS else chain, lake_root)
        n += 1


def _described_table(tree: Any) -> str | None:
    """The table a ``DESCRIBE [TABLE] name`` (parsed by :func:`check_read_only`) names, else None
    (a query, a database, a function)."""
    from sqlglot import exp

    if isinstance(tree, exp.Describe) and isinstance(tree.this, exp.Table) and tree.args.get("kind") in (None, "TABLE"):
        return str(tree.this.sql(dialect="spark"))
    return None


def run_statement(spark: SparkSession, statement: str,
                  lake_root: str | None = None) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one statement that reads the lake (:func:`check_read_only`, ``lake_root`` as there) and
    collect its result.

    Returns:
        (column names, rows).

    Raises:
        SqlError: the statement does not only read, or the engine refused it (its message,
            without the traceback).
    """
    tree = check_read_only(statement, lake_root)
    try:
        df = spark.sql(_engine_form(tree, statement.strip().rstrip(";")))
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
        message = text[0] if text else type(exc).__name__
        travelled = _travelled_versions(spark, tree, lake_root)
        raise SqlError(f"{message} ({travelled})" if travelled else message) from None


def _engine_form(tree: Any, statement: str) -> str:
    """``statement`` as every engine takes it: Sail reads ``DESCRIBE <table>`` and ``USE <database>``
    only as ``DESCRIBE TABLE <table>`` and ``USE DATABASE <database>`` (Apache Spark reads both
    forms), so those two are written out; anything else is left as it is."""
    from sqlglot import exp

    plain = {k: v for k, v in tree.args.items() if k not in ("this", "as_json") and v}
    if isinstance(tree, exp.Describe) and not plain and isinstance(tree.this, exp.Table):
        return f"DESCRIBE TABLE {tree.this.sql(dialect='spark')}"
    if isinstance(tree, exp.Use) and not plain and isinstance(tree.this, exp.Table) and len(tree.this.parts) == 1:
        return f"USE DATABASE {tree.this.sql(dialect='spark')}"
    return statement


def _travelled_versions(spark: SparkSession, tree: Any, lake_root: str | None) -> str | None:
    """For a statement that travels in time (``VERSION AS OF``) to tables of the lake: the Delta
    versions each has, in words (an engine's error for a version a table lacks may not say them),
    else None."""
    from sqlglot import exp

    from lakehouse.spark.tables import LAYERS, current_gold_rows, delta_version, is_delta_table, table

    if lake_root is None:
        return None
    said: list[str] = []
    aliases: dict[str, str] | None = None  # gold.<name> -> the table of its current version
    for node in tree.find_all(exp.Table):
        parts = [part.name for part in node.parts]
        if not node.args.get("version") or len(parts) != 2 or parts[0] not in LAYERS:
            continue
        try:
            location = table(lake_root, parts[0], parts[1]).location
            if parts[0] == "gold" and not is_delta_table(location):
                if aliases is None:
                    aliases = {r["name"]: r["table_name"] for r in current_gold_rows(spark, lake_root)
                               if r["is_current"]}
                if parts[1] in aliases:
                    location = table(lake_root, "gold", aliases[parts[1]]).location
            if is_delta_table(location):
                said.append(f"{'.'.join(parts)} has versions 0 to {delta_version(location)}")
        except Exception:  # noqa: BLE001 - the versions are a courtesy; the engine's error stands
            continue
    if not said:
        return None
    return "; ".join(said) + "; `lakehouse history <name>` lists what each version of a gold table holds"


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


def shell(spark: SparkSession, console: Console, *, read: Callable[[str], str] | None = None,
          history: Path | None = None, lake_root: str | None = None) -> int:
    """The interactive prompt: statements end with ``;``, ``quit`` or Ctrl-D leaves; Ctrl-C clears
    the line being typed, or cancels the running statement, and returns to the prompt.

    Args:
        read: reads one line after showing a prompt, raising ``EOFError`` at the end of input and
            ``KeyboardInterrupt`` on Ctrl-C (None: :func:`line_reader`'s; tests pass their own).
        history: the history file, a statement line per line (None: no history).
        lake_root: as for :func:`run_statement`.

    Returns:
        The number of statements that failed.
    """
    if read is None:
        read = line_reader(history)
    elif history is not None:
        _load_history(history)
    failures = 0
    console.print("Spark SQL over the lake: bronze.*, silver.*, gold.*; end statements with ';', quit with "
                  "Ctrl-D or 'quit'. Try: SHOW TABLES IN gold;")
    buffer: list[str] = []
    while True:
        try:
            try:
                line = read("sql> " if not buffer else "...> ")
            except EOFError:
                console.print()
                break
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
                columns, rows = run_statement(spark, text, lake_root)
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
        except KeyboardInterrupt:  # at the prompt, or between it and the statement: the line is dropped
            console.print()
            buffer = []
    if history is not None and read is input:
        _save_history(history)
    return failures


def line_reader(history: Path | None) -> Callable[[str], str]:
    """How the prompt reads a line: on a terminal, prompt_toolkit's prompt, which reads Ctrl-C as
    the key it is (``KeyboardInterrupt``) and keeps ``history``; else ``input`` (its history by
    readline).

    Not readline on a terminal: CPython's readline loop (``Modules/readline.c``) writes the prompt,
    then waits on the terminal with no timeout and looks for signals only when that wait is
    interrupted; a Ctrl-C that lands between the two is taken by the interpreter and then waits for
    the next key, so on a loaded machine the prompt sometimes did not come back after a Ctrl-C.
    """
    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        if history is not None:
            _load_history(history)
        return input
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import History, InMemoryHistory

    class LineHistory(History):
        """A statement line per line of ``history``, as readline kept it (the last
        :data:`HISTORY_LINES` read)."""

        def load_history_strings(self) -> Iterable[str]:
            assert history is not None
            try:
                lines = history.read_text(errors="replace").splitlines()
            except OSError:
                return []
            return reversed([line for line in lines[-HISTORY_LINES:] if line.strip()])

        def store_string(self, string: str) -> None:
            assert history is not None
            append_history(history, string)

    session: PromptSession[str] = PromptSession(history=LineHistory() if history is not None else InMemoryHistory())
    return session.prompt


def _interrupt(spark: SparkSession) -> None:
    """Cancel what the session runs (Ctrl-C at the prompt), so the next statement does not wait
    behind it; an engine that cannot is left to finish on its own."""
    with suppress(Exception):
        spark.interruptAll()


HISTORY_LINES = 1000
"""Statements the prompt's history keeps (readline's ``set_history_length`` on the other path)."""


def append_history(path: Path, statement: str) -> None:
    """Append ``statement`` to the history file ``path`` as one line; once the file holds twice
    :data:`HISTORY_LINES` lines, write it again (to a file beside it, then renamed over it) with
    the last :data:`HISTORY_LINES`, so that it does not grow without end. A history that cannot
    be written is left as it is: the prompt goes on."""
    with suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(statement.replace("\n", " ") + "\n")
        # a line is at least two bytes: a file this small holds too few lines to count them
        if path.stat().st_size < 4 * HISTORY_LINES:
            return
        lines = path.read_text(errors="replace").splitlines()
        if len(lines) >= 2 * HISTORY_LINES:
            kept = path.with_name(f".{path.name}.{os.getpid()}")
            kept.write_text("".join(f"{line}\n" for line in lines[-HISTORY_LINES:]))
            os.replace(kept, path)


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
        readline.set_history_length(HISTORY_LINES)
        readline.write_history_file(str(path))
    except (ImportError, OSError):
        pass


def history_file() -> Path:
    """Where the prompt keeps its history (``$LAKEHOUSE_SQL_HISTORY`` or ``~/.lakehouse_sql_history``)."""
    return Path(os.environ.get("LAKEHOUSE_SQL_HISTORY", Path.home() / ".lakehouse_sql_history"))
