"""The change feed of every gold table (issue 19): what each run inserted, updated or deleted, and why.

The defining property (the feed replayed gives every version of every table) is checked on the
generated histories against the reference model (``tests/spark/test_against_reference.py``, with
:func:`tests.feeds.assert_feeds_replay`); here a story checks each cause, the index, the CLI and the
setting that turns the feed off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.messages import SchemaMeta, SchemaRevert
from lakehouse.errors import ChangesError
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.lensfiles import load_lens_file
from lakehouse.publish.publisher import Publisher
from lakehouse.spark.gold import CHANGE_META
from pipelines.changes import change_feed
from pipelines.gold import run_gold
from pipelines.ingest import run_ingest
from pipelines.register import register_schema
from pipelines.silver import run_silver
from tests.feeds import assert_feeds_replay, replay
from tests.lakes import REPO, gold_data, run_cli

pytestmark = pytest.mark.parity

NOTE_LENS = """\
kind: schema-migration
fields:
  - text:
    action: create
    type: text
  - owner:
    action: create
    type: relation
    schema: profile
    cascade: true
"""
AGE_LENS = """\
kind: schema-migration
fields:
  - age:
    action: create
    type: integer
"""


def materialize(spark: Any, lake: Any) -> Any:
    run_ingest(spark, lake)
    run_silver(spark, lake)
    return run_gold(spark, lake)


def feed(spark: Any, lake: Any, table: str) -> list[tuple[int, str, str, str | None]]:
    """(gold run, change, cause, name or text) of a change table's rows, in order."""
    rows = [r.asDict() for r in spark.read.format("delta").load(f"{lake.lake_root}/gold/{table}_changes").collect()]
    return sorted((r["_gold_run"], r["_change"], r["_cause"], r["name"] if "name" in r else r["text"]) for r in rows)


@pytest.mark.slow_on_spark(why="six gold runs, 140 s there; the generated histories check the feed on both engines")
def test_each_run_feeds_its_changes_with_their_cause(spark: Any, lake: Any, tmp_path: Path, engine_name: str) -> None:
    (tmp_path / "note.yaml").write_text(NOTE_LENS)
    (tmp_path / "age.yaml").write_text(AGE_LENS)
    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing, create_key=True) as pub:
        profile = str(pub.schema_init(SchemaMeta(name="profile")))
        pub.schema_message("profile", load_lens_file(REPO / "lenses" / "profile" / "001.yaml"))
        note = str(pub.schema_init(SchemaMeta(name="note")))
        pub.schema_message("note", load_lens_file(tmp_path / "note.yaml", resolve_schema=pub.resolve_schema))
        ann, bob = (pub.create("profile", {"name": n, "email": f"{n}@example.org"}) for n in ("ann", "bob"))
        pub.create("note", {"text": "to ann", "owner": bytes.fromhex(ann)})
        pub.create("note", {"text": "to bob", "owner": bytes.fromhex(bob)})
    run_ingest(spark, lake)
    run_silver(spark, lake)
    register_schema(spark, lake, profile, None)
    register_schema(spark, lake, note, None)
    first = run_gold(spark, lake)  # run 1: the tables are new
    assert first.changes == {"profile_v2": {"insert": 2, "update": 0, "delete": 0},
                             "note_v2": {"insert": 2, "update": 0, "delete": 0}}

    with Publisher(store, "author", lake.landing) as pub:  # run 2: an update, a delete and its cascade
        pub.update("profile", ann, {"name": "ann b"})
        pub.delete("profile", bob)
    materialize(spark, lake)
    with Publisher(store, "author", lake.landing) as pub:  # run 3: a new version, written at
        pub.schema_message("profile", load_lens_file(tmp_path / "age.yaml"))
        pub.update("profile", ann, {"name": "ann c", "age": 40})
    materialize(spark, lake)
    with Publisher(store, "author", lake.landing) as pub:  # run 4: its revert
        pub.schema_message("profile", SchemaRevert(2))
    reverted = materialize(spark, lake)
    assert reverted.modes[profile] == "revert"

    assert feed(spark, lake, "profile_v2") == [
        (1, "insert", "new_table", "ann"), (1, "insert", "new_table", "bob"),
        (2, "delete", "message", "bob"),  # the row it removed
        (2, "update_postimage", "message", "ann b"), (2, "update_preimage", "message", "ann"),
        (3, "update_postimage", "message", "ann c"), (3, "update_preimage", "message", "ann b"),  # written at 3
        (4, "update_postimage", "revert", "ann b"),  # the write at the abandoned version is ignored again
        (4, "update_preimage", "revert", "ann c")]
    assert feed(spark, lake, "note_v2") == [(1, "insert", "new_table", "to ann"), (1, "insert", "new_table", "to bob"),
                                            (2, "delete", "cascade", "to bob")]
    assert feed(spark, lake, "profile_v3") == [(3, "insert", "new_table", "ann c")]  # a new table starts as it is
    assert assert_feeds_replay(Path(lake.lake_root)) > 0
    names = {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()}
    assert {"profile_v2_changes", "note_v2_changes"} <= names and "profile_v3_changes" not in names  # abandoned

    # a rebuild changes nothing, so it feeds nothing
    run_silver(spark, lake, rebuild=True)
    rebuilt = run_gold(spark, lake, rebuild=True)
    assert rebuilt.changes and not any(n for counts in rebuilt.changes.values() for n in counts.values())
    assert len(feed(spark, lake, "profile_v2")) == 9

    latest = change_feed(spark, lake, "profile")  # the revert's version 4 has the shape of 2, and a table of its own
    assert (latest.table, [r["name"] for r in latest.rows]) == ("gold.profile_v4_changes", ["ann b"])
    since = change_feed(spark, lake, "profile", version=2, since=2)
    assert (since.table, since.version, since.total) == ("gold.profile_v2_changes", 2, 4)
    assert [r["gold_run"] for r in since.runs] == [3, 4, 5] and since.runs[-1]["updates"] == 0
    assert [r["_change"] for r in change_feed(spark, lake, "profile", version=3).rows] == ["insert"]  # it stays readable
    with pytest.raises(ChangesError) as missing:
        change_feed(spark, lake, "profile", version=9)
    assert missing.value.code == "no_feed" and "versions with one: 2, 3, 4" in str(missing.value)
    with pytest.raises(ChangesError) as unknown:
        change_feed(spark, lake, "nothing")
    assert unknown.value.code == "unknown_name" and "note, profile" in str(unknown.value)
    # and `lakehouse changes` prints them (once, on Sail: each call on Apache Spark starts a JVM)
    if engine_name == "sail":
        printed = run_cli(lake, "changes", "profile", "--version", "2", "--since", "1", "--format", "json")
        assert printed.returncode == 0, printed.stderr
        out = json.loads(printed.stdout)
        assert out["total"] == 7
        assert sorted((c["_gold_run"], c["_change"]) for c in out["changes"]) == [
            (2, "delete"), *((run, kind) for run in (2, 3, 4) for kind in ("update_postimage", "update_preimage"))]
        shown = run_cli(lake, "changes", "note", COLUMNS="200")
        assert shown.returncode == 0 and "cascade" in shown.stdout and "gold.note_v2_changes" in shown.stdout, \
            shown.stderr
        updates = run_cli(lake, "changes", "profile", "--version", "2", COLUMNS="250")  # an update as one line
        assert updates.returncode == 0 and "ann b → ann c" in updates.stdout, updates.stdout


@pytest.mark.slow_on_spark(why="four gold runs; the setting is read the same way by both engines' runs")
def test_with_the_feed_off_a_run_feeds_nothing_and_on_again_it_goes_on_from_where_it_stopped(
        spark: Any, lake: Any) -> None:
    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing, create_key=True) as pub:
        profile = str(pub.schema_init(SchemaMeta(name="profile")))
        pub.schema_message("profile", load_lens_file(REPO / "lenses" / "profile" / "001.yaml"))
        ann = pub.create("profile", {"name": "ann"})
    run_ingest(spark, lake)
    run_silver(spark, lake)
    register_schema(spark, lake, profile, None)
    run_gold(spark, lake)
    off = lake.with_overrides(change_feed="off")
    for name in ("ann b", "ann c"):
        with Publisher(store, "author", lake.landing) as pub:
            pub.update("profile", ann, {"name": name})
        assert materialize(spark, off).changes == {}
    with Publisher(store, "author", lake.landing) as pub:
        pub.create("profile", {"name": "cy"})
    materialize(spark, lake)
    # the run after the gap compares the table with the version the feed reached, not the last one
    assert feed(spark, lake, "profile_v2") == [(1, "insert", "new_table", "ann"), (4, "insert", "message", "cy"),
                                               (4, "update_postimage", "message", "ann c"),
                                               (4, "update_preimage", "message", "ann")]
    # the runs without it are not in it, but what it gives after its last run is the table
    from lakehouse.spark import deltalog

    table = [gold_data(r) for r in deltalog.read_rows(f"{lake.lake_root}/gold/profile_v2").to_pylist()]
    changes = deltalog.read_rows(f"{lake.lake_root}/gold/profile_v2_changes").to_pylist()
    assert sorted(replay(changes, 4).values(), key=repr) == sorted(table, key=repr)


WIDE_FIELDS = 24  # a wide schema: more than the 21 columns that filled a 4 GB Apache Spark driver


def test_the_changes_of_a_wide_table_are_found_and_joined_on_every_engine(spark: Any) -> None:
    """``row_changes`` of a table of many nullable columns, joined as a merge's causes are: one row
    per changed instance (null-safe: NULL to NULL is no change, NULL to a value is), the image after
    the change, a delete with its author. On Apache Spark the plan once grew as 2^columns (its
    constraint propagation copied the comparison for each renamed column) and never finished."""
    import pyarrow as pa

    from lakehouse.spark.gold import row_changes

    kinds = [pa.string(), pa.int64(), pa.float64(), pa.list_(pa.string())]
    names = [f"field_{n}" for n in range(WIDE_FIELDS)]
    schema = pa.schema([("instance_id", pa.string()), ("author", pa.string()),
                        *((name, kinds[n % len(kinds)]) for n, name in enumerate(names))])

    def value(n: int, seed: int) -> Any:
        return [f"{seed}", seed, seed + 0.5, [f"{seed}"]][n % len(kinds)]

    def frame(rows: dict[str, dict[str, Any]]) -> Any:
        table = pa.Table.from_pylist([{"instance_id": i, "author": "ann", **r} for i, r in rows.items()], schema)
        return spark.createDataFrame(table)

    base = {name: value(n, n) for n, name in enumerate(names)}
    before = frame({"gone": base, "same": {**base, "field_3": None}, "to_null": base,
                    "from_null": {**base, "field_5": None}})
    after = frame({"same": {**base, "field_3": None}, "to_null": {**base, "field_2": None},
                   "from_null": {**base, "field_5": value(5, 9)}, "new": base})
    changes = row_changes(before, after, ["instance_id", "author", *names])
    marks = spark.createDataFrame([("to_null", True), ("new", True)], "instance_id STRING, _marked BOOLEAN")
    rows = {(r["instance_id"], r["_change"]): r.asDict() for r in changes.join(marks, "instance_id", "left").collect()}

    assert {key: r["_marked"] for key, r in rows.items()} == {
        ("gone", "delete"): None, ("to_null", "update_preimage"): True, ("to_null", "update_postimage"): True,
        ("from_null", "update_preimage"): None, ("from_null", "update_postimage"): None, ("new", "insert"): True}
    assert rows["gone", "delete"]["author"] == "ann"
    assert [rows["gone", "delete"][name] for name in names] == [base[name] for name in names]  # the row removed
    assert rows["to_null", "update_postimage"]["field_2"] is None and rows["to_null", "update_postimage"]["field_1"] == 1
    assert rows["to_null", "update_preimage"]["field_2"] == value(2, 2)
    assert rows["from_null", "update_preimage"]["field_5"] is None
    assert rows["from_null", "update_postimage"]["field_5"] == value(5, 9)
    assert [rows["new", "insert"][name] for name in names] == [base[name] for name in names]


def test_the_changes_found_here_are_those_the_engine_finds(spark: Any) -> None:
    """A merge's rows before and after it, when projected here, are compared here
    (:func:`lakehouse.spark.gold.local_changes`): the same changes and images as the engine's
    ``row_changes``, for every column type, NaN (equal to NaN), -0.0 (equal to 0.0) and nulls.
    (In an array, Sail finds -0.0 and 0.0 different, Apache Spark equal: ``docs/engines.md``.)"""
    from datetime import datetime, timezone

    import pyarrow as pa

    from lakehouse.spark.gold import CHANGE_META, local_changes, row_changes
    from lakehouse.spark.groups import arrow_schema, spark_schema

    columns = "instance_id STRING, author STRING, t STRING, n BIGINT, x DOUBLE, xs ARRAY<DOUBLE>, " \
              "b BOOLEAN, at TIMESTAMP, blob BINARY, _updates BIGINT"
    names = [c.split()[0] for c in columns.split(", ")]
    nan, when = float("nan"), datetime(2024, 5, 1, 12, tzinfo=timezone.utc)
    base = ("ann", "t", 1, nan, [1.0, nan, None], True, when, b"\x00\x01", 0)
    variants = {"same": base, "nan_to_1": (*base[:3], 1.0, *base[4:]), "zero": (*base[:3], -0.0, *base[4:]),
                "list": (*base[:4], [1.0, nan], *base[5:]), "to_null": (*base[:5], None, *base[6:]),
                "time": (*base[:6], when.replace(minute=1), *base[7:]), "blob": (*base[:7], b"", base[8])}
    before = {**{i: base for i in variants}, "gone": base}
    before["zero"] = (*base[:3], 0.0, *base[4:])
    after = {**variants, "new": base}

    def frame(rows: dict[str, tuple[Any, ...]]) -> Any:
        table = pa.Table.from_pylist([dict(zip(names, (i, *r), strict=True)) for i, r in rows.items()],
                                     arrow_schema(columns))
        return spark.createDataFrame(table, spark_schema(columns))

    def image(row: dict[str, Any]) -> tuple[Any, ...]:  # NaN as text: equal to itself in a set
        def plain(value: Any) -> Any:
            return tuple(map(plain, value)) if isinstance(value, list) else "NaN" if value != value else value
        return tuple(plain(row[name]) for name in ["_change", *names])

    engine = {image(r) for r in row_changes(frame(before), frame(after), names).toArrow().to_pylist()}
    meta = {"_gold_run": 1, "_silver_run": 1, "_watermark": 1, "_delta_version": 1}
    here = local_changes(before, after, lambda *_: "message", meta, f"{CHANGE_META}, {columns}").to_pylist()
    assert {image(r) for r in here} == engine
    updated = ["nan_to_1", "list", "to_null", "time", "blob"]
    assert sorted((r["instance_id"], r["_change"]) for r in here) == sorted(
        [*((i, kind) for i in updated for kind in ("update_preimage", "update_postimage")),
         ("new", "insert"), ("gone", "delete")])
    assert all(image(r)[1:] == image({"_change": None, "instance_id": r["instance_id"],
                                      **dict(zip(names[1:], before[r["instance_id"]], strict=True))})[1:]
               for r in here if r["_change"] in ("update_preimage", "delete"))


@pytest.mark.slow_on_spark(why="three gold runs and the feeds written again; the same window and explode on both")
def test_a_lake_whose_feeds_have_no_rows_before_gains_them_from_the_feed_itself(spark: Any, lake: Any,
                                                                               tmp_path: Path) -> None:
    """A lake from before pre-images (an update's row after only, a delete's ids only, an index
    without ``preimages``): its next gold run, even one with nothing new, writes its feeds again
    with the rows before, equal to those a run of today writes, and they replay."""
    from pyspark.sql import functions as F

    from lakehouse.spark import catalog, delta
    from lakehouse.spark.tables import delta_version, table

    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing, create_key=True) as pub:
        profile = str(pub.schema_init(SchemaMeta(name="profile")))
        pub.schema_message("profile", load_lens_file(REPO / "lenses" / "profile" / "001.yaml"))
        ann, bob = (pub.create("profile", {"name": n, "email": f"{n}@example.org"}) for n in ("ann", "bob"))
    run_ingest(spark, lake)
    run_silver(spark, lake)
    register_schema(spark, lake, profile, None)
    run_gold(spark, lake)
    for name in ("ann b", "ann c"):
        with Publisher(store, "author", lake.landing) as pub:
            pub.update("profile", ann, {"name": name})
            if name == "ann c":
                pub.delete("profile", bob)
        materialize(spark, lake)
    changes_ref, index_ref = table(lake.lake_root, "gold", "profile_v2_changes"), catalog.GOLD_CHANGES.at(lake.lake_root)
    today = spark.read.format("delta").load(changes_ref.location)
    expected = sorted(map(repr, (r.asDict() for r in today.collect())))
    # the shape of before: each update its row after, each delete its ids
    image = [c for c in today.columns if c not in delta.columns(CHANGE_META) and c not in ("_change", "instance_id",
                                                                                        "author")]
    old = today.where(F.col("_change") != "update_preimage").select(
        *(F.when(F.col("_change") == "update_postimage", "update").otherwise(F.col("_change")).alias(c) if c == "_change"
          else F.when(F.col("_change") == "delete", F.lit(None)).otherwise(F.col(c)).alias(c) if c in image
          else F.col(c) for c in today.columns))
    delta.overwrite(delta.stage(old, str(tmp_path / "old_feed")), changes_ref, **catalog.CHANGES_PROPERTIES)
    index = spark.read.format("delta").load(index_ref.location)
    delta.overwrite(delta.stage(index.drop("preimages"), str(tmp_path / "old_index")), index_ref)
    assert {r["_change"] for r in spark.read.format("delta").load(changes_ref.location).collect()} == {
        "insert", "update", "delete"}

    assert run_gold(spark, lake).up_to_date  # nothing new, and the feeds are brought to today's shape
    again = spark.read.format("delta").load(changes_ref.location)
    assert sorted(map(repr, (r.asDict() for r in again.collect()))) == expected
    assert assert_feeds_replay(Path(lake.lake_root)) > 0
    latest = spark.read.format("delta").load(index_ref.location).orderBy(F.desc("gold_run")).first()
    assert latest is not None and latest["preimages"] and latest["changes_version"] == delta_version(changes_ref.location)
    version = delta_version(changes_ref.location)
    run_gold(spark, lake)
    assert delta_version(changes_ref.location) == version  # once only
