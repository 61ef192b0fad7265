"""The projection planned per field (lakehouse.core.projection) against the field-by-field one
(lakehouse.core.schemas.project), on hand-built logs and on generated histories."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from lakehouse.core.messages import FieldChange, SchemaId, SchemaMeta, SchemaMigration, SchemaRevert
from lakehouse.core.projection import CONVERT, COPY, DEFAULT, plan_projection
from lakehouse.core.reference import reference
from lakehouse.core.schemas import SchemaVersions, build_versions, project
from lakehouse.errors import SchemaLogError
from tests.histories import histories, knobs
from tests.simulate import History


def change(name: str, action: str, type_text: str | None = None, **kwargs: Any) -> FieldChange:
    if "default" in kwargs:
        kwargs["has_default"] = True
    return FieldChange(name, action, type_text, **kwargs)


def build(*log: Any) -> SchemaVersions:
    return build_versions(list(enumerate(log, start=1)))


LOG = (
    SchemaMeta("numbers"),
    SchemaMigration((change("n", "create", "integer", default=0), change("s", "create", "text", default="x"))),
    SchemaMigration((change("s", "update", validation="^[a-z]+$", default="d"),)),  # n unchanged
    SchemaMigration((change("n", "update", "text", default="?"), change("label", "create", "text"))),
    SchemaMigration((change("n", "update", "integer", default=0),)),  # n as at version 3
)


def picked(values: list[Any], fields: list[tuple[str, int]]) -> dict[str, Any]:
    return {name: values[i] for name, i in fields}


def test_tables_that_define_a_field_alike_share_its_column() -> None:
    sv = build(*LOG)
    p = plan_projection(sv)
    assert sorted(p.tables) == [2, 3, 4, 5]
    n = {version: dict(p.fields(version))["n"] for version in p.tables}
    assert n[2] == n[3] == n[5] != n[4]  # integer default 0 at 2, 3 and 5; text at 4
    s = {version: dict(p.fields(version))["s"] for version in p.tables}
    assert s[2] != s[3] == s[4] == s[5]  # the validation added at 3 makes another column
    assert len(p.columns) == 5  # n twice, s twice, label once


def test_each_written_version_reaches_a_column_one_way() -> None:
    sv = build(*LOG)
    p = plan_projection(sv)
    label = dict(p.fields(4))["label"]
    n_text, n_int = dict(p.fields(4))["n"], dict(p.fields(2))["n"]
    s_checked = dict(p.fields(3))["s"]
    assert p.way(label, 2)[0] == DEFAULT  # added after version 2
    assert p.way(n_int, 5)[0] == COPY and p.way(n_int, 2)[0] == COPY
    assert p.way(n_text, 2)[0] == CONVERT and p.way(n_int, 4)[0] == CONVERT
    assert p.way(s_checked, 2)[0] == CONVERT  # written unchecked, shown under a validation
    values = p.values({"n": (4, "12"), "s": (2, "Not lower"), "label": (4, None)})
    assert picked(values, p.fields(5)) == {"n": 12, "s": "d", "label": None}
    assert picked(values, p.fields(2)) == {"n": 12, "s": "Not lower"}
    assert picked(p.values({}), p.fields(4)) == {"n": "?", "s": "d", "label": None}


def test_a_write_at_an_abandoned_version_is_refused() -> None:
    sv = build(*LOG, SchemaRevert(3))
    p = plan_projection(sv)
    assert 4 not in p.tables
    with pytest.raises(SchemaLogError) as caught:
        p.values({"n": (4, "1")})
    assert caught.value.code == "abandoned_version"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(knobs(max_messages=60)))
def test_the_planned_projection_equals_the_field_by_field_one(history: History) -> None:
    ref = reference(history.lines)
    for sid, sv in ref.schemas.items():
        p = plan_projection(sv)
        for instance in ref.instances.values():
            if instance.schema != sid or not instance.writes:
                continue
            values = p.values(instance.writes)
            for version in sv.gold_versions():
                assert picked(values, p.fields(version)) == project(sv, instance.writes, version)


def test_a_batch_of_stored_states_projects_as_the_states_do() -> None:
    """The engine's projection reads stored state rows a column at a time (writes as CBOR gives
    them back); the wide rows are those of the states themselves (wide_batch, as wide_local
    builds them), nulls and defaults alike."""
    import pyarrow as pa

    from lakehouse.core.gold import InstanceState
    from lakehouse.spark.gold import _project_batch, wide_batch, wide_ddl
    from lakehouse.spark.groups import arrow_schema
    from lakehouse.spark.silver import STATES_DDL, state_row

    sv = build(*LOG)
    p = plan_projection(sv)
    schema = arrow_schema(wide_ddl(p))
    states = [InstanceState("aa" * 34, "01" * 32, {"n": (4, "12"), "s": (2, "Not lower"), "label": (4, None)}, 4,
                            "bb" * 34, 2),
              InstanceState("cc" * 34, "02" * 32, {}, 2, "dd" * 34, 0),
              InstanceState("ee" * 34, "02" * 32, {"n": (2, 7), "s": (3, "ok")}, 3, "ff" * 34, 1)]
    rows = pa.RecordBatch.from_pylist([state_row(SchemaId(b"\x01" * 32, 0), 1, sv, s) for s in states],
                                      schema=arrow_schema(STATES_DDL))
    assert _project_batch(p, schema, rows).to_pylist() == wide_batch(p, states, schema).to_pylist()
