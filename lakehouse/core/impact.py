"""What a schema migration would do to the values the lake holds, before it is published (issue 19).

A migration changes no stored write: it adds a version whose lens shows every stored value anew
(SEMANTICS.md section 4, :func:`lakehouse.core.lenses.translate_value`). For each live instance
and each field, the value its gold row shows at the current version is compared with the one it
would show at the new version (:func:`field_outcomes`):

- ``kept``: the field is in both lenses and shows the same value;
- ``renamed``: the same, under another name (a ``rename``: the field is one identity,
  SEMANTICS.md section 2, and nothing is lost);
- ``converted``: it shows another value, the stored one converted (or another default);
- ``defaulted``: it shows the new default, because converting the stored value or validating it
  failed;
- ``hidden``: the new lens lacks the field, and it showed a value (not null);
- ``shown_again``: the current lens lacks the field (removed earlier), the new one has it again,
  and a stored value shows again (``defaulted`` when it no longer converts).

Fields are matched by identity, not name: a renamed field is compared with itself, and a field
created under a name a rename left is a new field. A field of the new lens that neither lens had
before, or that no stored write set, shows its default on every row: nothing stored is affected,
and it is not counted.

A **revert** also changes which write a field shows: the updates it ignores (those at the versions
it abandons) no longer count, and the instance's state is folded again without them. Its outcomes
compare the value shown now with the one the state after the revert shows at the new version, and
add:

- ``restored``: the field showed a value an ignored update wrote; it shows the earlier write's
  value again (or the default, when no earlier write set it). ``defaulted`` when that value no
  longer converts.

Pure: no Spark, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lakehouse.core.lenses import ABSENT, LensField, translate_value, translation
from lakehouse.core.schemas import SchemaMessage, SchemaVersions, build_versions

OUTCOMES = ("kept", "renamed", "converted", "restored", "defaulted", "hidden", "shown_again")
EXAMPLES = 3  # instances kept as examples per field and outcome


def with_message(messages: Sequence[tuple[int, SchemaMessage]], rejected: Mapping[int, str],
                 message: SchemaMessage) -> tuple[SchemaVersions, int]:
    """The schema's versions as they would be with ``message`` as the next entry of its log.

    Args:
        messages, rejected: the log's accepted prefix, as :func:`lakehouse.core.schemas.build_versions`
            takes it.

    Returns:
        (the versions, the new version: the seq the message would take).
    """
    seq = max([0, *(s for s, _ in messages), *rejected]) + 1
    return build_versions([*messages, (seq, message)], rejected=rejected), seq


def _same(a: Any, b: Any) -> bool:
    """Whether two shown values are the same value of the same type (``1`` is not ``1.0``, NaN is NaN)."""
    return repr(a) == repr(b)


def field_outcomes(sv: SchemaVersions, current: int, new: int, writes: Mapping[str, tuple[int, Any]],
                   after_writes: Mapping[str, tuple[int, Any]] | None = None) -> Iterator[tuple[str, str, Any, Any]]:
    """What showing one live instance at version ``new`` instead of ``current`` does to each field
    (module docstring).

    Args:
        sv: the schema's versions, ``new`` among them (:func:`with_message`).
        current, new: the two versions compared.
        writes: the instance's state (:attr:`lakehouse.core.gold.InstanceState.writes`).
        after_writes: its state once the message is applied, when that differs (a revert's, folded
            without the updates it ignores); None: ``writes``.

    Yields:
        (field name, outcome, value shown at ``current`` or None, value shown at ``new`` or None);
        the name is the one lens(``new``) shows (lens(``current``)'s for ``hidden``).
    """
    after_writes = writes if after_writes is None else after_writes
    before_lens, after_lens = sv.lens(current), sv.lens(new)
    for shown in after_lens:
        key = shown.key
        value, written = _stored(sv, after_writes, key)
        after, failed = translation(value, written, shown)
        previous = before_lens.by_key(key)
        if previous is None:
            if value is not ABSENT and value is not None:
                yield shown.name, "defaulted" if failed else "shown_again", None, after
            continue
        before = translate_value(*_stored(sv, writes, key), previous)
        if _same(before, after):
            yield shown.name, "kept" if previous.name == shown.name else "renamed", before, after
        elif failed:
            yield shown.name, "defaulted", before, after
        elif _same(writes.get(key), after_writes.get(key)):
            yield shown.name, "converted", before, after
        else:
            yield shown.name, "restored", before, after
    for previous in before_lens:
        if after_lens.by_key(previous.key) is None:
            before = translate_value(*_stored(sv, writes, previous.key), previous)
            if before is not None:
                yield previous.name, "hidden", before, None


def _stored(sv: SchemaVersions, writes: Mapping[str, tuple[int, Any]], key: str) -> tuple[Any, LensField | None]:
    """A field's latest write in ``writes`` (by identity): (its value, the field as the version written
    at has it), or (``ABSENT``, None) when no write set it."""
    entry = writes.get(key)
    return (ABSENT, None) if entry is None else (entry[1], sv.lens(entry[0]).by_key(key))


@dataclass
class FieldImpact:
    """One field's outcomes over every live instance.

    Attributes:
        name: the field.
        counts: outcome -> instances.
        examples: outcome -> up to :data:`EXAMPLES` (instance id, shown before, shown after).
    """

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[tuple[str, Any, Any]]] = field(default_factory=dict)

    def add(self, outcome: str, count: int, examples: Sequence[tuple[str, Any, Any]]) -> None:
        """Count ``count`` more instances with ``outcome``, keeping the first examples."""
        self.counts[outcome] = self.counts.get(outcome, 0) + count
        kept = self.examples.setdefault(outcome, [])
        kept.extend(examples[:EXAMPLES - len(kept)])


def impact_of(sv: SchemaVersions, current: int, new: int,
              states: Iterable[tuple[str, Mapping[str, tuple[int, Any]], Mapping[str, tuple[int, Any]] | None]]
              ) -> dict[str, FieldImpact]:
    """The outcomes of every field over live instances, by field name.

    Args:
        states: ``(instance id, writes, writes after or None)`` (:func:`field_outcomes`).
    """
    fields: dict[str, FieldImpact] = {}
    for instance, writes, after_writes in states:
        for name, outcome, before, after in field_outcomes(sv, current, new, writes, after_writes):
            fields.setdefault(name, FieldImpact(name)).add(outcome, 1, [(instance, before, after)])
    return fields
