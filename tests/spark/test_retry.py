"""A materialize survives a known transient engine failure: the failed step runs again, the summary
says so, and the lake ends as a clean run leaves it; any other error stops the run at once."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakehouse.spark import delta
from pipelines.gold import run_gold
from pipelines.ingest import run_ingest
from pipelines.register import register_schema
from pipelines.silver import run_silver
from tests.lakes import write_landing
from tests.simulate import Knobs, simulate
from tests.spark.test_crashes import lake_state
from tests.unit.test_retry import GARBLED


@contextmanager
def failing(errors: dict[int, BaseException]) -> Iterator[None]:
    """Within the block, the k-th Delta commit raises ``errors[k]`` (once)."""
    count = [0]

    def inject(_number: int, _table: str) -> None:
        count[0] += 1
        error = errors.pop(count[0], None)
        if error is not None:
            raise error

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(delta, "on_commit", inject)
        yield


def materialized(spark: Any, settings: Any, names: dict[Any, str], silver_fails: dict[int, BaseException],
                 gold_fails: dict[int, BaseException]) -> tuple[Any, Any]:
    """Ingest, the silver part (failing at ``silver_fails``), register, the gold part (failing at
    ``gold_fails``): their summaries."""
    run_ingest(spark, settings)
    with failing(silver_fails):
        silver = run_silver(spark, settings)
    for sid, name in names.items():
        register_schema(spark, settings, str(sid), name)
    with failing(gold_fails):
        gold = run_gold(spark, settings)
    return silver, gold


def test_a_transient_engine_failure_is_retried_and_reported(spark: Any, lake: Any, tmp_path: Path) -> None:
    history = simulate(Knobs.clean(authors=2, schemas=1, migrations=3, messages=20, update=0.4), seed=2)
    clean = lake.with_overrides(lake_root=str(tmp_path / "clean"))
    for settings in (lake, clean):
        write_landing(settings, "all.jsonl", list(history.lines))
    materialized(spark, clean, dict(history.names), {}, {})
    silver, gold = materialized(spark, lake, dict(history.names), {1: RuntimeError(GARBLED)},
                                {2: RuntimeError(GARBLED)})
    assert silver.retried == ["silver: garbled_udf_python_version"]
    assert gold.retried == ["gold: garbled_udf_python_version"]
    assert lake_state(Path(lake.lake_root)) == lake_state(Path(clean.lake_root))


def test_an_unknown_engine_failure_stops_the_run_at_once(spark: Any, lake: Any) -> None:
    history = simulate(Knobs.clean(authors=1, schemas=1, migrations=2, messages=5), seed=2)
    write_landing(lake, "all.jsonl", list(history.lines))
    run_ingest(spark, lake)
    commits: list[str] = []
    with pytest.MonkeyPatch.context() as patch, pytest.raises(RuntimeError, match="boom"):
        def boom(_number: int, table: str) -> None:
            commits.append(table)
            raise RuntimeError("boom")

        patch.setattr(delta, "on_commit", boom)
        run_silver(spark, lake)
    assert len(commits) == len(set(commits))  # each table once (its writers run at once): not run again
    assert not Path(lake.lake_root, "silver", "runs").exists()
