"""The history generator (tests.simulate): deterministic, and showing what it claims.

What a history claims to hold is checked with the reference model: a knob turned up on an
otherwise clean history must leave its mark in the tables (a fork in ``silver.logs``, an ignored
message, a cascade, a rejected line, ...).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from random import Random
from typing import Any

import pytest
from hypothesis import given, settings

from lakehouse.core.reference import Reference, reference
from tests.histories import histories
from tests.simulate import CLAIMS, Knobs, generate, simulate, split_batches, write_landing

LENS_CODES = {
    "unknown_field",
    "wrong_type",
    "too_long",
    "out_of_range",
    "validation_failed",
    "bad_value",
    "too_large",
}
LINE_CODES = ("not_json", "bad_hex", "missing_payload", "bad_signature", "wrong_payload")


def code_of_message(code: str) -> Callable[[Reference], bool]:
    return lambda ref: any(m.reason_code == code for m in ref.messages)


def code_of_line(code: str) -> Callable[[Reference], bool]:
    return lambda ref: any(line.reason_code == code for line in ref.lines)


def duplicated(ref: Reference) -> bool:
    return any(n > 1 for n in Counter(line.entry_hash for line in ref.lines if line.accepted).values())


def recreated(ref: Reference) -> bool:
    removed = set()
    for row in ref.schema_fields:
        if row.action == "remove":
            removed.add((row.schema, row.name))
        elif row.action == "create" and (row.schema, row.name) in removed:
            return True
    return False


def renamed(ref: Reference) -> bool:
    return any(row.action == "rename" and row.renamed_to for row in ref.schema_fields)


def renamed_back(ref: Reference) -> bool:
    away = set()
    for row in ref.schema_fields:  # by schema, version, position
        if row.action == "rename":
            if (row.schema, row.renamed_to) in away:
                return True
            away.add((row.schema, row.name))
    return False


def created_after_rename(ref: Reference) -> bool:
    away = set()
    for row in ref.schema_fields:
        if row.action == "rename":
            away.add((row.schema, row.name))
        elif row.action == "create" and (row.schema, row.name) in away:
            return True
    return False


def old_version(ref: Reference) -> bool:
    current = {str(sid): sv.current_version for sid, sv in ref.schemas.items()}
    return any(
        m.status == "applied"
        and m.kind in ("create", "update")
        and (m.version or 0) < current[m.schema or ""]
        for m in ref.messages
    )


# claim -> (the knobs that make it likely on a clean history, what the tables show)
EVIDENCE: dict[str, tuple[dict[str, Any], Callable[[Reference], bool]]] = {
    "gap": (
        {"gap": 0.2},
        lambda ref: any(
            m.status == "pending" and (m.waits_for or "").startswith("log ") for m in ref.messages
        ),
    ),
    "fork": ({"fork": 0.2}, lambda ref: any(log.fork_seq for log in ref.logs)),
    "wrong_backlink": ({"bad_link": 0.3}, code_of_message("wrong_backlink")),
    "wrong_skiplink": ({"bad_link": 0.3}, code_of_message("wrong_skiplink")),
    "duplicate": ({"duplicate": 0.3}, duplicated),
    **{code: ({"malformed": 0.6}, code_of_line(code)) for code in LINE_CODES},
    "after_end_of_feed": ({"end_of_feed": 1.0}, code_of_message("after_end_of_feed")),
    "invalid_migration": (
        {"invalid_migration": 0.5},
        lambda ref: any(v.status == "invalid" for v in ref.schema_versions),
    ),
    "revert": ({"revert": 0.5}, lambda ref: any(v.status == "revert" for v in ref.schema_versions)),
    "ignored_revert": (
        {"revert": 0.5, "ignored_revert": 0.5},
        lambda ref: any(v.status == "ignored_revert" for v in ref.schema_versions),
    ),
    "meta_update": (
        {"meta_update": 0.5},
        lambda ref: any(v.kind == "schema-meta" and v.version > 1 for v in ref.schema_versions),
    ),
    "recreate": ({}, recreated),
    "rename": ({}, renamed),
    "rename_back": ({}, renamed_back),
    "create_after_rename": ({}, created_after_rename),
    "old_version": ({}, old_version),
    "bad_value": ({"bad_value": 0.3}, lambda ref: any(m.reason_code in LENS_CODES for m in ref.messages)),
    "unauthorised": ({"unauthorised": 0.3}, code_of_message("unknown_instance")),
    "abandoned_write": (
        {"revert": 0.5, "abandoned_write": 0.5},
        lambda ref: any(m.status == "ignored" and m.kind == "create" for m in ref.messages),
    ),
    "future_version": (
        {"future_version": 0.3},
        lambda ref: any(m.status == "pending" and (m.waits_for or "").startswith("schema ") for m in ref.messages),
    ),
    **{
        code: ({"stray": 0.5}, code_of_message(code))
        for code in ("not_cbor", "wrong_log", "no_log_purpose", "not_a_schema")
    },
    "cascade_delete": ({"delete": 0.3}, lambda ref: any(i.cascaded for i in ref.instances.values())),
}


def test_every_claim_has_its_evidence() -> None:
    assert set(EVIDENCE) == set(CLAIMS)


@pytest.mark.parametrize("claim", sorted(EVIDENCE))
def test_a_history_shows_what_it_claims(claim: str) -> None:
    overrides, shows = EVIDENCE[claim]
    claimed = 0
    for seed in range(3):
        history = simulate(Knobs.clean(messages=60, migrations=8, **overrides), seed)
        if history.claims[claim]:
            claimed += 1
            assert shows(reference(history.lines)), (
                f"seed {seed} claims {claim} but the tables do not show it"
            )
    assert claimed, f"no history claims {claim}"


def test_a_clean_history_is_all_applied() -> None:
    history = simulate(Knobs.clean(), 5)
    assert set(history.claims) <= {"old_version", "recreate", "cascade_delete", "rename", "rename_back",
                                   "create_after_rename"}
    assert {(m.status, m.reason_code) for m in reference(history.lines).messages} == {("applied", None)}


@settings(max_examples=20, deadline=None)
@given(history=histories())
def test_line_defects_are_always_there(history: Any) -> None:
    assert set(history.claims) <= set(CLAIMS)
    ref = reference(history.lines)
    for code in LINE_CODES:
        assert sum(line.reason_code == code for line in ref.lines) == history.claims[code]
    if history.claims["duplicate"]:
        assert duplicated(ref)


def test_the_same_seed_gives_the_same_history() -> None:
    assert simulate(Knobs(), 7) == simulate(Knobs(), 7)
    assert simulate(Knobs(), 7).lines != simulate(Knobs(), 8).lines
    assert generate(50, seed=3) == generate(50, seed=3)


def test_names_register_every_schema() -> None:
    history = simulate(Knobs.clean(schemas=3), 1)
    ref = reference(history.lines)
    assert set(history.names) == set(ref.schemas)
    assert sorted(history.names.values()) == ["s0", "s1", "s2"]


def test_realistic_histories_are_mostly_valid_at_mixed_versions() -> None:
    lines = generate(3000, seed=1)
    assert len(lines) == 3000 + 3 * 9  # three schemas of a schema-meta and eight more messages
    ref = reference(lines)
    statuses = Counter(m.status for m in ref.messages)
    assert statuses["applied"] > 0.95 * len(ref.messages)
    assert len({m.author for m in ref.messages}) == 15
    applied = [m for m in ref.messages if m.status == "applied" and m.kind in ("create", "update")]
    for sid in ref.schemas:
        assert len({m.version for m in applied if m.schema == str(sid)}) >= 3
    assert {"create", "update", "delete"} <= {m.kind for m in ref.messages}


def test_knobs_are_checked() -> None:
    with pytest.raises(ValueError, match="probability"):
        Knobs(gap=1.5)
    with pytest.raises(ValueError, match="authors"):
        Knobs(authors=0)


def test_split_batches_deals_every_line_once() -> None:
    lines = list(simulate(Knobs(), 2).lines)
    batches = split_batches(lines, 4, Random(9))
    assert len(batches) == 4
    assert sorted(map(json.dumps, (line for batch in batches for line in batch))) == sorted(
        map(json.dumps, lines)
    )
    assert batches == split_batches(lines, 4, Random(9))
    with pytest.raises(ValueError):
        split_batches(lines, 0, Random(9))


def test_write_landing_writes_json_lines_files(tmp_path: Path) -> None:
    lines = list(simulate(Knobs(malformed=0.5), 3).lines)
    files = write_landing(lines, tmp_path / "landing", lines_per_file=10)
    assert [f.name for f in files] == [f"landing-{n:05d}.jsonl" for n in range(len(files))]
    assert len(files) == -(-len(lines) // 10)
    read = [raw for f in files for raw in f.read_text(encoding="utf-8").splitlines()]
    assert read == [line if isinstance(line, str) else json.dumps(line) for line in lines]


def semantic_cases(ref: Reference) -> set[str]:
    """The cases of SEMANTICS.md sections 3-5 that a reference shows (what the property tests must meet)."""
    found: set[str] = set()
    if any(value is None for i in ref.instances.values() for _, value in i.writes.values()):
        found.add("null")
    history: dict[tuple[str, str], list[Any]] = {}
    for row in ref.schema_fields:
        history.setdefault((row.schema, row.name), []).append(row)
    for rows in history.values():
        types = [r.type for r in rows]
        if any(types[j] == types[i] != types[i + 1] for i in range(len(types) - 1) for j in range(i + 2, len(types))):
            found.add("detour")
        if any(b.action == "update" and b.validation is not None and b.validation == a.validation
               for a, b in zip(rows, rows[1:], strict=False)):
            found.add("validation_kept")
        if any(r.name == "parent" and r.action == "remove" for r in rows):
            found.add("parent_removed")
    if "parent_removed" in found and any(i.cascaded for i in ref.instances.values()):
        found.add("cascade_then_removal")
    if any(log.purpose == "schema" and log.fork_seq for log in ref.logs):
        found.add("forked_schema")
    found |= {"unreachable_version", "ignored_instance"} & {m.reason_code for m in ref.messages}
    by_log: dict[tuple[str, int], list[Any]] = {}
    for m in sorted(ref.messages, key=lambda m: m.seq_num):
        by_log.setdefault((m.author, m.log_id), []).append(m)
    for messages in by_log.values():
        first_pending = next((m.seq_num for m in messages if m.status == "pending" and m.log_status == "accepted"),
                             None)
        if first_pending is not None and any(m.status == "applied" and m.seq_num > first_pending for m in messages):
            found.add("past_pending")
    return found


def test_generated_histories_reach_every_case_of_the_semantics() -> None:
    """Nulls, type detours, validation-keeping updates, cascades then the removal of their field,
    forked schema logs, versions that can never arrive, ignored instances, writes after a pending
    message of their log: the default histories hold each, so the property tests meet them."""
    reached: Counter[str] = Counter()
    for seed in range(20):
        reached.update(semantic_cases(reference(simulate(Knobs(), seed).lines)))
    assert set(reached) == {"null", "detour", "validation_kept", "parent_removed", "cascade_then_removal",
                            "forked_schema", "unreachable_version", "ignored_instance", "past_pending"}, reached
