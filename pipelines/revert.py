"""``make revert SCHEMA=<name or id> TARGET=<version>``: publish a schema-revert and materialize it.

SEMANTICS.md sections 2 and 6. The revert is signed with the schema author's key from the key
store (nothing is published or changed without it), landed, then ingested and materialized in
the same run, under the lake lock the caller holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.core.messages import SchemaId, SchemaRevert, decode_message
from lakehouse.errors import PublishError
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.publisher import Publisher
from lakehouse.spark.lake import registrations
from pipelines.gold import GoldSummary, run_gold
from pipelines.ingest import IngestSummary, run_ingest
from pipelines.silver import SilverSummary, run_silver

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.config import Settings


@dataclass
class RevertSummary:
    """The version the revert took, and what ingest, silver and gold did with it."""

    schema: str
    version: int
    target: int
    ingest: IngestSummary
    silver: SilverSummary
    gold: GoldSummary
    resumed: bool = False  # the revert was published by an earlier run that stopped before the end


def revert_schema(spark: SparkSession, settings: Settings, schema: str, target: int) -> RevertSummary:
    """Revert ``schema`` to version ``target`` and materialize the result.

    Args:
        schema: a registered gold name, a schema name known to the key store, or a schema id.
        target: the version to go back to.

    When the schema's latest message is already a revert to ``target`` (a run of this command
    that was stopped after publishing it), nothing is published again: its ingest and
    materialize are finished, and the summary says ``resumed``.

    Returns:
        The summary.

    Raises:
        PublishError: no key in the key store is the schema's author (code ``no_key``), the schema
            is unknown, or the revert would be ignored (target not an earlier, live version).
    """
    by_name = {name: str(sid) for sid, name in registrations(spark, settings.lake_root).items()}
    schema_id = by_name.get(schema, schema)
    store = KeyStore(settings.keys)
    if not store.names():
        raise PublishError(f"the key store {store.folder} is empty: only the schema's author can revert it",
                           code="no_key")
    resolved = Publisher(store, store.names()[0], settings.landing).resolve_schema(schema_id)
    owner = store.find_author(resolved.author)
    if owner is None:
        raise PublishError(f"no key in {store.folder} is the author of schema {resolved}; only a schema's "
                           "author can revert it", code="no_key")
    with Publisher(store, owner.name, settings.landing, max_payload=settings.max_payload) as publisher:
        version = _published_revert(publisher, resolved, target)
        resumed = version is not None
        if version is None:
            version = publisher.schema_message(str(resolved), SchemaRevert(target))
    return RevertSummary(str(resolved), version, target, run_ingest(spark, settings), run_silver(spark, settings),
                         run_gold(spark, settings), resumed)


def _published_revert(publisher: Publisher, schema: SchemaId, target: int) -> int | None:
    """The version of the schema's latest message when it is already a revert to ``target`` (a
    run that published it and was stopped before its materialize ended), else None. Publishing
    another would abandon the first for nothing; the run finishes the first instead."""
    log = publisher.state.logs.get(schema.log_id)
    if log is None or not log.messages:
        return None
    latest = decode_message(bytes.fromhex(log.messages[-1]))
    if isinstance(latest, SchemaRevert) and latest.target == target:
        return len(log.messages)
    return None
