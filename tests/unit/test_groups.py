"""lakehouse.spark.groups: the Arrow schemas that per-group functions write, and the tasks a
partition's rows are cut into (whole groups)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.errors import LakehouseError
from lakehouse.spark import groups, silver
from lakehouse.spark.delta import columns
from lakehouse.spark.groups import arrow_schema, arrow_type, group_tasks


def test_every_ddl_of_a_per_group_function_has_an_arrow_schema_with_the_same_columns() -> None:
    for ddl in (silver.STATES_DDL, silver.LOG_PASS_DDL, silver.INSTANCE_PASS_DDL):
        assert arrow_schema(ddl).names == columns(ddl)


def test_types_map_exactly() -> None:
    schema = arrow_schema("a STRING, b BIGINT, c ARRAY<STRING>, d BINARY, e BOOLEAN")
    assert schema.types == [pa.string(), pa.int64(), pa.list_(pa.string()), pa.binary(), pa.bool_()]
    assert arrow_type("array<array<bigint>>") == pa.list_(pa.list_(pa.int64()))


def test_an_unmapped_type_is_refused_by_name() -> None:
    with pytest.raises(LakehouseError, match="DECIMAL"):
        arrow_schema("a DECIMAL(10,2)")


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 40)), max_size=400),
       chunk=st.integers(1, 50), task_rows=st.sampled_from([1, 7, 64]))
def test_tasks_hold_whole_groups_within_the_row_limit(keys: list[tuple[str | None, int]], chunk: int,
                                                      task_rows: int) -> None:
    """Every row once; a group's rows all in one task, next to each other; a task at most
    TASK_ROWS rows unless it is one group (as many groups as fit: the next would break the limit),
    whatever batches the engine handed over."""
    rows = [{"k": k, "n": n, "i": i} for i, (k, n) in enumerate(keys)]
    schema = pa.schema([("k", pa.string()), ("n", pa.int64()), ("i", pa.int64())])
    batches = [pa.RecordBatch.from_pylist(rows[s:s + chunk], schema=schema) for s in range(0, len(rows), chunk)]
    original = groups.TASK_ROWS
    groups.TASK_ROWS = task_rows
    try:
        tasks = [t.to_pylist() for t in group_tasks(("k", "n"), batches)]
    finally:
        groups.TASK_ROWS = original
    if not batches:
        assert tasks == []
        return
    assert sorted(r["i"] for t in tasks for r in t) == list(range(len(rows)))
    sizes = Counter((r["k"], r["n"]) for r in rows)
    seen: set[tuple[str | None, int]] = set()
    for t in tasks:
        runs = [(r["k"], r["n"]) for r in t]
        groups_in_task = [key for j, key in enumerate(runs) if j == 0 or runs[j - 1] != key]
        assert len(groups_in_task) == len(set(groups_in_task))  # each group's rows next to each other
        assert not seen & set(groups_in_task)  # and in this task only
        seen |= set(groups_in_task)
        assert all(runs.count(key) == sizes[key] for key in groups_in_task)  # whole
        assert len(t) <= task_rows or len(groups_in_task) == 1
    for t, following in zip(tasks, tasks[1:], strict=False):
        assert len(t) + sizes[(following[0]["k"], following[0]["n"])] > task_rows  # the next group did not fit


def test_a_partition_without_rows_is_one_empty_task() -> None:
    schema = pa.schema([("k", pa.string())])
    tasks = list(group_tasks(("k",), [pa.RecordBatch.from_pylist([], schema=schema)]))
    assert [t.num_rows for t in tasks] == [0] and tasks[0].schema == schema
