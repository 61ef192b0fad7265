"""``make materialize``, silver part: bronze entries -> log state, message statuses, schemas.

SEMANTICS.md sections 1-3 and 7, ``docs/semantics-notes.md``. Incremental: a run reads the
bronze entries that arrived after its watermark, and re-judges only the logs they touch (from
those logs' entries) plus, of the instance logs whose schema log has new entries, the instances
with a message at a version that changed or a pending one, from the messages that name them
(:func:`_affected`). A touched instance
log that only grew (every new entry lies past its accepted prefix, and it has no fork) is judged
as an extension: its accepted prefix keeps its rows, and only the messages past it are
decoded and judged, from the state the earlier ones left.

The log and instance passes judge an input of more than ``group_rows`` rows in parts of whole
logs, one after another (:func:`lakehouse.spark.groups.staged_group_batches`), and a first run or
a rebuild joins their rows for ``silver.messages`` in parts alike, so that memory does not grow
with the lake. Steps:

1. **log pass** (in the engine, the touched logs by batches of whole logs): accepted prefix,
   forks, pending entries, decoded messages and the log's purpose; the regular instance logs
   judged a column at a time, the others one by one (:func:`lakehouse.spark.silver.log_pass_batch`);
2. **schemas** (on the driver: schema logs are small): every schema log's versions, lenses and
   field history (:func:`lakehouse.core.schemas.build_versions`), and the statuses of schema
   messages;
3. **instance pass** (in the engine, one group per instance log to judge): message statuses,
   and the state of every instance they change, folded from the values the checks returned
   (each message decoded and checked once); an extended log whose schema neither changed nor
   was touched resumes from the stored statuses and states of the instances its new messages
   name (:func:`lakehouse.spark.silver.instance_pass`), read from the files of their buckets;
4. at the same time: write ``silver.messages`` again with the judged rows in place
   (:func:`lakehouse.spark.delta.upsert`), write ``silver.logs`` again with the touched logs'
   rows in place (a first run or a rebuild writes both whole), replace
   ``silver.schema_versions`` and ``silver.schema_fields``, and replace the changed states of
   ``silver.instance_states`` (a MERGE on deletion vectors, :func:`lakehouse.spark.delta.replace_rows`,
   that names their buckets, :mod:`lakehouse.spark.buckets`, or the table written again when it is
   due to be compacted); then append the run and its watermark to
   ``silver.runs`` (last, so that a run that died is simply done again).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lakehouse.core.messages import SchemaId
from lakehouse.core.schemalog import build_schemas, field_rows, schema_message_status
from lakehouse.core.schemalog import version_rows as schema_version_rows
from lakehouse.core.schemas import SchemaVersions
from lakehouse.progress import Timeline
from lakehouse.spark import buckets, catalog, delta, workers
from lakehouse.spark import silver as S
from lakehouse.spark.groups import Lookup, parts_for, staged_group_batches
from lakehouse.spark.lake import found_schema_entries, silver_tables
from lakehouse.spark.retry import retried
from lakehouse.spark.tables import TableRef, is_delta_table, register_table, remove_tree, staging_folder

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.config import Settings
    from lakehouse.spark import deltalog

WHOLE_STATES_ROWS = 8_192
"""Stored states up to which a run writes ``silver.instance_states`` whole (compacted) rather than
merging the states it replaces into it: below it a MERGE's fixed cost is more than the whole write
on both engines. The MERGE of 100 instances' states against the whole write, on 2 cores, tables of
the 1,000,000-message bench lake's states: Sail 0.11 s against 0.05 at 2,000 and at 5,000 rows,
0.13 against 0.15 at 10,000, 0.13 against 0.30 at 50,000; Apache Spark 3.9 s against 2.5 at
2,000, 3.0 against 2.6 at 10,000, 2.9 against 2.5 at 50,000, 6.2 against 5.6 at 100,000, 5.2
against 7.9 at 200,000 (the states rows are wider than a gold table's, so Sail's break-even comes
well before :data:`lakehouse.spark.gold.WHOLE_TABLE_ROWS`)."""


LOG_PASS_FOLDER, INSTANCE_PASS_FOLDER = "log_pass", "instance_pass"
"""The staged folders of the two passes' rows in a run's staging folder: read back by the steps
after them, and counted by the writes (their rows bound what a write sends from this process)."""


@dataclass
class SilverSummary:
    """What one silver run did."""

    run_id: int = 0
    watermark: int = 0
    new_entries: int = 0
    logs_judged: int = 0
    logs_extended: int = 0
    instance_logs_judged: int = 0  # whole, or only the messages of the instances judged again
    instances_judged_again: int = 0  # in logs judged only in part (:func:`_affected`)
    statuses: dict[str, int] = field(default_factory=dict)
    schemas: int = 0
    changed_schemas: list[str] = field(default_factory=list)
    seconds: float = 0.0
    retried: list[str] = field(default_factory=list)  # transient engine failures survived
    steps: dict[str, float] = field(default_factory=dict)  # step -> wall seconds (Timeline)
    up_to_date: bool = False
    rebuilt: str | None = None  # why a run that was not asked to rebuild did


@dataclass(frozen=True)
class _SilverRun:
    """What the steps of one silver run start from: the tables as the last run left them (the
    ``old_*`` frames are None for a first run or a rebuild), and bronze."""

    spark: SparkSession
    tables: dict[str, TableRef]
    summary: SilverSummary  # filled in by the steps
    rebuild: bool
    bronze: DataFrame
    watermark: int  # the last run's (0 for a rebuild)
    top: int  # the latest bronze batch: this run's watermark
    staging: str  # the run's staging folder, under the lake root (a path or a URI)
    old_messages: DataFrame | None
    old_logs: DataFrame | None
    old_states: DataFrame | None
    # the stored states' Delta log as this run found it, and their number of buckets (None: none yet)
    states_layout: tuple[deltalog.Snapshot | None, int | None]
    old_schema_entries: DataFrame | None  # None too in a lake from before silver.schema_entries
    # silver.messages' Delta log as this run found it, and its number of buckets (of the author; None:
    # none yet): read once, by the start (at 10,000,000 messages its log lists some 12,000 files)
    messages_layout: tuple[deltalog.Snapshot | None, int | None]
    after_unfinished: bool  # an earlier run died before its end (its staging folder was there)
    group_rows: int  # input rows a group step holds at once (setting group_rows)
    # rows up to which a write of a table without deletion vectors goes from this process, by the
    # deltalake package (lakehouse.spark.delta.here_rows_for: on Apache Spark; 0 on embedded Sail)
    here_rows: int = 0


@dataclass(frozen=True)
class LogPass:
    """Step 1's result (:func:`_log_pass`): the logs with new entries and what the log pass found."""

    touched: DataFrame  # (author, log_id) of the logs with new entries
    p1: DataFrame  # the log pass's rows (LOG_PASS_DDL)
    touched_logs: DataFrame  # their logs, with whether each was judged whole
    all_logs: DataFrame  # every log's silver.logs row, as this run leaves the table (LOGS_DDL)
    accepted_touched: DataFrame  # accepted (author, log_id, seq_num, entry_hash) of the touched logs
    # the stored silver.messages rows of the touched logs, staged when few (None: not staged)
    stored: DataFrame | None = None


@dataclass(frozen=True)
class SchemaPass:
    """Step 2's result (:func:`_schemas`): every schema log's versions and what changed in them."""

    schemas: dict[SchemaId, SchemaVersions]
    ended: dict[SchemaId, int]  # schema log -> the seq of its accepted end-of-feed entry
    entry_rows: list[tuple[Any, ...]]  # silver.schema_entries
    version_rows: list[tuple[Any, ...]]  # silver.schema_versions
    field_rows: list[tuple[Any, ...]]  # silver.schema_fields
    schema_status: DataFrame  # (entry_hash, s_status, s_code, s_reason) of every schema message
    changed_versions: list[tuple[str, int]]  # (schema, version) new, gone or changed
    stable: list[str]  # the schemas with versions before this run and after it
    unsettled: list[str]  # the schemas with a version gone or changed
    versions_stored: bool = False  # silver.schema_versions holds exactly version_rows already


@dataclass(frozen=True)
class InstancePass:
    """Step 3's result (:func:`_instance_pass`): the judged statuses and states, and which
    instances were judged."""

    p2: DataFrame  # the judged statuses and the states they change (INSTANCE_PASS_DDL)
    whole: DataFrame  # (author, log_id) of the instance logs judged whole
    again: DataFrame | None  # (author, log_id, instance) of the instances judged again in other logs
    again_schemas: list[str]  # the schemas of those logs


@retried("silver")
def run_silver(spark: SparkSession, settings: Settings, *, rebuild: bool = False) -> SilverSummary:
    """Bring the silver tables up to date with bronze (see the module docstring).

    Args:
        spark: the session.
        settings: ``lake_root``, ``group_rows``.
        rebuild: recompute every log from all of bronze (``make rebuild``).

    Returns:
        The summary: new entries, logs judged, statuses, changed schemas.
    """
    started = time.monotonic()
    timeline = Timeline()
    run = _start(spark, settings.lake_root, rebuild, settings.group_rows, delta.here_rows_for(settings))
    if isinstance(run, SilverSummary):  # nothing new in bronze
        run.seconds = time.monotonic() - started
        return run
    run_started = datetime.utcnow()
    workers.start(workers.processes_for(settings))
    logs = _log_pass(run)
    timeline.mark("log pass")
    schemas = _schemas(run, logs)
    timeline.mark("schemas")
    judged = _instance_pass(run, logs, schemas)
    timeline.mark("instance pass")
    _write(run, logs, schemas, judged)
    timeline.mark("writes")
    _finish(run, run_started)
    timeline.mark("finish")
    run.summary.steps = timeline.steps
    run.summary.seconds = time.monotonic() - started
    return run.summary


def _start(spark: SparkSession, root: str, rebuild: bool, group_rows: int, here_rows: int = 0
           ) -> _SilverRun | SilverSummary:
    """The run's id and watermark, or when bronze has nothing new (or is not there yet) the
    summary that says so (``up_to_date``)."""
    T = silver_tables(root)
    summary = SilverSummary()
    staging = staging_folder(root, "silver")
    # a run that died in a write in slices left that table in part written: this one writes it again
    stopped = buckets.unfinished(staging)
    if stopped and not rebuild:
        rebuild = True
        summary.rebuilt = f"a run stopped while it wrote {', '.join(stopped)} in slices"
    bronze = delta.read(spark, catalog.ENTRIES.at(root))
    ran = delta.integer_max(spark, T["runs"], "run_id", "watermark")  # None before the first run
    last = ran or (None, None)
    summary.run_id = (last[0] or 0) + 1
    watermark = 0 if rebuild else (last[1] or 0)
    if bronze is None:
        summary.up_to_date = True
        return summary
    old_states = None if rebuild else delta.read(spark, T["instance_states"])
    states_layout = (None, None) if old_states is None else buckets.layout(T["instance_states"].location)
    if ran is not None and not rebuild and (old_states is None or "log_id" not in old_states.columns):
        # a lake whose instance states gold folded (only those of registered schemas): silver
        # folds them all now, from every log
        rebuild, watermark, old_states = True, 0, None
        summary.rebuilt = "silver.instance_states is folded by silver now"
    top = (delta.integer_max(spark, catalog.ENTRIES.at(root), "batch_id") or (None,))[0] or 0
    summary.watermark = top
    if top <= watermark and not rebuild:
        summary.up_to_date = True
        summary.watermark = watermark
        if ran is not None and not is_delta_table(T["schema_entries"].location):
            # a lake from before the table: it is found the long way once, here, rather than by
            # every run that reads the schemas
            found = found_schema_entries(spark, root)
            if found is not None:
                delta.overwrite(found, T["schema_entries"])
                register_table(spark, T["schema_entries"])
        snap, count = states_layout
        if old_states is not None and snap is not None and snap.files and count is None:
            # a lake from before its states had buckets: laid out in them once, here, rather than by
            # the next run that brings a message
            buckets.lay_out(old_states, T["instance_states"], snap, **catalog.INSTANCE_STATES.properties)
        snap, count = buckets.layout(T["messages"].location) if ran is not None else (None, None)
        if snap is not None and snap.files and count is None:
            # the same for a lake from before its messages had buckets
            messages = delta.read(spark, T["messages"])
            assert messages is not None, "its Delta log was just read"
            buckets.lay_out(messages, T["messages"], snap, catalog.MESSAGES_BUCKET_KEY, **catalog.MESSAGES.properties)
        return summary
    # a run leaves its staging folder only when it dies before its end: what it committed is in the
    # tables this run starts from
    after_unfinished = remove_tree(staging)
    old_messages, old_logs = (None, None) if rebuild else (delta.read(spark, T["messages"]), delta.read(spark, T["logs"]))
    if old_logs is not None and "ended" not in old_logs.columns:
        old_logs = _with_ended(bronze, old_logs, old_messages, f"{staging}/old_logs")
    old_schema_entries = None if rebuild else delta.read(spark, T["schema_entries"])
    messages_layout = (None, None) if old_messages is None else buckets.layout(T["messages"].location)
    # the statistics of a lake from before they were narrowed: each file written from now on
    # keeps only those (its older files keep theirs until written again)
    messages_layout = _with_stats(spark, T["messages"], messages_layout, catalog.MESSAGES_STATS)
    states_layout = _with_stats(spark, T["instance_states"], states_layout, catalog.STATES_STATS)
    return _SilverRun(spark, T, summary, rebuild, bronze, watermark, top, staging, old_messages, old_logs, old_states,
                      states_layout, old_schema_entries, messages_layout, after_unfinished, group_rows, here_rows)


def _with_stats(spark: SparkSession, ref: TableRef, layout: tuple[deltalog.Snapshot | None, int | None],
                stats: Mapping[str, str]) -> tuple[deltalog.Snapshot | None, int | None]:
    """A table's layout (:func:`lakehouse.spark.buckets.layout`) after the statistics properties
    ``stats`` are set on it where it lacks them (one commit of its metaData, once a lake), read
    again then; as it was when nothing is missing, or there is no table."""
    snap = layout[0]
    missing = {k: v for k, v in stats.items() if snap is not None and snap.properties.get(k) != v}
    if not missing:
        return layout
    delta.set_properties(spark, ref, missing)
    return buckets.layout(ref.location)


def _with_ended(bronze: DataFrame, old_logs: DataFrame, old_messages: DataFrame | None, staged: str) -> DataFrame:
    """``silver.logs`` of a lake from before its ``ended`` column, with it: whether the entry at
    each log's accepted seq ends the log, found once by joining those entries (their hashes from
    ``silver.messages``) with bronze; false for a log with nothing accepted (null for every log
    when ``silver.messages`` is missing: the log pass then judges every touched log whole). Staged
    in ``staged``; the run writes the table with the column, so that no later run reads bronze
    for it."""
    from pyspark.sql import functions as F

    if old_messages is None:
        return old_logs.withColumn("ended", F.lit(None).cast("boolean"))
    key = ["author", "log_id"]
    last = (old_messages.where(F.col("log_status") == "accepted").select(*key, "seq_num", "entry_hash")
            .join(old_logs.select(*key, F.col("accepted_seq").alias("seq_num")), [*key, "seq_num"]))
    ended = bronze.select("entry_hash", "end_of_feed").join(last, "entry_hash").select(*key, "end_of_feed")
    return delta.stage(old_logs.join(ended, key, "left").withColumn("ended", F.coalesce(F.col("end_of_feed"), F.lit(False)))
                       .drop("end_of_feed"), staged)


def _stored_messages(run: _SilverRun, logs: DataFrame, hashes: Iterable[int] | None = None) -> DataFrame:
    """``silver.messages`` as stored, narrowed to the files of the buckets of ``logs``' authors
    (``author, log_id``: a few) when the table has buckets; the rows of ``logs`` are still to be
    taken from it.

    Args:
        hashes: the 16-bit hashes of their authors (:func:`lakehouse.spark.buckets.hash_column`),
            when known; else found, in one job.
    """
    assert run.old_messages is not None, "only a run after an earlier one has stored messages"
    count = run.messages_layout[1]
    if count is None:
        return run.old_messages
    if hashes is None:
        hashes = buckets.hashes_of(logs, catalog.MESSAGES_BUCKET_KEY)
    # through Delta, not their files as parquet (lakehouse.spark.buckets.read_files): a trickle's
    # hundred authors name some 300 files of 250,000 rows at 10,000,000 messages, which Sail read
    # no faster so (1.5-1.7 s against 1.3-1.4 from a cold cache), and slower in a fresh process
    # one partition: a file of each bucket read is a partition of the engine's, and the staged
    # result, read by several steps, would be as many small files
    return buckets.where_in(run.old_messages, hashes, count).coalesce(1)


_LOG_COLUMNS = ["author", "log_id", "purpose", "schema", "first_seq", "accepted_seq", "fork_seq", "entries", "pending",
                "ended"]


def _log_pass(run: _SilverRun) -> LogPass:
    """Step 1: the log pass over the touched logs (:func:`lakehouse.spark.silver.log_pass_batch`), their
    ``silver.logs`` rows, and the accepted entries: the log pass's, and the earlier ones of logs it
    judged as an extension."""
    from pyspark.sql import functions as F

    bronze, staging, old_logs, old_messages = run.bronze, run.staging, run.old_logs, run.old_messages
    key = ["author", "log_id"]
    new = bronze.where(F.col("batch_id") > run.watermark)
    # the new entries, and the earlier ones of their logs: about the log pass's input, in one job
    per_log = new.groupBy(*key).agg(F.count("*").alias("new"))
    if old_logs is not None:
        per_log = per_log.join(old_logs.select(*key, "entries", F.col("run_id").alias("_run")), key, "left")
    counted = per_log.agg(F.sum("new"), F.collect_set(buckets.hash_column(catalog.MESSAGES_BUCKET_KEY)),
                          *([F.sum("entries"), F.max("_run")] if old_logs is not None else [])).collect()[0]
    run.summary.new_entries = int(counted[0] or 0)
    earlier = int(counted[2] or 0) if old_logs is not None else 0
    # a touched log's row written by this run's id: by a run that died after its silver.logs commit,
    # whose entries count some of this run's new ones (the log pass counts those logs in bronze)
    rewritten = old_logs is not None and counted[3] is not None and int(counted[3]) >= run.summary.run_id
    touched = new.select(*key).distinct()
    # the touched logs' stored messages, read once for the log pass (its prefix hashes) and the
    # instance pass (the earlier messages of the logs it judges: _stored_of)
    hashes = {int(h) for h in counted[1]}  # of the touched logs' authors: the buckets of their rows
    stored = None
    if old_messages is not None and run.watermark and earlier <= STAGED_EARLIER_ROWS:
        stored = delta.stage(_stored_messages(run, touched, hashes)
                             .join(F.broadcast(touched), key, "left_semi"), f"{staging}/stored_of_touched")
    # a run from watermark 0 (the first, or a rebuild) touches every log: all of bronze is its input
    log_input = S.log_pass_input(bronze, run.watermark, None if run.watermark == 0 else touched, old_logs,
                                 old_messages if stored is None else stored, f"{staging}/log_info", recount=rewritten)
    p1 = staged_group_batches(log_input, key, S.log_pass_batch, S.LOG_PASS_DDL, f"{staging}/{LOG_PASS_FOLDER}",
                              parts=parts_for(run.summary.new_entries + earlier, run.group_rows), what="log pass")
    touched_logs = delta.stage(p1.select(
        "author", "log_id", "purpose", F.col("purpose_schema").alias("schema"), F.col("purpose_seq").alias("first_seq"),
        "accepted_seq", "fork_seq", "entries", "pending", "whole_log", "ended").distinct(), f"{staging}/touched_logs")
    counts = touched_logs.agg(F.count("*"), F.sum(F.when(F.col("whole_log"), 0).otherwise(1))).collect()[0]
    run.summary.logs_judged, run.summary.logs_extended = counts[0], counts[1] or 0
    # the touched logs' rows with this run's id; the others' as stored (their run, too)
    all_logs = touched_logs.select(*_LOG_COLUMNS, F.lit(run.summary.run_id).cast("bigint").alias("run_id"))
    if old_logs is not None:
        all_logs = (old_logs.select(*delta.columns(catalog.LOGS_DDL)).join(touched, ["author", "log_id"], "left_anti")
                    .unionByName(all_logs))
    return LogPass(touched, p1, touched_logs, delta.stage(all_logs, f"{staging}/all_logs"),
                   p1.where(F.col("log_status") == "accepted").select(*S.ACCEPTED_COLUMNS), stored)


def _earlier(run: _SilverRun, log_pass: LogPass, logs: DataFrame, stored: DataFrame | None = None) -> DataFrame:
    """The stored ``silver.messages`` rows of ``logs`` (``author, log_id``) that this run's log
    pass did not judge again: all of an untouched log's, the accepted prefix of a log judged as an
    extension. Narrowed to ``logs`` first, so that the rest runs over their rows only (an
    incremental run at 1,000,000 messages spent a second over every earlier message); the sets of
    logs, a row per log at most, are broadcast, so the stored messages are not shuffled to narrow them.

    Args:
        stored: the stored messages to take them from (``silver.messages``, or a part of it that
            holds every message of ``logs``: :func:`_stored_of`); None: ``silver.messages``.
    """
    from pyspark.sql import functions as F

    key = ["author", "log_id"]
    assert run.old_messages is not None, "only a run after an earlier one has earlier messages"
    stored = run.old_messages if stored is None else stored
    whole_logs = F.broadcast(log_pass.touched_logs.where(F.col("whole_log")).select(*key))
    return (stored.join(F.broadcast(logs.select(*key)), key, "left_semi").join(whole_logs, key, "left_anti")
            .join(log_pass.p1.select("entry_hash"), "entry_hash", "left_anti"))


STAGED_EARLIER_ROWS = 200_000
"""Stored messages of the logs an instance pass judges up to which they are staged once, for its
several reads of them (:func:`_stored_of`)."""


def _stored_of(run: _SilverRun, log_pass: LogPass, logs: DataFrame, rows: int, hashes: set[int]) -> DataFrame | None:
    """The stored messages of ``logs`` (``author, log_id``; about ``rows`` messages, their authors'
    16-bit ``hashes``: :func:`lakehouse.spark.buckets.hash_column`), read once:
    the instance pass reads them two or three times (the earlier messages of the logs judged
    whole, of those judged in part, of those that grew), each a scan of every stored message
    otherwise (a few tenths of a second at 1,000,000 messages on Sail, growing with the lake).
    Those the log pass staged (``log_pass.stored``) when every one of ``logs`` has new entries (a
    run that changed no schema), else staged here when they are at most
    :data:`STAGED_EARLIER_ROWS`. None: read ``silver.messages`` each time."""
    from pyspark.sql import functions as F

    key = ["author", "log_id"]
    if log_pass.stored is not None and logs.join(log_pass.touched_logs.select(*key), key, "left_anti").isEmpty():
        return log_pass.stored
    if run.old_messages is None or rows > STAGED_EARLIER_ROWS:
        return None
    return delta.stage(_stored_messages(run, logs, hashes).join(F.broadcast(logs), key, "left_semi"),
                       f"{run.staging}/stored_of_judged")


def _schemas(run: _SilverRun, logs: LogPass) -> SchemaPass:
    """Step 2, on the driver (schema logs are small): every schema log's versions, which schemas
    changed since the last run (``summary.changed_schemas``), and the statuses of schema messages."""
    from pyspark.sql import functions as F

    spark, summary = run.spark, run.summary
    key, columns = ["author", "log_id"], delta.columns(catalog.SCHEMA_ENTRIES_DDL)
    # schema logs and their messages are few: broadcast, bronze is not shuffled to find them
    schema_logs = F.broadcast(logs.all_logs.where(F.col("purpose") == "schema").select(*key))
    accepted = logs.accepted_touched
    earlier = None
    if run.old_schema_entries is not None:
        # the earlier accepted entries of the schema logs, but those of logs judged whole (and those
        # the log pass judged again): the stored ones, not every stored message and bronze
        whole_logs = F.broadcast(logs.touched_logs.where(F.col("whole_log")).select(*key))
        earlier = (run.old_schema_entries.join(schema_logs, key, "left_semi").join(whole_logs, key, "left_anti")
                   .join(logs.p1.select("entry_hash"), "entry_hash", "left_anti").select(*columns))
    elif run.old_messages is not None:  # a schema log with new entries is judged whole by the log pass
        accepted = accepted.unionByName(
            _earlier(run, logs, schema_logs).where(F.col("log_status") == "accepted").select(*S.ACCEPTED_COLUMNS))
    found = S.with_payloads(F.broadcast(accepted.join(schema_logs, key, "left_semi")), run.bronze,
                            "end_of_feed").select(*columns)
    schema_rows = (found if earlier is None else found.unionByName(earlier)).collect()
    schemas = build_schemas(schema_rows)
    ended = {SchemaId(bytes.fromhex(r["author"]), int(r["log_id"])): int(r["seq_num"])
             for r in schema_rows if r["end_of_feed"]}
    summary.schemas = len(schemas)
    version_rows = [delta.row(catalog.SCHEMA_VERSIONS_DDL, **vars(r)) for r in schema_version_rows(schemas)]
    # a small table: read by this process (lakehouse.spark.delta.read_arrow)
    old_versions = None if run.rebuild else delta.read_arrow(spark, run.tables["schema_versions"])
    stored_versions: list[tuple[Any, ...]] = []
    if old_versions is not None:
        stored_versions = [tuple(r) for r in delta.arrow_rows(old_versions.select(delta.columns(catalog.SCHEMA_VERSIONS_DDL)))]
    old_version_rows = set(stored_versions)
    differ = set(version_rows) ^ old_version_rows  # rows new, gone or changed
    # the stored table holds these rows already (and nothing else): not written again
    versions_stored = delta.holds_rows(None if old_versions is None else old_versions.column_names, stored_versions,
                                       version_rows, catalog.SCHEMA_VERSIONS_DDL)
    summary.changed_schemas = sorted({r[0] for r in differ})
    schema_status_rows = []
    for r in schema_rows:
        sid = SchemaId(bytes.fromhex(r["author"]), int(r["log_id"]))
        if r["author"] and sid in schemas:
            status, code, reason = schema_message_status(schemas[sid], int(r["seq_num"]))
            schema_status_rows.append((r["entry_hash"], status, code, reason))
    schema_status = spark.createDataFrame(
        schema_status_rows, "entry_hash STRING, s_status STRING, s_code STRING, s_reason STRING")
    return SchemaPass(schemas, ended, [tuple(r) for r in schema_rows], version_rows,
                      [delta.row(catalog.SCHEMA_FIELDS_DDL, **vars(r)) for r in field_rows(schemas)], schema_status,
                      changed_versions=sorted({(r[0], r[1]) for r in differ}),
                      stable=sorted({str(sid) for sid in schemas} & {r[0] for r in old_version_rows}),
                      unsettled=sorted({r[0] for r in old_version_rows - set(version_rows)}),
                      versions_stored=versions_stored)


def _instance_pass(run: _SilverRun, logs: LogPass, schemas: SchemaPass) -> InstancePass:
    """Step 3: the instance pass over the touched instance logs and, of the instance logs of
    changed schemas, the messages whose statuses can change (:func:`_affected`;
    :func:`lakehouse.spark.silver.instance_pass`). A log that only grew, and whose schema neither
    changed nor was touched, is judged from where its earlier messages left it: only its new
    messages are decoded. A log judged in part is given the messages of the instances judged
    again, each instance from its first message: the others' statuses and states stand.

    """
    from pyspark.sql import functions as F

    changed, touched = run.summary.changed_schemas, logs.touched
    instance_logs = logs.all_logs.where(F.col("purpose") == "instance")
    judge = instance_logs.join(touched, ["author", "log_id"], "left_semi")
    # a touched log may be the schema that instance messages write or wait for (or turn out not to
    # be a schema log at all): of the instance logs naming it, or a changed schema, those whose
    # statuses can change are judged again
    touched_ids = touched.select(F.concat_ws(":", "author", F.col("log_id").cast("string")).alias("schema"))
    naming = instance_logs.join(touched_ids, "schema", "left_semi")
    if changed:
        naming = naming.unionByName(instance_logs.where(F.col("schema").isin(changed)))
    affected, again = _affected(run, schemas, naming)
    purpose = [F.col("schema").alias("purpose_schema"), F.col("first_seq").alias("purpose_seq")]
    # staged, as the logs judged whole below: small, and read by several steps (the states write too)
    judge = delta.stage(judge.unionByName(affected).distinct().select("author", "log_id", *purpose),
                        f"{run.staging}/judge")
    partial = None  # the logs judged in part: only their messages that name an instance of `again`
    if again is not None:
        # a log judged whole anyway (it has new entries) is judged whole
        again = delta.stage(again.join(judge, ["author", "log_id"], "left_anti"), f"{run.staging}/again")
        again = None if again.isEmpty() else again
    if again is not None:
        partial = delta.stage(instance_logs.join(again.select("author", "log_id").distinct(), ["author", "log_id"])
                              .select("author", "log_id", *purpose), f"{run.staging}/partial")
    key = ["author", "log_id"]
    judged = judge.select(*key, "purpose_schema", F.lit(False).alias("in_part"))
    if partial is not None:
        judged = judged.unionByName(partial.select(*key, "purpose_schema", F.lit(True).alias("in_part")))
    # the logs judged by schema, and their entries (about the pass's input), in one job
    judged_rows = (judged.join(logs.all_logs.select(*key, "entries"), key, "left").groupBy("purpose_schema", "in_part")
                   .agg(F.count("*").alias("logs"), F.sum("entries").alias("entries"),
                        F.collect_set(buckets.hash_column(catalog.MESSAGES_BUCKET_KEY)).alias("hashes")).collect())
    # the judged logs' authors' buckets: the files of silver.messages that hold their rows
    hashes = {int(h) for r in judged_rows for h in r["hashes"]}
    referenced = {SchemaId.parse(r["purpose_schema"]) for r in judged_rows}
    again_schemas = sorted({r["purpose_schema"] for r in judged_rows if r["in_part"]})
    states = S.schema_states(referenced, schemas.schemas, schemas.ended, logs.all_logs)
    entries = sum(int(r["entries"] or 0) for r in judged_rows)
    # every stored message the pass reads is of a log it judges (whole, in part, or grown): read once
    stored = _stored_of(run, logs, judged.select(*key).distinct(), entries, hashes)
    extended = delta.stage(logs.touched_logs.where(~F.col("whole_log") & (F.col("purpose") == "instance"))
                           .where(~F.col("schema").isin(changed)).join(touched_ids, "schema", "left_anti")
                           .select("author", "log_id"), f"{run.staging}/extended")
    whole = judge.join(extended, ["author", "log_id"], "left_anti")
    accepted = logs.accepted_touched
    if run.old_messages is not None:
        accepted = accepted.unionByName(
            _earlier(run, logs, whole, stored).where(F.col("log_status") == "accepted").select(*S.ACCEPTED_COLUMNS))
    parts = parts_for(entries, run.group_rows)
    # in parts, each part's messages take their payloads from its own part of bronze (a join of
    # every message with bronze before the split held every payload: 6.4 GiB at 10,000,000)
    lookup = Lookup(run.bronze, ("entry_hash",), ("payload",)) if parts > 1 else None

    def to_judge(messages: DataFrame) -> DataFrame:
        if lookup is None:
            return S.messages_to_judge(S.with_payloads(messages, run.bronze))
        return S.messages_to_judge(messages.withColumn("payload", F.lit(None).cast("binary")))

    instance_input = to_judge(accepted.join(whole, ["author", "log_id"]))
    if partial is not None and again is not None:  # the one with the other
        named = (_earlier(run, logs, partial, stored).where(F.col("log_status") == "accepted")
                 .join(again, ["author", "log_id", "instance"], "left_semi").select(*S.ACCEPTED_COLUMNS))
        instance_input = instance_input.unionByName(
            to_judge(named.join(partial, ["author", "log_id"])))
    if run.old_messages is not None:
        ext = judge.join(extended, ["author", "log_id"], "left_semi")
        instance_input = instance_input.unionByName(
            to_judge(logs.accepted_touched.join(ext, ["author", "log_id"])))
        # the instances that the new updates and deletes of the extended logs name
        named = (logs.p1.where((F.col("log_status") == "accepted") & F.col("kind").isin("update", "delete"))
                 .join(ext, ["author", "log_id"], "left_semi").select("author", "log_id", "instance").distinct())
        instance_input = instance_input.unionByName(S.resume_rows(named, _earlier(run, logs, ext, stored), ext))
        if run.old_states is not None:
            # read from the files of their buckets only, when the stored states have buckets
            count = run.states_layout[1]
            stored = run.old_states if count is None else buckets.where_in(
                run.old_states, buckets.hashes_of(named, "instance"), count)
            instance_input = instance_input.unionByName(S.state_rows(named, stored, ext))
    p2 = staged_group_batches(instance_input, key, S.instance_pass(states), S.INSTANCE_PASS_DDL,
                              f"{run.staging}/{INSTANCE_PASS_FOLDER}", parts=parts, what="instance pass", lookup=lookup)
    run.summary.instance_logs_judged = sum(int(r["logs"]) for r in judged_rows)
    run.summary.instances_judged_again = again.count() if again is not None else 0
    return InstancePass(p2, whole, again, again_schemas)


def _affected(run: _SilverRun, schemas: SchemaPass, logs: DataFrame) -> tuple[DataFrame, DataFrame | None]:
    """Of ``logs`` (instance logs whose schema log has new entries, or changed), what must be
    judged again: the logs to judge whole, and the instances to judge again in the others.

    A message's status depends on its version (whether it exists, its lens, whether a revert
    abandoned it), on its log's purpose, and on the earlier messages of its instance, never on
    those of another instance (SEMANTICS.md section 3: a pending message holds back only its own
    instance). So of a schema that has versions before this run and after it, only the instances
    with a message at a version that is new, gone or changed (a revert abandons versions, a fork
    takes them away), or with a pending message (a fork or an end of feed can make its version
    unreachable), are judged again, from every message of their log that names them: a revert
    judges again the instances written at the versions it abandons, not every log of its schema,
    nor every message of a log that wrote at them. Every log of another schema (one that just
    became a schema, or stopped being one) is judged whole, and all of ``logs`` on a first run.

    Returns:
        (``logs`` to judge whole, ``author, log_id, instance`` of the instances to judge again in
        the other logs, or None when there are none to look for).
    """
    from pyspark.sql import functions as F

    if run.old_messages is None or not schemas.stable:
        return logs, None
    key = ["author", "log_id"]
    versions = run.spark.createDataFrame(schemas.changed_versions, "schema STRING, version BIGINT")
    stable = F.col("schema").isin(schemas.stable)
    # the stored messages of those logs, from their authors' buckets: usually none, as a run that
    # brings instance messages only names no schema log, and then nothing is read (Sail read every
    # stored message for a query whose filter keeps none: 1.5 s of a trickle at 10,000,000 messages)
    named = logs.where(stable)
    hashes = buckets.hashes_of(named, catalog.MESSAGES_BUCKET_KEY)
    if not hashes:
        return logs.where(~stable), None
    stored = _stored_messages(run, named, hashes)
    hit = (stored.join(versions, ["schema", "version"], "left_semi")
           .unionByName(stored.where(F.col("status") == "pending"))
           .where(F.col("instance").isNotNull()).select(*key, "instance"))
    return logs.where(~stable), hit.join(logs.where(stable).select(*key), key, "left_semi").distinct()


def _write(run: _SilverRun, logs: LogPass, schemas: SchemaPass, judged: InstancePass) -> None:
    """Step 4: the final statuses, then five tables, each written on its own, at the same time:
    small jobs whose fixed costs overlap (the run's row comes after all of them, :func:`_finish`)."""
    from pyspark.sql import functions as F

    spark, T, summary, rebuild, p2, again = run.spark, run.tables, run.summary, run.rebuild, judged.p2, judged.again
    states = p2.where(F.col("instance_id").isNotNull() & F.col("replaced").isNull()).select(
        *delta.columns(catalog.STATES_DDL))
    whole_logs = None  # the logs judged whole, when some are (none when every touched log only grew)
    if not rebuild and run.old_states is not None:
        # every state of a log judged whole is replaced (it may have lost instances, or its purpose)
        whole_logs = delta.stage(judged.whole.select("author", "log_id").unionByName(
            logs.touched_logs.where(F.col("whole_log")).select("author", "log_id")), f"{run.staging}/whole_logs")
        whole_logs = None if whole_logs.isEmpty() else whole_logs
    replaced, replaced_at = _replaced_states(run, schemas, judged, states, p2.where(F.col("replaced")), whole_logs)
    p2 = p2.where(F.col("entry_hash").isNotNull()).select(*delta.columns(S.INSTANCE_STATUS_DDL))
    final = S.final_statuses(logs.p1, p2, schemas.schema_status, summary.run_id)
    # a rebuild or a first run writes silver.messages whole: its statuses are counted from the table
    # written, not by computing the final statuses (every message's) a second time
    whole = rebuild or run.old_messages is None
    if not whole:
        summary.statuses = {r["status"]: r["count"] for r in final.groupBy("status").count().collect()}
    message_cols = delta.columns(catalog.MESSAGES_DDL)

    def write_messages() -> None:
        if whole:
            parts = parts_for(summary.new_entries, run.group_rows)
            count = buckets.count_for(summary.new_entries)
            if parts == 1:
                buckets.write(final.select(*message_cols), T["messages"], count, catalog.MESSAGES_BUCKET_KEY,
                              staging=run.staging, **catalog.MESSAGES.properties)
                return
            # in parts, as the passes: the join of the two passes' rows holds a part of them at a
            # time (at 3,000,000 messages it was the run's peak); one write of the table after
            staged = f"{run.staging}/messages_parts"
            for n in range(parts):
                in_part = F.pmod(F.hash("entry_hash"), F.lit(parts)) == n
                part = S.final_statuses(logs.p1.where(in_part), p2.where(in_part), schemas.schema_status,
                                       summary.run_id)
                delta.append_staged(part.select(*message_cols), staged)
            buckets.write(spark.read.schema(catalog.MESSAGES_DDL).parquet(staged), T["messages"], count,
                          catalog.MESSAGES_BUCKET_KEY, staging=run.staging, **catalog.MESSAGES.properties)
            return
        # messages the log pass did not see whose status the instance pass judged again (their
        # schema log has new entries): their stored rows with the new statuses, in the same
        # rewrite (a MERGE of them rewrote the table a second time: a revert at 1M wrote silver in
        # 5.0 s with it, 2.9 s without)
        rejudged = ["status", "reason_code", "reason", "waits_for"]
        untouched = p2.select("entry_hash", *rejudged).join(logs.p1.select("entry_hash"), "entry_hash", "left_anti")
        source, staged = final.select(*message_cols), f"{run.staging}/{LOG_PASS_FOLDER}"
        if not untouched.isEmpty():
            assert run.old_messages is not None, "a run that is not a rebuild has a silver.messages to read"
            stored = [c for c in message_cols if c not in (*rejudged, "run_id")]
            source = source.unionByName(run.old_messages.select(*stored).join(untouched, "entry_hash")
                                        .withColumn("run_id", F.lit(summary.run_id).cast("bigint"))
                                        .select(*message_cols))
            # staged: the upsert reads its source three times, and this one reads every stored message
            source = delta.stage(source, f"{run.staging}/messages_source")
            staged = f"{run.staging}/messages_source"
        # on Apache Spark, a few rows go from this process (the upsert's here_rows): they are at
        # most the log pass's rows (one a message it judged), or the staged source's
        source_rows = delta.staged_rows(staged) if run.here_rows > 0 else None
        # a row whose columns did not change keeps the run that last changed it
        # keyed by batch too (an entry's batch is its own): the batches' statistics tell that a run's
        # new entries are not stored (delta._keys_past), and otherwise they are looked for in the
        # files of their batches only (0.28-0.56 s over every stored message at 1M)
        snap, stored_count = run.messages_layout
        delta.upsert(spark, T["messages"], catalog.MESSAGES_DDL, source, ["entry_hash", "batch_id"], "run_id",
                     None if stored_count is None else (stored_count, catalog.MESSAGES_BUCKET_KEY), snap=snap,
                     properties=catalog.MESSAGES.properties, here_rows=run.here_rows, source_rows=source_rows)

    def write_logs() -> None:
        # the table as the log pass staged it, in one plain write of the small table (15,003 logs
        # at 1,000,000 messages); a MERGE of the touched logs took Sail 1.3 s beside the other
        # writes, and Apache Spark several jobs more
        delta.replace_with_staged(logs.all_logs, f"{run.staging}/all_logs", catalog.LOGS_DDL, T["logs"])

    def write_states() -> None:
        if rebuild or run.old_states is None:
            buckets.write(states, T["instance_states"], buckets.count_for(states.count()), staging=run.staging,
                          **catalog.INSTANCE_STATES.properties)
            return
        # replaced: every state of a log judged whole, of an instance judged again, and the
        # states the new messages of an extended log changed
        # the ids of the stored states to leave out, found from their key columns: one join over
        # the stored states' rows (each join over them costs as much as writing them: a second
        # one added a second to a revert at 1,000,000 messages)
        out, keys = states.select("instance_id"), run.old_states.select("author", "log_id", "instance_id")
        if whole_logs is not None:  # none when every touched log only grew
            out = out.unionByName(keys.join(whole_logs, ["author", "log_id"], "left_semi").select("instance_id"))
        if again is not None:  # keyed by log too: an instance named in another log than its own keeps its state
            ids = again.withColumnRenamed("instance", "instance_id")
            out = out.unionByName(keys.join(ids, ["author", "log_id", "instance_id"], "left_semi").select("instance_id"))
        if whole_logs is not None or again is not None:
            # staged: the engine then knows how few they are and builds its join on them; from
            # the joins above it cannot size them, and Sail built the join on every stored state,
            # wide columns and all (a revert at 1,000,000 messages wrote the states in 1.9-2.1 s
            # that way, 1.4 s staged)
            out = delta.stage(out, f"{run.staging}/states_out")
        snap, count = run.states_layout
        if (snap is not None and count is not None
                and delta.mergeable(T["instance_states"], snap, whole_rows=WHOLE_STATES_ROWS)):
            # the stored states of those ids marked deleted, the new ones added: no file written
            # again, and only the files of their buckets read
            delta.replace_rows(spark, T["instance_states"], f"{catalog.STATES_DDL}, {buckets.DDL}",
                               states.select("*", buckets.column(count)), out, "instance_id",
                               buckets.condition(buckets.hashes_of(out), count))
            return
        # written whole (compacted), in buckets chosen again: a small table, one with many files
        # or deleted rows, or one from before it had buckets
        kept = run.old_states.join(out, "instance_id", "left_anti").select(*delta.columns(catalog.STATES_DDL))
        rows = kept.unionByName(states)
        live = snap.rows if snap is not None else None
        buckets.write(rows, T["instance_states"], buckets.count_for(live if live is not None else rows.count()),
                      staging=run.staging, **catalog.INSTANCE_STATES.properties)

    def write_schema_entries() -> None:
        # written again only when a schema log gained or lost an accepted entry (most runs bring
        # instance messages only)
        stored = None if run.old_schema_entries is None else delta.read_arrow(spark, T["schema_entries"])
        entry_hash = delta.columns(catalog.SCHEMA_ENTRIES_DDL).index("entry_hash")
        if stored is not None and set(stored.column("entry_hash").to_pylist()) == {
                r[entry_hash] for r in schemas.entry_rows}:
            return
        delta.replace_with_rows(spark, schemas.entry_rows, catalog.SCHEMA_ENTRIES_DDL, T["schema_entries"])

    def write_replaced() -> None:
        # a small run's rows on Apache Spark from this process (here_rows): a statement of 1.3 s
        # a run otherwise (Run BY); at most the staged rows, or the instance pass's and the markers
        if run.here_rows > 0:
            bound = (delta.staged_rows(replaced_at) if replaced_at is not None
                     else 1 + len(schemas.unsettled) + delta.staged_rows(f"{run.staging}/{INSTANCE_PASS_FOLDER}"))
            if bound <= run.here_rows and delta.overwrite_here(replaced, T["replaced_states"]):
                return
        delta.overwrite(replaced, T["replaced_states"])

    writes = [write_messages, write_logs, write_states, write_schema_entries, write_replaced,
              # most runs bring instance messages only: the schema tables are written when they change
              lambda: None if schemas.versions_stored else delta.replace_with_rows(
                  spark, schemas.version_rows, catalog.SCHEMA_VERSIONS_DDL, T["schema_versions"]),
              lambda: delta.overwrite_rows(spark, schemas.field_rows, catalog.SCHEMA_FIELDS_DDL, T["schema_fields"])]
    with ThreadPoolExecutor(max_workers=len(writes)) as pool:
        for done in [pool.submit(write) for write in writes]:
            done.result()
    if whole:
        written = spark.read.format("delta").load(T["messages"].location)
        summary.statuses = {r["status"]: r["count"] for r in written.groupBy("status").count().collect()}


def _replaced_states(run: _SilverRun, schemas: SchemaPass, judged: InstancePass, states: DataFrame,
                     folded_onto: DataFrame, whole_logs: DataFrame | None) -> tuple[DataFrame, str | None]:
    """``silver.replaced_states`` (``REPLACED_DDL``): the states this run writes (``states``) or
    drops, each as it was before the run, and the row that names the run. Small: the stored states
    the new messages of extended logs fold onto (``folded_onto``, from the staged instance pass),
    those of the logs that silver held and judged whole, and those of the instances judged again
    in the others (read, and staged before any table is written, only when there are any).

    A schema with a version gone or changed (a fork of its log took it away) has a row of its own
    instead of its states: their values were shown through versions it no longer has. Empty after
    a rebuild, a first run, or a run that died before its end (the states this run starts from
    may be some of that run's, not those of the last finished run): gold reads its tables instead.

    Args:
        whole_logs: ``author, log_id`` of the logs judged whole (None when there are none).

    Returns:
        The rows, and the staged folder they are read from (None: not staged).
    """
    from pyspark.sql import functions as F

    spark, key, cols = run.spark, ["author", "log_id"], delta.columns(catalog.STATES_DDL)
    if run.rebuild or run.old_states is None or run.old_logs is None or run.after_unfinished:
        return spark.createDataFrame([], catalog.REPLACED_DDL), None
    before, read_states = folded_onto.select(*cols), False
    if whole_logs is not None:
        judged_again = whole_logs.join(run.old_logs.select(*key), key, "left_semi")
        read_states = not judged_again.isEmpty()
        if read_states:
            before = before.unionByName(run.old_states.join(judged_again, key, "left_semi").select(*cols))
    # the instances judged again in logs judged in part, unless their schemas are all unsettled
    # (a revert's): the rows of those are left out below
    if judged.again is not None and not set(judged.again_schemas) <= set(schemas.unsettled):
        read_states = True
        before = before.unionByName(run.old_states.join(judged.again.withColumnRenamed("instance", "instance_id"),
                                                        [*key, "instance_id"], "left_semi").select(*cols))
    written = states
    if schemas.unsettled:  # their schemas' rows stand for them
        written = written.where(~F.col("schema").isin(schemas.unsettled))
        before = before.where(~F.col("schema").isin(schemas.unsettled))
    ids = written.select("instance_id").unionByName(before.select("instance_id")).distinct()
    run_id = F.lit(run.summary.run_id).cast("bigint").alias("run_id")
    rows = ids.join(before, "instance_id", "left").select(run_id, F.col("schema").isNotNull().alias("existed"), *cols)
    nulls = (None,) * (len(cols) - 1)  # every column after run_id, existed and schema
    marker = spark.createDataFrame([(run.summary.run_id, None, schema, *nulls) for schema in [None, *schemas.unsettled]],
                                   catalog.REPLACED_DDL)
    replaced = marker.unionByName(rows)
    # staged when it reads silver.instance_states, which is written at the same time
    if not read_states:
        return replaced, None
    staged = f"{run.staging}/replaced_states"
    return delta.stage(replaced, staged), staged


def _finish(run: _SilverRun, run_started: datetime) -> None:
    """The run's row in ``silver.runs``, last: a run that died before it is simply done again."""
    spark = run.spark
    delta.append_rows(spark, [(run.summary.run_id, run.top, run.rebuild, run_started, datetime.utcnow())],
                      catalog.RUNS_DDL, run.tables["runs"])
    remove_tree(run.staging)
    for ref in run.tables.values():
        register_table(spark, ref)
