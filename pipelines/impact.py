"""``lakehouse schema check``: what a migration or a revert would do to the lake, before it is published.

Issue 19. Read only: nothing is published or written. For a **migration**, on the lake as silver
last left it: whether the migration is valid (the rules silver applies,
:func:`lakehouse.core.schemas.build_versions`, with the reason), and per field how many live
instances would show their value kept, converted, defaulted by a failed conversion or validation,
hidden, or shown again (:mod:`lakehouse.core.impact`, with a few examples), computed from the
stored instance states in the engine; the gold table it adds; what gold would wait for. For a
**revert**: the versions it abandons, the applied creates and updates that become ignored, the live
instances that leave gold with their create, the fields the target shows again or hides, and per
field the same outcomes over the instances that stay, ``restored`` among them: a value an ignored
update wrote gives way to the earlier one (the instances updated at the abandoned versions are
judged again and folded as silver would, :func:`lakehouse.spark.lake.refolded_states`).
``lakehouse schema migrate`` and ``lakehouse schema revert`` run it first and ask before a change
that defaults, hides or drops anything.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.core.gold import decode_writes
from lakehouse.core.impact import FieldImpact, impact_of, with_message
from lakehouse.core.messages import SchemaId, SchemaMigration, SchemaRevert
from lakehouse.core.registry import gold_table_name, resolve_schema, waits_of
from lakehouse.core.schemalog import jsonable, schema_logs
from lakehouse.core.schemas import SchemaVersions, build_versions
from lakehouse.core.statuses import SchemaState
from lakehouse.errors import HistoryError, LakehouseError
from lakehouse.spark import delta, workers
from lakehouse.spark.groups import arrow_schema, spark_schema
from lakehouse.spark.lake import (
    gold_state_tables,
    load_schemas,
    refolded_states,
    registrations,
    schema_entries,
    silver_tables,
)
from lakehouse.spark.silver import state_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakehouse.config import Settings

IMPACT_DDL = "field STRING, outcome STRING, n BIGINT, examples STRING"


@dataclass
class Impact:
    """What a schema message would do (module docstring).

    Attributes:
        schema, name: the schema id, and its gold name (or meta name when not registered).
        kind: ``migration`` or ``revert``.
        current, version: the schema's current version, and the one the message would be.
        status, reason, detail: the new version's status as silver would judge it (``valid``,
            ``invalid``, ``revert``, ``ignored_revert``), its reason code and message.
        instances: the live instances (those a revert removes among them).
        fields: field name -> its outcomes over the live instances that stay.
        tables: the gold tables it would add.
        waits: what gold would wait for after it, or None.
        abandoned: the versions it would abandon (revert).
        ignored: ``create`` / ``update`` -> applied messages that would become ignored (revert).
        removed: live instances whose create would become ignored: they leave gold (revert).
        shown_again, hidden: fields the new version shows that the current one hides (removed
            earlier: their stored values show again), and the other way round.
        added: fields the new version has that no earlier version of the current one's lineage had.
        renamed: ``old>new`` for each field the new version shows under another name (the same
            field: its values are ``renamed``, nothing lost).
    """

    schema: str
    name: str
    kind: str
    current: int
    version: int
    status: str
    reason: str | None = None
    detail: str | None = None
    instances: int = 0
    fields: dict[str, FieldImpact] = field(default_factory=dict)
    tables: list[str] = field(default_factory=list)
    waits: str | None = None
    abandoned: list[int] = field(default_factory=list)
    ignored: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    shown_again: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    hidden: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)

    @property
    def valid(self) -> bool:
        """Whether silver would take it (an invalid migration or ignored revert changes nothing)."""
        return self.status in ("valid", "revert")

    @property
    def loses(self) -> list[str]:
        """What it would take from readers of the new version, in words (empty: nothing)."""
        out = [f"{n} value(s) of {name} {outcome}" for name, f in sorted(self.fields.items())
               for outcome, n in sorted(f.counts.items()) if outcome in ("defaulted", "hidden") and n]
        out += [f"{n} applied {kind}(s) ignored" for kind, n in sorted(self.ignored.items()) if n]
        if self.removed:
            out.append(f"{self.removed} instance(s) leave gold")
        return out

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready data (``--format json``)."""
        return {"schema": self.schema, "name": self.name, "kind": self.kind, "current": self.current,
                "version": self.version, "status": self.status, "valid": self.valid, "reason": self.reason,
                "detail": self.detail, "instances": self.instances,
                "fields": {name: {"counts": f.counts, "examples": {o: [list(e) for e in ex] for o, ex in f.examples.items()}}
                           for name, f in sorted(self.fields.items())},
                "tables": self.tables, "waits": self.waits, "abandoned": self.abandoned, "ignored": self.ignored,
                "removed": self.removed, "shown_again": self.shown_again, "added": self.added, "hidden": self.hidden,
                "renamed": self.renamed, "loses": self.loses}


def lake_resolver(spark: SparkSession, settings: Settings) -> Callable[[str], SchemaId]:
    """Turns a relation's schema name in a lens file into the schema id the lake knows it by (a
    registered gold name, a meta name only one schema has, or an id). The lake is read at the
    first name asked for: a lens file without relations reads nothing."""
    root = settings.lake_root

    @cache
    def known() -> tuple[dict[SchemaId, SchemaVersions], dict[SchemaId, str]]:
        return load_schemas(spark, root), registrations(spark, root)

    return lambda name: _named(name, *known())


def _named(name: str, schemas: Mapping[SchemaId, SchemaVersions], names: Mapping[SchemaId, str]) -> SchemaId:
    """The schema ``name`` means: the one ``names`` registers under that gold name, else a meta
    name only one of ``schemas`` has, or an id (:func:`lakehouse.core.registry.resolve_schema`).

    Raises:
        RegistrationError: as :func:`lakehouse.core.registry.resolve_schema` (unknown, ambiguous, bad id).
    """
    registered = next((sid for sid, gold in names.items() if gold == name), None)
    return registered or resolve_schema(name, {sid: sv.meta.name for sid, sv in schemas.items()})


def check_message(spark: SparkSession, settings: Settings, schema: str,
                  message: SchemaMigration | SchemaRevert) -> Impact:
    """What publishing ``message`` as the next entry of ``schema``'s log would do (module docstring).

    Args:
        schema: a registered gold name, a meta name only one schema has, or a schema id.

    Raises:
        HistoryError: the lake has no such schema (code ``unknown_schema``; run ingest and
            materialize first).
    """
    root = settings.lake_root
    schemas, logs = _schemas(spark, root)
    names = registrations(spark, root)
    try:
        sid = _named(schema, schemas, {s: gold for s, gold in names.items() if s in schemas})
    except LakehouseError as exc:
        raise HistoryError(f"{exc} (the check reads the lake as the last `make materialize` left it)") from None
    sv = schemas[sid]
    messages, rejected = logs[sid]
    candidate, version = with_message(messages, rejected, message)
    new = candidate[version]
    impact = Impact(str(sid), names.get(sid, sv.meta.name), "revert" if isinstance(message, SchemaRevert) else "migration",
                    sv.current_version, version, new.status, new.reason, new.message)
    if not impact.valid:
        return impact
    current_lens, new_lens = sv.lens(sv.current_version), candidate.lens(version)
    was_hidden = {f.key for f in sv[sv.current_version].hidden}  # removed earlier: their values show again
    new_fields = [f for f in new_lens if current_lens.by_key(f.key) is None]  # by identity (SEMANTICS.md 2)
    impact.shown_again = [f.name for f in new_fields if f.key in was_hidden]
    impact.added = [f.name for f in new_fields if f.key not in was_hidden]
    impact.hidden = [f.name for f in current_lens if new_lens.by_key(f.key) is None]
    impact.renamed = [f"{f.name}>{g.name}" for f in current_lens
                      if (g := new_lens.by_key(f.key)) is not None and g.name != f.name]
    if sid in names and new.has_gold_table:
        impact.tables = [f"gold.{gold_table_name(names[sid], version)}"]
    if sid in names:
        impact.waits = waits_of({**schemas, sid: candidate}, names).get(sid)
    live = _live_states(spark, root, sid)
    impact.instances = live.count()
    if isinstance(message, SchemaRevert):
        impact.abandoned = [v.version for v in candidate
                            if v.version <= len(sv) and v.abandoned and not sv[v.version].abandoned]
        live = _revert_states(spark, root, sid, impact, live, SchemaState(version, True, candidate))
    ddl = IMPACT_DDL
    task = partial(_impact_batch, candidate, sv.current_version, version, arrow_schema(ddl))
    found = live.mapInArrow(workers.arrow_function(task, "schema check"), spark_schema(ddl))
    for r in found.collect():
        examples = [tuple(e) for e in json.loads(r["examples"])]
        impact.fields.setdefault(r["field"], FieldImpact(r["field"])).add(r["outcome"], int(r["n"]), examples)
    return impact


def _schemas(spark: SparkSession, root: str) -> tuple[dict[SchemaId, SchemaVersions], dict[SchemaId, Any]]:
    """Every schema's versions and its log's messages (:func:`lakehouse.core.schemalog.schema_logs`)."""
    logs = schema_logs(schema_entries(spark, root))
    return {sid: build_versions(m, rejected=r) for sid, (m, r) in logs.items()}, logs


def _live_states(spark: SparkSession, root: str, sid: SchemaId) -> DataFrame:
    """The stored states (``silver.instance_states``) of the schema's live instances: not deleted,
    and not removed by a cascade as the last gold run found."""
    from pyspark.sql import functions as F

    from lakehouse.spark.catalog import STATES_DDL

    stored = delta.read(spark, silver_tables(root)["instance_states"])
    if stored is None:  # no instance log judged yet
        return spark.createDataFrame([], STATES_DDL)
    states = stored.where((F.col("schema") == str(sid)) & ~F.col("deleted")).select(*delta.columns(STATES_DDL))
    removed = delta.read(spark, gold_state_tables(root)["cascade_removed"])
    if removed is None:
        return states
    return states.join(removed.where(F.col("instance_id").isNotNull()).select("instance_id"), "instance_id", "left_anti")


def _impact_batch(sv: SchemaVersions, current: int, new: int, schema: pa.Schema, batch: pa.RecordBatch) -> pa.RecordBatch:
    """One batch of live state rows (with ``after_writes``, the state after a revert, when it
    differs) -> (field, outcome, instances, examples as JSON) (a task of a worker process)."""
    states = ((r["instance_id"], state_of(r).writes,
               decode_writes(bytes(r["after_writes"])) if r.get("after_writes") is not None else None)
              for r in batch.to_pylist())
    fields = impact_of(sv, current, new, states)
    rows = [{"field": name, "outcome": outcome, "n": n,
             "examples": json.dumps([[i, jsonable(b), jsonable(a)] for i, b, a in f.examples[outcome]], default=str)}
            for name, f in fields.items() for outcome, n in f.counts.items()]
    return pa.RecordBatch.from_pylist(rows, schema=schema)


def _revert_states(spark: SparkSession, root: str, sid: SchemaId, impact: Impact, live: DataFrame,
                   after: SchemaState) -> DataFrame:
    """A revert's counts: applied creates and updates at the versions it abandons (they become
    ignored), and the live instances created there (they leave gold).

    Args:
        after: the schema as silver would know it with the revert published.

    Returns:
        The live states that stay, with ``after_writes``: the state once the instances updated at
        the abandoned versions are judged again without those writes (null where nothing changes).
    """
    from pyspark.sql import functions as F

    if not impact.abandoned:
        return live
    messages = spark.read.format("delta").load(silver_tables(root)["messages"].location)
    at_abandoned = messages.where((F.col("schema") == str(sid)) & F.col("version").isin(impact.abandoned)
                                  & (F.col("status") == "applied") & F.col("kind").isin("create", "update"))
    impact.ignored = {r["kind"]: int(r["count"]) for r in at_abandoned.groupBy("kind").count().collect()}
    creates = at_abandoned.where(F.col("kind") == "create").select(F.col("entry_hash").alias("instance_id"))
    stays = live.join(creates, "instance_id", "left_anti")
    impact.removed = impact.instances - stays.count()
    if not impact.ignored.get("update"):
        return stays
    # the instances the ignored updates name, judged again from the messages that name them
    named = at_abandoned.where(F.col("kind") == "update").select("author", "log_id", "instance").distinct()
    refolded = (refolded_states(spark, root, named.select("author", "log_id").distinct(), {sid: after}, named)
                .select("instance_id", F.col("writes").alias("after_writes")))
    return stays.join(refolded, "instance_id", "left")
