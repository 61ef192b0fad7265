"""Gold: registration, waiting schemas, time travel over many commits, history (SEMANTICS.md sections 5-6)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakehouse.core.messages import SchemaMeta, SchemaRevert
from lakehouse.errors import HistoryError, RegistrationError
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.lensfiles import load_lens_file
from lakehouse.publish.publisher import Publisher
from lakehouse.spark import buckets, cascades
from lakehouse.spark import gold as G
from lakehouse.spark.tables import table
from pipelines.gold import run_gold
from pipelines.history import schema_history
from pipelines.ingest import run_ingest
from pipelines.register import register_schema
from pipelines.silver import run_silver
from tests.feeds import assert_feeds_replay
from tests.lakes import REPO, run_cli

pytestmark = pytest.mark.parity

LENSES = REPO / "lenses"


def materialize(spark: Any, lake: Any) -> Any:
    run_ingest(spark, lake)
    run_silver(spark, lake)
    return run_gold(spark, lake)


def publish_schemas(lake: Any, *names: str) -> dict[str, str]:
    """Publish the named schemas with their first lens file; returns name -> schema id."""
    store = KeyStore(lake.keys)
    ids = {}
    with Publisher(store, "author", lake.landing, create_key=True) as pub:
        for name in names:
            ids[name] = str(pub.schema_init(SchemaMeta(name=name)))
            pub.schema_message(name, load_lens_file(LENSES / name / "001.yaml", resolve_schema=pub.resolve_schema))
    return ids


@pytest.mark.slow_on_spark(why="rules decided in Python; the slothmail story registers on both engines")
def test_registration_rules(spark: Any, lake: Any) -> None:
    ids = publish_schemas(lake, "profile", "attachment")
    with pytest.raises(RegistrationError) as unseen:
        register_schema(spark, lake, ids["profile"], None)
    assert unseen.value.code == "unknown_schema" and "make ingest" in str(unseen.value)

    summary = materialize(spark, lake)
    assert set(summary.unregistered) == set(ids.values()) and not summary.tables
    with pytest.raises(RegistrationError) as bad_id:
        register_schema(spark, lake, "not-an-id:x", None)
    assert bad_id.value.code == "bad_schema_id"
    with pytest.raises(RegistrationError) as bad_name:
        register_schema(spark, lake, ids["profile"], "Profile-Table")
    assert bad_name.value.code == "bad_name"
    # issue: a name such as slothmail_v2 took over another registration's versioned table
    with pytest.raises(RegistrationError) as versioned:
        register_schema(spark, lake, ids["attachment"], "profile_v2")
    assert versioned.value.code == "bad_name" and "_v<digits>" in str(versioned.value)
    with pytest.raises(RegistrationError) as feed_name:  # gold.profile_v2_changes is profile_v2's change feed
        register_schema(spark, lake, ids["attachment"], "profile_v2_changes")
    assert feed_name.value.code == "bad_name"

    assert register_schema(spark, lake, ids["profile"], None) == (ids["profile"], "profile", True)
    assert register_schema(spark, lake, ids["profile"], None) == (ids["profile"], "profile", False)
    with pytest.raises(RegistrationError) as taken:
        register_schema(spark, lake, ids["attachment"], "profile")
    assert taken.value.code == "name_taken" and "--name <name> (NAME=<name> with make register)" in str(taken.value)
    with pytest.raises(RegistrationError) as renamed:
        register_schema(spark, lake, ids["profile"], "people")
    assert renamed.value.code == "registered"

    gold = run_gold(spark, lake)
    assert [t.name for t in gold.tables] == ["profile_v2"]
    assert set(gold.unregistered) == {ids["attachment"]}
    assert run_gold(spark, lake).up_to_date


def test_a_schema_is_registered_by_name_right_after_its_ingest(spark: Any, lake: Any) -> None:
    """Issue: `make ingest` then `make register` failed until a materialize ran in between, and
    only an id was accepted."""
    ids = publish_schemas(lake, "profile", "attachment")
    with Publisher(KeyStore(lake.keys), "other", lake.landing, create_key=True) as pub:
        pub.schema_init(SchemaMeta(name="attachment"))  # a second schema named attachment
    run_ingest(spark, lake)
    assert register_schema(spark, lake, "profile", None) == (ids["profile"], "profile", True)
    with pytest.raises(RegistrationError) as ambiguous:
        register_schema(spark, lake, "attachment", None)
    assert ambiguous.value.code == "ambiguous_name" and ids["attachment"] in str(ambiguous.value)
    with pytest.raises(RegistrationError) as unknown:
        register_schema(spark, lake, "nothing", None)
    assert unknown.value.code == "unknown_schema" and "profile" in str(unknown.value)
    assert register_schema(spark, lake, ids["attachment"], "files") == (ids["attachment"], "files", True)
    run_silver(spark, lake)
    assert {t.name for t in run_gold(spark, lake).tables} == {"profile_v2", "files_v2"}


def test_a_stopped_revert_run_again_finishes_the_first_instead_of_publishing_another(lake: Any) -> None:
    """Issue: a killed `lakehouse revert` run again published a second revert, abandoning the first."""
    ids = publish_schemas(lake, "profile", "attachment", "slothmail")
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        pub.schema_message("slothmail", load_lens_file(LENSES / "slothmail" / "002.yaml",
                                                       resolve_schema=pub.resolve_schema))
    stopped = run_cli(lake, "revert", "slothmail", "--target", "2", LAKEHOUSE_FAULT_AFTER="entries")
    assert stopped.returncode == 70, stopped.stderr
    again = run_cli(lake, "revert", "slothmail", "--target", "2")
    assert again.returncode == 0, again.stderr
    assert "version 4 is already the revert to version 2" in again.stdout
    listed = run_cli(lake, "sql", f"SELECT version, kind FROM silver.schema_versions WHERE schema = '{ids['slothmail']}' "
                                  "ORDER BY version", "--format", "json")
    kinds = [json.loads(line)["kind"] for line in listed.stdout.splitlines()]
    assert kinds == ["schema-meta", "schema-migration", "schema-migration", "schema-revert"]


@pytest.mark.slow_on_spark(why="about 100 s on Apache Spark; schemas waiting for a relation's target, and "
                               "keeping their tables, run on both engines in the generated histories")
def test_a_wait_follows_the_versions_a_revert_keeps_and_a_registration_can_be_dropped(spark: Any, lake: Any) -> None:
    """Issue: a relation to a schema that never appears made gold wait forever, even after a revert
    abandoned the version that added it; status never said so; a registration could not be dropped."""
    ids = publish_schemas(lake, "profile", "attachment", "slothmail")
    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing) as pub:
        pub.create("slothmail", {"subject": "kept"})  # at version 2, which the revert keeps
        pub.schema_message("slothmail", load_lens_file(LENSES / "slothmail" / "002.yaml",
                                                       resolve_schema=pub.resolve_schema))
    run_ingest(spark, lake)
    run_silver(spark, lake)
    for name in ("profile", "slothmail"):
        register_schema(spark, lake, ids[name], None)
    assert ids["attachment"] in run_gold(spark, lake).waiting[ids["slothmail"]]
    status = run_cli(lake, "status", COLUMNS="250")
    assert status.returncode == 0, status.stderr
    waiting_line = next(line for line in status.stdout.splitlines() if ids["slothmail"] in line and "waits" not in line
                        and "attachment" in line)
    assert waiting_line.split()[1] == "slothmail"

    with Publisher(store, "author", lake.landing) as pub:  # the revert abandons the relation's version
        pub.schema_message("slothmail", SchemaRevert(2))
    gold = materialize(spark, lake)
    assert not gold.waiting and "slothmail_v2" in {t.name for t in gold.tables}
    assert "waiting schemas" not in run_cli(lake, "status", COLUMNS="250").stdout

    dropped = run_cli(lake, "register", "slothmail", "--drop")
    assert dropped.returncode == 0 and ids["slothmail"] in dropped.stdout, dropped.stderr
    assert {t.name for t in run_gold(spark, lake).tables} == set()
    assert {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()} == {"profile", "profile_v2"}
    register_schema(spark, lake, "slothmail", None)
    run_gold(spark, lake)
    assert [r["subject"] for r in spark.sql("SELECT subject FROM gold.slothmail").collect()] == ["kept"]
    missing = run_cli(lake, "register", "nothing", "--drop")
    assert missing.returncode != 0 and "not_registered" in missing.stdout + missing.stderr


@pytest.mark.slow_on_spark(why="three materialize runs; relations wait in the generated histories on both engines")
def test_a_schema_waits_for_the_schemas_its_relations_point_at(spark: Any, lake: Any) -> None:
    ids = publish_schemas(lake, "profile", "slothmail")
    materialize(spark, lake)
    register_schema(spark, lake, ids["slothmail"], None)
    waiting = run_gold(spark, lake)
    assert ids["profile"] in waiting.waiting[ids["slothmail"]] and not waiting.tables
    register_schema(spark, lake, ids["profile"], None)
    done = run_gold(spark, lake)
    assert not done.waiting
    assert {t.name for t in done.tables} == {"profile_v2", "slothmail_v2"}
    assert {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()} == {
        "profile", "profile_v2", "slothmail", "slothmail_v2"}


@pytest.mark.slow_on_spark(why="about 90 s on Apache Spark on 2 cores; schemas waiting for a relation's target, "
                               "and keeping their tables, run on both engines in the generated histories")
def test_a_waiting_schema_keeps_its_tables_and_catches_up_when_the_wait_ends(spark: Any, lake: Any) -> None:
    """Issue: the run that ended a wait folded only the changes of its own silver run, so the
    changes made while the schema waited never reached gold; and its tables left the catalog."""
    ids = publish_schemas(lake, "profile", "attachment", "slothmail")
    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing) as pub:
        first = pub.create("slothmail", {"subject": "one"})
    run_ingest(spark, lake)
    run_silver(spark, lake)
    for name in ("profile", "slothmail"):
        register_schema(spark, lake, ids[name], None)
    assert {t.name for t in run_gold(spark, lake).tables} == {"profile_v2", "slothmail_v2"}

    with Publisher(store, "author", lake.landing) as pub:  # a relation to the unregistered attachment
        pub.schema_message("slothmail", load_lens_file(LENSES / "slothmail" / "002.yaml",
                                                       resolve_schema=pub.resolve_schema))
        pub.update("slothmail", first, {"subject": "two"})
        pub.create("slothmail", {"subject": "new"})
    waiting = materialize(spark, lake)
    assert ids["attachment"] in waiting.waiting[ids["slothmail"]]
    # while it waits, its tables stay readable as the last run left them
    assert [r["subject"] for r in spark.sql("SELECT subject FROM gold.slothmail").collect()] == ["one"]

    register_schema(spark, lake, ids["attachment"], None)
    done = run_gold(spark, lake)
    assert not done.waiting
    for name in ("slothmail", "slothmail_v2", "slothmail_v3"):
        got = sorted(r["subject"] for r in spark.sql(f"SELECT subject FROM gold.{name}").collect())
        assert got == ["new", "two"], name


@pytest.mark.slow_on_spark(why="13 materialize runs; the table-level test below covers 32 commits on every engine")
def test_every_delta_version_of_a_gold_table_stays_readable(spark: Any, lake: Any, monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """Sail cannot time-travel past a checkpoint while the log has a ``_last_checkpoint`` hint
    (LAKEHOUSE.md, engine caveats; docs/engines.md says why): 12 commits by materialize runs, past
    Delta's default checkpoint interval of 10, all readable (the table-level test below writes 32),
    with the checkpoints the gold runs wrote of the table's log and of its change table's (every 2
    commits here, :func:`lakehouse.spark.delta.checkpoint_log`) and no hint."""
    from lakehouse.spark import delta

    monkeypatch.setattr(delta, "LOG_CHECKPOINT_COMMITS", 2)
    ids = publish_schemas(lake, "profile")
    materialize(spark, lake)
    register_schema(spark, lake, ids["profile"], None)
    store = KeyStore(lake.keys)
    with Publisher(store, "author", lake.landing) as pub:
        ada = pub.create("profile", {"name": "name 0"})
    materialize(spark, lake)
    rounds = 12
    for n in range(1, rounds):
        with Publisher(store, "author", lake.landing) as pub:
            pub.update("profile", ada, {"name": f"name {n}"})
        materialize(spark, lake)
    history = schema_history(spark, lake, "profile")
    writes = history.tables["profile_v2"]
    assert len(writes) == rounds and [w["delta_version"] for w in writes] == list(range(rounds))
    location = f"{lake.lake_root}/gold/profile_v2"
    for n, w in enumerate(writes):
        got = spark.read.format("delta").option("versionAsOf", w["delta_version"]).load(location).collect()
        assert [(r["name"], r["_updates"]) for r in got] == [(f"name {n}", n)]
    sql = spark.sql(f"SELECT name FROM gold.profile_v2 VERSION AS OF {writes[3]['delta_version']}").collect()
    assert [r["name"] for r in sql] == ["name 3"]
    log = Path(location) / "_delta_log"
    due = [v for v in range(rounds) if delta.checkpoint_due("profile_v2", v)]
    assert len(due) >= rounds // 2 - 1
    assert sorted(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet")) == due
    assert not (log / "_last_checkpoint").exists()
    feed_log = Path(f"{location}_changes") / "_delta_log"  # its change table's, appended to by each run
    assert list(feed_log.glob("*.checkpoint.parquet")) and not (feed_log / "_last_checkpoint").exists()


@pytest.mark.slow_on_spark(why="32 gold runs, about 45 s on Apache Spark; the checkpoint it guards against is Sail's")
def test_every_version_of_a_gold_table_written_32_times_stays_readable(spark: Any, lake: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Time travel past several checkpoint intervals at the table level, as a revert reads gold
    tables (LAKEHOUSE.md, engine caveats): 32 overwrites by the gold writer, every version read back,
    through the reader, through SQL's ``VERSION AS OF`` and through this package's reader of the log.
    The checkpoints the gold run writes (:func:`lakehouse.spark.delta.checkpoint_log`, here one in 8
    commits) leave no ``_last_checkpoint`` hint, and the hint of a checkpoint written with one (a run
    that died between the two) is gone after the table's next write; the hint is looked for only in
    the few versions after a checkpoint (:data:`lakehouse.spark.delta.HINT_WINDOW`), not at every write."""
    from deltalake import DeltaTable

    from lakehouse.spark import delta, deltalog, tables
    from lakehouse.spark.gold import write_table

    monkeypatch.setattr(delta, "LOG_CHECKPOINT_COMMITS", 8)
    monkeypatch.setattr(delta, "HINT_WINDOW", 3)
    looked: list[str] = []
    remove_file = tables.remove_file
    monkeypatch.setattr(tables, "remove_file", lambda location: looked.append(location) or remove_file(location))
    ref = table(str(lake.lake_root), "gold", "travel_v2")
    log = Path(ref.location) / "_delta_log"
    rounds = 32
    due = [n for n in range(rounds) if delta.checkpoint_due(ref.name, n)]
    assert 3 <= len(due) <= 4 and all(b - a == 8 for a, b in zip(due, due[1:], strict=False))
    stale = due[1]
    for n in range(rounds):
        write_table(spark.createDataFrame([("i", "a", f"name {n}", n)], "instance_id STRING, author STRING, "
                                           "name STRING, _updates BIGINT"), ref, 1)
        if n == stale:  # the checkpoint with its hint, as a run that died before taking it away left it
            DeltaTable(str(ref.location)).create_checkpoint()
            assert (log / delta.CHECKPOINT_HINT).exists()
        else:
            assert delta.checkpoint_log(ref, n) == (n in due)
            assert not (log / delta.CHECKPOINT_HINT).exists()
    assert sorted(int(p.name[:20]) for p in log.glob("*.checkpoint.parquet")) == due
    window = [n for n in range(rounds) if n != stale and any(0 <= n - d < 3 for d in due)]
    assert len(looked) == len(window) < rounds
    for n in range(rounds):
        got = spark.read.format("delta").option("versionAsOf", n).load(ref.location).collect()
        assert [(r["name"], r["_updates"]) for r in got] == [(f"name {n}", n)]
        assert deltalog.snapshot(ref.location, n).rows == 1
    sql = spark.sql(f"SELECT name FROM delta.`{ref.location}` VERSION AS OF 3").collect()
    assert [r["name"] for r in sql] == ["name 3"]
    assert [r["name"] for r in spark.read.format("delta").load(ref.location).collect()] == [f"name {rounds - 1}"]


@pytest.mark.slow_on_spark(why="two materialize runs; history reads silver.gold_versions the same way on both engines")
def test_history_lists_versions_and_unknown_names_fail_clearly(spark: Any, lake: Any) -> None:
    ids = publish_schemas(lake, "profile")
    materialize(spark, lake)
    register_schema(spark, lake, ids["profile"], "people")
    materialize(spark, lake)
    for name in ("people", "profile", ids["profile"]):
        history = schema_history(spark, lake, name)
        assert (history.schema, history.name) == (ids["profile"], "people")
    assert [(v["version"], v["kind"], v["gold_table"]) for v in history.versions] == [
        (1, "schema-meta", None), (2, "schema-migration", "people_v2")]
    assert history.versions[1]["changes"] == ["create name<varchar>", "create email<varchar>"]
    with pytest.raises(HistoryError) as unknown:
        schema_history(spark, lake, "nope")
    assert "people" in str(unknown.value)


def test_catalog_names_are_registered_once_and_again_after_they_are_dropped(spark: Any, lake: Any) -> None:
    """``register_table`` leaves a name registered at the same location as it is, registers it
    again at another location, and again after ``register_gold`` dropped it from the catalog."""
    from lakehouse.spark.tables import TableRef, register_gold, register_table

    first, second = table(str(lake.lake_root), "gold", "kept_v1"), table(str(lake.lake_root), "gold", "kept_v2")
    spark.range(2).write.format("delta").save(first.location)
    spark.range(3).write.format("delta").save(second.location)
    register_table(spark, TableRef("gold", "kept", first.location))
    register_table(spark, TableRef("gold", "kept", first.location))
    assert spark.table("gold.kept").count() == 2
    register_table(spark, TableRef("gold", "kept", second.location))
    assert spark.table("gold.kept").count() == 3
    register_gold(spark, str(lake.lake_root))  # no gold run in this lake: every gold name is dropped
    assert "kept" not in {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()}
    register_table(spark, TableRef("gold", "kept", second.location))
    assert spark.table("gold.kept").count() == 3


def test_describe_lists_the_columns_of_every_registered_table(spark: Any, lake: Any) -> None:
    """Issue: ``DESCRIBE TABLE gold.x`` returned no columns on Sail, though queries read them."""
    from lakehouse.spark.tables import TableRef, register_table

    ref = table(str(lake.lake_root), "gold", "described_v1")
    spark.createDataFrame([("a", 1, True)], "name STRING, n BIGINT, b BOOLEAN").write.format("delta").save(
        ref.location)
    for name in ("described_v1", "described"):
        register_table(spark, TableRef("gold", name, ref.location))
        described = [(r["col_name"], r["data_type"]) for r in spark.sql(f"DESCRIBE TABLE gold.{name}").collect()]
        assert described[:3] == [("name", "string"), ("n", "bigint"), ("b", "boolean")]
        assert spark.table(f"gold.{name}").collect() == [("a", 1, True)]
    # Sail refuses an ARRAY column declared at registration (docs/engines.md): such a table is still named
    listed = table(str(lake.lake_root), "gold", "listed_v1")
    spark.createDataFrame([("a", [1.5])], "name STRING, xs ARRAY<DOUBLE>").write.format("delta").save(listed.location)
    register_table(spark, TableRef("gold", "listed_v1", listed.location))
    assert spark.table("gold.listed_v1").collect()[0]["xs"] == [1.5]
    # and `lakehouse sql` / the prompt describe it from the table's schema where the engine gives nothing
    from lakehouse.sql import run_statement

    columns, described_rows = run_statement(spark, "DESCRIBE TABLE gold.listed_v1")
    assert columns[:2] == ["col_name", "data_type"]
    assert [(r[0], r[1]) for r in described_rows][:2] == [("name", "string"), ("xs", "array<double>")]


@pytest.mark.slow_on_spark(why="sixty small queries; cascades are in the generated histories on both engines")
def test_the_walk_over_every_edge_gives_the_removed_set_in_the_client_and_in_the_engine(
        spark: Any, engine_name: str, tmp_path: Path) -> None:
    """``walk_all`` keeps of the states only what a cascade can travel; the removed set from it,
    walked in the client (numbered, with numpy) or in the engine (a level at a time, and in the
    client after all past its levels), or over an edge index of every edge (as a region walk that
    gave up leaves it, patched with a state), is the one from every deleted instance and every
    edge (dangling targets included), and the flipped ids are those whose verdict differs from the
    set before."""
    from lakehouse.core.gold import removed_by_cascade
    from lakehouse.spark.cascades import RegionEdges, hex_ids_frame, walk_all
    from lakehouse.spark.edge_index import EdgeIndex

    runs = iter(range(1_000_000))

    @settings(max_examples={"sail": 40, "spark": 8}[engine_name], deadline=None)
    @given(graph=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 11), max_size=3)), min_size=1,
                          max_size=12),
           before=st.sets(st.integers(0, 11)), engine=st.booleans(), levels=st.sampled_from([64, 1]),
           indexed=st.booleans())
    # a chain of three: two levels in the engine, or one and the rest in the client
    @example(graph=[(True, []), (False, [0]), (False, [1])], before={2, 5}, engine=True, levels=64, indexed=False)
    @example(graph=[(True, []), (False, [0]), (False, [1])], before=set(), engine=True, levels=1, indexed=False)
    @example(graph=[(True, []), (False, [0]), (False, [1]), (False, [2, 9])], before={1}, engine=False, levels=64,
             indexed=True)
    def check(graph: list[tuple[bool, list[int]]], before: set[int], engine: bool, levels: int,
              indexed: bool) -> None:
        def hex_id(n: int) -> str:
            return f"0020{n:064x}"

        rows = [(hex_id(n), deleted, [hex_id(t) for t in targets]) for n, (deleted, targets) in enumerate(graph)]
        states = spark.createDataFrame(rows, "instance_id STRING, deleted BOOLEAN, targets ARRAY<STRING>")
        everything = removed_by_cascade([i for i, deleted, _ in rows if deleted], {i: t for i, _, t in rows if t})
        old = {hex_id(n) for n in before}
        index = None
        if indexed:  # built from the states' edges, then patched with the first state as it is
            edges = RegionEdges(spark, states)
            edges.stage(str(tmp_path / f"edges-{next(runs)}"), 1_000)
            index = EdgeIndex.of_edges(edges.here)
            assert index is not None
            first, deleted, targets = rows[0]
            index = index.patched({bytes.fromhex(first)},
                                  [(bytes.fromhex(first), deleted, sorted({bytes.fromhex(t) for t in targets}))])
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(cascades, "ENGINE_WALK_LEVELS", levels)
            walked = walk_all(spark, states, hex_ids_frame(spark, old), str(tmp_path / str(next(runs))),
                              client_edges=-1 if engine else None, index=index)
        # twelve instances cascade down at most eleven levels: one level may not be enough
        assert walked.where == ("engine" if engine else "client") or (engine and levels == 1)
        if graph == [(True, []), (False, [0]), (False, [1])]:
            assert walked.where == ("engine" if levels > 1 else "client")
        assert {r[0] for r in walked.removed.collect()} == everything
        assert walked.count == len(everything)
        flipped = set() if walked.flipped is None else {r[0] for r in walked.flipped.collect()}
        assert flipped == everything ^ old

    check()


@pytest.mark.slow_on_spark(why="small queries a level; region walks are in the generated histories on both engines")
def test_a_region_walk_finds_what_points_at_a_level_in_the_client_and_in_the_engine(
        spark: Any, engine_name: str, tmp_path: Path) -> None:
    """``RegionEdges.pointing_at``: the ``(source, deleted)`` of every edge into the given ids, from
    the states' edges in the engine (a first level), then from them staged, read here or (past the
    client's bound, or let go) scanned by the engine; the same sets every way, duplicates and
    dangling targets included; ``stage`` counts the staged rows. ``RegionEdges.targets_of``: the
    targets of the given sources once the edges are read here, None before."""
    from lakehouse.spark.cascades import RegionEdges

    runs = iter(range(1_000_000))

    @settings(max_examples={"sail": 25, "spark": 6}[engine_name], deadline=None)
    @given(graph=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 9), max_size=3)), min_size=1, max_size=10),
           levels=st.lists(st.sets(st.integers(0, 12), min_size=1), min_size=1, max_size=3), here=st.booleans(),
           forget=st.booleans())
    def check(graph: list[tuple[bool, list[int]]], levels: list[set[int]], here: bool, forget: bool) -> None:
        def hex_id(n: int) -> str:
            return f"0020{n:064x}"

        rows = [(hex_id(n), deleted, [hex_id(t) for t in targets]) for n, (deleted, targets) in enumerate(graph)]
        states = spark.createDataFrame(rows, "instance_id STRING, deleted BOOLEAN, targets ARRAY<STRING>")
        edges = RegionEdges(spark, states)
        for depth, level in enumerate(levels):
            if depth == 1:
                staged = edges.stage(str(tmp_path / str(next(runs))), client_edges=None if here else -1)
                assert staged == sum(max(1, len(targets)) for deleted, targets in graph if targets or deleted)
                if forget:  # the rows read here let go (a region walk past CLIENT_WALK_EDGES with no index)
                    edges.forget_here()
                assert edges.where == ("client" if here and not forget else "engine")
            ids = {hex_id(n) for n in level}
            expected = {(source, deleted) for source, deleted, targets in rows for t in targets if t in ids}
            assert edges.pointing_at(ids) == expected
            # the other way, from sources to their targets: known only once the edges are here
            assert edges.targets_of(ids) == ({t for source, _, targets in rows if source in ids for t in targets}
                                             if edges.where == "client" else None)

    check()


@pytest.mark.slow_on_spark(why="one small query a case; the generated histories merge on both engines")
def test_the_touched_instances_per_schema_are_the_same_read_here_or_by_the_engine(
        spark: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """What a run touches, per schema: its count and its ids' bucket hashes, from the staged rows
    read here (few rows, every hash certain) or from the engine (more rows than the limit, or an
    id whose hash the engine alone knows): the same either way, since a merge reads only those
    buckets."""
    from pyspark.sql import functions as F

    import pipelines.gold as gold
    from lakehouse.spark import delta

    rows = [("s1", f"0020{n:04x}{n:060x}") for n in range(0, 60000, 997)] + [("s2", "0020ffff" + "0" * 60)]
    for case, extra, limit in (("here", [], 10_000), ("engine, more rows", [], 5), ("engine, odd id", [("s2", "xy")], 10_000)):
        monkeypatch.setattr(gold, "LOCAL_PROJECTION_LIMIT", limit)
        path = str(tmp_path / case.replace(" ", "_").replace(",", ""))
        touched = delta.stage(spark.createDataFrame(rows + extra, "schema STRING, instance_id STRING"), path)
        engine = {r["schema"]: (int(r["n"]), {int(h) for h in r["h"]}) for r in touched.groupBy("schema").agg(
            F.count("*").alias("n"), F.collect_set(buckets.hash_column()).alias("h")).collect()}
        asked: list[str] = []  # the engine's hash column, built only when the engine is asked
        monkeypatch.setattr(buckets, "hash_column",
                            lambda key="instance_id", f=buckets.hash_column, asked=asked: asked.append(key) or f(key))
        counts, hashes, ids = gold._touched_per_schema(touched, path)
        monkeypatch.undo()
        assert bool(asked) == case.startswith("engine"), case
        assert {k: (counts[k], hashes[k]) for k in counts} == engine, case
        assert engine["s1"] == (61, {n for n in range(0, 60000, 997)})
        # the ids themselves when read here (a merge computed here), none from the engine
        assert ids == (None if case.startswith("engine") else
                       {s: frozenset(i for k, i in rows if k == s) for s in ("s1", "s2")}), case


def test_a_gold_double_reads_back_as_written(spark: Any, lake: Any) -> None:
    """A float field in a one-row file: the engine must read the data file, not the Delta log's
    statistics (which it parses one unit in the last place off for this value)."""
    from lakehouse.spark.gold import write_table

    value = 990232.5988427799
    ref = table(str(lake.lake_root), "gold", "floats_v2")
    for rows in (1, 3):  # one row, and a file whose values are all equal
        write_table(spark.createDataFrame([("i", "a", value)] * rows, "instance_id STRING, author STRING, x DOUBLE")
                     .coalesce(1), ref, rows)
        assert [r["x"] for r in spark.read.format("delta").load(ref.location).collect()] == [value] * rows


@pytest.mark.slow_on_spark(why="three lakes and five materialize runs; the catalog is found from the lake root on "
                               "both engines the same way")
def test_a_copied_lake_and_its_original_stay_independent(spark: Any, lake: Any, tmp_path: Any) -> None:
    """Issue: gold_versions held absolute paths, so statements on a copy wrote into the original,
    and a moved original broke every command on the copy."""
    import shutil

    from lakehouse.spark.tables import register_gold
    from tests.lakes import write_landing
    from tests.simulate import Knobs, simulate

    history = simulate(Knobs.clean(authors=1, schemas=1, migrations=2, messages=20), seed=4)
    lines = list(history.lines)
    write_landing(lake, "first.jsonl", lines[:-5])
    materialize(spark, lake)
    for sid, name in history.names.items():
        register_schema(spark, lake, str(sid), name)
    materialize(spark, lake)
    original = {r["table_name"]: r["rows"] for r in spark.table("silver.gold_versions").collect() if r["table_name"]}
    copy = lake.with_overrides(lake_root=str(tmp_path / "copy"), landing=str(tmp_path / "copy-landing"))
    shutil.copytree(lake.lake_root, copy.lake_root)
    shutil.copytree(lake.landing, copy.landing)
    write_landing(copy, "second.jsonl", lines[-5:])
    materialize(spark, copy)
    name = next(iter(history.names.values()))
    assert {r["location"] for r in spark.table("silver.gold_versions").collect() if r["location"]} <= {
        f"gold/{t}" for t in original}
    latest = max(original, key=lambda t: int(t.rsplit("_v", 1)[1]))
    copied_rows = spark.table(f"gold.{name}").count()  # the catalog names the copy's table
    assert copied_rows == spark.read.format("delta").load(f"{copy.lake_root}/gold/{latest}").count()
    register_gold(spark, str(lake.lake_root))
    assert spark.table(f"gold.{name}").count() == original[latest]
    moved = tmp_path / "moved"
    shutil.move(str(lake.lake_root), moved)  # the original goes away: the copy does not care
    write_landing(copy, "again.jsonl", lines[-5:])
    materialize(spark, copy)
    register_gold(spark, str(copy.lake_root))
    assert spark.table(f"gold.{name}").count() == copied_rows


@pytest.mark.slow_on_spark(why="three commands of their own, 100 s there; test_impact checks what a check finds on "
                                "both engines, and the question is asked by the command line alike")
def test_a_revert_that_takes_from_readers_asks_first_and_a_revert_to_the_current_version_is_refused(
        spark: Any, lake: Any) -> None:
    """Issue: on a lake with 3 live instances, `make revert SCHEMA=notes TARGET=1` asked nothing and
    printed `instances: 0 live`: every row left gold, and reverting back is refused. `lakehouse
    revert` now checks the lake as `schema revert` does and, where no one can answer, refuses
    without `--yes`; a revert to the current version would only add a version and a table."""
    from lakehouse.core.lensfile import parse_lens_file
    from tests.publishing import landing_files

    with Publisher(KeyStore(lake.keys), "author", lake.landing, create_key=True) as pub:
        pub.schema_init(SchemaMeta("notes"))
        pub.schema_message("notes", parse_lens_file(  # type: ignore[arg-type]
            "kind: schema-migration\nfields:\n  - body:\n    action: create\n    type: text\n", file="001.yaml"))
        for n in range(3):
            pub.create("notes", {"body": f"note {n}"})
    run_ingest(spark, lake)
    register_schema(spark, lake, "notes", None)
    run_silver(spark, lake)
    run_gold(spark, lake)
    landed = landing_files(lake.landing)

    asked = run_cli(lake, "revert", "notes", "--target", "1")
    assert asked.returncode == 1 and "[needs_confirmation]" in asked.stderr, asked.stderr
    assert "3 applied create(s) ignored" in asked.stderr and "3 instance(s) leave gold" in asked.stderr
    assert "--yes" in asked.stderr and "Traceback" not in asked.stderr
    assert landing_files(lake.landing) == landed  # nothing signed, nothing changed
    assert len(rows_of(spark, lake, "notes_v2")) == 3

    same = run_cli(lake, "revert", "notes", "--target", "2", "--yes")
    assert same.returncode == 1 and "[revert_to_current]" in same.stderr, same.stderr
    assert landing_files(lake.landing) == landed

    done = run_cli(lake, "revert", "notes", "--target", "1", "--yes")
    assert done.returncode == 0, done.stderr
    assert "published notes version 3: revert to version 1" in done.stdout


def rows_of(spark: Any, lake: Any, name: str) -> list[Any]:
    return spark.read.format("delta").load(table(str(lake.lake_root), "gold", name).location).collect()


def materialized_profiles(spark: Any, lake: Any, count: int) -> list[str]:
    """``count`` profiles created, ingested, registered and materialized: their instance ids."""
    ids = publish_schemas(lake, "profile")
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        made = [pub.create("profile", {"name": f"p{n}"}) for n in range(count)]
    run_ingest(spark, lake)
    register_schema(spark, lake, ids["profile"], None)
    run_silver(spark, lake)
    run_gold(spark, lake)
    return made


@pytest.mark.slow_on_spark(why="three materialize runs; the generated histories merge bucketed tables on both engines")
def test_a_merge_reads_and_writes_only_the_buckets_of_the_instances_it_changes(
        spark: Any, lake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bucketed layout (lakehouse.spark.buckets) of a gold table and of silver's states: every
    row in the bucket its id hashes to, a file per bucket when written whole, and a run that
    changes two instances commits files (new rows, deletion vectors, files written again in place of
    others) only in their buckets."""
    from lakehouse.spark import buckets, deltalog

    monkeypatch.setattr(buckets, "BUCKET_ROWS", 2)  # 24 rows: 16 buckets
    monkeypatch.setattr(G, "BUCKET_ROWS", 2)
    made = materialized_profiles(spark, lake, 24)
    locations = [f"{lake.lake_root}/gold/profile_v2", f"{lake.lake_root}/silver/instance_states"]
    count = 16

    def bucket(instance: str) -> int:
        return count + int(instance[4:8], 16) % count

    for location in locations:
        written = deltalog.snapshot(location)
        assert written.partition_columns == (buckets.COLUMN,)
        assert {f.partition_values[buckets.COLUMN] for f in written.files} == {str(bucket(i)) for i in made}
        assert len(written.files) == len({bucket(i) for i in made})  # a file per bucket
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        pub.update("profile", made[3], {"name": "changed"})
        pub.delete("profile", made[7])
    materialize(spark, lake)
    for location in locations:
        log = sorted(Path(location, "_delta_log").glob("*.json"))[-1]
        actions = [json.loads(line) for line in log.read_text().splitlines()]
        # the bucket of each file added or removed (a file given a deletion vector is both), from its path
        paths = [(a.get("add") or a.get("remove"))["path"] for a in actions if "add" in a or "remove" in a]
        touched = {re.search(rf"{buckets.COLUMN}=([0-9]+)/", path).group(1)  # type: ignore[union-attr]
                   for path in paths}
        assert touched and touched <= {str(bucket(made[3])), str(bucket(made[7]))}, location
    rows = {r["instance_id"]: r for r in spark.read.format("delta").load(locations[0]).collect()}
    assert made[7] not in rows and rows[made[3]]["name"] == "changed" and len(rows) == 23
    assert all(r[buckets.COLUMN] == bucket(i) for i, r in rows.items())
    states = {r["instance_id"]: r for r in spark.read.format("delta").load(locations[1]).collect()}
    assert set(states) == set(made) and states[made[7]]["deleted"] and states[made[3]]["updates"] == 1
    assert all(r[buckets.COLUMN] == bucket(i) for i, r in states.items())


@pytest.mark.slow_on_spark(why="three materialize runs; the generated histories write touched buckets on both engines")
def test_a_gold_table_keeps_a_file_a_bucket_and_no_deletion_vector_and_outside_readers_read_it(
        spark: Any, lake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that changes a few instances of a large gold table writes their buckets again (one new
    file each, the old one removed) and no deletion vector: the table stays a file a bucket, so it
    never needs compacting, and the ``deltalake`` package (delta-rs), which refuses tables with
    deletion vectors, reads each of its versions as the engine does."""
    from deltalake import DeltaTable

    from lakehouse.spark import deltalog

    monkeypatch.setattr(G, "BUCKET_ROWS", 2)  # 24 rows: 16 buckets
    made = materialized_profiles(spark, lake, 24)
    location = f"{lake.lake_root}/gold/profile_v2"
    for n in range(3):
        with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
            pub.update("profile", made[n], {"name": f"changed {n}"})
            pub.delete("profile", made[10 + n])
        materialize(spark, lake)
        snap = deltalog.snapshot(location)
        live = [i for k, i in enumerate(made) if not 10 <= k <= 10 + n]
        held = sorted(f.partition_values[buckets.COLUMN] for f in snap.files)
        assert held == sorted({str(16 + int(i[4:8], 16) % 16) for i in live}), n  # a file a bucket
        assert snap.rows == len(live) and not any(f.deletion_vector for f in snap.files)
    engine = sorted((r["instance_id"], r["name"]) for r in rows_of(spark, lake, "profile_v2"))
    assert len(engine) == 21 and (made[0], "changed 0") in engine
    outside = DeltaTable(location).to_pyarrow_table(columns=["instance_id", "name"]).to_pylist()
    assert sorted((r["instance_id"], r["name"]) for r in outside) == engine
    first = DeltaTable(location, version=snap.version - 2).to_pyarrow_table(columns=["instance_id"]).to_pylist()
    assert len(first) == 23


@pytest.mark.slow_on_spark(why="three materialize runs; the generated histories draw whole writes on both engines")
def test_a_small_gold_table_is_written_whole_by_an_incremental_run(
        spark: Any, lake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gold table of at most ``WHOLE_TABLE_ROWS`` live rows, and silver's states when they are at
    most ``WHOLE_STATES_ROWS``, are written whole by a run that changes some of their instances
    (cheaper than a MERGE on both engines): each new version replaces every file, carries no
    deletion vector, and holds the run's rows; the gold table's change feed has only the changed
    instances. Profiles cannot cascade: the run walks no cascade, and leaves the stored removed set
    as it was."""
    from lakehouse.spark import buckets, deltalog
    from lakehouse.spark.tables import delta_version
    from pipelines import silver

    monkeypatch.setattr(G, "WHOLE_TABLE_ROWS", 24)
    monkeypatch.setattr(silver, "WHOLE_STATES_ROWS", 24)
    monkeypatch.setattr(buckets, "BUCKET_ROWS", 4)  # 24 rows: 8 buckets, 23: 8
    monkeypatch.setattr(G, "BUCKET_ROWS", 4)
    made = materialized_profiles(spark, lake, 24)
    location, states = f"{lake.lake_root}/gold/profile_v2", f"{lake.lake_root}/silver/instance_states"
    before = {where: {f.path for f in deltalog.snapshot(where).files} for where in (location, states)}
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        pub.update("profile", made[3], {"name": "changed"})
        pub.delete("profile", made[7])
    removed_at = delta_version(f"{lake.lake_root}/silver/cascade_removed")
    summary = materialize(spark, lake)
    for where in (location, states):
        log = sorted(Path(where, "_delta_log").glob("*.json"))[-1]
        actions = [json.loads(line) for line in log.read_text().splitlines()]
        removed = {a["remove"]["path"] for a in actions if "remove" in a}
        added = [a["add"] for a in actions if "add" in a]
        assert removed == before[where] and added and not any(a.get("deletionVector") for a in added), where
        assert {f.path for f in deltalog.snapshot(where).files} == {a["path"] for a in added}, where
    rows = {r["instance_id"]: r for r in rows_of(spark, lake, "profile_v2")}
    assert made[7] not in rows and rows[made[3]]["name"] == "changed" and len(rows) == 23
    folded = {r["instance_id"]: r for r in spark.read.format("delta").load(states).collect()}
    assert set(folded) == set(made) and folded[made[7]]["deleted"] and folded[made[3]]["updates"] == 1
    # profiles have no relation field: no cascade was walked, and the removed set stays empty, as
    # it was stored (semantics note 31)
    assert (summary.cascade_region, summary.cascaded) == (0, 0)
    assert delta_version(f"{lake.lake_root}/silver/cascade_removed") == removed_at
    removed = spark.read.format("delta").load(f"{lake.lake_root}/silver/cascade_removed").collect()
    assert [(r["instance_id"], r["schema"] is not None) for r in removed] == [(None, True)]
    assert summary.changes["profile_v2"] == {"insert": 0, "update": 1, "delete": 1}
    assert_feeds_replay(lake.lake_root)


def test_the_stored_cascade_set_is_read_in_either_shape(spark: Any) -> None:
    """``silver.cascade_removed`` read for its ids and covered schemas: the current shape (marker
    rows name the schemas) and a lake's from before it named them (every row an id, no schema
    covered, so that the run writes it again in the current shape)."""
    from pipelines.gold import _stored_set

    current = spark.createDataFrame([("aa", None, None), (None, "s1", 3), (None, "s2", 3), ("bb", None, None)],
                                    "instance_id STRING, schema STRING, silver_run BIGINT")
    assert _stored_set(current) == (2, {"s1", "s2"})
    assert _stored_set(current.where("instance_id IS NULL")) == (0, {"s1", "s2"})
    assert _stored_set(spark.createDataFrame([("aa",)], "instance_id STRING")) == (1, set())


@pytest.mark.slow_on_spark(why="four materialize runs; the generated histories cascade on both engines")
def test_a_cascade_field_added_after_runs_that_walked_none_cascades(spark: Any, lake: Any) -> None:
    """Runs whose schemas cannot cascade leave ``silver.cascade_removed`` as the first stored it
    (semantics note 31); a migration then adds a relation with ``cascade: true``: the next run
    removes the instances pointing at a deleted one, and only those."""
    from lakehouse.core.messages import FieldChange, SchemaMigration
    from lakehouse.spark.tables import delta_version

    made = materialized_profiles(spark, lake, 4)
    removed_table = f"{lake.lake_root}/silver/cascade_removed"
    stored_at = delta_version(removed_table)
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        pub.update("profile", made[1], {"name": "renamed"})
    assert materialize(spark, lake).cascade_region == 0 and delta_version(removed_table) == stored_at
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        profile = pub.resolve_schema("profile")
        pub.schema_message("profile", SchemaMigration((
            FieldChange("parent", "create", "relation", schema=profile, cascade=True),)))
        child = pub.create("profile", {"name": "child", "parent": bytes.fromhex(made[0])})
        pub.create("profile", {"name": "grandchild", "parent": bytes.fromhex(child)})
        kept = pub.create("profile", {"name": "kept", "parent": bytes.fromhex(made[2])})  # its parent lives
        pub.delete("profile", made[0])
    summary = materialize(spark, lake)
    assert (summary.cascaded, summary.deleted) == (2, 1), summary
    for name in ("profile_v2", "profile_v3"):
        assert {r["instance_id"] for r in rows_of(spark, lake, name)} == {*made[1:], kept}, name


def index_files(root: str) -> list[str]:
    """The names of the files of the lake's cascade edge index (a local lake or one on a store)."""
    from pyarrow import fs

    from lakehouse.spark import edge_index
    from lakehouse.spark.tables import filesystem_of

    filesystem, folder = filesystem_of(edge_index.folder_of(root))
    return sorted(i.base_name for i in filesystem.get_file_info(fs.FileSelector(folder, allow_not_found=True))
                  if i.type == fs.FileType.File)


def index_digests(root: str, gold_run: int) -> list[str]:
    """The cache's names of the base's files, as the patch of ``gold_run`` records them."""
    import pyarrow.ipc as ipc

    from lakehouse.spark import edge_index
    from lakehouse.spark.tables import filesystem_of

    filesystem, folder = filesystem_of(edge_index.folder_of(root))
    with filesystem.open_input_file(f"{folder}/patch-{gold_run:012d}.arrow") as f:
        meta = {k.decode(): v.decode() for k, v in (ipc.open_file(f).schema.metadata or {}).items()}
    return sorted(f"{meta[d]}.arrow" for d in ("base_digest", "gone_digest"))


@pytest.mark.slow_on_spark(why="four materialize runs; the generated histories walk regions on both engines")
@pytest.mark.parametrize("case", ["local", "past_client_walk", "on_store"])
def test_a_region_walk_keeps_its_edge_index_from_run_to_run_and_a_rebuild_drops_it(
        engine: Any, spark: Any, lake: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
        case: str) -> None:
    """The cascade edges a region walk searches (``lakehouse.spark.edge_index``) are built by the
    first walk, saved under the run that wrote them, and brought up to date by the next run, which
    keeps the base file and writes only its patch; the cascades are those of the states now. A
    rebuild removes the index (gold run numbers may start again in a lake whose gold state went).
    Edges past those a walk reads here (``CLIENT_WALK_EDGES``) are indexed too, up to
    ``INDEX_EDGES``. A lake on object storage keeps its index there, and this machine's copy of
    the base's files in its cache (``index_cache``), named as the patch says."""
    import uuid
    from contextlib import nullcontext

    from tests.e2e.test_object_storage import session_on_store

    if case == "past_client_walk":
        monkeypatch.setattr(cascades, "CLIENT_WALK_EDGES", 0)
    session: Any = nullcontext(spark)
    if case == "on_store":
        request.getfixturevalue("store")
        lake = lake.with_overrides(lake_root=f"s3://lake/index-{uuid.uuid4().hex[:8]}", spark_remote="")
        session = session_on_store(engine, lake)
    with session as on:
        walks_its_region_over_the_index(on, lake, on_store=case == "on_store")


def profiles_with_parents(spark: Any, lake: Any, *, others: int = 0) -> tuple[list[str], str, str, list[str]]:
    """Four materialized profiles (:func:`materialized_profiles`), then published, not yet
    ingested: a cascading ``parent`` relation added, a child of the first profile, its grandchild,
    and ``others`` children of the third. Returns the profiles, the child, the grandchild and the
    others (instance ids)."""
    from lakehouse.core.messages import FieldChange, SchemaMigration

    made = materialized_profiles(spark, lake, 4)
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        profile = pub.resolve_schema("profile")
        pub.schema_message("profile", SchemaMigration((
            FieldChange("parent", "create", "relation", schema=profile, cascade=True),)))
        child = pub.create("profile", {"name": "child", "parent": bytes.fromhex(made[0])})
        grandchild = pub.create("profile", {"name": "grandchild", "parent": bytes.fromhex(child)})
        more = [pub.create("profile", {"name": f"other{n}", "parent": bytes.fromhex(made[2])}) for n in range(others)]
    return made, child, grandchild, more


def walks_its_region_over_the_index(spark: Any, lake: Any, *, on_store: bool) -> None:
    def cached() -> list[str]:
        return sorted(p.name for p in Path(lake.index_cache).rglob("*") if p.is_file())

    root = str(lake.lake_root)
    made, child, grandchild, _ = profiles_with_parents(spark, lake)
    built = materialize(spark, lake)
    assert built.cascaded == 0
    assert index_files(root) == [f"{kind}-{built.run_id:012d}.arrow" for kind in ("base", "gone", "patch")]
    digests = index_digests(root, built.run_id) if on_store else []
    assert cached() == digests and (len(digests) == 2 or not on_store)
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        pub.delete("profile", made[0])
    kept = materialize(spark, lake)
    assert (kept.cascaded, kept.deleted) == (2, 1), kept
    assert index_files(root) == [f"base-{built.run_id:012d}.arrow", f"gone-{built.run_id:012d}.arrow",
                                 f"patch-{kept.run_id:012d}.arrow"]
    assert cached() == digests
    if on_store:  # the same base: this machine's copy served the run
        assert index_digests(root, kept.run_id) == digests
    rows = {r["instance_id"] for r in rows_of(spark, lake, "profile_v3")}
    assert rows == set(made[1:]) and not rows & {child, grandchild}
    rebuilt = run_gold(spark, lake, rebuild=True)
    assert not index_files(root) and rebuilt.cascaded == 2
    assert {r["instance_id"] for r in rows_of(spark, lake, "profile_v3")} == rows


@pytest.mark.slow_on_spark(why="three materialize runs; the generated histories walk regions on both engines")
@pytest.mark.parametrize("share", [1, 1_000_000])
def test_a_region_walk_over_an_edge_index_goes_on_to_a_share_of_its_edges(
        spark: Any, lake: Any, monkeypatch: pytest.MonkeyPatch, share: int) -> None:
    """Over an edge index a region walk gives up only when its region passes the index's edges over
    ``REGION_SHARE``, when that is more than ``CASCADE_REGION_LIMIT`` (``cascades.region_limit``):
    with a limit of one instance, a delete whose region is three instances is walked as a region
    over an index of five edges, and given up (every edge walked) when the share leaves the limit
    at one; the cascades are the same either way."""
    monkeypatch.setattr(cascades, "CASCADE_REGION_LIMIT", 1)
    monkeypatch.setattr(cascades, "REGION_SHARE", share)
    made, _, _, others = profiles_with_parents(spark, lake, others=3)
    materialize(spark, lake)
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        pub.delete("profile", made[0])
    run = materialize(spark, lake)
    assert (run.cascaded, run.deleted) == (2, 1), run
    # the region: the deleted instance, its child and its grandchild
    assert run.cascade_region == (3 if share == 1 else None), run
    rows = {r["instance_id"] for r in rows_of(spark, lake, "profile_v3")}
    assert rows == {*made[1:], *others}


@pytest.mark.slow_on_spark(why="three materialize runs; the merge that lays a table out again is the same Delta write")
def test_a_gold_table_written_before_buckets_is_laid_out_in_them_by_its_next_merge(
        spark: Any, lake: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lake from before the bucketed layout has gold tables, silver states and silver messages
    without ``_bucket``: silver's next run lays its states (of the instance) and messages (of the
    author) out in buckets, the next one appends its messages in their buckets, and the next run
    that merges rows into a gold table writes it whole in buckets (semantics note 26), with the rows
    the merge gives, and its earlier versions stay readable by time travel."""
    from lakehouse.spark import buckets, delta, deltalog
    from lakehouse.spark.tables import delta_version

    monkeypatch.setattr(buckets, "BUCKET_ROWS", 4)  # 12 rows: 4 buckets
    monkeypatch.setattr(G, "BUCKET_ROWS", 4)
    made = materialized_profiles(spark, lake, 12)
    ref, states = table(str(lake.lake_root), "gold", "profile_v2"), table(str(lake.lake_root), "silver", "instance_states")
    messages = table(str(lake.lake_root), "silver", "messages")
    stored = sorted(map(tuple, spark.read.format("delta").load(messages.location).drop(buckets.COLUMN).collect()))
    # the tables as a release before buckets wrote them: no layout column, not partitioned
    for unlaid in (ref, states, messages):
        before = spark.read.format("delta").load(unlaid.location).drop(buckets.COLUMN).toArrow()
        delta.overwrite(spark.createDataFrame(before), unlaid, **delta.DELETION_VECTORS)
        assert deltalog.snapshot(unlaid.location).partition_columns == ()
    old_version = delta_version(ref.location)
    # silver lays its states out at its next run, one with nothing new too
    assert run_silver(spark, lake).up_to_date
    assert deltalog.snapshot(states.location).partition_columns == (buckets.COLUMN,)
    laid = {r["instance_id"]: r[buckets.COLUMN] for r in spark.read.format("delta").load(states.location).collect()}
    assert laid == {i: 4 + int(i[4:8], 16) % 4 for i in made}
    # and its messages, in buckets of their author, as many as their rows call for, the rows the same
    count = buckets.count_for(len(stored))
    assert deltalog.snapshot(messages.location).partition_columns == (buckets.COLUMN,) and count > 1
    laid = spark.read.format("delta").load(messages.location).collect()
    assert {(r["author"], r[buckets.COLUMN]) for r in laid} == {
        (r["author"], count + int(r["author"][4:8], 16) % count) for r in laid}
    assert sorted(tuple(r.asDict()[c] for c in r.asDict() if c != buckets.COLUMN) for r in laid) == stored
    with Publisher(KeyStore(lake.keys), "author", lake.landing) as pub:
        pub.update("profile", made[2], {"name": "changed"})
        pub.delete("profile", made[5])
    materialize(spark, lake)
    # the new messages appended, in the buckets of the table's count
    laid = spark.read.format("delta").load(messages.location).collect()
    assert len(laid) == len(stored) + 2 and {r[buckets.COLUMN] for r in laid} <= set(range(count, 2 * count))
    assert all(r[buckets.COLUMN] == count + int(r["author"][4:8], 16) % count for r in laid)
    laid_out = deltalog.snapshot(ref.location)
    rows = {r["instance_id"]: r for r in rows_of(spark, lake, "profile_v2")}
    assert made[5] not in rows and rows[made[2]]["name"] == "changed" and len(rows) == 11
    assert all(r[buckets.COLUMN] == 4 + int(i[4:8], 16) % 4 for i, r in rows.items())
    # a file per bucket that has rows
    assert laid_out.partition_columns == (buckets.COLUMN,) and len(laid_out.files) == len(
        {r[buckets.COLUMN] for r in rows.values()})
    old = spark.read.format("delta").option("versionAsOf", old_version).load(ref.location)
    assert buckets.COLUMN not in old.columns and old.count() == 12
    assert_feeds_replay(lake.lake_root)


def test_the_changed_instances_are_the_same_found_here_or_by_the_engine(spark: Any, lake: Any, tmp_path: Path) -> None:
    """The instances a run takes as changed (``changed_instances``), found by this process from the
    files of ``silver.messages`` that can hold a later run's rows (Apache Spark's small runs) or by
    the engine: the same for every plan, an entry that lost its place (no kind) naming its author's
    instances, a message of a log that is no instance log naming none; past ``here_rows``, the engine."""
    from lakehouse.core.messages import SchemaId
    from lakehouse.core.revert import SchemaPlan
    from lakehouse.spark import catalog, delta
    from lakehouse.spark import lake as L
    from lakehouse.spark.lake import silver_tables

    T = silver_tables(str(lake.lake_root))
    a, b, c = "0a" * 32, "0b" * 32, "0c" * 32
    s1, s2 = SchemaId(bytes.fromhex(c), 1), SchemaId(bytes.fromhex(c), 2)

    def message(entry: str, author: str, log: int, kind: str | None, instance: str | None, run: int) -> tuple[Any, ...]:
        return delta.row(catalog.MESSAGES_DDL, entry_hash=entry, author=author, log_id=log, seq_num=1, batch_id=run,
                         log_status="accepted", status="applied", kind=kind, instance=instance, run_id=run)

    runs = [[message("e1", a, 1, "create", "i1", 1), message("e2", b, 1, "create", "i2", 1),
             message("e3", c, 1, "schema-meta", None, 1)],
            [message("e4", a, 1, "update", "i1", 2), message("e5", a, 2, None, None, 2),
             message("e6", b, 2, "create", None, 2)],
            [message("e7", b, 1, "delete", "i2", 3), message("e8", c, 1, "create", "i9", 3)]]
    for rows in runs:  # a run's rows in files of their own, as silver appends them
        delta.append(spark.createDataFrame(rows, catalog.MESSAGES_DDL), T["messages"])
    logs = [delta.row(catalog.LOGS_DDL, author=a, log_id=1, purpose="instance", schema=str(s1)),
            delta.row(catalog.LOGS_DDL, author=b, log_id=1, purpose="instance", schema=str(s2)),
            delta.row(catalog.LOGS_DDL, author=b, log_id=2, purpose="instance", schema=str(s2)),
            delta.row(catalog.LOGS_DDL, author=c, log_id=1, purpose="schema")]
    delta.append(spark.createDataFrame(logs, catalog.LOGS_DDL), T["logs"])
    states = [delta.row(catalog.STATES_DDL, schema=str(s1), instance_id=i, author=a, log_id=1) for i in ("i1", "i3")]
    delta.append(spark.createDataFrame(states, catalog.STATES_DDL), T["instance_states"])

    for n, since in enumerate([(1, 2), (0, 0), (2, 1), (3, 3)]):
        plans = {s1: SchemaPlan("merge", since[0]), s2: SchemaPlan("merge", since[1])}
        found = {}
        for how, here_rows in (("engine", 0), ("here", 100), ("over the limit", 2)):
            staged = str(tmp_path / f"{n}_{how.replace(' ', '_')}")
            changed, lost = L.changed_instances(spark, str(lake.lake_root), plans, staged=staged, here_rows=here_rows)
            found[how] = ({(r["schema"], r["instance_id"]) for r in changed.collect()}, lost)
            if since != (3, 3):  # the engine's rows are staged (of none, Sail writes no folder)
                assert Path(staged).exists() == (how != "here"), how
        assert found["here"] == found["engine"] == found["over the limit"], since
    assert found["engine"] == (set(), False)  # since (3, 3): nothing after run 3
    changed, lost = L.changed_instances(spark, str(lake.lake_root), {s1: SchemaPlan("merge", 1), s2: SchemaPlan(
        "merge", 1)}, staged=str(tmp_path / "check"), here_rows=100)
    # run 2's update of i1, its lost entry (every instance of a: i1, i3), run 2's create (its entry
    # hash) and run 3's delete in s2; nothing of log c:1 (no instance log)
    assert ({(r["schema"], r["instance_id"]) for r in changed.collect()}, lost) == (
        {(str(s1), "i1"), (str(s1), "i3"), (str(s2), "e6"), (str(s2), "i2")}, True)
