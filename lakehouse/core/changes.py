"""A gold table's change feed between two of its versions: the pure part (``docs/semantics-notes.md``,
note 22).

An instance's row is an ``insert`` (not there before), a ``delete`` (gone after) or an ``update``
(some column differs, ``_last_entry`` and ``_updates`` included); an instance whose row is the same
in both is left out. A change table holds each as rows of the table (:func:`images`): an insert
gives the row added, a delete the row removed, an update the row before (``update_preimage``) and
the row after (``update_postimage``), Delta's change data feed's names. The comparison is the
engine's null-safe equality (``<=>``) of every column, which ``lakehouse.spark.gold.row_changes``
asks of the engine for many rows: this one serves the few rows a run projects in its own process
(``pipelines.gold``), with no engine query.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

INSERT, UPDATE, DELETE = "insert", "update", "delete"
PREIMAGE, POSTIMAGE = "update_preimage", "update_postimage"
"""The ``_change`` of an update's two rows in a change table: the row before, the row after."""
KINDS = (INSERT, PREIMAGE, POSTIMAGE, DELETE)
"""Every ``_change`` of a change table."""


def same_value(a: Any, b: Any) -> bool:
    """Whether two values of a gold column (as Arrow gives them to Python: None, bool, int, float,
    str, bytes, datetime, or a list of those) are equal as Apache Spark's null-safe equality
    compares them: both null, or equal; a float NaN equals NaN, and -0.0 equals 0.0, alone or in
    an array, whose elements are compared in order. (Sail's ``<=>`` agrees but for -0.0 and 0.0
    inside arrays, which it finds different: ``docs/engines.md``.)

    >>> same_value(float("nan"), float("nan")), same_value([1.0, None], [1.0, None]), same_value(None, 0)
    (True, True, False)
    """
    if a is None or b is None:
        return a is None and b is None
    if type(a) is list:
        return type(b) is list and len(a) == len(b) and all(map(same_value, a, b))
    return bool(a == b) or (type(a) is float and type(b) is float and a != a and b != b)


def row_changes(before: Mapping[str, Sequence[Any]], after: Mapping[str, Sequence[Any]]) -> list[tuple[str, str]]:
    """What changed between two versions of a table's rows: ``(change, instance id)`` per instance
    whose row was added (:data:`INSERT`), dropped (:data:`DELETE`) or has a column that differs
    (:data:`UPDATE`, :func:`same_value`), in ``after``'s order then ``before``'s.

    Args:
        before, after: instance id -> its row's other columns, in the table's order (the same
            columns in both).
    """
    changes = []
    for instance, row in after.items():
        old = before.get(instance)
        if old is None:
            changes.append((INSERT, instance))
        elif not all(map(same_value, old, row)):
            changes.append((UPDATE, instance))
    changes.extend((DELETE, instance) for instance in before if instance not in after)
    return changes


def images(change: str) -> tuple[tuple[str, bool], ...]:
    """The rows a change (:func:`row_changes`) gives its change table: per row, its ``_change``
    (:data:`KINDS`) and whether it shows the row before the change (else the row after).

    >>> images(UPDATE)
    (('update_preimage', True), ('update_postimage', False))
    """
    if change == UPDATE:
        return (PREIMAGE, True), (POSTIMAGE, False)
    return ((change, change == DELETE),)


def counted(kind: str) -> str | None:
    """The change a change-table row counts as in the feed's index (``inserts``, ``updates``,
    ``deletes``): an update's pre-image does not count again (None)."""
    return {INSERT: INSERT, POSTIMAGE: UPDATE, DELETE: DELETE}.get(kind)


def change_cause(change: str, schema: str, changed_in: Collection[str] | None, removed: bool, flipped: bool) -> str:
    """The cause of a change of a merged table of ``schema`` (note 22): a delete of an instance a
    cascade removes is ``cascade``; a change of an instance that a changed message of its schema's
    logs names, ``message``; of one only a cascade's flip touched, ``cascade``; else ``message``.

    Args:
        changed_in: the schemas of the instance logs whose changed messages name the instance.
        removed: whether a cascade removes the instance now.
        flipped: whether its cascade verdict flipped in this run.
    """
    if change == DELETE and removed:
        return "cascade"
    if changed_in is not None and schema in changed_in:
        return "message"
    return "cascade" if flipped else "message"
