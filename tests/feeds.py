"""The change feed's defining property, checked on a lake: replaying a gold table's change feed from
its first run gives the table as every run left it, and every row before a change is the row the
table had (issue 19; ``docs/semantics-notes.md``, note 22).

Read from the tables' own Delta logs (:func:`lakehouse.spark.deltalog.read_rows`, deletion vectors
applied), a reader of its own: no engine job per table and version, and the same reader for the
feed and the table it is checked against.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from lakehouse.core.changes import DELETE, INSERT, KINDS, POSTIMAGE, PREIMAGE
from lakehouse.core.changes import counted as counted_as
from lakehouse.spark import delta
from lakehouse.spark.gold import CAUSES, CHANGE_META
from tests.lakes import gold_data

FEED_META = delta.columns(CHANGE_META)


def _rows(location: str, version: int | None = None) -> list[dict[str, Any]]:
    from lakehouse.spark import deltalog

    return deltalog.read_rows(location, version).to_pylist()


def _exists(location: str) -> bool:
    from lakehouse.spark.tables import is_delta_table

    return is_delta_table(location)


def _key(row: dict[str, Any]) -> str:
    return repr(sorted(row.items()))  # NaN == NaN, as a table compares them


def replay(feed: list[dict[str, Any]], up_to: int) -> dict[str, dict[str, Any]]:
    """The rows a change feed gives after gold run ``up_to``: its changes in run order, each
    insert of an instance not there; each update's row before equal to the instance's row, and its
    row after different; each delete's row equal to the row it removes.

    Raises:
        AssertionError: a change that does not fit the rows before it.
    """
    rows: dict[str, dict[str, Any]] = {}
    before: dict[tuple[int, str], dict[str, Any]] = {}  # the pre-images of each run's updates
    ordered = sorted((c for c in feed if c["_gold_run"] <= up_to), key=lambda c: (c["_gold_run"], KINDS.index(c["_change"])))
    for change in ordered:
        image = {k: v for k, v in change.items() if k not in FEED_META}
        assert change["_cause"] in CAUSES, change
        instance, run = change["instance_id"], change["_gold_run"]
        if change["_change"] == INSERT:
            assert instance not in rows, f"insert of an instance already there: {change}"
            rows[instance] = image
        elif change["_change"] == PREIMAGE:
            assert rows.get(instance) == image, f"the row before an update is not the row there: {change}"
            before[run, instance] = image
        elif change["_change"] == POSTIMAGE:
            old = before.pop((run, instance), None)
            assert old is not None and old != image, f"an update without its row before, or no change: {change}"
            rows[instance] = image
        else:
            assert change["_change"] == DELETE and rows.get(instance) == image, f"a delete not of the row there: {change}"
            del rows[instance]
    assert not before, f"updates' rows before without their rows after: {sorted(before)}"
    return rows


def assert_feeds_replay(lake_root: Path | str) -> int:
    """Every gold table each gold run listed (``silver.gold_versions``) equals its change feed
    replayed up to that run, and the feed's index (``silver.gold_changes``) counts its rows.

    Args:
        lake_root: the lake (a local path, or a URI such as ``s3://bucket/lake``).

    Returns:
        The number of (run, table) pairs checked.
    """
    root = str(lake_root).rstrip("/")
    versions = f"{root}/silver/gold_versions"
    if not _exists(versions):
        return 0
    checked = 0
    feeds: dict[str, list[dict[str, Any]]] = {}
    for listed in _rows(versions):
        name = listed["table_name"]
        if name is None:
            continue
        if name not in feeds:
            location = f"{root}/gold/{name}_changes"
            feeds[name] = _rows(location) if _exists(location) else []
        # the layout column is the table's only: a change gives the row's data
        table = [gold_data(r) for r in _rows(f"{root}/gold/{name}", int(listed["delta_version"]))]
        got = sorted(map(_key, replay(feeds[name], listed["gold_run"]).values()))
        assert got == sorted(map(_key, table)), f"{name} after gold run {listed['gold_run']}: the feed replayed differs"
        checked += 1
    index = f"{root}/silver/gold_changes"
    counted: dict[tuple[str, int], dict[str, int]] = defaultdict(lambda: {"insert": 0, "update": 0, "delete": 0})
    for name, feed in feeds.items():
        for change in feed:
            kind = counted_as(change["_change"])
            if kind is not None:
                counted[name, change["_gold_run"]][kind] += 1
    recorded = {(r["table_name"], r["gold_run"]): {"insert": r["inserts"], "update": r["updates"], "delete": r["deletes"]}
                for r in (_rows(index) if _exists(index) else [])}
    assert {k: v for k, v in counted.items()} == {k: v for k, v in recorded.items() if any(v.values())}
    return checked
