"""Registrations: which schemas have gold tables, under which names, and which of them wait
(SEMANTICS.md section 5; README, Concepts: ``make register``).

A registration gives a schema a gold name ``<name>``: its tables are ``gold.<name>_v<n>`` (one per
schema version with a lens, :func:`gold_table_name`), ``gold.<name>`` for the latest, and each
version's change feed ``gold.<name>_v<n>_changes`` (:func:`changes_table_name`). The decisions
here are pure: the lake readers in :mod:`lakehouse.spark.lake` give them what the lake holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from lakehouse.core.messages import SchemaId
from lakehouse.core.schemas import SchemaVersions
from lakehouse.errors import LakehouseError, RegistrationError

NAME_RULE: Final = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
NAME_OPTION: Final = "--name <name> (NAME=<name> with make register)"
"""How a registration's errors say to give a name: the command's option, and the make target's."""
"""A gold name: lowercase letters, digits and ``_``, starting with a letter, at most 48 characters."""
VERSIONED_NAME: Final = re.compile(r"_v[0-9]+(_changes)?$")
"""The end of a versioned table's name or of its change feed's: no gold name may end so."""


def gold_table_name(name: str, version: int) -> str:
    """The gold table of schema version ``version`` of the schema registered as ``name``:
    ``<name>_v<version>`` (in the ``gold`` layer)."""
    return f"{name}_v{version}"


CHANGES_SUFFIX: Final = "_changes"


def changes_table_name(table_name: str) -> str:
    """The change feed of the gold table ``table_name`` (:func:`gold_table_name`):
    ``<table_name>_changes``."""
    return f"{table_name}{CHANGES_SUFFIX}"


def fed_table_name(feed_name: str) -> str | None:
    """The gold table whose change feed is ``feed_name`` (:func:`changes_table_name`), else None."""
    return feed_name.removesuffix(CHANGES_SUFFIX) if feed_name.endswith(CHANGES_SUFFIX) else None


def resolve_schema(schema: str, known: Mapping[SchemaId, str]) -> SchemaId:
    """The schema a ``register`` request names: an id, or a meta name only one known schema has.

    Args:
        schema: ``<author hex>:<log_id>`` or a schema's meta name.
        known: schema id -> meta name of every schema the lake holds.

    Raises:
        RegistrationError: codes ``unknown_schema``, ``ambiguous_name``, ``bad_schema_id``.
    """
    if ":" in schema:
        try:
            sid = SchemaId.parse(schema)
        except LakehouseError as exc:
            raise RegistrationError(f"SCHEMA must be <author hex>:<log_id> or a schema name: {exc}",
                                    code="bad_schema_id") from None
        if sid not in known:
            raise RegistrationError(f"no schema {sid} in the lake yet: publish it, then run `make ingest` before "
                                    "registering", code="unknown_schema")
        return sid
    named = sorted((sid for sid, meta_name in known.items() if meta_name == schema), key=str)
    if len(named) > 1:
        raise RegistrationError(f"{len(named)} schemas are named {schema!r}: give one of their ids, "
                                + ", ".join(map(str, named)), code="ambiguous_name")
    if not named:
        names = ", ".join(sorted(set(known.values()))) or "none yet"
        raise RegistrationError(f"no schema named {schema!r} in the lake (known: {names}); publish it, then run "
                                "`make ingest` before registering, or give its id <author hex>:<log_id>",
                                code="unknown_schema")
    return named[0]


def registration(sid: SchemaId, name: str, current: Mapping[SchemaId, str]) -> bool:
    """Whether registering ``sid`` as ``name`` is new (False: already registered so).

    Args:
        current: the registrations, schema -> gold name.

    Raises:
        RegistrationError: the name is not an identifier (``bad_name``) or ends in ``_v<digits>``
            or ``_v<digits>_changes`` (the names of versioned tables and their change feeds:
            ``bad_name``), the schema is registered under another name (``registered``), or
            another schema has the name (``name_taken``; the message says how to give its own name).
    """
    if not NAME_RULE.match(name):
        raise RegistrationError(
            f"{name!r} is not a gold table name (lowercase letters, digits and '_', starting with a letter); "
            f"give one with {NAME_OPTION}", code="bad_name")
    if VERSIONED_NAME.search(name):
        # gold.<name>_v<n> and their change feeds gold.<name>_v<n>_changes are the tables of every
        # name: a name that ends so would be (or take) another's table
        raise RegistrationError(
            f"{name!r} ends like a versioned gold table or its change feed (_v<digits>, _v<digits>_changes): its "
            "tables would collide with another "
            f"registration's; give another name with {NAME_OPTION}", code="bad_name")
    if sid in current:
        if current[sid] == name:
            return False
        raise RegistrationError(f"schema {sid} is already registered as {current[sid]!r}", code="registered")
    for other, other_name in current.items():
        if other_name == name:
            raise RegistrationError(
                f"the name {name!r} is taken by schema {other}; give this schema its own name with {NAME_OPTION}",
                code="name_taken")
    return True


def registered_as(name: str, current: Mapping[SchemaId, str]) -> SchemaId:
    """The schema registered as ``name`` (its gold name, or its id), for ``register --drop``.

    Raises:
        RegistrationError: code ``not_registered`` (the message lists the registered names).
    """
    found = [sid for sid, gold_name in current.items() if name in (gold_name, str(sid))]
    if not found:
        known = ", ".join(sorted(current.values())) or "none"
        raise RegistrationError(f"no registration named {name!r} (registered: {known})", code="not_registered")
    return found[0]


def waits_of(schemas: Mapping[SchemaId, SchemaVersions], names: Mapping[SchemaId, str]) -> dict[SchemaId, str]:
    """Registered schemas that cannot have gold tables yet, with what they wait for.

    A schema waits until silver has seen it and every schema its relations point at (in a version
    no revert abandoned: the versions whose writes gold shows) is registered and not waiting
    itself: cascades need the deletes of the targets. A relation only an abandoned version had
    holds nothing back.

    Args:
        schemas: every schema silver knows, by id.
        names: the registrations, schema -> gold name.
    """
    waiting: dict[SchemaId, str] = {}
    targets: dict[SchemaId, set[SchemaId]] = {}
    for sid in names:
        if sid not in schemas:
            waiting[sid] = "not a schema in silver (not seen yet, or a fork at seq 1 of its log took it away)"
            continue
        targets[sid] = {f.schema for v in schemas[sid] if not v.abandoned for f in v.lens if f.schema is not None}
        missing = sorted(f"{names.get(t, schemas[t].meta.name if t in schemas else '?')} ({t})"
                         for t in targets[sid] if t not in names)
        if missing:
            waiting[sid] = "relations to unregistered schema(s) " + ", ".join(missing)
    changed = True
    while changed:
        changed = False
        for sid, pointed in targets.items():
            blocked = sorted(names[t] for t in pointed if t in waiting and t != sid)
            if sid not in waiting and blocked:
                waiting[sid] = "relations to waiting schema(s) " + ", ".join(blocked)
                changed = True
    return waiting
