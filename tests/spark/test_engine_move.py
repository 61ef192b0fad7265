"""A lake moves between engines (LAKEHOUSE.md, Engine): begun on one, continued on the other.

A user may start on embedded Sail and move to an Apache Spark cluster, or back. A generated
history arrives in two batches: the first is ingested and materialized on one engine, the second
on the other, and every table equals the reference model of SEMANTICS.md after each
half, read by the engine that did not write it as well as by the one that did.
"""

from __future__ import annotations

from random import Random
from typing import Any

import pytest

from lakehouse.spark.tables import register_lake
from tests.conftest import engine_for
from tests.simulate import Knobs, split_batches
from tests.simulate import simulate as simulate_history
from tests.spark.test_against_reference import check_lake, run_batches

pytestmark = pytest.mark.all_engines


@pytest.mark.parametrize("first, then", [
    pytest.param("sail", "spark", marks=pytest.mark.slow_on_spark(
        why="about 85 s on 2 cores; the move from Apache Spark to Sail runs in make test")),
    ("spark", "sail"),
])
def test_a_lake_begun_on_one_engine_is_continued_on_the_other(lake: Any, first: str, then: str) -> None:
    history = simulate_history(Knobs(authors=3, schemas=3, migrations=5, messages=40), seed=23)
    batches = split_batches(list(history.lines), 2, Random(5))
    assert all(batches), "each engine takes a batch"
    before, after = engine_for(first).spark, engine_for(then).spark
    arrived = run_batches(before, lake, history, batches[:1])
    check_lake(before, lake, arrived, history)
    register_lake(after, str(lake.lake_root))  # a new session names the lake's tables, as every command does
    check_lake(after, lake, arrived, history)
    arrived += run_batches(after, lake, history, batches[1:], first=1)
    check_lake(after, lake, arrived, history)
    register_lake(before, str(lake.lake_root))
    check_lake(before, lake, arrived, history)
