"""The plan of a gold run per schema (lakehouse.core.revert): full, merge, or revert by time travel
plus replay, decided from the earlier runs' ``silver.gold_versions`` rows."""

from __future__ import annotations

from typing import Any

from lakehouse.core.revert import SchemaPlan, carried_rows, plan_schema, table_action
from tests.unit.test_schemas import build, create, meta, migration, revert

S = "aa:1"


def row(gold_run: int, silver_run: int, schema_version: int, version: int, delta_version: int, *,
        written: bool = True, schema: str = S) -> dict[str, Any]:
    return {"schema": schema, "gold_run": gold_run, "silver_run": silver_run, "schema_version": schema_version,
            "version": version, "delta_version": delta_version, "written": written,
            "table_name": f"t_v{version}"}


def test_a_first_run_or_a_rebuild_writes_every_table() -> None:
    versions = build(meta(), migration(create("a", "text")))
    assert plan_schema(S, versions, [], full=False).mode == "full"
    assert plan_schema(S, versions, [row(1, 1, 2, 2, 0)], full=True).mode == "full"
    assert table_action(SchemaPlan("full"), 2, known=True) == "write"


def test_changes_count_from_the_silver_run_the_latest_tables_reflect() -> None:
    """A waiting schema's rows were carried (not written) with their silver run: the run that ends
    the wait merges in every change since that run, not since the last gold run."""
    versions = build(meta(), migration(create("a", "text")))
    previous = [row(1, 1, 2, 2, 0), row(2, 1, 2, 2, 0, written=False), row(2, 9, 1, 1, 0, schema="bb:2")]
    plan = plan_schema(S, versions, previous, full=False)
    assert (plan.mode, plan.since) == ("merge", 1)
    assert table_action(plan, 2, known=True) == "merge" and table_action(plan, 3, known=False) == "write"


def test_a_revert_travels_each_table_to_its_version_before_the_first_abandoned_one() -> None:
    # v1 meta, v2 and v3 migrations, v4 reverts to 2: v3 is abandoned by the revert at 4
    versions = build(meta(), migration(create("a", "text")), migration(create("b", "text")), revert(2))
    previous = [
        row(1, 1, 2, 2, 0), row(1, 1, 2, 1, 0),  # run 1: the schema at version 2
        row(2, 4, 2, 2, 1), row(2, 4, 2, 1, 1),  # run 2: still 2, both tables written again
        row(3, 6, 3, 3, 0), row(3, 6, 3, 2, 2), row(3, 6, 3, 1, 2),  # run 3: version 3 arrives
    ]
    plan = plan_schema(S, versions, previous, full=False)
    assert (plan.mode, plan.first_abandoned) == ("revert", 3)
    assert plan.snapshots == {1: (1, 4), 2: (1, 4)}  # the last Delta versions written before v3
    assert plan.since == 4
    assert table_action(plan, 2, known=True) == "replay" and table_action(plan, 4, known=False) == "write"


def test_a_revert_already_seen_by_the_last_run_is_a_merge() -> None:
    versions = build(meta(), migration(create("a", "text")), migration(create("b", "text")), revert(2))
    previous = [row(1, 1, 4, 2, 0), row(1, 1, 4, 4, 0)]
    assert plan_schema(S, versions, previous, full=False) == SchemaPlan("merge", 1)


def test_a_waiting_schema_keeps_its_rows_unwritten_with_their_silver_run() -> None:
    columns = ["schema", "gold_run", "silver_run", "schema_version", "version", "delta_version", "written",
               "table_name"]
    last = [row(3, 5, 2, 2, 4), row(3, 5, 2, 2, 4, schema="bb:2"), {**row(3, 5, 2, 1, 0), "table_name": None}]
    carried = carried_rows(last, [S], 4, columns)
    assert carried == [(S, 4, 5, 2, 2, 4, False, "t_v2")]
