"""Schemas: a schema log's messages -> its versions, lenses, lineage and field history.

A schema is the log (author, log_id) that holds its schema messages; its version v is the seq_num of
one of its entries (SEMANTICS.md section 2). :func:`build_versions` replays the log in seq order,
one version per seq, and answers for every version: its status, its lens, whether a revert
abandoned it, and its parent on the lineage. :func:`translate` and :func:`project` show values
written at one version at another, comparing the field at the two versions with
:func:`lakehouse.core.lenses.translate_value`.

Versions, in seq order
    - seq 1 must be ``schema-meta``: status ``meta``, empty lens.
    - later ``schema-meta``: status ``meta``, lens unchanged, metadata updated.
    - ``schema-migration``: the previous lens with the changes applied in order; status ``valid``.
      Any of these makes the whole migration ``invalid`` (lens unchanged, reason code and message
      kept, no field history): ``field_exists`` (create of a visible field), ``no_such_field`` /
      ``field_removed`` (update or remove of a field that never existed on the lineage / was
      removed), ``bad_type`` (missing or unknown type), ``validation_not_allowed`` (validation on a
      type other than varchar, text and their arrays), ``bad_validation`` (RE2 rejects the
      pattern), ``missing_default`` (update without ``default``), ``bad_default`` (a default that
      does not fit the field's type, length or validation), ``missing_schema`` (relation without a
      target), ``schema_not_allowed`` (``schema`` or ``cascade: true`` on a non-relation),
      ``type_changed_on_recreate`` (re-creating a removed field with another type),
      ``field_removed`` also for a rename of a removed field, ``name_taken`` (a rename to a name
      a field of the log's history has had, visible, hidden or renamed away, other than the
      renamed field's own earlier names), and, for
      messages built without the decoder, ``bad_field_name``, ``bad_action``, ``empty_migration``.
    - ``schema-revert`` with target t at version r: status ``revert``, lens(r) = lens(t), and the
      versions strictly between t and r become abandoned (``abandoned_by`` = the first revert that
      abandoned them). Ignored (status ``ignored_revert``, lens unchanged, reason kept) when t is
      not an earlier version of the log (``bad_target``: t < 1 or t >= r), or t is abandoned
      (``target_abandoned``). SEMANTICS.md's third condition, "a revert between t and r already
      targets a version earlier than t", is that same condition: a version is only ever abandoned
      by a revert s with target t' < t < s < r. Ignored reverts abandon nothing and count for
      neither condition.
    - a seq whose message the caller rejected (``rejected``): status ``rejected``, lens unchanged.

Lineage
    The state of a version is its lens, its hidden fields (removed on its lineage, remembered with
    their last definition, so a re-create must keep the type and can show old values again) and its
    metadata. A revert copies the whole state of its target: metadata, like fields, follows the
    lineage, and a field created only on an abandoned branch is unknown after the revert.
    ``parent(r) = t`` for a revert at r with target t; for every other version v > 1,
    ``parent(v) = v - 1``, which is always the previous non-abandoned version when v is written.
    The non-abandoned versions form one chain in seq order, each one's parent being the previous
    one.

Field identity
    Every field has an identity (SEMANTICS.md section 2), kept as :attr:`LensField.key`: what an
    instance's writes store its values under, so values follow the field through renames. A create
    takes the identity of the removed field of its name on its lineage (same type), else a new one:
    its key is its name, unless a field that has been renamed already holds that key (a create of
    a name a rename left), then ``name@version.position``. A rename keeps the key and the place in
    the lens. A log without renames keys every field by its name, as lakes written before renames
    existed store them.

Field history
    Append-only: one row per field change of every valid migration, abandoned or not, with the
    field's definition as it stands after the change; a rename's row has the old name and the new
    one (``to``).

Decisions where the spec is silent
    - An ``update`` changes only what it names (SEMANTICS.md section 2): ``type`` absent keeps the
      type, ``validation`` absent keeps the validation and ``validation: ""`` removes it,
      ``default`` (required; an explicit null counts) replaces the default. A kept validation must
      suit the new type: an update to a non-text type of a validated field is invalid
      (``validation_not_allowed``) unless it says ``validation: ""``. ``schema`` on an update sets
      the target and ``cascade``; without it the target and cascade are kept (``cascade: true``
      still turns cascading on). The decoder allows neither key on an update, so a non-relation
      field cannot become a relation by an update.
    - ``validation: ""`` on a create means no validation, as on an update.
    - A default is checked like an instance value against its own field (type, length,
      validation), so that a failed translation always lands on a value that fits.
    - Re-creating a removed field appends it at the end of the lens.
    - "A name any field of the history has had" (the rename rule) is read over the whole log,
      abandoned versions included, as the field history keeps them; a field may take back a name
      it had itself (a rename back). A rename to the field's own current name is ``name_taken``.
    - A revert may target any earlier non-abandoned version, whatever its status (meta, invalid,
      revert, ignored, rejected): every version has a lens.
    - The caller passes every seq of the log's accepted prefix, as a message or as rejected; a
      missing seq is an error, not a version without a lens.
    - The current version is the latest seq that is not rejected, whatever its status (it may be an
      invalid migration or an ignored revert, whose lens is its parent's).
    - Translating from or to an abandoned version is an error: abandoned versions' writes drop out
      (SEMANTICS.md section 6) and they have no gold table.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal, TypeAlias

from lakehouse.core.lenses import (
    ABSENT,
    EMPTY_LENS,
    FieldType,
    Lens,
    LensField,
    check_value,
    compile_validation,
    parse_type,
    translate_value,
)
from lakehouse.core.messages import (
    FieldChange,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    is_field_name,
)
from lakehouse.errors import MessageError, SchemaLogError

SchemaMessage: TypeAlias = SchemaMeta | SchemaMigration | SchemaRevert
VersionStatus = Literal["meta", "valid", "invalid", "revert", "ignored_revert", "rejected"]


@dataclass(frozen=True)
class FieldHistoryRow:
    """One row of the append-only field history (silver): one field change of a valid migration.

    Attributes:
        version: the migration's version.
        position: index of the change in the migration's ``fields`` (0-based).
        name: the field (for ``rename``: its name before).
        action: ``create``, ``update``, ``rename`` or ``remove``.
        type: the field's type after the change (for ``remove``: the type it had), as text.
        validation: the field's validation after the change (None for ``remove``).
        default: the field's canonical default after the change (None for ``remove``).
        schema: relation target after the change, else None.
        cascade: relation cascade after the change.
        to: for ``rename``, the field's new name; else None.
    """

    version: int
    position: int
    name: str
    action: str
    type: str
    validation: str | None
    default: Any = field(hash=False)
    schema: SchemaId | None
    cascade: bool
    to: str | None = None


@dataclass(frozen=True)
class SchemaVersion:
    """One version of a schema: what its message did and the lens it shows.

    Attributes:
        version: the seq_num.
        kind: the message kind, or None for a rejected message.
        status: ``meta``, ``valid``, ``invalid``, ``revert``, ``ignored_revert`` or ``rejected``.
        lens: the lens at this version.
        parent: the previous version on this version's lineage (None for version 1).
        abandoned: whether a later revert abandoned this version.
        abandoned_by: the first revert that abandoned it, else None.
        reason: reason code for ``invalid``, ``ignored_revert`` and ``rejected``, else None.
        message: the human-readable explanation that goes with ``reason``.
        target: the target of a ``schema-revert`` (applied or ignored), else None.
        meta: the schema metadata in force on this version's lineage.
        hidden: fields removed on this version's lineage, with their last definition.
    """

    version: int
    kind: str | None
    status: VersionStatus
    lens: Lens
    parent: int | None
    abandoned: bool
    abandoned_by: int | None
    reason: str | None
    message: str | None
    target: int | None
    meta: SchemaMeta
    hidden: tuple[LensField, ...]

    @property
    def has_gold_table(self) -> bool:
        """Whether ``gold.<name>_v<version>`` exists (SEMANTICS.md section 5)."""
        return self.status in ("valid", "revert") and not self.abandoned and len(self.lens) > 0


@dataclass(frozen=True)
class SchemaVersions:
    """All versions of one schema log, built by :func:`build_versions`.

    Attributes:
        versions: version v at index v - 1.
        field_history: the field history rows, in (version, position) order.
        current_version: the seq_num of the latest accepted schema message (not rejected).
        names_had: every name a field of the log has had (visible, removed or renamed away,
            abandoned versions included) -> the identity keys of the fields that had it.
    """

    versions: tuple[SchemaVersion, ...]
    field_history: tuple[FieldHistoryRow, ...]
    current_version: int
    names_had: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False)

    def __getitem__(self, version: int) -> SchemaVersion:
        """The version ``version``.

        Raises:
            SchemaLogError: code ``unknown_version`` when the log has no such seq.
        """
        if (
            isinstance(version, bool)
            or not isinstance(version, int)
            or not 1 <= version <= len(self.versions)
        ):
            raise SchemaLogError(
                f"version {version!r} is not in this schema log (versions 1..{len(self.versions)})",
                code="unknown_version",
            )
        return self.versions[version - 1]

    def __iter__(self) -> Iterator[SchemaVersion]:
        return iter(self.versions)

    def __len__(self) -> int:
        return len(self.versions)

    def lens(self, version: int) -> Lens:
        """The lens at ``version`` (raises SchemaLogError for an unknown version)."""
        if type(version) is int and 0 < version <= len(self.versions):  # the hot path: no checks to repeat
            return self.versions[version - 1].lens
        return self[version].lens

    @cached_property
    def created_writes(self) -> tuple[Mapping[str, tuple[int, None]], ...]:
        """Per version (v at index v - 1), the writes a create at v starts from: every field of
        lens(v) null, written at v (SEMANTICS.md section 4: a key the create leaves out is null).
        Built once per schema; a create copies its version's. Keyed by field identity
        (:attr:`LensField.key`), as every state's writes are."""
        return tuple({f.key: (v.version, None) for f in v.lens} for v in self.versions)

    def may_rename(self, name: str, to: str) -> bool:
        """Whether a migration at the next version could rename the visible field ``name`` to
        ``to`` (SEMANTICS.md section 2: ``to`` is a field name that no other field of the log has
        had, and no field of the current lens or its removed fields has now)."""
        current = self.versions[self.current_version - 1]
        field_ = current.lens.get(name)
        return field_ is not None and is_field_name(to) and \
            _name_free(to, field_.key, current.lens.names, {f.name for f in current.hidden}, self.names_had)

    @cached_property
    def write_keys(self) -> tuple[Mapping[str, str] | None, ...]:
        """Per version (v at index v - 1), field name -> identity key for the fields of lens(v)
        when a rename made any of them differ, else None (a write's names are its keys)."""
        return tuple({f.name: f.key for f in v.lens} if any(f.key != f.name for f in v.lens) else None
                     for v in self.versions)

    @cached_property
    def cascading(self) -> frozenset[tuple[int, str]]:
        """(version, field key) of every relation field with ``cascade: true`` in the lens of that
        version: the values that cascade (SEMANTICS.md section 5), looked up once per schema."""
        return frozenset((v.version, f.key) for v in self.versions for f in v.lens
                         if f.cascade and f.type.is_relation)

    @cached_property
    def cascading_names(self) -> tuple[str, ...]:
        """The identity keys of the fields in :attr:`cascading`, each once: the only writes a
        cascade looks at."""
        return tuple(sorted({key for _, key in self.cascading}))

    @property
    def meta(self) -> SchemaMeta:
        """The schema metadata at the current version (name, description, ...)."""
        return self[self.current_version].meta

    @property
    def abandoned(self) -> frozenset[int]:
        """The abandoned versions."""
        return frozenset(v.version for v in self.versions if v.abandoned)

    def gold_versions(self) -> tuple[int, ...]:
        """The versions that have a gold table, ascending (SEMANTICS.md section 5)."""
        return tuple(v.version for v in self.versions if v.has_gold_table)

    def lineage(self, version: int) -> tuple[int, ...]:
        """The versions from 1 to ``version`` along parents, ascending, ``version`` included."""
        chain = [self[version].version]
        while (parent := self[chain[-1]].parent) is not None:
            chain.append(parent)
        return tuple(reversed(chain))


# --------------------------------------------------------------------------------------------------
# Building the versions


@dataclass(frozen=True)
class _State:
    """What a version hands on to its children: visible fields, hidden fields, metadata."""

    lens: Lens
    hidden: Mapping[str, LensField]
    meta: SchemaMeta


@dataclass
class _Names:
    """What the log's valid migrations did to names, abandoned or not: for each name, the keys of
    the fields that have had it; the keys of the fields renamed at least once."""

    had: dict[str, set[str]] = field(default_factory=dict)
    renamed: set[str] = field(default_factory=set)

    def copy(self) -> _Names:
        return _Names({name: set(keys) for name, keys in self.had.items()}, set(self.renamed))


def build_versions(
    messages: Sequence[tuple[int, SchemaMessage]],
    *,
    rejected: Mapping[int, str] | None = None,
) -> SchemaVersions:
    """Replay one schema log into its versions (SEMANTICS.md section 2).

    Args:
        messages: ``(seq_num, message)`` for every accepted schema message of the log, in any
            order; seq 1 must be a :class:`SchemaMeta`.
        rejected: ``seq_num -> reason code`` for the entries of the log's accepted prefix whose
            message the caller rejected (did not decode, or is not a schema message). Such a seq
            is still a version: it keeps the previous lens.

    Returns:
        The versions 1..k, where the seqs of ``messages`` and ``rejected`` together must be
        exactly 1..k.

    Raises:
        SchemaLogError: ``not_a_schema_log``, ``bad_seq`` or ``not_a_schema_message``.
    """
    rejected = dict(rejected or {})
    by_seq: dict[int, SchemaMessage] = {}
    for seq, given in messages:
        if seq in by_seq or seq in rejected:
            raise SchemaLogError(f"seq {seq} is given twice", code="bad_seq")
        if not isinstance(given, (SchemaMeta, SchemaMigration, SchemaRevert)):
            raise SchemaLogError(
                f"seq {seq} holds a {type(given).__name__}, not a schema message", code="not_a_schema_message"
            )
        by_seq[seq] = given
    count = len(by_seq) + len(rejected)
    if set(by_seq) | set(rejected) != set(range(1, count + 1)):
        raise SchemaLogError(
            f"the seqs of a schema log must be exactly 1..{count}, got {sorted(set(by_seq) | set(rejected))}",
            code="bad_seq",
        )
    first = by_seq.get(1)
    if not isinstance(first, SchemaMeta):
        raise SchemaLogError("seq 1 of a schema log must be a schema-meta message", code="not_a_schema_log")

    states: dict[int, _State] = {}
    names = _Names()
    abandoned_by: dict[int, int] = {}
    rows: list[FieldHistoryRow] = []
    versions: list[SchemaVersion] = []
    for seq in range(1, count + 1):
        message = by_seq.get(seq)
        previous = states[seq - 1] if seq > 1 else _State(EMPTY_LENS, {}, first)
        state, parent = previous, (seq - 1 if seq > 1 else None)
        status: VersionStatus
        reason: str | None = None
        explanation: str | None = None
        target: int | None = None
        if message is None:
            status, reason = "rejected", rejected[seq]
            explanation = f"the message at seq {seq} was rejected ({reason})"
        elif isinstance(message, SchemaMeta):
            status, state = "meta", _State(previous.lens, previous.hidden, message)
        elif isinstance(message, SchemaMigration):
            try:
                state, new_rows, names_after = _apply_migration(seq, previous, message, names)
            except MessageError as exc:
                status, reason, explanation = "invalid", exc.code, str(exc)
            else:
                status, names = "valid", names_after
                rows.extend(new_rows)
        else:
            target = message.target
            if isinstance(target, bool) or not isinstance(target, int) or not 1 <= target < seq:
                status, reason = "ignored_revert", "bad_target"
                explanation = f"target {target!r} is not an earlier version of the log (1..{seq - 1})"
            elif target in abandoned_by:
                status, reason = "ignored_revert", "target_abandoned"
                by = abandoned_by[target]
                explanation = (
                    f"target {target} was abandoned: the revert at version {by} already went back to "
                    f"version {versions[by - 1].target}"
                )
            else:
                status, state, parent = "revert", states[target], target
                for version in range(target + 1, seq):
                    abandoned_by.setdefault(version, seq)
        states[seq] = state
        versions.append(
            SchemaVersion(
                version=seq,
                kind=None if message is None else message.kind,
                status=status,
                lens=state.lens,
                parent=parent,
                abandoned=False,
                abandoned_by=None,
                reason=reason,
                message=explanation,
                target=target,
                meta=state.meta,
                hidden=tuple(state.hidden.values()),
            )
        )
    final = tuple(
        replace(v, abandoned=True, abandoned_by=abandoned_by[v.version]) if v.version in abandoned_by else v
        for v in versions
    )
    return SchemaVersions(versions=final, field_history=tuple(rows), current_version=max(by_seq),
                          names_had={name: frozenset(keys) for name, keys in names.had.items()})


def _apply_migration(
    version: int, previous: _State, migration: SchemaMigration, names: _Names
) -> tuple[_State, list[FieldHistoryRow], _Names]:
    """Apply a migration's changes in order to the previous state; ``names`` is what the log's
    earlier valid migrations did to names (left as it is: the migration's own come back).

    Raises:
        MessageError: the first change that makes the whole migration invalid (code = reason).
    """
    if not migration.fields:
        raise MessageError(
            "a migration needs at least one field change", code="empty_migration", path="fields"
        )
    visible: dict[str, LensField] = {f.name: f for f in previous.lens}
    hidden: dict[str, LensField] = dict(previous.hidden)
    names = names.copy()
    rows: list[FieldHistoryRow] = []
    for position, change in enumerate(migration.fields):
        path = f"fields[{position}]"
        name = change.name
        if not is_field_name(name):
            raise MessageError(
                f"{name!r} is not a field name (^[a-z][a-z0-9_]{{0,63}}$)",
                code="bad_field_name",
                path=f"{path}.name",
            )
        if change.action == "create":
            result = _create(change, visible, hidden, path=path)
            removed = hidden.pop(name, None)
            if removed is not None:
                key = removed.key  # the removed field's identity comes back
            elif name in names.renamed:
                key = f"{name}@{version}.{position}"  # a rename left the name: a new field
            else:
                key = name
            result = replace(result, key=key)
            visible[name] = result
            names.had.setdefault(name, set()).add(key)
        elif change.action == "rename":
            _require_visible(change, visible, hidden, path=path)
            result = _rename(change, visible, hidden, names, path=path)
            visible = {(result.name if n == name else n): (result if n == name else f) for n, f in visible.items()}
            names.had.setdefault(result.name, set()).add(result.key)
            names.renamed.add(result.key)
        elif change.action == "update":
            _require_visible(change, visible, hidden, path=path)
            result = _update(change, visible[name], path=path)
            visible[name] = result
        elif change.action == "remove":
            _require_visible(change, visible, hidden, path=path)
            removed = visible.pop(name)
            hidden[name] = removed
            result = LensField(name, removed.type, schema=removed.schema, cascade=removed.cascade)
        else:
            raise MessageError(f"unknown action {change.action!r}", code="bad_action", path=f"{path}.action")
        rows.append(
            FieldHistoryRow(
                version=version,
                position=position,
                name=name,
                action=change.action,
                type=str(result.type),
                validation=result.validation,
                default=result.default,
                schema=result.schema,
                cascade=result.cascade,
                to=change.to if change.action == "rename" else None,
            )
        )
    return _State(Lens(tuple(visible.values())), hidden, previous.meta), rows, names


def _rename(change: FieldChange, visible: Mapping[str, LensField], hidden: Mapping[str, LensField],
            names: _Names, *, path: str) -> LensField:
    """The visible field ``change.name`` under its new name ``change.to``: same identity, type,
    validation, default, relation (SEMANTICS.md section 2)."""
    current, to = visible[change.name], change.to
    if not is_field_name(to):
        raise MessageError(f"{to!r} is not a field name (^[a-z][a-z0-9_]{{0,63}}$)", code="bad_field_name",
                           path=f"{path}.to")
    assert to is not None
    if not _name_free(to, current.key, visible, hidden, names.had):
        now = "is a visible field" if to in visible else "is a removed field" if to in hidden else "was another field's"
        raise MessageError(
            f"cannot rename {change.name!r} to {to!r}: {to!r} {now}, and a name never stands for two fields",
            code="name_taken",
            path=f"{path}.to",
        )
    return replace(current, name=to)


def _name_free(to: str, key: str, visible: Collection[str], hidden: Collection[str],
               had: Mapping[str, Collection[str]]) -> bool:
    """Whether the field of identity ``key`` may be renamed to ``to``: no visible or removed field
    is called ``to``, and no other field has been."""
    return to not in visible and to not in hidden and not set(had.get(to, ())) - {key}


def _require_visible(
    change: FieldChange, visible: Mapping[str, LensField], hidden: Mapping[str, LensField], *, path: str
) -> None:
    if change.name in visible:
        return
    if change.name in hidden:
        raise MessageError(
            f"cannot {change.action} {change.name!r}: it was removed", code="field_removed", path=path
        )
    raise MessageError(
        f"cannot {change.action} {change.name!r}: no such field", code="no_such_field", path=path
    )


def _create(
    change: FieldChange, visible: Mapping[str, LensField], hidden: Mapping[str, LensField], *, path: str
) -> LensField:
    if change.name in visible:
        raise MessageError(f"field {change.name!r} already exists", code="field_exists", path=path)
    if change.type is None:
        raise MessageError("a created field needs a type", code="bad_type", path=f"{path}.type")
    field_type = parse_type(change.type, path=f"{path}.type")
    removed = hidden.get(change.name)
    if removed is not None and removed.type != field_type:
        raise MessageError(
            f"field {change.name!r} was removed as {removed.type}; it can only come back as {removed.type}, "
            f"not {field_type}",
            code="type_changed_on_recreate",
            path=f"{path}.type",
        )
    if field_type.is_relation:
        if change.schema is None:
            raise MessageError(
                f"a {field_type} field needs a target schema", code="missing_schema", path=path
            )
        schema, cascade = change.schema, change.cascade
    else:
        _forbid_relation_keys(change, field_type, path=path)
        schema, cascade = None, False
    return _with_default(
        change,
        LensField(change.name, field_type, _validation(change.validation, field_type, path=path), None, schema,
                  cascade),
        path=path,
    )


def _update(change: FieldChange, current: LensField, *, path: str) -> LensField:
    field_type = current.type if change.type is None else parse_type(change.type, path=f"{path}.type")
    if field_type.is_relation:
        schema = change.schema if change.schema is not None else current.schema
        if schema is None:
            raise MessageError(
                f"a {field_type} field needs a target schema", code="missing_schema", path=path
            )
        cascade = change.cascade or (change.schema is None and current.cascade)
    else:
        _forbid_relation_keys(change, field_type, path=path)
        schema, cascade = None, False
    if not change.has_default:
        raise MessageError(
            f"an update of {change.name!r} needs a default (stored where converting an old value fails)",
            code="missing_default",
            path=f"{path}.default",
        )
    validation = current.validation if change.validation is None else change.validation
    return _with_default(
        change,
        LensField(change.name, field_type, _validation(validation, field_type, path=path), None, schema, cascade,
                  current.key),
        path=path,
    )


def _forbid_relation_keys(change: FieldChange, field_type: FieldType, *, path: str) -> None:
    if change.schema is not None or change.cascade:
        raise MessageError(
            f"schema and cascade belong to relation fields, not {field_type}",
            code="schema_not_allowed",
            path=path,
        )


def _validation(validation: str | None, field_type: FieldType, *, path: str) -> str | None:
    """The validation a created or updated field gets: ``None`` for none (``""`` removes one)."""
    if not validation:
        return None
    if not field_type.is_text:
        raise MessageError(
            f"validation is only allowed on varchar, text and their arrays, not {field_type} (an update "
            "keeps the field's validation unless it says validation: \"\")",
            code="validation_not_allowed",
            path=f"{path}.validation",
        )
    compile_validation(validation, path=f"{path}.validation")
    return validation


def _with_default(change: FieldChange, lens_field: LensField, *, path: str) -> LensField:
    if not change.has_default:
        return lens_field
    try:
        default = check_value(lens_field, change.default, path=f"{path}.default")
    except MessageError as exc:
        raise MessageError(
            f"the default does not fit {lens_field.type}: {exc.message}",
            code="bad_default",
            path=f"{path}.default",
        ) from None
    return replace(lens_field, default=default)


# --------------------------------------------------------------------------------------------------
# Translation (SEMANTICS.md section 4)


def translate(sv: SchemaVersions, field: str, value: Any, from_version: int, to_version: int) -> Any:
    """Show a value written at ``from_version`` at ``to_version`` (SEMANTICS.md section 4).

    Compares the field in lens(from_version) with the field in lens(to_version)
    (:func:`lakehouse.core.lenses.translate_value`), the same identity whatever its name at each;
    the versions in between do not matter.

    Args:
        sv: the schema's versions.
        field: the field's identity (:attr:`LensField.key`: its name unless a rename touched it).
        value: the canonical value written at ``from_version``, ``None``, or
            :data:`~lakehouse.core.lenses.ABSENT` when no write set the field.
        from_version: the version the write named (not abandoned).
        to_version: the version to show the value at (not abandoned).

    Returns:
        :data:`~lakehouse.core.lenses.NOT_SHOWN` when lens(to_version) does not show ``field``;
        else its canonical value at ``to_version``.

    Raises:
        SchemaLogError: code ``unknown_version`` or ``abandoned_version``.
    """
    for version in (from_version, to_version):
        if sv[version].abandoned:
            raise SchemaLogError(
                f"version {version} was abandoned by the revert at version {sv[version].abandoned_by}",
                code="abandoned_version",
            )
    return translate_value(value, sv.lens(from_version).by_key(field), sv.lens(to_version).by_key(field))


def project(sv: SchemaVersions, writes: Mapping[str, tuple[int, Any]], to_version: int) -> dict[str, Any]:
    """One gold row's field values at ``to_version`` (SEMANTICS.md section 5).

    Args:
        sv: the schema's versions.
        writes: field identity (:attr:`LensField.key`) -> (version named by the latest applied
            write that set the field, its canonical value or ``None``). A create sets every field
            of its lens (a key it lacks is ``None``); fields no write set are left out and show
            their default.
        to_version: the version of the gold table (not abandoned).

    Returns:
        Field name -> canonical value, for every field of lens(to_version), in lens order.

    Raises:
        SchemaLogError: code ``unknown_version`` or ``abandoned_version``.
    """
    row: dict[str, Any] = {}
    for lens_field in sv.lens(to_version):
        from_version, value = writes.get(lens_field.key, (to_version, ABSENT))
        row[lens_field.name] = translate(sv, lens_field.key, value, from_version, to_version)
    return row
