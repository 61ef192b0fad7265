"""Instance state and gold rows: the pure part of the gold pipeline (SEMANTICS.md section 5).

An instance's **state** is the fold of its applied messages in log order (notes 14 and 15 of
``docs/semantics-notes.md``): for each field, the latest applied write that set it, with the
version that write named (a create sets every field of its lens, a key it lacks to null); the
version and entry of the latest applied create or update; the number of applied updates; whether
it was deleted. A gold row of version n is that state projected to n through the lens
(:mod:`lakehouse.core.projection`, which plans it per field for all tables at once).

Whether a relation value cascades is decided by the lens of the version it was written at
(SEMANTICS.md section 5): an instance is removed when one of its relation values written under
``cascade: true`` points at a deleted or removed instance, recursively and across schemas
(:func:`removed_by_cascade`). A migration changes neither: only instance messages do.

Pure: no Spark, no I/O. :mod:`lakehouse.core.reference` computes the same rows independently.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import cbor2

from lakehouse.core.messages import Create, Delete, Message, Update
from lakehouse.core.schemas import SchemaVersions
from lakehouse.core.statuses import Decoded, InstanceLogResult

GOLD_META_COLUMNS = ("_version", "_last_entry", "_updates")
GOLD_ID_COLUMNS = ("instance_id", "author")
Id = TypeVar("Id", bound=Hashable)  # an instance id of one kind (hex text or raw hash)


def gold_column(field_name: str) -> str:
    """The gold column of a field: its name, or ``_field_<name>`` for ``instance_id`` and ``author``.

    Field names start with a letter (FORMAT.md section 3), so the system columns (ids and ``_...``)
    can only clash with a field named ``instance_id`` or ``author`` (note 16).
    """
    return f"_field_{field_name}" if field_name in GOLD_ID_COLUMNS else field_name


@dataclass
class InstanceState:
    """One instance after its applied messages (SEMANTICS.md section 5, note 14).

    Attributes:
        instance_id: the create's entry hash (68 hex characters).
        author: the instance's author (64 hex characters).
        writes: field identity (:attr:`lakehouse.core.lenses.LensField.key`, the name unless a
            rename touched the field) -> (version named by the latest applied write that set it,
            canonical value; ``None`` for a null, or a field of the create's lens its create left out).
        version: the version named by the latest applied create or update.
        last_entry: that message's entry hash (hex).
        updates: the number of applied updates.
        deleted: whether an applied delete ended it. A delete of a create that was ignored
            (abandoned version) leaves a state with only this set: never shown, but a target
            that cascades.
    """

    instance_id: str
    author: str
    writes: dict[str, tuple[int, Any]] = field(default_factory=dict)
    version: int = 0
    last_entry: str = ""
    updates: int = 0
    deleted: bool = False


def apply(state: InstanceState | None, sv: SchemaVersions | None, author: str, entry_hash: str, message: Message,
          values: Mapping[str, Any] | None) -> InstanceState:
    """One applied create, update or delete of an instance, folded into its state (notes 14, 15).

    Args:
        state: the instance's state before the message; None before its create, or when the
            create was ignored (abandoned version) and this is a delete of it.
        sv: the versions of the instance's schema (the lens of a create's version names the
            fields a create leaves out); None only for a delete.
        author: the author of the instance's log.
        entry_hash: the message's entry hash (hex).
        message: the message, applied (SEMANTICS.md section 3).
        values: the field values it writes, as silver's check returned them (canonical); None
            for a delete.

    Returns:
        The state after the message (``state`` itself, changed in place, unless it starts one):
        a delete of an ignored create leaves a deleted state without writes, which never shows
        but starts cascades.
    """
    if isinstance(message, Delete):
        if state is None:
            return InstanceState(instance_id=message.instance.hex(), author=author, deleted=True)
        state.deleted = True
        return state
    assert isinstance(message, (Create, Update)) and message.schema is not None and values is not None
    version = message.schema.version
    if isinstance(message, Create):  # a key the create leaves out is null (SEMANTICS.md section 4)
        assert sv is not None
        state = InstanceState(instance_id=entry_hash, author=author, writes=dict(sv.created_writes[version - 1]))
    assert state is not None, "an applied update follows its instance's applied create"
    keys = sv.write_keys[version - 1] if sv is not None else None
    for name, value in values.items():  # a write names a field; its value is kept under its identity
        state.writes[name if keys is None else keys[name]] = (version, value)
    state.version, state.last_entry = version, entry_hash
    if isinstance(message, Update):
        state.updates += 1
    return state


def fold_log(sv: SchemaVersions | None, author: str, messages: Sequence[tuple[int, bytes, Decoded]],
             judged: InstanceLogResult, before: Mapping[str, InstanceState]) -> dict[str, InstanceState]:
    """The states of the instances one instance log's judged messages change.

    Args:
        sv: the versions of the log's schema (None when it has none: nothing is then applied
            but deletes).
        author: the log's author.
        messages: ``(seq, entry hash, decoded)`` of the judged messages, in seq order.
        judged: what :func:`lakehouse.core.statuses.judge_instance_log` gave for them: their
            statuses, and the checked values of the applied creates and updates.
        before: the stored states of instances that messages update or delete and that were
            created before them (empty when ``messages`` starts the log).

    Returns:
        instance id (hex) -> state, for every instance an applied message wrote.
    """
    states: dict[str, InstanceState] = {}
    for seq, entry_hash, decoded in messages:
        message = decoded.message
        if message is None or judged.statuses[seq].status != "applied":
            continue
        instance = entry_hash.hex() if isinstance(message, Create) else message.instance.hex()  # type: ignore[union-attr]
        state = states.get(instance) or before.get(instance)
        states[instance] = apply(state, sv, author, entry_hash.hex(), message, judged.values.get(seq))
    return states


def encode_writes(writes: Mapping[str, tuple[int, Any]]) -> bytes:
    """The writes of a state as CBOR (``{field: [version, value]}``, fields in name order, so that
    equal states give equal bytes), for storage in a column. Not CBOR's canonical form, which
    costs twice as much to encode and is not needed to read it back."""
    return cbor2.dumps(dict(sorted(writes.items())))  # a (version, value) pair is a CBOR array, as a list


def decode_writes(data: bytes) -> dict[str, tuple[int, Any]]:
    """The inverse of :func:`encode_writes`."""
    return {name: (int(version), value) for name, (version, value) in cbor2.loads(data).items()}


def read_writes(data: bytes) -> Mapping[str, Sequence[Any]]:
    """The writes of :func:`encode_writes` as CBOR gives them back (``{field: [version, value]}``),
    for a reader that only looks at them (:meth:`lakehouse.core.projection.Projection.values`):
    :func:`decode_writes` without a tuple per field."""
    writes: dict[str, list[Any]] = cbor2.loads(data)
    return writes


def cascade_targets(sv: SchemaVersions, writes: Mapping[str, tuple[int, Any]]) -> list[str]:
    """The instance ids this instance's cascading relation values point at (SEMANTICS.md section 5).

    A value cascades when its field is a relation (or relation[]) with ``cascade: true`` in the
    lens of the version the value was written at, whatever later versions say of the field.

    Args:
        sv: the instance's schema versions.
        writes: the instance's writes (:attr:`InstanceState.writes`).

    Returns:
        Sorted distinct relation ids (68 hex).
    """
    targets: set[str] = set()
    cascading = sv.cascading
    for key in sv.cascading_names:  # none when the schema has no cascading field
        write = writes.get(key)
        if write is None:
            continue
        version, value = write
        if value is None or (version, key) not in cascading:
            continue
        targets.update(value if isinstance(value, list) else [value])
    return sorted(targets)


def _pointed_by(targets: Mapping[Id, Iterable[Id]]) -> dict[Id, list[Id]]:
    """The reverse of ``targets``: id -> the ids whose cascading values point at it."""
    pointed_by: dict[Id, list[Id]] = defaultdict(list)
    for source, pointed in targets.items():
        for target in pointed:
            pointed_by[target].append(source)
    return pointed_by


def removed_by_cascade(deleted: Iterable[Id], targets: Mapping[Id, Iterable[Id]]) -> set[Id]:
    """The instances removed by cascades: those pointing (recursively) at a deleted or removed one.

    Args:
        deleted: ids of deleted instances (hex, or raw hashes: any one kind of id).
        targets: instance id -> the ids its cascading relation fields point at.

    Returns:
        The ids removed by a cascade (deleted ids are not included unless also removed).
    """
    pointed_by = _pointed_by(targets)
    gone = set(deleted)
    removed: set[Id] = set()
    frontier = list(gone)
    while frontier:
        target = frontier.pop()
        for source in pointed_by.get(target, ()):
            if source not in gone:
                gone.add(source)
                removed.add(source)
                frontier.append(source)
    return removed


def removed_by_cascade_numbered(count: int, deleted: Any, sources: Any, targets: Any) -> Any:
    """:func:`removed_by_cascade` over instances numbered ``0 .. count - 1``, a level at a time
    with numpy: over the 3,000,000 edges of 10,000,000 messages of the bench history, the walk
    over Python sets and lists took 5.4 s.

    Args:
        count: how many instances are numbered (every number below is less).
        deleted: the numbers of the deleted instances (integer array; repeats allowed).
        sources, targets: the cascading edges as two integer arrays of the same length: instance
            ``sources[k]`` points at ``targets[k]``.

    Returns:
        The numbers of the instances removed by a cascade, ascending (int64 array; a deleted
        instance is never among them).
    """
    import numpy as np

    sources, targets = np.asarray(sources, dtype=np.int64), np.asarray(targets, dtype=np.int64)
    by_target = np.argsort(targets, kind="stable")
    pointing = sources[by_target]  # the sources of the edges, grouped by target
    starts = np.concatenate(([0], np.cumsum(np.bincount(targets, minlength=count))))  # target t: pointing[starts[t]:starts[t + 1]]
    gone = np.zeros(count, dtype=bool)
    frontier = np.unique(np.asarray(deleted, dtype=np.int64))
    gone[frontier] = True
    removed = np.zeros(count, dtype=bool)
    while frontier.size:
        first, lengths = starts[frontier], starts[frontier + 1] - starts[frontier]
        at = np.repeat(first - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
        found = np.unique(pointing[at])
        frontier = found[~gone[found]]
        gone[frontier] = True
        removed[frontier] = True
    return np.flatnonzero(removed)


def removed_in_region(region: Mapping[Id, tuple[bool, Iterable[Id]]], gone_outside: Iterable[Id]) -> set[Id]:
    """The instances of a region removed by cascades, when every verdict outside it is known: the
    removed set of :func:`removed_by_cascade` brought up to date after a few instances changed.

    An instance's verdict depends only on the instances its cascading values lead to
    (recursively). So when the region holds every changed instance (its deleted flag or its
    targets changed, or it appeared or went) and every instance pointing at one, directly or
    not, each verdict outside the region is the one found before the change, and the removed set
    after it is the one before, less the region, plus what this returns.

    Args:
        region: id -> (deleted, cascading targets) of every instance of the region; an instance
            with no state (gone with its log) as (False, ()).
        gone_outside: the ids outside the region that are deleted or were removed (others,
            and ids of the region, are ignored).

    Returns:
        The ids of the region removed by a cascade (never a deleted one).
    """
    seeds = [i for i, (deleted, _) in region.items() if deleted]
    seeds.extend(i for i in gone_outside if i not in region)
    return removed_by_cascade(seeds, {i: targets for i, (_, targets) in region.items()})


def pointing_at(targets: Mapping[Id, Iterable[Id]], ids: Iterable[Id], deleted: Container[Id] = ()) -> set[Id]:
    """``ids`` and every instance pointing at one of them through cascading values, directly or
    not, but not past a deleted instance that is not one of ``ids``: the region of
    :func:`removed_in_region` around changed instances. An unchanged deleted instance is gone
    before and after the change, so what points at it is removed either way. The gold pipeline
    finds the same region in the engine, a level per query (``lakehouse.spark.cascades.update_in_region``).

    Args:
        targets: instance id -> the ids its cascading relation values point at.
        ids: the changed instances.
        deleted: the deleted instances.
    """
    pointed_by = _pointed_by(targets)
    region = set(ids)
    frontier = list(region)
    while frontier:
        for source in pointed_by.get(frontier.pop(), ()):
            if source not in region:
                region.add(source)
                if source not in deleted:
                    frontier.append(source)
    return region
