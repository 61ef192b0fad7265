"""The plan of a gold run, per schema: rebuild, merge, or revert by time travel plus replay.

SEMANTICS.md sections 5 and 6; LAKEHOUSE.md (gold: reverts use Delta time travel plus replay of
deletes). Pure decisions, from the ``silver.gold_versions`` rows of the earlier gold runs (any
mapping with their columns) and the schema's versions; the gold pipeline
(``pipelines/gold.py``) carries them out.

- :func:`plan_schema`: how one schema's tables are brought up to date (:class:`SchemaPlan`);
- :func:`table_action`: what that means for one of its tables (``write``, ``merge``, ``replay``);
- :func:`carried_rows`: the rows a waiting schema's tables keep in the next run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from lakehouse.core.schemas import SchemaVersions

PlanMode = Literal["full", "merge", "revert"]
"""How a schema's tables are brought up to date (:func:`plan_schema`)."""
TableAction = Literal["write", "merge", "replay"]
"""What a run does to one gold table (:func:`table_action`)."""

Row = Any
"""One ``silver.gold_versions`` row: ``schema``, ``gold_run``, ``silver_run``, ``schema_version``
(the schema's latest version in that run), ``version`` (the table's), ``written``,
``delta_version``, ``table_name`` ...: a Spark ``Row`` or a mapping, read by column name."""


@dataclass
class SchemaPlan:
    """How one active schema's tables are brought up to date in a run.

    ``full``: every table rebuilt from the instance states (first run, rebuild, or newly active).
    A migration alone never needs it: which values cascade is decided by the version each was
    written at, so a new version changes no instance's liveness. ``merge``: the rows of the
    instances whose messages changed since silver run ``since`` are merged in. ``revert``: a revert
    abandoned versions since the last run; each surviving table with a snapshot is read as of that
    Delta version (written before the first abandoned version appeared) and the instances changed
    since the snapshot's silver run are replayed onto it; a table with no snapshot (the abandoned
    version already existed when it was first written) is merged, like in a ``merge`` run.

    Attributes:
        mode: ``full``, ``merge`` or ``revert``.
        since: the silver run after which message changes count (``merge``, ``revert``).
        first_abandoned: the first version the revert abandoned (``revert``).
        snapshots: table version -> (Delta version to travel to, the silver run it reflects).
    """

    mode: PlanMode
    since: int = 0
    first_abandoned: int = 0
    snapshots: dict[int, tuple[int, int]] = field(default_factory=dict)


def plan_schema(schema: str, versions: SchemaVersions, previous: Sequence[Row], full: bool) -> SchemaPlan:
    """The plan of one active schema, from the ``silver.gold_versions`` rows of every earlier run.

    Changes count from the silver run that the schema's tables reflect in the latest run that
    lists them, not from the last gold run's: a schema that waited was carried through the runs
    of its wait unchanged (:func:`carried_rows`), and the run that ends the wait brings in every
    change since.

    Args:
        schema: the schema id as text (``author:log_id``).
        versions: its versions, with which are abandoned and by which revert.
        previous: every earlier run's rows (of every schema).
        full: a rebuild was asked for.
    """
    mine = [r for r in previous if r["schema"] == schema]
    latest = [r for r in mine if r["gold_run"] == max(x["gold_run"] for x in mine)]
    last_version = max((int(r["schema_version"]) for r in latest), default=None)
    if full or last_version is None or last_version > len(versions):
        return SchemaPlan("full")
    since = min(int(r["silver_run"]) for r in latest)
    newly = sorted(v.version for v in versions if v.abandoned and (v.abandoned_by or 0) > last_version)
    if not newly:
        return SchemaPlan("merge", since)
    first = newly[0]
    snapshots: dict[int, tuple[int, int]] = {}
    for r in sorted(mine, key=lambda r: r["gold_run"]):
        if r["written"] and int(r["schema_version"]) < first:
            snapshots[int(r["version"])] = (int(r["delta_version"]), int(r["silver_run"]))
    runs = [run for _, run in snapshots.values()]
    return SchemaPlan("revert", min([*runs, since]), first, snapshots)


def table_action(plan: SchemaPlan, version: int, known: bool) -> TableAction:
    """How a run brings one gold table up to date: ``write`` it from every live state (a ``full``
    plan, or a table the last run did not have), ``replay`` a revert onto its earlier Delta version,
    or ``merge`` in the rows of the touched instances (nothing, when no instance of its schema was
    touched).

    Args:
        plan: the table's schema's plan.
        version: the table's schema version.
        known: whether the last gold run had the table.
    """
    if plan.mode == "full" or not known:
        return "write"
    if plan.mode == "revert" and version in plan.snapshots:
        return "replay"
    return "merge"


def carried_rows(last: Iterable[Row], waiting: Iterable[str], run_id: int, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """The ``silver.gold_versions`` rows of the waiting schemas' tables, carried from the last run
    into run ``run_id`` as they were (not written; the silver run they reflect kept): a waiting
    schema's tables stay in the catalog, and :func:`plan_schema` knows where its changes start.

    Args:
        last: the last run's rows.
        waiting: the waiting schemas' ids as text.
        run_id: this gold run.
        columns: the table's columns, in order (the tuples follow it).
    """
    waits = set(waiting)
    carried = []
    for r in last:
        if r["table_name"] is not None and r["schema"] in waits:
            row = {c: r[c] for c in columns} | {"gold_run": run_id, "written": False}
            carried.append(tuple(row[c] for c in columns))
    return carried
