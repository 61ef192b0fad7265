"""Gold transforms: instance states from applied messages, typed rows per schema version.

SEMANTICS.md section 5. The functions here are grouped-map / map functions for
``applyInPandas`` / ``mapInPandas`` built around the pure :mod:`lakehouse.core.gold`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pandas as pd

from lakehouse.core.gold import cascade_targets, decode_writes, encode_writes, fold, gold_column, gold_row
from lakehouse.core.lenses import spark_type_ddl
from lakehouse.core.messages import SchemaId, decode_message
from lakehouse.core.schemas import SchemaVersions

STATES_DDL = (
    "schema STRING, instance_id STRING, author STRING, writes BINARY, version BIGINT, last_entry STRING, "
    "updates BIGINT, deleted BOOLEAN, targets ARRAY<STRING>"
)
REGISTRATIONS_DDL = "schema STRING, name STRING, registered_at TIMESTAMP"
GOLD_VERSIONS_DDL = (
    "gold_run BIGINT, silver_run BIGINT, watermark BIGINT, registrations BIGINT, schema STRING, name STRING, "
    "version BIGINT, table_name STRING, location STRING, delta_version BIGINT, is_current BOOLEAN, rows BIGINT, "
    "written_at TIMESTAMP"
)


def gold_ddl(sv: SchemaVersions, version: int) -> str:
    """The Spark DDL of ``gold.<name>_v<version>``: ids, the lens's fields typed, then the row metadata."""
    fields = ", ".join(f"`{gold_column(f.name)}` {spark_type_ddl(f.type)}" for f in sv.lens(version))
    return (f"instance_id STRING, author STRING{', ' if fields else ''}{fields}, "
            "_version BIGINT, _last_entry STRING, _updates BIGINT")


def fold_states(schemas: Mapping[SchemaId, SchemaVersions]) -> Any:
    """A grouped-map function: one instance's applied messages -> its state row (``STATES_DDL``).

    Input columns: ``schema`` (the log's schema id), ``author``, ``instance``, ``seq_num``,
    ``entry_hash``, ``payload``.
    """

    def run(group: pd.DataFrame) -> pd.DataFrame:
        columns = [c.split()[0] for c in STATES_DDL.split(", ")]
        schema = SchemaId.parse(str(group["schema"].iloc[0]))
        sv = schemas[schema]
        rows = sorted(group.itertuples(index=False), key=lambda r: int(r.seq_num))
        state = fold(sv, str(rows[0].author), [(r.entry_hash, decode_message(bytes(r.payload))) for r in rows])
        if state is None:
            return pd.DataFrame([], columns=columns)
        return pd.DataFrame([{
            "schema": str(schema), "instance_id": state.instance_id, "author": state.author,
            "writes": encode_writes(state.writes), "version": state.version, "last_entry": state.last_entry,
            "updates": state.updates, "deleted": state.deleted, "targets": cascade_targets(sv, state.writes),
        }], columns=columns)

    return run


def project_rows(sv: SchemaVersions, version: int) -> Any:
    """A map function: live state rows of one schema -> rows of ``gold.<name>_v<version>``."""
    from lakehouse.core.gold import InstanceState

    def run(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        columns = [c.split()[0].strip("`") for c in _split_ddl(gold_ddl(sv, version))]
        for batch in batches:
            out = []
            for r in batch.itertuples(index=False):
                state = InstanceState(r.instance_id, r.author, decode_writes(bytes(r.writes)), int(r.version),
                                      r.last_entry, int(r.updates), bool(r.deleted))
                out.append(gold_row(sv, state, version))
            yield pd.DataFrame(out, columns=columns)

    return run


def _split_ddl(ddl: str) -> list[str]:
    """Top-level comma split of a DDL string (``ARRAY<...>`` types hold no commas here)."""
    return [part.strip() for part in ddl.split(", ")]
