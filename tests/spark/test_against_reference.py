"""The Spark pipelines against the reference model of SEMANTICS.md, on generated histories.

For histories from :mod:`tests.simulate` delivered in random batches (each batch
ingested and materialized), the bronze, silver and gold tables equal what
:func:`lakehouse.core.reference.reference` computes from the whole set of lines, every landing
line is accounted for exactly once (SEMANTICS.md section 7), and ``make rebuild`` gives the same.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.core.reference import Reference, reference
from lakehouse.core.registry import waits_of
from lakehouse.spark import buckets, cascades, compaction
from lakehouse.spark import gold as gold_writes
from lakehouse.spark.lake import found_schema_entries, registrations
from lakehouse.spark.tables import current_gold_rows, is_delta_table
from pipelines import gold as gold_pipeline
from pipelines import silver as silver_pipeline
from pipelines.gold import run_gold
from pipelines.ingest import run_ingest
from pipelines.optimize import run_optimize
from pipelines.register import register_schema
from pipelines.silver import run_silver
from tests.feeds import assert_feeds_replay
from tests.histories import histories_in_batches, knobs
from tests.lakes import gold_data, rows, write_landing
from tests.simulate import History, Line, simulate

pytestmark = pytest.mark.parity

SILVER_COLUMNS = {
    "logs": ["author", "log_id", "purpose", "schema", "first_seq", "accepted_seq", "fork_seq", "entries", "pending"],
    "messages": ["entry_hash", "author", "log_id", "seq_num", "log_status", "status", "reason_code", "waits_for",
                 "kind", "schema", "version", "instance"],
    "schema_versions": ["schema", "version", "name", "kind", "status", "reason_code", "reason", "target", "parent",
                        "abandoned", "abandoned_by", "has_gold_table", "lens"],
    "schema_fields": ["schema", "version", "position", "name", "action", "type", "validation", "default_value",
                      "relation_schema", "cascade"],
}


def expected_silver(ref: Reference) -> dict[str, list[dict[str, Any]]]:
    tables = {"logs": ref.logs, "messages": ref.messages, "schema_versions": ref.schema_versions,
              "schema_fields": ref.schema_fields}
    return {name: sorted((dataclasses.asdict(r) for r in table), key=_key) for name, table in tables.items()}


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True, default=str)


def assert_silver_equal(spark: Any, lake: Any, ref: Reference) -> None:
    """chispa: each silver table (its semantic columns) equals the reference's rows, in any order; a
    table no silver run wrote (bronze has no entry yet: silver has not run) as no rows."""
    expected = expected_silver(ref)
    for name, columns in SILVER_COLUMNS.items():
        location = f"{lake.lake_root}/silver/{name}"
        if not is_delta_table(location):
            assert not ref.entries and not expected[name], name
            continue
        actual = spark.read.format("delta").load(location).select(*columns)
        want = spark.createDataFrame([tuple(r[c] for c in columns) for r in expected[name]], actual.schema)
        assert_df_equality(actual, want, ignore_row_order=True, ignore_nullable=True)


def gold_tables(spark: Any, lake: Any) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for r in spark.sql("SHOW TABLES IN gold").collect():
        name = r["tableName"]
        if not re.fullmatch(r".+_v[0-9]+", name):  # gold.<name> is one of them; change feeds are checked apart
            continue
        # the layout column (its values follow the table's number of buckets) is not the contract's
        out[name] = sorted((gold_data(x.asDict()) for x in spark.table(f"gold.{name}").collect()),
                           key=lambda x: x["instance_id"])
    return out


def normalise(value: Any) -> Any:
    """Values as a comparison sees them: Spark gives naive UTC datetimes and bytearrays."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if hasattr(value, "tzinfo") and value.tzinfo is not None:
        return value.replace(tzinfo=None)
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


def check_lake(spark: Any, lake: Any, lines: list[Line], history: History, batch_ends: list[int] | None = None) -> None:
    """Every table of the lake equals the reference's from ``lines``. ``batch_ends``: where each
    batch the lake was materialized after ended in ``lines`` (default: one batch of all): a
    schema that waits now keeps the tables the last batch before its wait left it."""
    ref = reference(lines)
    # bronze: every landing line in exactly one place
    entries = rows(spark, lake, "bronze", "entries")
    rejected = rows(spark, lake, "bronze", "rejected")
    assert {r["entry_hash"] for r in entries} == set(ref.entries)
    assert sorted(r["reason_code"] for r in rejected) == sorted(line.reason_code for line in ref.rejected
                                                                if line.reason_code is not None)
    assert len(rejected) + sum(1 for line in ref.lines if line.accepted) == len(lines)
    # silver
    assert_silver_equal(spark, lake, ref)
    # the schema logs' accepted entries each run keeps apart are those of silver.messages, with bronze's payloads
    # (compared as rows: a lake begun on the other engine may keep other column metadata)
    if ref.entries:
        schema_entries = spark.read.format("delta").load(f"{lake.lake_root}/silver/schema_entries").collect()
        found = found_schema_entries(spark, str(lake.lake_root))
        assert found is not None and sorted(map(repr, schema_entries)) == sorted(map(repr, found.collect()))
    # gold, for the registered schemas
    names = registrations(spark, str(lake.lake_root))
    # the reference has no registrations: schemas waiting for an unregistered relation target have
    # no tables yet, or keep those they had (note 19; those rules have their own tests in test_gold.py)
    waiting = waits_of(dict(ref.schemas), names)
    # a waiting schema keeps its tables; one silver no longer knows (a fork at seq 1) has none
    kept = _kept_tables(lines, batch_ends or [len(lines)], names, [sid for sid in waiting if sid in ref.schemas])
    names = {sid: name for sid, name in names.items() if sid not in waiting}
    expected = {name: [{k: normalise(v) for k, v in row.items()} for row in table]
                for name, table in {**ref.gold(names), **kept}.items()}
    got = {name: [{k: normalise(v) for k, v in row.items()} for row in table]
           for name, table in gold_tables(spark, lake).items()}
    assert got == expected
    # the row counts the last gold run recorded (lakehouse history, status) are the tables' sizes
    recorded = {r["table_name"]: r["rows"] for r in current_gold_rows(spark, str(lake.lake_root))}
    assert recorded == {name: len(table) for name, table in got.items()}
    # every gold table, as every run left it, is its change feed replayed (issue 19)
    assert_feeds_replay(lake.lake_root)


def _kept_tables(lines: list[Line], batch_ends: list[int], names: dict[Any, str],
                 waiting: list[Any]) -> dict[str, list[dict[str, Any]]]:
    """The gold tables the waiting schemas keep (note 19): each as the reference gives them after
    the last batch at which the schema was registered and not waiting, if any (a schema is
    registered once silver has seen it, :func:`register_seen`)."""
    kept: dict[str, list[dict[str, Any]]] = {}
    registered: set[Any] = set()
    for end in batch_ends:
        ref = reference(lines[:end])
        registered |= {sid for sid in names if sid in ref.schemas}
        then = {sid: names[sid] for sid in registered}
        active = {sid: name for sid, name in then.items() if sid not in waits_of(dict(ref.schemas), then)}
        tables = ref.gold(active)
        for sid in waiting:
            if sid in active:  # a later batch (or none) begins its wait
                mine = re.compile(rf"{re.escape(names[sid])}_v[0-9]+")
                kept = {t: rows for t, rows in kept.items() if not mine.fullmatch(t)}
                kept.update({t: rows for t, rows in tables.items() if mine.fullmatch(t)})
    return kept


def register_seen(spark: Any, lake: Any, history: History) -> None:
    """Register every schema of the history that silver has seen (under the history's names)."""
    known = registrations(spark, str(lake.lake_root))
    versions = rows(spark, lake, "silver", "schema_versions")
    seen = {r["schema"] for r in versions}
    for sid, name in history.names.items():
        if str(sid) in seen and sid not in known:
            register_schema(spark, lake, str(sid), name)


MODES: Counter[str] = Counter()  # how gold brought schemas up to date, over the whole module
JUDGED: Counter[str] = Counter()  # how silver judged touched logs: whole, or only what they gained
COMPACTED: Counter[str] = Counter()  # how optimize compacted tables between batches


def run_batches(spark: Any, lake: Any, history: History, batches: list[list[Line]], *, first: int = 0,
                optimize: bool = False) -> list[Line]:
    """Ingest and materialize each batch, registering the schemas seen; with ``optimize``, the
    lake's tables compacted after each (``lakehouse optimize``), so that the next run writes
    over compacted tables."""
    arrived: list[Line] = []
    for n, batch in enumerate(batches, start=first):
        if batch:
            write_landing(lake, f"batch-{n:03d}.jsonl", batch)
        arrived.extend(batch)
        run_ingest(spark, lake)
        schema_tables = _schema_tables(spark, lake)
        silver = run_silver(spark, lake)
        for name, (stored, version) in _schema_tables(spark, lake).items():
            if name in schema_tables and schema_tables[name][0] == stored:  # unchanged: not written again
                assert version == schema_tables[name][1], name
        if n == 0 and not silver.up_to_date:  # a first run: its summary counts the statuses silver.messages holds
            assert silver.statuses == Counter(r["status"] for r in rows(spark, lake, "silver", "messages"))
        JUDGED.update(whole=silver.logs_judged - silver.logs_extended, extended=silver.logs_extended)
        register_seen(spark, lake, history)
        gold = run_gold(spark, lake)
        MODES.update(gold.modes.values())
        if gold.modes:
            assert_summary_counts(spark, lake, gold)
        if optimize:
            COMPACTED.update(c.how for c in run_optimize(spark, lake).compacted)
    return arrived


def _schema_tables(spark: Any, lake: Any) -> dict[str, tuple[Counter[tuple[Any, ...]], int]]:
    """silver's schema tables that exist: their rows, and their Delta version."""
    from lakehouse.spark.tables import delta_version, is_delta_table

    found = {}
    for name in ("schema_versions", "schema_fields"):
        location = f"{lake.lake_root}/silver/{name}"
        if is_delta_table(location):
            found[name] = (Counter(map(tuple, spark.read.format("delta").load(location).collect())),
                           delta_version(location))
    return found


def assert_summary_counts(spark: Any, lake: Any, gold: Any) -> None:
    """A gold run's summary counts the lake's live instances of the schemas it brought up to date
    (each of their tables has a row per live instance) and silver's deleted states of them."""
    from pyspark.sql import functions as F

    current = {r["schema"]: r["rows"] for r in current_gold_rows(spark, str(lake.lake_root)) if r["schema"] in gold.modes}
    states = spark.read.format("delta").load(f"{lake.lake_root}/silver/instance_states")
    deleted = states.where(F.col("deleted") & F.col("schema").isin(list(gold.modes))).count()
    assert (gold.instances, gold.deleted) == (sum(current.values()), deleted)


def slice_every_table(patch: pytest.MonkeyPatch) -> None:
    """Every table of two buckets or more that silver writes whole is written in slices
    (:func:`lakehouse.spark.buckets.write`): four, a commit each."""
    patch.setattr(buckets, "SLICED_FROM", 2)
    patch.setattr(buckets, "STAGED_SLICES", 4)
    patch.setattr(buckets, "SLICE_BYTES", 1)


def slices_noted(patch: pytest.MonkeyPatch) -> list[str]:
    """The names of the tables written in slices from now on (:func:`lakehouse.spark.buckets._write_in_slices`),
    one per write, in the list returned."""
    names: list[str] = []
    write = buckets._write_in_slices

    def noted(rows: Any, ref: Any, *args: Any) -> None:
        names.append(ref.name)
        write(rows, ref, *args)

    patch.setattr(buckets, "_write_in_slices", noted)
    return names


# examples per engine: Apache Spark pays a fixed cost of some tenths of a second per job, and one
# example is a few dozen jobs per batch, about 70 s there (docs/engines.md)
EXAMPLES = {"sail": 8, "spark": 1}


def test_pipelines_equal_the_reference_model(spark: Any, lake: Any, engine_name: str) -> None:
    """Generated histories in random batches; ``engine_projection``: the rows of touched instances
    are projected in the engine, not here; ``group_rows``: the log and instance passes judge their
    input in parts of about that many rows (0: in one part); ``whole``: an incremental run writes
    its gold tables whole (their users' small tables), not merged (:data:`lakehouse.spark.gold.WHOLE_TABLE_ROWS`);
    ``engine_walk``: a walk of every cascade edge (a first run, a rebuild), and the levels of a
    region walk past its first, run in the engine, as for a lake past
    :data:`lakehouse.spark.cascades.CLIENT_WALK_EDGES` and :data:`lakehouse.spark.cascades.INDEX_EDGES`;
    ``small_buckets``: silver's states and the gold tables in buckets of about two rows, so that
    the reads and merges that name the touched instances' buckets leave the others out, as in a large lake
    (:data:`lakehouse.spark.buckets.BUCKET_ROWS`), and (unless ``whole``) a gold table of any size
    written again in its touched buckets (on Apache Spark by the ``deltalake`` package); ``optimize``: the tables compacted after each batch
    (``lakehouse optimize``, a run of two small files enough); ``small_region``: a region walk gives
    up past two instances (the walk of every edge follows, over the edge index the region walk
    built or patched when it had one); ``sliced``: every table of two buckets or more that silver
    writes whole is written a slice of its buckets at a time, a commit a slice, as a large lake's
    (:data:`lakehouse.spark.buckets.SLICED_FROM`)."""

    @settings(max_examples=EXAMPLES[engine_name], deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(case=histories_in_batches(knobs(max_authors=3, max_schemas=3, max_migrations=5, max_messages=30),
                                     max_batches=3),
           engine_projection=st.booleans(), group_rows=st.sampled_from([0, 10]), whole=st.booleans(),
           engine_walk=st.booleans(), small_buckets=st.booleans(), optimize=st.booleans(),
           small_region=st.booleans(), sliced=st.booleans())
    def check(case: tuple[History, list[list[Line]]], engine_projection: bool, group_rows: int, whole: bool,
              engine_walk: bool, small_buckets: bool, optimize: bool, small_region: bool, sliced: bool) -> None:
        history, batches = case
        with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as patch:
            if engine_projection:
                patch.setattr(gold_pipeline, "LOCAL_PROJECTION_LIMIT", -1)
            if whole:
                patch.setattr(gold_writes, "WHOLE_TABLE_ROWS", 1_000_000)
                patch.setattr(silver_pipeline, "WHOLE_STATES_ROWS", 1_000_000)
            if engine_walk:
                patch.setattr(cascades, "CLIENT_WALK_EDGES", -1)
                patch.setattr(cascades, "INDEX_EDGES", -1)
            if small_buckets:
                patch.setattr(buckets, "BUCKET_ROWS", 2)
                patch.setattr(gold_writes, "BUCKET_ROWS", 2)
                if not whole:  # a table of any size written again in its touched buckets
                    patch.setattr(gold_writes, "WHOLE_TABLE_ROWS", 0)
            if optimize:
                patch.setattr(compaction, "MIN_SMALL_FILES", 2)
            if small_region:  # regions past two instances given up, with an edge index or without
                patch.setattr(cascades, "CASCADE_REGION_LIMIT", 2)
                patch.setattr(cascades, "REGION_SHARE", 1_000_000)
            if sliced:
                slice_every_table(patch)
            here = lake.with_overrides(lake_root=f"{tmp}/lake", landing=f"{tmp}/landing", group_rows=group_rows)
            arrived = run_batches(spark, here, history, batches, optimize=optimize)
            ends = list(itertools.accumulate(len(batch) for batch in batches))
            check_lake(spark, here, arrived, history, ends)
            run_silver(spark, here, rebuild=True)
            rebuilt = run_gold(spark, here, rebuild=True)
            check_lake(spark, here, arrived, history, ends)
            # a rebuild equals the incremental runs: it changes no row, so its feed has no rows
            assert not any(n for counts in rebuilt.changes.values() for n in counts.values()), rebuilt.changes

    check()


@pytest.mark.slow_on_spark(why="six batches, each checked; the generated histories above run on every engine")
def test_a_larger_history_in_many_batches(spark: Any, lake: Any, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One bigger history (every defect on), checked after every batch (a table rewritten in one
    batch may be written whole in the next); the rows of touched instances are projected in the
    engine, cascades over every edge walked there, and silver's states and the gold tables in buckets
    of about four rows, silver's written whole in slices (the smaller histories above draw
    each); the tables compacted after every other batch (``lakehouse optimize``)."""
    from random import Random

    from tests.simulate import Knobs, split_batches

    monkeypatch.setattr(gold_pipeline, "LOCAL_PROJECTION_LIMIT", -1)
    monkeypatch.setattr(cascades, "CLIENT_WALK_EDGES", -1)
    monkeypatch.setattr(cascades, "INDEX_EDGES", -1)
    monkeypatch.setattr(buckets, "BUCKET_ROWS", 4)
    monkeypatch.setattr(gold_writes, "BUCKET_ROWS", 4)
    monkeypatch.setattr(compaction, "MIN_SMALL_FILES", 2)
    slice_every_table(monkeypatch)

    history = simulate(Knobs(authors=4, schemas=3, migrations=8, messages=150), seed=9)
    batches = split_batches(list(history.lines), 6, Random(3))
    JUDGED.clear()
    COMPACTED.clear()
    arrived: list[Line] = []
    ends: list[int] = []
    for n, batch in enumerate(batches):
        arrived += run_batches(spark, lake, history, [batch], first=n, optimize=n % 2 == 1)
        ends.append(len(arrived))
        check_lake(spark, lake, arrived, history, ends)
    statuses = {r["status"] for r in spark.table("silver.messages").select("status").distinct().collect()}
    assert statuses == {"applied", "pending", "ignored", "rejected"}, "the history exercises every status"
    assert JUDGED["extended"] > 0 and JUDGED["whole"] > 0, f"both ways of judging a log are exercised: {JUDGED}"
    assert COMPACTED["buckets"] > 0 and COMPACTED["tail"] > 0, f"optimize compacted buckets and tails: {COMPACTED}"


@pytest.mark.slow_on_spark(why="two batches; an incremental case the generated histories reach on both engines")
def test_a_message_waiting_for_a_log_that_turns_out_not_to_be_a_schema_is_judged_again(spark: Any, lake: Any) -> None:
    """Incremental runs re-judge instance logs that wait on a log when that log arrives."""
    from lakehouse.core.entries import yasmf_hash
    from lakehouse.core.messages import Create, Delete, Update
    from tests.stories import ALICE, BOB, OTHER_HASH, Log

    other = Log(ALICE, 7)
    not_schema = [other.add(Update(other.at(1), OTHER_HASH, {"a": 1}))]
    log = Log(BOB, 0)
    created = log.add(Create(other.at(1), {}))
    waiting = [created, log.add(Delete(yasmf_hash(bytes.fromhex(created["entry"])), other.at(1)))]
    history = History(lines=(), names={}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [waiting])
    check_lake(spark, lake, arrived, history)
    assert {r["status"] for r in rows(spark, lake, "silver", "messages")} == {"pending"}
    arrived += run_batches(spark, lake, history, [not_schema], first=1)
    check_lake(spark, lake, arrived, history)
    assert [r["reason_code"] for r in rows(spark, lake, "silver", "messages") if r["author"] == log.author] == [
        "not_a_schema", "not_a_schema"]


@pytest.mark.slow_on_spark(why="eight batches, each checked; the slothmail story takes the time-travel path on every engine")
def test_reverts_arriving_after_the_data_take_the_time_travel_path(spark: Any, lake: Any) -> None:
    """Lines in publish order, in chunks: reverts arrive after what they abandon (SEMANTICS.md
    section 6). Midway, every gold table is compacted whole (a Delta version of the same rows,
    as ``lakehouse optimize`` writes): the reverts after it travel to versions before it."""
    from lakehouse.spark import deltalog
    from lakehouse.spark.tables import lake_tables
    from tests.simulate import Knobs

    history = simulate(Knobs.clean(authors=3, schemas=2, migrations=8, messages=120, revert=0.4, update=0.4,
                                   delete=0.2, abandoned_write=0.1), seed=11)
    lines = list(history.lines)
    size = len(lines) // 8 + 1
    MODES.clear()
    arrived: list[Line] = []
    compacted = []
    for n, start in enumerate(range(0, len(lines), size)):
        arrived += run_batches(spark, lake, history, [lines[start:start + size]], first=n)
        check_lake(spark, lake, arrived, history)
        if n == 2:
            assert "full" in MODES, MODES
            MODES.clear()  # the modes after the compaction
            for ref in lake_tables(str(lake.lake_root)):
                if ref.layer == "gold" and not ref.name.endswith("_changes"):
                    compacted.append(compaction.compact(spark, ref, compaction.plan(
                        ref, deltalog.snapshot(ref.location), whole=True)))
    assert compacted and all(n == 1 for n in compacted)
    assert {"merge", "revert"} <= set(MODES), f"merges and reverts after the compaction: {MODES}"


@pytest.mark.slow_on_spark(why="a 400-message history and a revert; the slothmail story reverts on both engines")
def test_a_revert_of_a_version_older_than_every_gold_table_merges_what_changed(spark: Any, lake: Any) -> None:
    """The whole history in one run, then a revert of its newest version: no table has a Delta
    version from before that version appeared, so the changed instances are MERGEd."""
    from lakehouse.spark.lake import load_schemas
    from tests.benchmarks.suite import revert_line
    from tests.simulate import Knobs

    history = simulate(Knobs.realistic(400), seed=5)
    arrived = run_batches(spark, lake, history, [list(history.lines)])
    line, schema, _ = revert_line(history, load_schemas(spark, str(lake.lake_root)))
    write_landing(lake, "revert.jsonl", [line])
    run_ingest(spark, lake)
    run_silver(spark, lake)
    assert run_gold(spark, lake).modes[schema] == "revert"
    check_lake(spark, lake, [*arrived, line], history)


@pytest.mark.slow_on_spark(why="two batches; forks are in the generated histories on both engines")
def test_writes_that_a_later_fork_takes_out_of_their_logs_leave_gold(spark: Any, lake: Any) -> None:
    """A create and an update applied in one run; forks at their seqs arrive in the next. Their
    rows no longer name the instance they wrote (a forked entry is not decoded), yet the
    instance is folded again: the created one leaves gold, the updated one loses the update."""
    from lakehouse.core.messages import Create, Update
    from tests.stories import ALICE, Log
    from tests.unit.test_reference import schema_log

    schema, schema_lines = schema_log(length=2)
    updated, forked = Log(ALICE, 1), Log(ALICE, 2)
    first = [*schema_lines, updated.add(Create(schema.at(2), {"f2": "created"})),
             updated.add(Update(schema.at(2), updated.hashes[0], {"f2": "updated"})),
             forked.add(Create(schema.at(2), {"f2": "forked"}))]
    forks = [updated.entry(2, Update(schema.at(2), updated.hashes[0], {"f2": "other"})),
             forked.entry(1, Create(schema.at(2), {"f2": "other"}))]
    history = History(lines=(), names={schema.sid: "notes"}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [first])
    assert sorted(r["f2"] for r in spark.table("gold.notes").collect()) == ["forked", "updated"]
    arrived += run_batches(spark, lake, history, [forks], first=1)
    check_lake(spark, lake, arrived, history)
    assert [r["f2"] for r in spark.table("gold.notes").collect()] == ["created"]


@pytest.mark.slow_on_spark(why="two batches; forks at seq 1 of schema logs are in the generated histories on both engines")
def test_a_schema_a_fork_takes_away_leaves_gold(spark: Any, lake: Any) -> None:
    """A registered schema with tables; then a second entry at seq 1 of its log (a fork there):
    silver no longer knows the schema, so it has no versions and no tables. Found by a generated
    history: its tables were carried as those of a schema waiting for its relations."""
    from lakehouse.core.messages import Create, SchemaMeta
    from tests.stories import ALICE, BOB, Log
    from tests.unit.test_reference import schema_log

    kept, kept_lines = schema_log(length=2)
    lost, lost_lines = schema_log(BOB, length=2)
    writes = Log(ALICE, 1)
    first = [*kept_lines, *lost_lines, writes.add(Create(kept.at(2), {"f2": "kept"}))]
    history = History(lines=(), names={kept.sid: "kept", lost.sid: "lost"}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [first])
    assert {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()} >= {"lost", "lost_v2"}
    arrived += run_batches(spark, lake, history, [[lost.entry(1, SchemaMeta("other"))]], first=1)
    check_lake(spark, lake, arrived, history)
    assert {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()} == {"kept", "kept_v2", "kept_v2_changes"}
    assert "not a schema in silver" in run_gold(spark, lake).waiting[str(lost.sid)]


@pytest.mark.slow_on_spark(why="three batches; cascades and forks are in the generated histories on both engines")
def test_an_instance_a_cascade_removed_comes_back_when_a_fork_takes_its_deleted_target_away(spark: Any,
                                                                                          lake: Any) -> None:
    """A file (Carol's) points with a cascading relation at a folder Bob created and deleted: the
    file is removed. A fork at seq 1 of Bob's log then takes the folder's create and delete out:
    no state names the folder any more, nor does any table (it was deleted), yet the file comes
    back. The run after the fork computes the cascades again instead of bringing the last run's
    set up to date around the changed instances, which would not see the folder."""
    from lakehouse.core.messages import Create, Delete, SchemaMeta
    from tests.stories import ALICE, BOB, CAROL, Log, hash_of_bytes, migration, text

    folders, files = Log(ALICE, 0), Log(ALICE, 1)
    schemas = [folders.add(SchemaMeta("folders")), folders.add(migration(text("name"))),
               files.add(SchemaMeta("files")),
               files.add(migration(text("folder", type="relation", schema=folders.sid, cascade=True)))]
    bob, carol = Log(BOB, 0), Log(CAROL, 0)
    folder = bob.add(Create(folders.at(2), {"name": "one"}))
    first = [*schemas, folder, bob.add(Delete(hash_of_bytes(folder), folders.at(2))),
             carol.add(Create(files.at(2), {"folder": hash_of_bytes(folder)}))]
    history = History(lines=(), names={folders.sid: "folders", files.sid: "files"}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [first])
    assert spark.table("gold.files").count() == 0
    later = carol.add(Create(files.at(2), {"folder": None}))  # a run that changes little: cascades brought up to date
    arrived += run_batches(spark, lake, history, [[later]], first=1)
    arrived += run_batches(spark, lake, history, [[bob.entry(1, Create(folders.at(2), {"name": "other"}))]], first=2)
    check_lake(spark, lake, arrived, history)
    assert spark.table("gold.files").count() == 2


@pytest.mark.slow_on_spark(why="three batches; reverts and cascades are in the generated histories on both engines")
def test_a_revert_brings_the_cascades_up_to_date_around_what_changed_since_the_last_run(spark: Any,
                                                                                        lake: Any) -> None:
    """A revert counts table changes from its snapshot's silver run, older than the last run; the
    cascades count from the last run's (the set they bring up to date reflects it). Here an update
    at version 3 points a file at a deleted folder (the file is removed); the revert to version 2
    ignores it, and the file comes back. The region is that file alone, not also the file created
    since the snapshot (and before the last run); and a fork before the last run (an entry that
    lost its place, which the last run took into account) does not make the revert read every edge."""
    from lakehouse.core.messages import Create, Delete, SchemaMeta, SchemaRevert, Update
    from tests.stories import ALICE, BOB, CAROL, Log, hash_of_bytes, migration, text

    folders, files = Log(ALICE, 0), Log(ALICE, 1)
    bob, carol = Log(BOB, 0), Log(CAROL, 0)
    schemas = [folders.add(SchemaMeta("folders")), folders.add(migration(text("name"))),
               files.add(SchemaMeta("files")),
               files.add(migration(text("folder", type="relation", schema=folders.sid, cascade=True)))]
    kept, gone = bob.add(Create(folders.at(2), {"name": "kept"})), bob.add(Create(folders.at(2), {"name": "gone"}))
    file = carol.add(Create(files.at(2), {"folder": hash_of_bytes(kept)}))
    forked = Log(BOB, 1)
    history = History(lines=(), names={folders.sid: "folders", files.sid: "files"}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [[*schemas, kept, gone, file,
                                                  forked.add(Create(folders.at(2), {"name": "forked"}))]])
    later = [bob.add(Delete(hash_of_bytes(gone), folders.at(2))), files.add(migration(text("note"))),
             carol.add(Update(files.at(3), hash_of_bytes(file), {"folder": hash_of_bytes(gone)})),
             carol.add(Create(files.at(2), {"folder": hash_of_bytes(kept)})),
             forked.entry(1, Create(folders.at(2), {"name": "fork"}))]
    arrived += run_batches(spark, lake, history, [later], first=1)
    assert spark.table("gold.files").count() == 1, "the first file points at a deleted folder"
    revert = files.add(SchemaRevert(2))
    write_landing(lake, "batch-002.jsonl", [revert])
    run_ingest(spark, lake)
    run_silver(spark, lake)
    gold = run_gold(spark, lake)
    assert gold.modes[str(files.sid)] == "revert"
    assert gold.cascade_region == 1, "only the first file changed since the last run"
    check_lake(spark, lake, [*arrived, revert], history)
    assert spark.table("gold.files").count() == 2


def _materialize_batch(spark: Any, lake: Any, history: History, lines: list[Line], n: int) -> Any:
    """One more batch, as :func:`run_batches` runs it; silver's summary."""
    write_landing(lake, f"batch-{n:03d}.jsonl", lines)
    run_ingest(spark, lake)
    silver = run_silver(spark, lake)
    register_seen(spark, lake, history)
    run_gold(spark, lake)
    return silver


@pytest.mark.slow_on_spark(why="two batches; reverts in later batches are in the generated histories on both engines")
def test_a_revert_judges_again_only_the_logs_that_wrote_at_the_versions_it_abandons(spark: Any, lake: Any) -> None:
    """Issue: a revert judged every instance log of its schema again, though a log with no
    message at an abandoned version keeps its statuses (most of a revert near the head)."""
    from lakehouse.core.messages import Create, SchemaRevert
    from tests.stories import ALICE, Log
    from tests.unit.test_reference import schema_log

    schema, schema_lines = schema_log(length=3)
    at_two, at_three = Log(ALICE, 1), Log(ALICE, 2)
    first = [*schema_lines, at_two.add(Create(schema.at(2), {"f2": "kept"})),
             at_three.add(Create(schema.at(3), {"f3": "abandoned"}))]
    history = History(lines=(), names={schema.sid: "notes"}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [first])
    revert = schema.add(SchemaRevert(2))
    silver = _materialize_batch(spark, lake, history, [revert], 1)
    assert silver.instance_logs_judged == 1, "only the log that wrote at version 3"
    check_lake(spark, lake, [*arrived, revert], history)
    assert [r["f2"] for r in spark.table("gold.notes").collect()] == ["kept"]


@pytest.mark.slow_on_spark(why="two batches; reverts in later batches are in the generated histories on both engines")
def test_a_revert_judges_again_only_the_instances_written_at_the_versions_it_abandons(spark: Any, lake: Any) -> None:
    """Issue: a revert judged again every message of a log that wrote at an abandoned version (a
    third of a 1,000,000-message history for a revert near the head), though a message's status
    depends only on the earlier messages of its own instance. An update from another log that
    names an instance is judged again in that log, and leaves the instance's state as it is."""
    from lakehouse.core.messages import Create, SchemaRevert, Update
    from tests.stories import ALICE, BOB, Log, hash_of_bytes
    from tests.unit.test_reference import schema_log

    schema, schema_lines = schema_log(length=3)
    mixed, other = Log(ALICE, 1), Log(BOB, 1)
    kept, touched = mixed.add(Create(schema.at(2), {"f2": "kept"})), mixed.add(Create(schema.at(2), {"f2": "touched"}))
    first = [*schema_lines, kept, touched, mixed.add(Create(schema.at(3), {"f3": "abandoned"})),
             mixed.add(Update(schema.at(3), hash_of_bytes(touched), {"f3": "dropped"})),
             mixed.add(Update(schema.at(2), hash_of_bytes(touched), {"f2": "touched again"})),
             other.add(Create(schema.at(2), {"f2": "bob's"})),
             other.add(Update(schema.at(3), hash_of_bytes(kept), {"f3": "not bob's to change"}))]
    history = History(lines=(), names={schema.sid: "notes"}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [first])
    revert = schema.add(SchemaRevert(2))
    silver = _materialize_batch(spark, lake, history, [revert], 1)
    assert silver.instance_logs_judged == 2
    assert silver.instances_judged_again == 3, "touched and abandoned in alice's log, kept as bob's log names it"
    check_lake(spark, lake, [*arrived, revert], history)
    assert sorted(r["f2"] for r in spark.table("gold.notes").collect()) == ["bob's", "kept", "touched again"]


@pytest.mark.slow_on_spark(why="two batches; forks are in the generated histories on both engines")
def test_a_message_waiting_for_a_version_a_fork_makes_unreachable_is_rejected(spark: Any, lake: Any) -> None:
    """A create waits for version 3 of a schema; a fork at seq 2 of the schema log then ends it
    at version 1. The instance log has nothing new and no message at a version that changed:
    its pending message is what has it judged again."""
    from lakehouse.core.messages import Create
    from tests.stories import ALICE, Log, migration, text
    from tests.unit.test_reference import schema_log

    schema, schema_lines = schema_log(length=2)
    waiting = Log(ALICE, 1)
    first = [*schema_lines, waiting.add(Create(schema.at(3), {"f2": "early"}))]
    history = History(lines=(), names={schema.sid: "notes"}, claims=simulate().claims)
    arrived = run_batches(spark, lake, history, [first])
    assert spark.table("silver.messages").where("status = 'pending'").count() == 1
    fork = schema.entry(2, migration(text("other")))
    _materialize_batch(spark, lake, history, [fork], 1)
    check_lake(spark, lake, [*arrived, fork], history)
    assert [r["reason_code"] for r in spark.table("silver.messages").where(
        f"author = '{waiting.author}' AND log_id = 1").collect()] == ["unreachable_version"]
