"""The outcomes a migration has on stored values (lakehouse.core.impact), one field at a time."""

from __future__ import annotations

from lakehouse.core.impact import EXAMPLES, field_outcomes, impact_of, with_message
from lakehouse.core.messages import FieldChange, SchemaMeta, SchemaMigration, SchemaRevert

MESSAGES = [
    (1, SchemaMeta("people")),
    (2, SchemaMigration((FieldChange("name", "create", "text"), FieldChange("age", "create", "text"),
                         FieldChange("note", "create", "text"), FieldChange("city", "create", "text")))),
    (3, SchemaMigration((FieldChange("note", "remove"),))),
]
NEXT = SchemaMigration((
    FieldChange("age", "update", "integer", validation="", default=0, has_default=True),
    FieldChange("name", "update", validation="^[A-Z]", default="X", has_default=True),
    FieldChange("note", "create", "text"),  # shown again
    FieldChange("city", "remove"),
    FieldChange("fresh", "create", "integer", default=7, has_default=True),  # nothing stored: not counted
))


def outcomes(writes: dict[str, tuple[int, object]]) -> dict[str, tuple[str, object, object]]:
    sv, version = with_message(MESSAGES, {}, NEXT)
    return {name: (outcome, before, after) for name, outcome, before, after in field_outcomes(sv, 3, version, writes)}


def test_each_field_is_kept_converted_defaulted_hidden_or_shown_again() -> None:
    assert outcomes({"name": (2, "Ann"), "age": (2, "41"), "note": (2, "hi"), "city": (2, "Oslo")}) == {
        "name": ("kept", "Ann", "Ann"), "age": ("converted", "41", 41), "note": ("shown_again", None, "hi"),
        "city": ("hidden", "Oslo", None)}
    assert outcomes({"name": (2, "bob"), "age": (2, "old"), "note": (2, None), "city": (2, None)}) == {
        "name": ("defaulted", "bob", "X"), "age": ("defaulted", "old", 0)}


def test_a_field_no_write_set_shows_its_default_at_both_or_the_new_one() -> None:
    # age's default goes from null to 0: every row shows another value, not from a failed conversion
    assert outcomes({}) == {"name": ("converted", None, "X"), "age": ("converted", None, 0)}


def test_an_invalid_migration_is_judged_as_silver_would() -> None:
    sv, version = with_message(MESSAGES, {}, SchemaMigration((FieldChange("name", "create", "text"),)))
    assert (version, sv[version].status, sv[version].reason) == (4, "invalid", "field_exists")
    _, after_gap = with_message(MESSAGES, {4: "bad_message"}, NEXT)
    assert after_gap == 5  # a rejected seq still holds its place in the log


def test_impact_counts_every_instance_and_keeps_a_few_examples() -> None:
    sv, version = with_message(MESSAGES, {}, NEXT)
    states = ((f"i{n}", {"age": (2, str(n) if n % 2 else "x")}, None) for n in range(10))
    fields = impact_of(sv, 3, version, states)
    assert fields["age"].counts == {"converted": 5, "defaulted": 5}
    assert [e[0] for e in fields["age"].examples["defaulted"]] == ["i0", "i2", "i4"][:EXAMPLES]
    assert fields["name"].counts == {"converted": 10}  # no name stored: null before, the default after


def test_a_revert_restores_the_values_the_updates_it_ignores_had_replaced() -> None:
    # version 4 makes age an integer; the revert to 3 ignores the updates written at 4
    messages = [*MESSAGES, (4, SchemaMigration((FieldChange("age", "update", "integer", validation="", default=0,
                                                             has_default=True),)))]
    sv, version = with_message(messages, {}, SchemaRevert(3))
    assert (version, sv[version].status, sv[4].abandoned) == (5, "revert", True)
    before = {"name": (2, "Ann"), "age": (4, 41), "city": (2, "Oslo")}
    after = {"name": (2, "Ann"), "age": (2, "40"), "city": (2, "Oslo")}  # folded without the update at 4
    got = {name: (outcome, b, a) for name, outcome, b, a in field_outcomes(sv, 4, version, before, after)}
    assert got == {"name": ("kept", "Ann", "Ann"), "age": ("restored", 41, "40"), "city": ("kept", "Oslo", "Oslo")}
    # no earlier write of age: the default comes back; an unchanged write shown alike is kept
    got = {name: o for name, o, _, _ in field_outcomes(sv, 4, version, {"age": (4, 41)}, {})}
    assert got == {"name": "kept", "age": "restored", "city": "kept"}
    got = {name: o for name, o, _, _ in field_outcomes(sv, 4, version, {"age": (2, "7")}, {"age": (2, "7")})}
    assert got["age"] == "converted"  # the same write, shown through another lens
