"""lakehouse.spark.groups: the Arrow schemas that per-group functions write, and the tasks a
partition's rows are cut into (whole groups)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.errors import LakehouseError
from lakehouse.spark import catalog, groups, silver
from lakehouse.spark.delta import columns
from lakehouse.spark.groups import arrow_schema, arrow_type, group_tasks


def test_every_ddl_of_a_per_group_function_has_an_arrow_schema_with_the_same_columns() -> None:
    for ddl in (catalog.STATES_DDL, silver.LOG_PASS_DDL, silver.INSTANCE_PASS_DDL):
        assert arrow_schema(ddl).names == columns(ddl)


def test_types_map_exactly() -> None:
    schema = arrow_schema("a STRING, b BIGINT, c ARRAY<STRING>, d BINARY, e BOOLEAN")
    assert schema.types == [pa.string(), pa.int64(), pa.list_(pa.string()), pa.binary(), pa.bool_()]
    assert arrow_type("array<array<bigint>>") == pa.list_(pa.list_(pa.int64()))


def test_an_unmapped_type_is_refused_by_name() -> None:
    with pytest.raises(LakehouseError, match="DECIMAL"):
        arrow_schema("a DECIMAL(10,2)")


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 40), st.integers(0, 30)),
                     max_size=400),
       chunk=st.integers(1, 50), task_rows=st.sampled_from([1, 7, 64]), task_bytes=st.sampled_from([1, 40, 500, 64 << 20]))
def test_tasks_hold_whole_groups_within_the_row_and_byte_limits(keys: list[tuple[str | None, int, int]], chunk: int,
                                                                task_rows: int, task_bytes: int) -> None:
    """Every row once; a group's rows all in one task, next to each other; a task at most
    TASK_ROWS rows and TASK_BYTES bytes of strings and binaries unless it is one group (as many
    groups as fit: the next would break a limit), whatever batches the engine handed over."""
    rows = [{"k": k, "n": n, "i": i, "p": b"x" * size} for i, (k, n, size) in enumerate(keys)]
    schema = pa.schema([("k", pa.string()), ("n", pa.int64()), ("i", pa.int64()), ("p", pa.binary())])
    batches = [pa.RecordBatch.from_pylist(rows[s:s + chunk], schema=schema) for s in range(0, len(rows), chunk)]

    def size(row: dict[str, Any]) -> int:
        return len(row["k"] or "") + len(row["p"])

    original = groups.TASK_ROWS, groups.TASK_BYTES
    groups.TASK_ROWS, groups.TASK_BYTES = task_rows, task_bytes
    try:
        tasks = [t.to_pylist() for t in group_tasks(("k", "n"), batches)]
    finally:
        groups.TASK_ROWS, groups.TASK_BYTES = original
    if not batches:
        assert tasks == []
        return
    assert sorted(r["i"] for t in tasks for r in t) == list(range(len(rows)))
    assert all(r == rows[r["i"]] for t in tasks for r in t)
    sizes = Counter((r["k"], r["n"]) for r in rows)
    group_bytes = Counter()
    for r in rows:
        group_bytes[(r["k"], r["n"])] += size(r)
    seen: set[tuple[str | None, int]] = set()
    for t in tasks:
        runs = [(r["k"], r["n"]) for r in t]
        groups_in_task = [key for j, key in enumerate(runs) if j == 0 or runs[j - 1] != key]
        assert len(groups_in_task) == len(set(groups_in_task))  # each group's rows next to each other
        assert not seen & set(groups_in_task)  # and in this task only
        seen |= set(groups_in_task)
        assert all(runs.count(key) == sizes[key] for key in groups_in_task)  # whole
        assert (len(t) <= task_rows and sum(map(size, t)) <= task_bytes) or len(groups_in_task) == 1
    for t, following in zip(tasks, tasks[1:], strict=False):
        key = (following[0]["k"], following[0]["n"])
        # the next group did not fit
        assert len(t) + sizes[key] > task_rows or sum(map(size, t)) + group_bytes[key] > task_bytes


def test_a_partition_past_two_gib_of_binary_is_cut_into_tasks_of_its_own_types() -> None:
    """A binary column of more than 2 GiB over a partition's batches (each under it) cannot be held
    in one 32-bit-offset buffer, where ``take`` fails: the tasks still come, whole, with the
    partition's types. Three logs of one 0.75 GiB payload each, sharing one buffer."""
    value = pa.py_buffer(bytes(3 << 28))  # 0.75 GiB
    payload = pa.Array.from_buffers(pa.binary(), 1, [None, pa.array([0, len(value)], pa.int32()).buffers()[1], value])
    schema = pa.schema([("log", pa.string()), ("payload", pa.binary())])
    batches = [pa.RecordBatch.from_arrays([pa.array([log]), payload], schema=schema) for log in ("a", "b", "c")]
    tasks = group_tasks(("log",), batches)
    logs = []
    for task in tasks:  # one at a time: each holds a copy of its payload
        assert task.schema == schema
        assert task.column("payload")[0].as_buffer().size == len(value)
        logs.extend(task.column("log").to_pylist())
        del task
    assert sorted(logs) == ["a", "b", "c"]


def test_a_partition_without_rows_is_one_empty_task() -> None:
    schema = pa.schema([("k", pa.string())])
    tasks = list(group_tasks(("k",), [pa.RecordBatch.from_pylist([], schema=schema)]))
    assert [t.num_rows for t in tasks] == [0] and tasks[0].schema == schema
