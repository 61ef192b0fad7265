"""map_groups: each group whole, once, whatever the batching; exact int64; groups may yield nothing."""

from __future__ import annotations

from typing import Any

import pytest

from lakehouse.spark.groups import Row, map_groups

pytestmark = pytest.mark.parity

BIG = 2**62 + 1  # not a float64


def summarise(group: list[Row]) -> list[Row]:
    if group[0]["g"] == "empty":
        return []
    seqs = sorted(r["seq"] for r in group)
    return [{"g": group[0]["g"], "n": len(group), "first": seqs[0], "seqs": [str(s) for s in seqs]}]


def test_each_group_is_seen_whole_and_once(spark: Any) -> None:
    rows = [(f"g{i % 997}", BIG + i) for i in range(20_000)] + [("empty", 1), ("empty", 2)]
    df = spark.createDataFrame(rows, "g STRING, seq BIGINT").repartition(7)
    out = {r["g"]: r for r in map_groups(df, ["g"], summarise,
                                          "g STRING, n BIGINT, first BIGINT, seqs ARRAY<STRING>").collect()}
    assert set(out) == {f"g{i}" for i in range(997)}  # "empty" gave no row
    for name, r in out.items():
        expected = sorted(BIG + i for i in range(20_000) if f"g{i % 997}" == name)
        assert r["n"] == len(expected)
        assert r["first"] == expected[0]
        assert r["seqs"] == [str(s) for s in expected]
