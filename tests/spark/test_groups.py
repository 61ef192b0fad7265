"""map_groups: each group whole, once, whatever the batching; exact int64; groups may yield nothing."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.spark.groups import Columns, Row, map_groups

pytestmark = pytest.mark.parity

BIG = 2**62 + 1  # not a float64


def summarise(group: list[Row]) -> list[Row]:
    if group[0]["g"] == "empty":
        return []
    seqs = sorted(r["seq"] for r in group)
    return [{"g": group[0]["g"], "n": len(group), "first": seqs[0], "seqs": [str(s) for s in seqs]}]


def summarised_columns(group: list[Row]) -> Columns:
    """:func:`summarise` a column at a time, with a second row of nulls but for ``g``."""
    rows = summarise(group)
    columns: Columns = {name: [r[name] for r in rows] for name in ("g", "n", "first", "seqs")}
    if rows:
        for name, values in columns.items():
            values.append(f"{rows[0]['g']}:nulls" if name == "g" else None)
    return columns


@pytest.mark.parametrize("fn", [summarise, summarised_columns])
def test_each_group_is_seen_whole_and_once(spark: Any, fn: Any) -> None:
    rows = [(f"g{i % 997}", BIG + i) for i in range(20_000)] + [("empty", 1), ("empty", 2)]
    df = spark.createDataFrame(rows, "g STRING, seq BIGINT").repartition(7)
    every = {r["g"]: r for r in map_groups(df, ["g"], fn,
                                            "g STRING, n BIGINT, first BIGINT, seqs ARRAY<STRING>").collect()}
    out = {g: r for g, r in every.items() if not g.endswith(":nulls")}
    nulls = [r for g, r in every.items() if g.endswith(":nulls")]
    assert len(nulls) == (997 if fn is summarised_columns else 0)
    assert all(r["n"] is None and r["first"] is None and r["seqs"] is None for r in nulls)
    assert set(out) == {f"g{i}" for i in range(997)}  # "empty" gave no row
    for name, r in out.items():
        expected = sorted(BIG + i for i in range(20_000) if f"g{i % 997}" == name)
        assert r["n"] == len(expected)
        assert r["first"] == expected[0]
        assert r["seqs"] == [str(s) for s in expected]


def test_a_group_whose_rows_come_from_several_sources_is_seen_whole(spark: Any) -> None:
    """The rows of one group arrive in different partitions of a union (as the instance pass's
    messages, earlier messages and stored states do); the engine's hash partitioning by the keys
    brings them together, more rows than one task holds included."""
    from pyspark.sql import functions as F

    def name(i: int) -> str:
        return "big" if i < 20_000 else str(i % 11)  # "big": more rows than a task holds

    group = F.when(F.col("id") < 20_000, F.lit("big")).otherwise((F.col("id") % 11).cast("string"))
    parts = [spark.range(start, 60_000, 3).select(group.alias("g"), (F.col("id") + BIG).alias("seq")).repartition(5)
             for start in range(3)]
    df = parts[0].unionByName(parts[1]).unionByName(parts[2])
    out = {r["g"]: r for r in map_groups(df, ["g"], summarise,
                                         "g STRING, n BIGINT, first BIGINT, seqs ARRAY<STRING>").collect()}
    assert set(out) == {name(i) for i in range(60_000)}
    for g, r in out.items():
        expected = [BIG + i for i in range(60_000) if name(i) == g]
        assert r["n"] == len(expected) and r["first"] == expected[0]
        assert r["seqs"] == [str(s) for s in expected]


@pytest.mark.parametrize("parts", [1, 3, 40])
def test_a_step_judged_in_parts_sees_each_group_whole_and_once(spark: Any, tmp_path: Any, parts: int) -> None:
    """In parts (setting group_rows), each group is still in one part, whole: the same output as one
    part, whatever the number of parts (more parts than groups leaves some parts empty)."""
    from functools import partial

    from lakehouse.spark.groups import apply_to_groups, arrow_schema, staged_group_batches

    ddl = "g STRING, n BIGINT, first BIGINT, seqs ARRAY<STRING>"
    rows = [(f"g{i % 31}", BIG + i) for i in range(5_000)]
    df = spark.createDataFrame(rows, "g STRING, seq BIGINT").repartition(4)
    fn = partial(apply_to_groups, summarise, ("g",), arrow_schema(ddl))
    out = staged_group_batches(df, ["g"], fn, ddl, str(tmp_path / "out"), parts=parts, what="test").collect()
    assert sorted(r["g"] for r in out) == sorted(f"g{i}" for i in range(31))
    for r in out:
        expected = sorted(BIG + i for i in range(5_000) if f"g{i % 31}" == r["g"])
        assert (r["n"], r["first"], r["seqs"]) == (len(expected), expected[0], [str(s) for s in expected])


def looked_up(group: list[Row]) -> list[Row]:
    """A group's rows that took a value (``v``), and the sum of those values."""
    values = [r["v"] for r in group if r["v"] is not None]
    return [{"g": group[0]["g"], "rows": len(group), "found": len(values), "total": sum(values)}]


@pytest.mark.parametrize("parts", [1, 3, 40])
def test_a_lookup_fills_each_part_from_its_own_part_of_the_frame(spark: Any, tmp_path: Any, parts: int) -> None:
    """A step's input that takes a column from another frame (silver's instance pass: the payloads
    of its messages from bronze) gets the same values in parts as joined whole: each part of the
    input from its own part of the frame; rows whose key is null, or not in the frame, take null,
    and so do the rows of a part whose part of the frame has no rows (groups g0-g4 have none)."""
    from functools import partial

    from lakehouse.spark.groups import Lookup, apply_to_groups, arrow_schema, staged_group_batches

    ddl = "g STRING, rows BIGINT, found BIGINT, total BIGINT"
    # k null every 7th row; the frame holds the values of the keys k % 5 != 0 of groups g5 and on
    rows = [(f"g{i % 31}", None if i % 7 == 0 else f"k{i}", BIG if i % 2 else None) for i in range(3_000)]
    df = spark.createDataFrame(rows, "g STRING, k STRING, v BIGINT").repartition(3)
    frame = spark.createDataFrame([(f"g{i % 31}", f"k{i}", i) for i in range(3_000) if i % 5 and i % 31 >= 5],
                                  "g STRING, k STRING, v BIGINT")
    lookup = Lookup(frame, ("k",), ("v",))
    fn = partial(apply_to_groups, looked_up, ("g",), arrow_schema(ddl))
    out = {r["g"]: r for r in staged_group_batches(df, ["g"], fn, ddl, str(tmp_path / "out"), parts=parts,
                                                   what="test", lookup=lookup).collect()}
    assert set(out) == {f"g{i}" for i in range(31)}
    for g, r in out.items():
        mine = [i for i in range(3_000) if f"g{i % 31}" == g]
        found = [i for i in mine if i % 7 and i % 5 and i % 31 >= 5]
        assert (r["rows"], r["found"], r["total"]) == (len(mine), len(found), sum(found)), g


def test_parts_follow_the_input_rows() -> None:
    from lakehouse.spark.groups import parts_for

    assert [parts_for(rows, 1_000) for rows in (0, 1, 1_000, 1_001, 10_000)] == [1, 1, 1, 2, 10]
    assert parts_for(10**9, 0) == 1  # 0: one part
