"""The projection of one schema's instance states to every gold table, planned per field.

SEMANTICS.md sections 4 and 5. A value written under one definition of a field is shown under
another by comparing the two ends (:func:`lakehouse.core.lenses.translate_value`), so what a gold
column holds depends only on the field's definition at the table's version: its name, type,
validation and default. Two versions that define a field alike show the same column, whichever
version each value was written at. A :class:`Projection` therefore

- lists the **distinct columns** of a schema's gold tables (one per distinct definition, e.g. 47
  for the 150 field columns of the 18 tables of the benchmark's three schemas);
- says for each table which column each of its fields reads;
- decides once per (column, written version) how a value reaches the column: ``copy`` (the same
  type and validation: the value was checked when it was written), ``default`` (the field was
  added after the written version), or ``convert`` (convert, validate, default on failure).

:meth:`Projection.columns_of` turns a batch of states into the values of every distinct column, a
column at a time, so each state is read once for all of its schema's tables, a column shared by
several tables is computed once, and what a value's way needs is looked up once per (column,
written version), not per value. :func:`lakehouse.core.schemas.project` (the reference model's
path) gives the same values field by field; the property tests compare the two.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehouse.core.lenses import LensField, fresh, translator
from lakehouse.core.schemas import SchemaVersions
from lakehouse.errors import SchemaLogError

COPY, DEFAULT, CONVERT = "copy", "default", "convert"


def column_key(lens_field: LensField) -> tuple[Any, ...]:
    """What makes two definitions of a field show the same values under the same column name:
    identity, name, type, validation and default (the relation target and cascade flag do not
    change a value)."""
    return (lens_field.key, lens_field.name, lens_field.type, lens_field.validation, type(lens_field.default).__name__,
            repr(lens_field.default))


@dataclass
class Projection:
    """How the live states of one schema become the rows of its gold tables.

    Attributes:
        sv: the schema's versions.
        columns: the distinct columns, each the field definition it shows (column i is read by
            every table whose field at that position has the same :func:`column_key`).
        tables: gold version -> the column index of each field of its lens, in lens order.
    """

    sv: SchemaVersions
    columns: tuple[LensField, ...]
    tables: dict[int, tuple[int, ...]]
    _ways: list[dict[int, tuple[str, LensField | None]]] = field(init=False, repr=False)
    _translators: list[dict[int, Callable[[Any], Any] | None]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._ways = [{} for _ in self.columns]  # per column: written version -> way, decided on first use
        self._translators = [{} for _ in self.columns]  # the same, as the function columns_of applies

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (to the worker processes) without the translators, which are closures: each
        process builds its own on first use."""
        state = dict(self.__dict__)
        state["_translators"] = [{} for _ in self.columns]
        return state

    def way(self, column: int, written: int) -> tuple[str, LensField | None]:
        """How a value written at version ``written`` reaches ``column``: (``copy``, ``default`` or
        ``convert``, the field in lens(written) or None).

        Raises:
            SchemaLogError: code ``unknown_version`` or ``abandoned_version`` for ``written``.
        """
        ways = self._ways[column]
        found = ways.get(written)
        if found is None:
            version = self.sv[written]
            if version.abandoned:
                raise SchemaLogError(f"version {written} was abandoned by the revert at version "
                                     f"{version.abandoned_by}", code="abandoned_version")
            shown = self.columns[column]
            source = self.sv.lens(written).by_key(shown.key)
            if source is None:
                found = (DEFAULT, None)
            elif source.type == shown.type and source.validation == shown.validation:
                found = (COPY, source)
            else:
                found = (CONVERT, source)
            ways[written] = found
        return found

    def values(self, writes: Mapping[str, Sequence[Any]]) -> list[Any]:
        """The value of every distinct column for one instance state (:meth:`columns_of` of that
        state alone, each list value a copy).

        Raises:
            SchemaLogError: as :meth:`way`.
        """
        return [fresh(column[0]) for column in self.columns_of([writes])]

    def columns_of(self, states: Sequence[Mapping[str, Sequence[Any]]]) -> list[list[Any]]:
        """The values of every distinct column for a batch of instance states, a column at a time:
        each (column, written version) pair's way decided once (:meth:`way`), each value reaching its
        column by it (copied as written, the default, or translated by
        :func:`lakehouse.core.lenses.translator`).

        The values are not copies: a list value may be the state's own or the field's default,
        for a caller that hands them straight on (to Arrow) and never changes them.

        Args:
            states: per state, its :attr:`lakehouse.core.gold.InstanceState.writes` (field
                identity -> (written version, canonical value or None), a pair or a list of two as
                :func:`lakehouse.core.gold.read_writes` gives them); a field no write set shows
                its default.

        Returns:
            Per entry of :attr:`columns`, one canonical value per state (in order), as
            :func:`lakehouse.core.lenses.translate_value` gives it.

        Raises:
            SchemaLogError: as :meth:`way`.
        """
        out: list[list[Any]] = []
        for i, shown in enumerate(self.columns):
            key, default, known = shown.key, shown.default, self._translators[i]
            column: list[Any] = []
            append = column.append
            for writes in states:
                entry = writes.get(key)
                if entry is None:
                    append(default)
                    continue
                written, value = entry
                if written in known:
                    translate = known[written]
                else:
                    # the default when the field came after the written version (no source field)
                    translate = known[written] = translator(self.way(i, written)[1], shown)
                append(value if translate is None else translate(value))
            out.append(column)
        return out

    def fields(self, version: int) -> list[tuple[str, int]]:
        """(field name, column index) of each field of lens(``version``), in lens order.

        Raises:
            KeyError: ``version`` is not one of the planned tables.
        """
        return [(self.columns[i].name, i) for i in self.tables[version]]


def plan_projection(sv: SchemaVersions, versions: Iterable[int] | None = None) -> Projection:
    """The projection of ``sv``'s states to the gold tables of ``versions`` (default: every
    version with a gold table, :meth:`SchemaVersions.gold_versions`).

    Raises:
        SchemaLogError: code ``unknown_version`` for a version not in the log.
    """
    index: dict[tuple[Any, ...], int] = {}
    columns: list[LensField] = []
    tables: dict[int, tuple[int, ...]] = {}
    for version in (sv.gold_versions() if versions is None else versions):
        picked = []
        for lens_field in sv.lens(version):
            key = column_key(lens_field)
            if key not in index:
                index[key] = len(columns)
                columns.append(lens_field)
            picked.append(index[key])
        tables[version] = tuple(picked)
    return Projection(sv, tuple(columns), tables)
