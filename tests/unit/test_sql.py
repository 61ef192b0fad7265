"""Result rendering of ``lakehouse sql``, the prompt loop, and what analysts may run (LAKEHOUSE.md, Configuration)."""

from __future__ import annotations

import io
import json
from datetime import datetime, timezone
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
