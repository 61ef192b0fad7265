"""The change feed's comparison held here (lakehouse.core.changes) and the change rows built from it
(lakehouse.spark.gold.local_changes); tests/spark/test_changes.py checks it against the engine's."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from lakehouse.core.changes import (
    DELETE,
    INSERT,
    KINDS,
    POSTIMAGE,
    PREIMAGE,
    UPDATE,
    change_cause,
    counted,
    images,
    row_changes,
    same_value,
)
from lakehouse.spark.gold import CHANGE_META, local_changes

NAN = math.nan
WHEN = datetime(2024, 5, 1, 12, tzinfo=timezone.utc)


@pytest.mark.parametrize(("a", "b", "same"), [
    (None, None, True), (None, 0, False), (0, None, False), (None, [], False), (False, None, False),
    (1, 1, True), (1, 2, False), (True, True, True), (True, False, False),
    (1.5, 1.5, True), (1.5, 1.25, False), (NAN, NAN, True), (NAN, 1.0, False), (1.0, NAN, False),
    (-0.0, 0.0, True), (math.inf, math.inf, True), (math.inf, -math.inf, False),
    ("a", "a", True), ("a", "b", False), (b"\x00", b"\x00", True), (b"\x00", b"\x01", False),
    (WHEN, WHEN, True), (WHEN, WHEN.replace(hour=13), False),
    ([], [], True), ([1.0, NAN], [1.0, NAN], True), ([NAN], [1.0], False), ([-0.0], [0.0], True),
    ([1, None], [1, None], True), ([1, None], [1, 2], False), ([1], [1, 1], False), ([1], None, False),
])
def test_values_compare_as_the_engines_null_safe_equality(a: object, b: object, same: bool) -> None:
    assert same_value(a, b) is same
    assert same_value(b, a) is same


def test_row_changes_finds_inserts_updates_and_deletes_and_leaves_equal_rows_out() -> None:
    before = {"kept": ("ada", NAN, [NAN], 2), "changed": ("ada", 1.0, None, 2), "gone": ("bob", 1.0, None, 1)}
    after = {"kept": ("ada", NAN, [NAN], 2), "changed": ("ada", 1.0, None, 3), "new": ("cy", None, [], 1)}
    assert row_changes(before, after) == [(UPDATE, "changed"), (INSERT, "new"), (DELETE, "gone")]
    assert row_changes(after, after) == []


@pytest.mark.parametrize(("change", "changed_in", "removed", "flipped", "cause"), [
    (DELETE, None, True, False, "cascade"),       # removed by a cascade
    (DELETE, ["s"], True, False, "cascade"),      # deleted by its message, and removed by a cascade: the cascade
    (DELETE, ["s"], False, False, "message"),
    (UPDATE, ["s"], False, True, "message"),      # its own message, though its verdict flipped too
    (INSERT, None, False, True, "cascade"),       # back: the instance its cascade came from is
    (UPDATE, ["other"], False, True, "cascade"),  # named only by another schema's log
    (UPDATE, ["other"], False, False, "message"),
    (INSERT, None, False, False, "message"),
])
def test_the_cause_of_a_merged_change(change: str, changed_in: list[str] | None, removed: bool, flipped: bool,
                                      cause: str) -> None:
    assert change_cause(change, "s", changed_in, removed, flipped) == cause


def test_local_changes_gives_the_row_added_removed_and_both_rows_of_an_update() -> None:
    ddl = f"{CHANGE_META}, instance_id STRING, author STRING, `when` TIMESTAMP, tags ARRAY<DOUBLE>, _updates BIGINT"
    before = {"a": ("ada", WHEN, [1.0], 0), "b": ("bob", None, None, 4)}
    after = {"a": ("ada", WHEN, [2.0], 1), "c": ("cy", WHEN, [], 0)}
    meta = {"_gold_run": 7, "_silver_run": 6, "_watermark": 5, "_delta_version": 3}
    rows = local_changes(before, after, lambda change, instance: f"{change} {instance}", meta, ddl).to_pylist()
    assert rows == [
        {**meta, "_change": "update_preimage", "_cause": "update a", "instance_id": "a", "author": "ada", "when": WHEN,
         "tags": [1.0], "_updates": 0},
        {**meta, "_change": "update_postimage", "_cause": "update a", "instance_id": "a", "author": "ada", "when": WHEN,
         "tags": [2.0], "_updates": 1},
        {**meta, "_change": "insert", "_cause": "insert c", "instance_id": "c", "author": "cy", "when": WHEN,
         "tags": [], "_updates": 0},
        {**meta, "_change": "delete", "_cause": "delete b", "instance_id": "b", "author": "bob", "when": None,
         "tags": None, "_updates": 4},
    ]


def test_each_change_gives_its_rows_and_the_index_counts_an_update_once() -> None:
    assert [images(change) for change in (INSERT, UPDATE, DELETE)] == [
        ((INSERT, False),), ((PREIMAGE, True), (POSTIMAGE, False)), ((DELETE, True),)]
    assert [counted(kind) for kind in KINDS] == [INSERT, None, UPDATE, DELETE]


def test_a_reader_sees_an_update_as_one_row_with_before_and_after_of_each_changed_column() -> None:
    from pipelines.changes import as_read

    def row(run: int, change: str, instance: str, name: str | None, age: int | None) -> dict[str, object]:
        return {"_gold_run": run, "_change": change, "_cause": "message", "instance_id": instance, "name": name,
                "age": age}

    rows = [row(2, "delete", "b", "bob", 3), row(2, PREIMAGE, "a", "ann", 40), row(2, POSTIMAGE, "a", "ann b", 40),
            row(3, PREIMAGE, "a", "ann b", 40)]  # its row after cut by a limit
    assert as_read(rows) == [row(2, "delete", "b", "bob", 3),
                             {**row(2, UPDATE, "a", "ann", 40), "name": ("ann", "ann b")},
                             row(3, PREIMAGE, "a", "ann b", 40)]
