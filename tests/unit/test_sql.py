"""Result rendering of ``lakehouse sql``, the prompt loop, and what analysts may run (LAKEHOUSE.md, Configuration)."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from lakehouse.errors import SqlError
from lakehouse.sql import plain, render, shell


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


@pytest.mark.parametrize("statement", [
    "UPDATE gold.profile SET name = 'X'",
    "DELETE FROM gold.profile",
    "INSERT INTO bronze.entries SELECT * FROM bronze.entries",
    "MERGE INTO gold.a t USING gold.b s ON t.x = s.x WHEN MATCHED THEN DELETE",
    "CREATE TABLE gold.copy AS SELECT * FROM gold.profile",
    "DROP TABLE gold.profile",
    "ALTER TABLE gold.profile ADD COLUMN y INT",
    "TRUNCATE TABLE gold.profile",
    "VACUUM gold.profile",
    "RESTORE TABLE gold.profile TO VERSION AS OF 1",
    "SET spark.sql.ansi.enabled = false",
    "SELECT 1; DROP TABLE gold.profile",
    "SELECT reflect('java.lang.System', 'getenv', 'HOME')",
    "SELECT name FROM gold.profile WHERE java_method('java.lang.Math', 'abs', -1) = 1",
])
def test_statements_that_change_the_lake_or_the_session_are_not_run(statement: str) -> None:
    """Issue: UPDATE, DELETE and INSERT through `lakehouse sql` changed gold and bronze for good."""
    from lakehouse.sql import run_statement

    spark = FakeSpark()
    with pytest.raises(SqlError) as excinfo:
        run_statement(spark, statement)  # type: ignore[arg-type]
    assert excinfo.value.code in ("read_only", "not_understood") and "not run" in str(excinfo.value)
    assert spark.statements == []


@pytest.mark.parametrize("statement", [
    "SELECT * FROM gold.profile WHERE name = 'x'",
    "WITH a AS (SELECT 1 AS x) SELECT x FROM a",
    "SELECT 1 UNION ALL SELECT 2",
    "SELECT subject FROM gold.slothmail_v2 VERSION AS OF 3",
    "SHOW TABLES IN gold",
    "DESCRIBE TABLE gold.profile",
    "EXPLAIN SELECT * FROM gold.profile",
    "SELECT 1;",
])
def test_queries_and_statements_that_read_are_run(statement: str) -> None:
    from lakehouse.sql import run_statement

    spark = FakeSpark()
    run_statement(spark, statement)  # type: ignore[arg-type]
    assert spark.statements == [statement.rstrip(";")]


def test_json_refuses_repeated_column_names_instead_of_dropping_one() -> None:
    """Issue: SELECT s.instance_id, p.instance_id ... gave one key in JSON, both in CSV."""
    columns, rows = ["instance_id", "instance_id"], [("a", "b")]
    with pytest.raises(SqlError) as excinfo:
        render(columns, rows, "json")
    assert excinfo.value.code == "duplicate_columns" and "AS instance_id_2" in str(excinfo.value)
    assert render(columns, rows, "csv") == "instance_id,instance_id\na,b"


def test_the_gateway_reads_every_part_of_a_spark_connect_request() -> None:
    """``lakehouse serve``'s gateway: a write nested anywhere in a plan is found, reads pass."""
    from pyspark.sql.connect.proto import base_pb2, commands_pb2, expressions_pb2, relations_pb2

    from lakehouse.gateway import check_request

    def execute(plan: base_pb2.Plan) -> bytes:
        return base_pb2.ExecutePlanRequest(session_id="s", plan=plan).SerializeToString()

    def sql(query: str) -> relations_pb2.Relation:
        return relations_pb2.Relation(sql=relations_pb2.SQL(query=query))

    reads = base_pb2.Plan(root=relations_pb2.Relation(limit=relations_pb2.Limit(input=sql("SELECT 1"), limit=1)))
    check_request("ExecutePlan", execute(reads))
    check_request("Config", b"not even parsed")
    nested = base_pb2.Plan(root=relations_pb2.Relation(
        join=relations_pb2.Join(left=sql("SELECT 1"), right=sql("DELETE FROM gold.profile"))))
    write = base_pb2.Plan(command=commands_pb2.Command(write_operation=commands_pb2.WriteOperation(
        input=sql("SELECT 1"), path="/lake/bronze/entries")))
    udf = base_pb2.Plan(root=relations_pb2.Relation(project=relations_pb2.Project(
        input=sql("SELECT 1"), expressions=[expressions_pb2.Expression(
            common_inline_user_defined_function=expressions_pb2.CommonInlineUserDefinedFunction(function_name="f"))])))
    expression = base_pb2.Plan(root=relations_pb2.Relation(project=relations_pb2.Project(
        input=sql("SELECT 1"), expressions=[expressions_pb2.Expression(
            expression_string=expressions_pb2.Expression.ExpressionString(expression="reflect('a', 'b')"))])))
    for plan in (nested, write, udf, expression):
        with pytest.raises(SqlError) as excinfo:
            check_request("ExecutePlan", execute(plan))
        assert excinfo.value.code == "read_only" and "not run" in str(excinfo.value)
    analysed = base_pb2.AnalyzePlanRequest(session_id="s", schema=base_pb2.AnalyzePlanRequest.Schema(
        plan=base_pb2.Plan(root=sql("INSERT INTO bronze.entries SELECT * FROM bronze.entries"))))
    with pytest.raises(SqlError):
        check_request("AnalyzePlan", analysed.SerializeToString())
    with pytest.raises(SqlError, match="could not be read"):
        check_request("ExecutePlan", b"\xff\xff\xff")


LAKE = "/lake/root"


@pytest.mark.parametrize("statement", [
    "SELECT * FROM text.`/etc/passwd`",
    "SELECT count(*) FROM json.`/home/me/.keys/alice.key.json`",
    "SELECT * FROM gold.profile WHERE name IN (SELECT value FROM csv.`/etc/hosts`)",
    "WITH a AS (SELECT * FROM parquet.`file:/tmp/x`) SELECT * FROM a",
    "SELECT * FROM delta.`/elsewhere/table`",
    "SELECT * FROM delta.`/lake/root/../elsewhere`",
    "SELECT * FROM delta.`/lake/root/{..}/elsewhere`",
    "SELECT * FROM delta.`lake/root/gold/x`",
    "SELECT * FROM `/etc/passwd`",
    "SELECT * FROM other_catalog.gold.profile",
    "SELECT * FROM read_files('/etc/passwd')",
    "SELECT * FROM IDENTIFIER('text.`/etc/passwd`')",
    "DESCRIBE text.`/etc/passwd`",
    "SHOW COLUMNS IN text.`/etc/passwd`",
    "EXPLAIN SELECT * FROM text.`/etc/passwd`",
    "CREATE TEMPORARY VIEW v AS SELECT * FROM text.`/etc/passwd`",
])
def test_statements_that_read_other_than_the_lake_are_not_run(statement: str) -> None:
    """Issue: a client of `serve` read /etc/passwd and a key's secret through SQL on paths."""
    from lakehouse.sql import run_statement

    spark = FakeSpark()
    with pytest.raises(SqlError) as excinfo:
        run_statement(spark, statement, LAKE)  # type: ignore[arg-type]
    assert excinfo.value.code == "outside_lake" and "not run" in str(excinfo.value)
    assert spark.statements == []


@pytest.mark.parametrize("statement", [
    "CREATE GLOBAL TEMPORARY VIEW v AS SELECT 1",
    "CREATE TEMPORARY VIEW v USING text OPTIONS (path '/etc/passwd')",
    "CREATE VIEW v AS SELECT 1",
    "CREATE TEMPORARY VIEW gold.v AS SELECT 1",
])
def test_views_other_than_a_sessions_temporary_view_of_a_query_are_not_made(statement: str) -> None:
    from lakehouse.sql import run_statement

    spark = FakeSpark()
    with pytest.raises(SqlError) as excinfo:
        run_statement(spark, statement, LAKE)  # type: ignore[arg-type]
    assert excinfo.value.code == "read_only"
    assert spark.statements == []


@pytest.mark.parametrize("statement", [
    "SELECT * FROM delta.`/lake/root/gold/profile`",
    "SELECT * FROM delta.`file:/lake/root/gold/profile` VERSION AS OF 2",
    "SELECT * FROM spark_catalog.gold.profile",
    "SELECT * FROM range(3) JOIN gold.profile",
    "SELECT * FROM explode(array(1, 2))",
    "CREATE OR REPLACE TEMPORARY VIEW recent AS SELECT * FROM gold.profile",
    "CREATE TEMP VIEW v (a) AS SELECT 1",
    "SHOW TABLES IN spark_catalog.gold",
    "EXPLAIN EXTENDED SELECT p.name FROM gold.profile p",
    "USE DATABASE gold",
])
def test_reads_of_the_lake_are_run(statement: str) -> None:
    from lakehouse.sql import run_statement

    spark = FakeSpark()
    run_statement(spark, statement, LAKE)  # type: ignore[arg-type]
    assert spark.statements == [statement]


def test_a_delta_path_is_in_the_lake_only_under_its_root_with_links_resolved(tmp_path: Any) -> None:
    from lakehouse.sql import path_in_lake

    root = tmp_path / "lake"
    (root / "gold").mkdir(parents=True)
    (root / "gold" / "escape").symlink_to(tmp_path)
    assert path_in_lake(str(root / "gold" / "x"), str(root))
    assert path_in_lake(f"file://{root}/gold/x", str(root))
    assert not path_in_lake(str(root / "gold" / "escape" / "other"), str(root))
    assert not path_in_lake(str(tmp_path / "lake2"), str(root))
    assert not path_in_lake(str(root / "gold" / "*"), str(root))
    assert not path_in_lake(str(root / "gold" / "x"), None)
    assert path_in_lake("s3://bucket/lake/gold/x", "s3://bucket/lake")
    assert not path_in_lake("s3://bucket/lake2/x", "s3://bucket/lake")
    assert not path_in_lake("s3://bucket/lake/../other", "s3://bucket/lake")
    assert not path_in_lake("/bucket/lake/gold/x", "s3://bucket/lake")


def test_the_gateway_confines_dataframe_reads_to_the_lake() -> None:
    """Issue: `spark.read.text("/etc/passwd")` and `spark.read.json(<key file>)` answered through
    `serve`: reads through the DataFrame API go through the same checks as SQL."""
    from pyspark.sql.connect.proto import base_pb2, catalog_pb2, commands_pb2, relations_pb2

    from lakehouse.gateway import check_request

    def execute(root: relations_pb2.Relation) -> bytes:
        return base_pb2.ExecutePlanRequest(session_id="s", plan=base_pb2.Plan(root=root)).SerializeToString()

    def source(fmt: str | None, *paths: str, **options: str) -> relations_pb2.Relation:
        data = relations_pb2.Read.DataSource(paths=list(paths), options=options)
        if fmt is not None:
            data.format = fmt
        return relations_pb2.Relation(read=relations_pb2.Read(data_source=data))

    def named(name: str) -> relations_pb2.Relation:
        return relations_pb2.Relation(read=relations_pb2.Read(named_table=relations_pb2.Read.NamedTable(
            unparsed_identifier=name)))

    refused = [
        source("text", "/etc/passwd"), source("json", "/lake/root/gold/x"), source(None, "/lake/root/gold/x"),
        source("delta", "/elsewhere"), source("delta", "/lake/root/gold/x", "/elsewhere"),
        source("delta", path="/elsewhere"), source("delta"), named("text.`/etc/passwd`"), named("csv.`/x`"),
        relations_pb2.Relation(unresolved_table_valued_function=relations_pb2.UnresolvedTableValuedFunction(
            function_name="read_files")),
        relations_pb2.Relation(catalog=catalog_pb2.Catalog(list_columns=catalog_pb2.ListColumns(
            table_name="text.`/etc/passwd`"))),
    ]
    for relation in refused:
        with pytest.raises(SqlError) as excinfo:
            check_request("ExecutePlan", execute(relation), LAKE)
        assert excinfo.value.code == "outside_lake", relation
    for relation in (source("delta", "/lake/root/gold/x"), source("DELTA", path="/lake/root/gold/x"),
                     named("gold.profile"), named("spark_catalog.silver.messages"),
                     relations_pb2.Relation(unresolved_table_valued_function=relations_pb2.UnresolvedTableValuedFunction(
                         function_name="range"))):
        check_request("ExecutePlan", execute(relation), LAKE)
    view = commands_pb2.CreateDataFrameViewCommand(input=named("gold.profile"), name="v", is_global=False)
    check_request("ExecutePlan", base_pb2.ExecutePlanRequest(session_id="s", plan=base_pb2.Plan(
        command=commands_pb2.Command(create_dataframe_view=view))).SerializeToString(), LAKE)
    view.is_global = True
    with pytest.raises(SqlError) as excinfo:
        check_request("ExecutePlan", base_pb2.ExecutePlanRequest(session_id="s", plan=base_pb2.Plan(
            command=commands_pb2.Command(create_dataframe_view=view))).SerializeToString(), LAKE)
    assert excinfo.value.code == "read_only"


def test_each_served_session_gets_the_lake_named_once_and_again_after_idling() -> None:
    """`serve` on Sail names the lake's tables in each client's own session: once before its first
    request, again for every session when the lake changes, and again after an idle spell long
    enough for the engine to have dropped the session."""
    from lakehouse.spark.serving import SessionCatalogs

    now = [0.0]
    opened: list[tuple[str, str]] = []
    named: list[Any] = []

    def open_session(user: str, session: str) -> Any:
        opened.append((user, session))
        return object()

    def register(spark: Any) -> int:
        named.append(spark)
        return 3

    sessions = SessionCatalogs(open_session, register, idle_limit=600, clock=lambda: now[0])
    sessions.prepare("", "a")
    sessions.prepare("", "a")
    sessions.prepare("u", "b")
    assert opened == [("", "a"), ("u", "b")] and len(named) == 2 and len(sessions) == 2
    now[0] = 100
    sessions.prepare("", "a")
    assert sessions.refresh() == 2 and len(named) == 4
    now[0] = 650  # b idled past the limit: forgotten; a was seen at 100
    assert sessions.refresh() == 1
    sessions.prepare("u", "b")
    assert opened[-1] == ("u", "b") and len(opened) == 3
    now[0] = 1300
    sessions.prepare("", "a")  # idle 1,200 s: the engine may have dropped it, so it is named anew
    assert opened[-1] == ("", "a") and len(opened) == 4
    sessions.release("", "a")
    assert len(sessions) == 1


@pytest.mark.parametrize(("statement", "run"), [
    ("DESCRIBE gold.profile", "DESCRIBE TABLE gold.profile"),
    ("USE gold", "USE DATABASE gold"),
    ("DESCRIBE EXTENDED gold.profile", "DESCRIBE EXTENDED gold.profile"),
    ("USE DATABASE gold", "USE DATABASE gold"),
])
def test_describe_and_use_are_run_in_the_form_every_engine_reads(statement: str, run: str) -> None:
    """Issue: `DESCRIBE gold.t` and `USE gold` failed on Sail, which reads only `DESCRIBE TABLE`
    and `USE DATABASE`, although the README says DESCRIBE and USE work."""
    from lakehouse.sql import run_statement

    spark = FakeSpark()
    run_statement(spark, statement)  # type: ignore[arg-type]
    assert spark.statements == [run]


@pytest.mark.parametrize(("statement", "code", "said"), [
    ("", "not_understood", "the statement is empty"),
    ("  ;", "not_understood", "the statement is empty"),
    ("TRUNCATE TABLE gold.profile", "read_only", "not run: TRUNCATE changes"),
])
def test_an_empty_statement_and_a_truncate_are_named_as_what_they_are(statement: str, code: str, said: str) -> None:
    """Issue: `sql ""` got the code read_only, and TRUNCATE was shown as TRUNCATETABLE."""
    from lakehouse.sql import run_statement

    with pytest.raises(SqlError) as excinfo:
        run_statement(FakeSpark(), statement)  # type: ignore[arg-type]
    assert excinfo.value.code == code and said in str(excinfo.value)


@pytest.mark.parametrize(("statement", "said"), [
    ("SELECT * FROM gold.select", "Expected table name but got 'select' (line 1, column 25)"),
    ("SELECT FROM WHERE", "but got 'WHERE' (line 1, column 17)"),
])
def test_a_statement_that_does_not_parse_names_the_word_not_the_parser_token(statement: str, said: str) -> None:
    """Issue: `FROM gold.select` answered with the parser's `<Token token_type: TokenType.SELECT ...>`."""
    from lakehouse.sql import run_statement

    with pytest.raises(SqlError) as excinfo:
        run_statement(FakeSpark(), statement)  # type: ignore[arg-type]
    message = str(excinfo.value)
    assert excinfo.value.code == "not_understood" and said in message
    assert "Token" not in message and "\x1b" not in message


def test_the_prompt_history_keeps_its_last_statements_and_does_not_grow_without_end(tmp_path: Path,
                                                                                   monkeypatch: Any) -> None:
    """Each statement is a line of the history file (a statement of several lines on one); once the
    file holds twice ``HISTORY_LINES`` lines it keeps the last ``HISTORY_LINES``, in order."""
    from lakehouse import sql

    monkeypatch.setattr(sql, "HISTORY_LINES", 5)
    path = tmp_path / "deep" / "history"
    sql.append_history(path, "SELECT 1\nFROM gold.t")
    assert path.read_text() == "SELECT 1 FROM gold.t\n"
    for n in range(2, 10):
        sql.append_history(path, f"SELECT {n}")
    assert len(path.read_text().splitlines()) == 9
    sql.append_history(path, "SELECT 10")
    assert path.read_text().splitlines() == [f"SELECT {n}" for n in range(6, 11)]
    assert [p.name for p in path.parent.iterdir()] == ["history"]
