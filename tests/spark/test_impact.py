"""``lakehouse schema check``: the impact a migration reports before it is published is what it does
once published and materialized (issue 19), on generated histories and migrations with type
conversions, validations, removals, re-created fields and renames (:func:`tests.simulate.next_migration`)."""

from __future__ import annotations

import tempfile
from random import Random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lakehouse.core.gold import gold_column
from lakehouse.core.messages import SchemaRevert
from lakehouse.spark.lake import load_schemas
from pipelines.impact import check_message
from tests.lakes import write_landing
from tests.simulate import Knobs, next_migration, schema_line, simulate
from tests.spark.test_against_reference import normalise, run_batches

pytestmark = pytest.mark.parity

EXAMPLES = {"sail": 4, "spark": 1}


def gold_rows(spark: Any, lake: Any, table: str) -> dict[str, dict[str, Any]]:
    return {r["instance_id"]: r.asDict() for r in spark.read.format("delta").load(f"{lake.lake_root}/gold/{table}")
            .collect()}


@pytest.mark.slow_on_spark(why="about 60 s on Apache Spark; the check runs the same transforms as the gold run "
                               "that the parity tests compare")
def test_a_migrations_reported_impact_is_what_it_does(spark: Any, lake: Any, engine_name: str) -> None:
    @settings(max_examples=EXAMPLES[engine_name], deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(history_seed=st.integers(0, 1000), migration_seed=st.integers(0, 1000))
    def check(history_seed: int, migration_seed: int) -> None:
        history = simulate(Knobs.clean(authors=2, schemas=2, migrations=4, messages=60), seed=history_seed)
        with tempfile.TemporaryDirectory() as tmp:
            here = lake.with_overrides(lake_root=f"{tmp}/lake", landing=f"{tmp}/landing")
            run_batches(spark, here, history, [list(history.lines)])
            schemas = load_schemas(spark, str(here.lake_root))
            sid = max(history.names, key=lambda s: (len(schemas[s].gold_versions()), str(s)))
            sv, name = schemas[sid], history.names[sid]
            migration = next_migration(sv, sid, Random(migration_seed))
            impact = check_message(spark, here, name, migration)
            assert impact.valid, (impact.reason, impact.detail, migration)
            assert impact.tables == [f"gold.{name}_v{impact.version}"]

            write_landing(here, "migration.jsonl", [schema_line(history, sid, migration)])
            run_batches(spark, here, history, [[]], first=1)
            after = load_schemas(spark, str(here.lake_root))[sid]
            assert after.current_version == impact.version and after[impact.version].status == "valid"
            before_rows = gold_rows(spark, here, f"{name}_v{sv.gold_versions()[-1]}")
            after_rows = gold_rows(spark, here, f"{name}_v{impact.version}")
            assert impact.instances == len(after_rows) == len(before_rows)
            old, new = sv.lens(sv.current_version), after.lens(impact.version)
            for f in new:
                counts = impact.fields.get(f.name)
                got = counts.counts if counts else {}
                column = gold_column(f.name)
                previous = old.by_key(f.key)  # the same field, maybe under another name (a rename)
                if previous is not None:  # the same rows: a value shown alike is kept, else converted or defaulted
                    was = gold_column(previous.name)
                    same = sum(repr(before_rows[i][was]) == repr(row[column]) for i, row in after_rows.items())
                    assert got.get("kept" if previous.name == f.name else "renamed", 0) == same, (f, got)
                    assert got.get("converted", 0) + got.get("defaulted", 0) == len(after_rows) - same, (f, got)
                    defaults = sum(repr(row[column]) != repr(before_rows[i][was])
                                   and normalise(row[column]) == normalise(f.default) for i, row in after_rows.items())
                    assert got.get("defaulted", 0) <= defaults, (f, got)
                elif f.default is None:  # re-created (or new) with no default: a value shown is a stored one
                    shown = sum(row[column] is not None for row in after_rows.values())
                    assert got.get("shown_again", 0) == shown, (f, got)
            for f in old:
                if new.by_key(f.key) is None:
                    column = gold_column(f.name)
                    shown = sum(row[column] is not None for row in before_rows.values())
                    got = impact.fields[f.name].counts if f.name in impact.fields else {}
                    assert got.get("hidden", 0) == shown, (f, got)

    check()


@pytest.mark.slow_on_spark(why="two materialize runs; the migration's check above runs on both engines")
def test_a_reverts_reported_impact_is_what_it_does(spark: Any, lake: Any, tmp_path: Any) -> None:
    # a history with a rename after the revert's target, whose revert brings back no instance that a
    # cascade removed (a cascading value an abandoned update wrote): the check counts the instances
    # that leave gold, not those that come back
    history = simulate(Knobs.clean(authors=2, schemas=1, migrations=5, messages=60, revert=0.0), seed=4)
    run_batches(spark, lake, history, [list(history.lines)])
    sid = next(iter(history.names))
    name = history.names[sid]
    sv = load_schemas(spark, str(lake.lake_root))[sid]
    target = sv.gold_versions()[0]
    impact = check_message(spark, lake, name, SchemaRevert(target))
    assert impact.valid and impact.abandoned == [v.version for v in sv if v.version > target]
    messages = spark.table("silver.messages").where(
        f"schema = '{sid}' AND status = 'applied' AND version > {target}").collect()
    assert impact.ignored == {k: n for k in ("create", "update")
                              if (n := sum(r["kind"] == k for r in messages))}
    before_rows = {r["instance_id"]: r.asDict() for r in spark.table(f"gold.{name}").collect()}
    created = {r["entry_hash"] for r in messages if r["kind"] == "create"}
    assert impact.removed == len(before_rows.keys() & created) and impact.instances == len(before_rows)
    write_landing(lake, "revert.jsonl", [schema_line(history, sid, SchemaRevert(target))])
    run_batches(spark, lake, history, [[]], first=1)
    after_rows = {r["instance_id"]: r.asDict() for r in spark.table(f"gold.{name}").collect()}
    assert after_rows.keys() == before_rows.keys() - created
    # per field, over the instances that stay: a value shown alike is kept; one that changes is
    # converted, defaulted, or restored, and only an instance an ignored update wrote is restored
    rewritten = {r["instance"] for r in messages if r["kind"] == "update"}
    old, new = sv.lens(sv.current_version), load_schemas(spark, str(lake.lake_root))[sid].lens(impact.version)
    restored = 0
    for f in new:
        previous = old.by_key(f.key)  # the same field, under the name it has now, maybe another (a rename)
        if previous is None:
            continue
        column, was = gold_column(f.name), gold_column(previous.name)
        got = impact.fields[f.name].counts
        changed = {i for i, row in after_rows.items() if repr(before_rows[i][was]) != repr(row[column])}
        assert got.get("kept" if f.name == previous.name else "renamed", 0) == len(after_rows) - len(changed), (f, got)
        assert sum(got.get(o, 0) for o in ("converted", "restored", "defaulted")) == len(changed), (f, got)
        assert got.get("restored", 0) <= len(changed & rewritten), (f, got)
        assert {e[0] for e in impact.fields[f.name].examples.get("restored", [])} <= changed & rewritten
        restored += got.get("restored", 0)
    for f in old:
        if new.by_key(f.key) is None:
            shown = sum(before_rows[i][gold_column(f.name)] is not None for i in after_rows)
            assert impact.fields[f.name].counts.get("hidden", 0) == shown if shown else f.name not in impact.fields
    assert restored, "the history has updates at the abandoned versions whose values the revert restores"
