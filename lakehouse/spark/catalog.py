"""The lake's tables, each declared once: layer, name, columns and table properties
(LAKEHOUSE.md, Layers; SEMANTICS.md for what each must contain).

Every job reads and writes a lake table through its declaration here: its location under a lake
root (:meth:`Declared.at`), its columns as Spark DDL (``.ddl``, which ``createDataFrame`` and the
Arrow schemas of :mod:`lakehouse.spark.groups` take), a row in column order (:meth:`Declared.row`).
The gold tables are one per registered schema version, their columns given by the version's lens
(:mod:`lakehouse.spark.gold`): :func:`gold_table` and :func:`changes_table` locate them.

To add a table: declare it here (its DDL, a line on what it holds), add it to its layer's tuple,
and write it with :mod:`lakehouse.spark.delta` from the job that owns it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lakehouse.core.registry import changes_table_name, gold_table_name
from lakehouse.spark.delta import DELETION_VECTORS
from lakehouse.spark.session import TIME_TRAVEL_CHECKPOINT_INTERVAL
from lakehouse.spark.tables import TableRef, table

Layer = Literal["bronze", "silver", "gold"]


@dataclass(frozen=True)
class Declared:
    """One lake table.

    Attributes:
        layer: ``bronze``, ``silver`` or ``gold``.
        name: the table's name in its layer (SQL: ``<layer>.<name>``).
        ddl: its columns, as Spark DDL (``name TYPE, ...``).
        doc: what a row holds.
        properties: Delta table properties it is written with.
    """

    layer: Layer
    name: str
    ddl: str
    doc: str
    properties: Mapping[str, str] = field(default_factory=dict)

    @property
    def qualified(self) -> str:
        """``<layer>.<name>``, as SQL names it."""
        return f"{self.layer}.{self.name}"

    def at(self, lake_root: str) -> TableRef:
        """The table in the lake at ``lake_root`` (a local path or a URI)."""
        return table(lake_root, self.layer, self.name)

    def row(self, **values: Any) -> tuple[Any, ...]:
        """A row, its values by column name (a column not given is null), in column order.

        Raises:
            KeyError: a name that is not a column.
        """
        from lakehouse.spark.delta import row

        return row(self.ddl, **values)


# -- bronze -------------------------------------------------------------------------------------
ENTRIES_DDL = (
    "entry_hash STRING, author STRING, log_id BIGINT, seq_num BIGINT, backlink STRING, skiplink STRING, "
    "payload_hash STRING, payload_size BIGINT, end_of_feed BOOLEAN, entry BINARY, payload BINARY, "
    "source_file STRING, source_line BIGINT, batch_id BIGINT, ingested_at TIMESTAMP"
)
REJECTED_DDL = (
    "source_file STRING, source_sha STRING, source_line BIGINT, raw STRING, entry BINARY, payload BINARY, "
    "entry_hash STRING, reason_code STRING, reason STRING, batch_id BIGINT, rejected_at TIMESTAMP, raw_bytes BINARY"
)
"""``raw`` is the line as text; ``raw_bytes`` its exact bytes when they are not UTF-8 (``raw`` then
shows each byte that is not as U+FFFD), NULL otherwise. ``raw_bytes`` came after the other columns
(a lake from before it gains it at its next ingest, NULL in its earlier rows), hence its place."""
FILES_DDL = "source_file STRING, source_sha STRING, size BIGINT, lines BIGINT, batch_id BIGINT, ingested_at TIMESTAMP"

ENTRIES = Declared("bronze", "entries", ENTRIES_DDL, "each accepted entry: its raw bytes, decoded header, "
                   "payload and where it came from (landing file and line, ingest batch)")
REJECTED = Declared("bronze", "rejected", REJECTED_DDL, "each landing line that could not be accepted, raw, "
                    "with its reason code")
FILES = Declared("bronze", "files", FILES_DDL, "each landing file ingested, known by the SHA-256 of its content")
BRONZE: tuple[Declared, ...] = (ENTRIES, REJECTED, FILES)

# -- silver -------------------------------------------------------------------------------------
MESSAGES_DDL = (
    "entry_hash STRING, author STRING, log_id BIGINT, seq_num BIGINT, batch_id BIGINT, "
    "log_status STRING, status STRING, reason_code STRING, reason STRING, waits_for STRING, "
    "kind STRING, schema STRING, version BIGINT, instance STRING, run_id BIGINT"
)
LOGS_DDL = (
    "author STRING, log_id BIGINT, purpose STRING, schema STRING, first_seq BIGINT, accepted_seq BIGINT, "
    "fork_seq BIGINT, entries BIGINT, pending BIGINT, ended BOOLEAN, run_id BIGINT"
)
"""``silver.logs``: a row per log. ``ended``: whether the entry at ``accepted_seq`` ends the log
(``end_of_feed``), so that a run judging what a log grew by need not look that entry up in bronze
(a lake from before the column has it found once, by its next silver run)."""
STATES_DDL = (
    "schema STRING, instance_id STRING, author STRING, log_id BIGINT, writes BINARY, version BIGINT, "
    "last_entry STRING, updates BIGINT, deleted BOOLEAN, targets ARRAY<STRING>"
)
"""``silver.instance_states``: every instance's state folded from its applied messages (``writes``:
each field's value with the version it was written at, CBOR), and the ids its cascading relation
values point at (``targets``); also the shape of the states the passes hand each other."""
REPLACED_DDL = f"run_id BIGINT, existed BOOLEAN, {STATES_DDL}"
"""``silver.replaced_states``, rewritten by every silver run: per instance whose state the run wrote
or dropped, its state before the run (``existed`` false when it had none); a row with a null
``instance_id`` and ``schema`` that names the run (``run_id``; none when the run could not list
them: a rebuild, a first run, a run after one that died), and one with a null ``instance_id`` per
schema whose states are not listed (a version of it gone or changed). Gold's change feed projects
a merged table's rows as they were from it, instead of reading the table."""
SCHEMA_VERSIONS_DDL = (
    "schema STRING, version BIGINT, name STRING, kind STRING, status STRING, reason_code STRING, "
    "reason STRING, target BIGINT, parent BIGINT, abandoned BOOLEAN, abandoned_by BIGINT, "
    "has_gold_table BOOLEAN, lens STRING"
)
"""``silver.schema_versions``: :class:`lakehouse.core.schemalog.SchemaVersionRow`."""
SCHEMA_FIELDS_DDL = (
    "schema STRING, version BIGINT, position BIGINT, name STRING, action STRING, type STRING, "
    "validation STRING, default_value STRING, relation_schema STRING, cascade BOOLEAN, renamed_to STRING"
)
"""``silver.schema_fields``: :class:`lakehouse.core.schemalog.SchemaFieldRow`."""
SCHEMA_ENTRIES_DDL = ("author STRING, log_id BIGINT, seq_num BIGINT, entry_hash STRING, batch_id BIGINT, "
                      "payload BINARY, end_of_feed BOOLEAN")
"""``silver.schema_entries``: the accepted entries of every schema log, with their payloads (a copy of
bronze's): what a run builds every schema's versions from, read whole. A few hundred rows where
``silver.messages`` has millions: a run that finds them among those, and their payloads in bronze,
reads both tables."""
RUNS_DDL = "run_id BIGINT, watermark BIGINT, rebuild BOOLEAN, started_at TIMESTAMP, finished_at TIMESTAMP"

MESSAGES_BUCKET_KEY = "author"
"""The column whose ids cut ``silver.messages`` into buckets (the partition column ``_bucket``): a run
reads the stored messages of the logs it touches, and a log's are in its author's bucket."""
MESSAGES_STATS = {"delta.dataSkippingStatsColumns": "batch_id,run_id"}
"""``silver.messages``' statistics: min/max of the columns its reads skip files by, ``batch_id`` (a
run's new messages are past every stored one: :func:`lakehouse.spark.delta.upsert`) and ``run_id``
(the messages a run changed: :func:`lakehouse.spark.lake.changed_instances`). Those of every other
column, kept for each of its thousands of files, made each read of the table replay a Delta log
several times larger (12,288 files: 0.36-0.48 s a query against 0.12-0.14 s)."""
STATES_STATS = {"delta.dataSkippingNumIndexedCols": "0"}
"""``silver.instance_states``' statistics: rows only. Its reads name the files they need by bucket
(the partition values); the min/max of ids spread over a bucket skip nothing."""
MESSAGES = Declared("silver", "messages", MESSAGES_DDL, "every accepted or pending entry's message with its "
                    "status (applied, pending with what it waits for, ignored, rejected with its reason)",
                    MESSAGES_STATS)
LOGS = Declared("silver", "logs", LOGS_DDL, "each log: its purpose, accepted prefix, fork and pending entries")
SCHEMA_VERSIONS = Declared("silver", "schema_versions", SCHEMA_VERSIONS_DDL, "every schema version and its lens")
SCHEMA_FIELDS = Declared("silver", "schema_fields", SCHEMA_FIELDS_DDL, "the append-only field history")
INSTANCE_STATES = Declared("silver", "instance_states", STATES_DDL, "every instance's folded state",
                           {**DELETION_VECTORS, **STATES_STATS})
REPLACED_STATES = Declared("silver", "replaced_states", REPLACED_DDL, "the states the last run replaced, as they were")
SCHEMA_ENTRIES = Declared("silver", "schema_entries", SCHEMA_ENTRIES_DDL,
                          "the accepted entries of schema logs, with their payloads")
RUNS = Declared("silver", "runs", RUNS_DDL, "each silver run and the bronze batch it reached (its watermark)")
SILVER: tuple[Declared, ...] = (MESSAGES, LOGS, SCHEMA_VERSIONS, SCHEMA_FIELDS, SCHEMA_ENTRIES, INSTANCE_STATES,
                                REPLACED_STATES, RUNS)

# -- the gold part's state, kept in silver --------------------------------------------------------
REGISTRATIONS_DDL = "schema STRING, name STRING, registered_at TIMESTAMP"
GOLD_VERSIONS_DDL = (
    "gold_run BIGINT, silver_run BIGINT, watermark BIGINT, registrations BIGINT, schema STRING, name STRING, "
    "version BIGINT, table_name STRING, location STRING, delta_version BIGINT, is_current BOOLEAN, rows BIGINT, "
    "written BOOLEAN, schema_version BIGINT, written_at TIMESTAMP"
)
GOLD_CHANGES_DDL = (
    "gold_run BIGINT, silver_run BIGINT, watermark BIGINT, schema STRING, name STRING, version BIGINT, "
    "table_name STRING, delta_version BIGINT, changes_version BIGINT, inserts BIGINT, updates BIGINT, "
    "deletes BIGINT, written_at TIMESTAMP, preimages BOOLEAN"
)
"""``silver.gold_changes``: the change feed's index, one row per gold table a run wrote. ``delta_version``
is the gold table's version the feed has reached (its rows replayed give that version);
``changes_version`` the change table's version after the run (``-1``: none yet); ``updates`` counts
updated instances (each has two rows, before and after); ``preimages``: the change table's updates
and deletes carry the row before (every row of a lake whose feeds were brought to that shape,
:func:`lakehouse.spark.feeds.add_preimages`)."""
CASCADE_REMOVED_DDL = "instance_id STRING, schema STRING, silver_run BIGINT"
"""``silver.cascade_removed``: the instances the last gold run found removed by cascades, and a row
per schema whose states that set covers (``instance_id`` null) with the silver run it reflects (the
next run brings the set up to date from there when it covers the same schemas)."""

REGISTRATIONS = Declared("silver", "registrations", REGISTRATIONS_DDL, "the schemas registered for gold, by name")
GOLD_VERSIONS = Declared("silver", "gold_versions", GOLD_VERSIONS_DDL, "per gold run, a marker row and the Delta "
                         "version of every current gold table (lakehouse history, time travel)")
GOLD_CHANGES = Declared("silver", "gold_changes", GOLD_CHANGES_DDL, "the change feeds' index")
CASCADE_REMOVED = Declared("silver", "cascade_removed", CASCADE_REMOVED_DDL, "the instances cascades removed")
GOLD_STATE: tuple[Declared, ...] = (REGISTRATIONS, GOLD_VERSIONS, CASCADE_REMOVED, GOLD_CHANGES)

# -- gold ---------------------------------------------------------------------------------------
CHANGES_PROPERTIES = {"delta.checkpointInterval": str(TIME_TRAVEL_CHECKPOINT_INTERVAL),
                      "delta.dataSkippingNumIndexedCols": "1"}
"""A change table's properties: time travel on Sail (an unfinished run's rows are taken out from an
earlier version), statistics on ``_gold_run`` only (a read of the runs after one skips the files
of those before)."""


def gold_table(lake_root: str, name: str, version: int) -> TableRef:
    """The gold table of schema version ``version`` of the schema registered as ``name``:
    ``gold.<name>_v<version>``."""
    return table(lake_root, "gold", gold_table_name(name, version))


def changes_table(lake_root: str, table_name: str) -> TableRef:
    """The change feed of gold table ``table_name``: ``gold.<table_name>_changes``."""
    return table(lake_root, "gold", changes_table_name(table_name))
