"""Gold transforms: instance states from applied messages, typed rows per schema version.

SEMANTICS.md section 5. The functions here are a per-group function for
:func:`lakehouse.spark.groups.map_groups` (states) and a ``mapInArrow`` function (gold rows, typed
exactly), built around the pure :mod:`lakehouse.core.gold`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.core.gold import (
    InstanceState,
    cascade_targets,
    decode_writes,
    encode_writes,
    fold,
    gold_column,
    gold_row,
)
from lakehouse.core.lenses import spark_type_ddl
from lakehouse.core.messages import SchemaId, decode_message
from lakehouse.core.schemas import SchemaVersions
from lakehouse.spark.groups import Row, arrow_schema, spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

STATES_DDL = (
    "schema STRING, instance_id STRING, author STRING, writes BINARY, version BIGINT, last_entry STRING, "
    "updates BIGINT, deleted BOOLEAN, targets ARRAY<STRING>"
)
REGISTRATIONS_DDL = "schema STRING, name STRING, registered_at TIMESTAMP"
GOLD_VERSIONS_DDL = (
    "gold_run BIGINT, silver_run BIGINT, watermark BIGINT, registrations BIGINT, schema STRING, name STRING, "
    "version BIGINT, table_name STRING, location STRING, delta_version BIGINT, is_current BOOLEAN, rows BIGINT, "
    "written BOOLEAN, schema_version BIGINT, written_at TIMESTAMP"
)


def gold_ddl(sv: SchemaVersions, version: int) -> str:
    """The Spark DDL of ``gold.<name>_v<version>``: ids, the lens's fields typed, then the row metadata."""
    fields = ", ".join(f"`{gold_column(f.name)}` {spark_type_ddl(f.type)}" for f in sv.lens(version))
    return (f"instance_id STRING, author STRING{', ' if fields else ''}{fields}, "
            "_version BIGINT, _last_entry STRING, _updates BIGINT")


def fold_states(schemas: Mapping[SchemaId, SchemaVersions]) -> Callable[[list[Row]], list[Row]]:
    """A per-group function for :func:`lakehouse.spark.groups.map_groups`: one instance's applied
    messages -> its state row (``STATES_DDL``), or none when the fold leaves no instance (a delete
    of an ignored create leaves a deleted state: a cascade starts from it).

    Input columns: ``schema`` (the log's schema id), ``author``, ``instance``, ``seq_num``,
    ``entry_hash``, ``payload``.
    """

    def run(group: list[Row]) -> list[Row]:
        schema = SchemaId.parse(str(group[0]["schema"]))
        sv = schemas[schema]
        rows = sorted(group, key=lambda r: int(r["seq_num"]))
        state = fold(sv, str(rows[0]["author"]), [(r["entry_hash"], decode_message(bytes(r["payload"]))) for r in rows])
        if state is None:
            return []
        return [{
            "schema": str(schema), "instance_id": state.instance_id, "author": state.author,
            "writes": encode_writes(state.writes), "version": state.version, "last_entry": state.last_entry,
            "updates": state.updates, "deleted": state.deleted, "targets": cascade_targets(sv, state.writes),
        }]

    return run


def state_of(row: Row) -> InstanceState:
    """The instance state of a ``STATES_DDL`` row (its ``schema`` and ``targets`` are not needed)."""
    return InstanceState(row["instance_id"], row["author"], decode_writes(bytes(row["writes"])), int(row["version"]),
                         row["last_entry"], int(row["updates"]), bool(row["deleted"]))


def project_local(spark: SparkSession, states: Iterable[InstanceState], sv: SchemaVersions, version: int) -> DataFrame:
    """The rows of ``gold.<name>_v<version>`` (:func:`gold_ddl`) of live instance states held here,
    projected in this process and sent to the engine with the plan that uses them.

    For a few rows this spares the engine a Python function call per table (see
    ``pipelines.gold.LOCAL_PROJECTION_LIMIT``); the rows are those :func:`project` gives.
    """
    ddl = gold_ddl(sv, version)
    rows = pa.Table.from_pylist([gold_row(sv, state, version) for state in states], schema=arrow_schema(ddl))
    return spark.createDataFrame(rows, spark_schema(ddl))


def project_rows(sv: SchemaVersions, version: int) -> Any:
    """An Arrow map function: live state rows of one schema -> rows of ``gold.<name>_v<version>``.

    Arrow, not pandas, so that a nullable BIGINT column keeps every int64 exactly.
    """
    schema = arrow_schema(gold_ddl(sv, version))  # the DDL's types, exactly (int64 included)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield pa.RecordBatch.from_pylist([gold_row(sv, state_of(r), version) for r in batch.to_pylist()],
                                             schema=schema)

    return run


def project(states: DataFrame, sv: SchemaVersions, version: int) -> DataFrame:
    """Rows of ``gold.<name>_v<version>`` (:func:`gold_ddl`) from live state rows of one schema
    (``STATES_DDL``), projected by :func:`project_rows` in the engine."""
    return states.mapInArrow(project_rows(sv, version), spark_schema(gold_ddl(sv, version)))
