"""``make rebuild`` equals what incremental runs produced (LAKEHOUSE.md, Layers; SEMANTICS.md section 7)."""

from __future__ import annotations

import io
import json
from collections import Counter
from typing import Any

import pytest
from rich.console import Console

from lakehouse.cli import render_status
from lakehouse.core.messages import SchemaMeta, SchemaRevert
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.lensfiles import load_lens_file
from lakehouse.publish.publisher import Publisher
from pipelines.gold import run_gold
from pipelines.ingest import run_ingest
from pipelines.register import register_schema
from pipelines.silver import run_silver
from pipelines.status import lake_status
from tests.lakes import REPO, gold_data, rows

pytestmark = pytest.mark.parity

# the layout column: a rebuild may choose another number of buckets
SILVER = {"messages": ("run_id", "_bucket"), "logs": ("run_id",), "schema_versions": (), "schema_fields": (),
          "instance_states": ("_bucket",), "schema_entries": ()}


def snapshot(spark: Any, lake: Any) -> dict[str, Any]:
    out: dict[str, Any] = {name: rows(spark, lake, "silver", name, drop=drop) for name, drop in SILVER.items()}
    for r in spark.sql("SHOW TABLES IN gold").collect():
        name = r["tableName"]
        # the layout column: a rebuild may choose another number of buckets for a table
        out[f"gold.{name}"] = sorted(json.dumps(gold_data(x.asDict()), sort_keys=True, default=str)
                                     for x in spark.table(f"gold.{name}").collect())
    return out


@pytest.mark.slow_on_spark(why="seven batches; the generated histories check make rebuild against the reference model on every engine")
def test_rebuild_equals_incremental_runs(spark: Any, lake: Any) -> None:
    store = KeyStore(lake.keys)
    lens = REPO / "lenses"

    def batch(publish: Any) -> None:
        with Publisher(store, "author", lake.landing, create_key=True) as pub:
            publish(pub)
        run_ingest(spark, lake)
        run_silver(spark, lake)
        run_gold(spark, lake)

    ids: dict[str, str] = {}
    batch(lambda pub: ids.update(profile=str(pub.schema_init(SchemaMeta(name="profile")))))
    register_schema(spark, lake, ids["profile"], None)
    batch(lambda pub: pub.schema_message("profile", load_lens_file(lens / "profile" / "001.yaml")))
    people: list[str] = []
    batch(lambda pub: people.extend(pub.create("profile", {"name": f"p{n}", "email": f"p{n}@example.org"})
                                    for n in range(5)))
    batch(lambda pub: [pub.update("profile", people[0], {"name": "renamed"}), pub.delete("profile", people[1])])
    batch(lambda pub: pub.schema_message("profile", SchemaMeta(name="profile", description="people")))
    batch(lambda pub: pub.schema_message("profile", SchemaRevert(2)))
    batch(lambda pub: pub.create("profile", {"name": "late"}))
    incremental = snapshot(spark, lake)
    assert len(incremental["gold.profile"]) == 5

    rebuilt = run_silver(spark, lake, rebuild=True)
    run_gold(spark, lake, rebuild=True)
    assert snapshot(spark, lake) == incremental
    # the summary counts every message's status, as silver.messages holds them
    assert rebuilt.statuses == Counter(r["status"] for r in rows(spark, lake, "silver", "messages"))
    assert rebuilt.statuses["applied"] and rebuilt.statuses["ignored"]

    # and the status report reads the same lake without error, naming what is there
    text = Console(file=io.StringIO(), width=160, record=True)
    for part in render_status(lake_status(spark, lake)):
        text.print(part)
    report = text.export_text()
    assert "silver.messages" in report and "gold.profile_v" in report


@pytest.mark.slow_on_spark(why="about 80 s on Apache Spark; the upgrade of a lake is engine-neutral Python and "
                               "Delta writes that the other parity tests cover")
def test_a_lake_whose_instance_states_gold_folded_is_brought_up_to_date_by_its_next_run(spark: Any, lake: Any) -> None:
    """Lakes from before silver folded the instance states kept them without ``log_id`` (gold
    folded them): the next run recomputes silver from bronze once, says why, and gives the
    tables a lake built by this release has; a run after it is incremental again."""
    from lakehouse.spark import delta
    from lakehouse.spark.lake import silver_tables

    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing, create_key=True) as pub:
        schema = str(pub.schema_init(SchemaMeta(name="profile")))
        pub.schema_message("profile", load_lens_file(REPO / "lenses" / "profile" / "001.yaml"))
        people = [pub.create("profile", {"name": f"p{n}", "email": f"p{n}@example.org"}) for n in range(3)]
        pub.update("profile", people[0], {"name": "renamed"})
    run_ingest(spark, lake)
    register_schema(spark, lake, schema, None)
    run_silver(spark, lake)
    run_gold(spark, lake)
    built = snapshot(spark, lake)
    ref = silver_tables(str(lake.lake_root))["instance_states"]
    old = spark.read.format("delta").load(ref.location).drop("log_id").toArrow()
    delta.overwrite(spark.createDataFrame(old), ref)

    with Publisher(store, "author", lake.landing) as pub:
        pub.update("profile", people[1], {"name": "later"})
    run_ingest(spark, lake)
    upgraded = run_silver(spark, lake)
    run_gold(spark, lake)
    assert upgraded.rebuilt and upgraded.logs_judged == len(rows(spark, lake, "silver", "logs"))  # every log, whole
    after = snapshot(spark, lake)
    assert len(after["instance_states"]) == 3 and all(r["log_id"] is not None for r in after["instance_states"])
    assert sorted(json.loads(r)["name"] for r in after["gold.profile"]) == ["later", "p2", "renamed"]
    assert len(built["instance_states"]) == 3
    run_silver(spark, lake, rebuild=True)
    run_gold(spark, lake, rebuild=True)
    assert snapshot(spark, lake) == after

    with Publisher(store, "author", lake.landing) as pub:
        pub.update("profile", people[2], {"name": "last"})
    run_ingest(spark, lake)
    assert run_silver(spark, lake).rebuilt is None


@pytest.mark.slow_on_spark(why="three materializes; the table is written by the same Delta writes on both engines")
def test_a_lake_from_before_silver_kept_the_schema_entries_apart_finds_them_once(spark: Any, lake: Any,
                                                                                tmp_path: Any) -> None:
    """``silver.schema_entries`` (the accepted entries of schema logs): a lake from before it reads
    the schemas the long way (silver.messages and bronze) until its next silver run, which writes it
    even with nothing new; a migration later adds its entry, and a run that brings instance
    messages only leaves the table as it was."""
    from lakehouse.spark.lake import found_schema_entries, load_schemas, silver_tables
    from lakehouse.spark.tables import delta_version, remove_tree

    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing, create_key=True) as pub:
        schema = str(pub.schema_init(SchemaMeta(name="profile")))
        pub.schema_message("profile", load_lens_file(REPO / "lenses" / "profile" / "001.yaml"))
        ann = pub.create("profile", {"name": "ann", "email": "ann@example.org"})
    run_ingest(spark, lake)
    register_schema(spark, lake, schema, None)
    run_silver(spark, lake)
    run_gold(spark, lake)
    stored = rows(spark, lake, "silver", "schema_entries")
    assert [(r["seq_num"], r["end_of_feed"]) for r in sorted(stored, key=lambda r: r["seq_num"])] == [(1, False), (2, False)]
    ref = silver_tables(str(lake.lake_root))["schema_entries"]
    schemas = load_schemas(spark, str(lake.lake_root))
    remove_tree(ref.location)  # a lake from before the table
    assert load_schemas(spark, str(lake.lake_root)).keys() == schemas.keys()  # found the long way
    assert run_silver(spark, lake).up_to_date and rows(spark, lake, "silver", "schema_entries") == stored

    with Publisher(store, "author", lake.landing) as pub:
        (tmp_path / "age.yaml").write_text("kind: schema-migration\nfields:\n  - age:\n    action: create\n"
                                           "    type: integer\n")
        pub.schema_message("profile", load_lens_file(tmp_path / "age.yaml"))
    run_ingest(spark, lake)
    run_silver(spark, lake)
    grown = rows(spark, lake, "silver", "schema_entries")
    assert len(grown) == 3 and grown == sorted(
        (r.asDict() for r in found_schema_entries(spark, str(lake.lake_root)).collect()),  # type: ignore[union-attr]
        key=lambda r: json.dumps(r, sort_keys=True, default=str))
    version = delta_version(ref.location)
    with Publisher(store, "author", lake.landing) as pub:
        pub.update("profile", ann, {"name": "ann b"})
    run_ingest(spark, lake)
    run_silver(spark, lake)
    assert delta_version(ref.location) == version


@pytest.mark.slow_on_spark(why="two batches of a story and a check of every table: 173 s on Apache Spark in make "
                                "test; the upgrade is the same pipeline code on both engines")
def test_a_lake_whose_logs_do_not_say_whether_they_ended_finds_it_once_in_bronze(spark: Any, lake: Any) -> None:
    """``silver.logs`` from before its ``ended`` column: the next run finds, once, from bronze,
    whether each log's accepted prefix ends it and writes the column, so that a log judged by
    what it grew rejects the entry after its end (Carol's update in the second batch of the
    story)."""
    from collections import Counter

    from lakehouse.spark import delta
    from lakehouse.spark.lake import silver_tables
    from tests.simulate import History
    from tests.spark.test_against_reference import check_lake, run_batches
    from tests.stories import CAROL, STORIES

    story = STORIES["deletes_never_wait"](0)
    history = History(lines=(), names=story.names, claims=Counter())
    arrived = run_batches(spark, lake, history, [story.batches[0]])
    ref = silver_tables(str(lake.lake_root))["logs"]
    carol = bytes(CAROL.verify_key).hex()
    assert [r["ended"] for r in rows(spark, lake, "silver", "logs") if r["author"] == carol] == [True]
    delta.overwrite(spark.read.format("delta").load(ref.location).drop("ended"), ref)
    arrived += run_batches(spark, lake, history, [story.batches[1]], first=1)
    check_lake(spark, lake, arrived, history)
    assert [r["ended"] for r in rows(spark, lake, "silver", "logs") if r["author"] == carol] == [True]


def test_silver_keeps_statistics_only_on_the_columns_its_reads_skip_by_and_an_older_lake_gets_them(
        spark: Any, lake: Any) -> None:
    """``silver.messages`` keeps min/max statistics on ``batch_id`` and ``run_id`` only and
    ``silver.instance_states`` none (rows only), so that each read replays a small Delta log; a
    lake whose tables were written with every column's statistics has the properties set by its
    next run, whose files keep only those (the older files as they were), and the statistics still
    tell a run's new messages from the stored ones."""
    from lakehouse.spark import buckets, catalog, deltalog
    from lakehouse.spark.lake import silver_tables
    from lakehouse.spark.tables import remove_tree

    T = silver_tables(str(lake.lake_root))
    store = KeyStore(lake.keys)

    def narrow(location: str, batch: int | None = None) -> list[bool]:
        """Per data file (of ``batch`` when given): whether its statistics name only the kept columns."""
        snap = deltalog.snapshot(location)
        kept = {"batch_id", "run_id"} if location == T["messages"].location else set()
        return [set(f.minima) <= kept and set(f.maxima) <= kept and f.records is not None for f in snap.files
                if batch is None or f.maxima.get("batch_id") == batch]

    with Publisher(store, "author", lake.landing, create_key=True) as pub:
        schema = str(pub.schema_init(SchemaMeta(name="profile")))
        pub.schema_message("profile", load_lens_file(REPO / "lenses" / "profile" / "001.yaml"))
        people = [pub.create("profile", {"name": f"p{n}", "email": f"p{n}@example.org"}) for n in range(3)]
    run_ingest(spark, lake)
    register_schema(spark, lake, schema, None)
    run_silver(spark, lake)
    for declared in (catalog.MESSAGES, catalog.INSTANCE_STATES):
        location = T[declared.name].location
        assert deltalog.snapshot(location).properties.items() >= declared.properties.items()
        assert all(narrow(location))
    assert deltalog.snapshot(T["messages"].location).integer_max("batch_id") == 1

    # a lake from before: both tables written again in their buckets with every column's statistics
    for declared, key in ((catalog.MESSAGES, "author"), (catalog.INSTANCE_STATES, "instance_id")):
        ref = T[declared.name]
        stored = spark.createDataFrame(spark.read.format("delta").load(ref.location).drop(buckets.COLUMN).toArrow())
        count = buckets.layout(ref.location)[1]
        assert count is not None
        remove_tree(ref.location)
        buckets.write(stored, ref, count, key, **({"delta.enableDeletionVectors": "true"}
                                                 if declared is catalog.INSTANCE_STATES else {}))
        assert not any(narrow(ref.location))
    before = {f.path for f in deltalog.snapshot(T["instance_states"].location).files}
    with Publisher(store, "author", lake.landing) as pub:
        pub.update("profile", people[0], {"name": "renamed"})
        pub.create("profile", {"name": "new", "email": "new@example.org"})
    run_ingest(spark, lake)
    assert run_silver(spark, lake).new_entries == 2
    for declared in (catalog.MESSAGES, catalog.INSTANCE_STATES):
        assert deltalog.snapshot(T[declared.name].location).properties.items() >= declared.properties.items()
    assert narrow(T["messages"].location, batch=2) and all(narrow(T["messages"].location, batch=2))
    # the states: the files the run wrote keep the kept statistics (the whole table, or a file a
    # touched bucket beside its stored one)
    written = [f for f in deltalog.snapshot(T["instance_states"].location).files if f.path not in before]
    assert written and all(not f.minima and not f.maxima and f.records for f in written)
