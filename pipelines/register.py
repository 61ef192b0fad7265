"""``make register SCHEMA=<id or name> NAME=<name>``: register a schema for gold tables, or drop
its registration (``lakehouse register NAME --drop``). README, Concepts (gold); the rules are
:mod:`lakehouse.core.registry`'s.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from lakehouse.core.registry import registered_as, registration, resolve_schema
from lakehouse.spark import catalog, delta
from lakehouse.spark.lake import gold_state_tables, known_schemas, registrations
from lakehouse.spark.tables import register_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.config import Settings


def register_schema(spark: SparkSession, settings: Settings, schema: str, name: str | None) -> tuple[str, str, bool]:
    """Register a schema for gold (``make register SCHEMA=<id or name> NAME=<name>``).

    A schema can be registered as soon as its log is in bronze (``make ingest``), before silver
    has judged it: like the server of the seeds, the lake indexes a schema it has the log of.
    Its tables come with the next ``make materialize``.

    Args:
        schema: the schema id ``<author hex>:<log_id>``, or its meta name where only one schema
            has it.
        name: the gold name (``gold.<name>``); defaults to the schema's meta name.

    Returns:
        (schema id, name, whether it was new).

    Raises:
        RegistrationError: the schema is unknown (no schema log in silver or bronze), the name
            is ambiguous, the name is not an identifier or ends in ``_v<digits>`` or
            ``_v<digits>_changes`` (the names of versioned tables and their change feeds), or
            another schema has the name (the message says to give its own NAME).
    """
    root = settings.lake_root
    known = known_schemas(spark, root)
    sid = resolve_schema(schema, known)
    chosen = name or known[sid]
    if not registration(sid, chosen, registrations(spark, root)):
        return str(sid), chosen, False
    ref = gold_state_tables(root)["registrations"]
    delta.append_rows(spark, [(str(sid), chosen, datetime.now(timezone.utc))], catalog.REGISTRATIONS_DDL, ref)
    register_table(spark, ref)
    return str(sid), chosen, True


def drop_registration(spark: SparkSession, settings: Settings, name: str) -> str:
    """Drop the registration of the schema registered as ``name`` (its gold name or its id): the
    next ``make materialize`` no longer names its tables. Their data stays in the lake, and
    registering the schema again brings them back up to date.

    Returns:
        The schema id whose registration was dropped.

    Raises:
        RegistrationError: code ``not_registered`` (the message lists the registered names).
    """
    root = settings.lake_root
    sid = registered_as(name, registrations(spark, root))
    ref = gold_state_tables(root)["registrations"]
    stored = delta.read_rows(spark, ref)
    assert stored is not None, "a registered name is in the table"
    delta.replace_with_rows(spark, [tuple(r) for r in stored if r["schema"] != str(sid)], catalog.REGISTRATIONS_DDL, ref)
    register_table(spark, ref)
    return str(sid)
