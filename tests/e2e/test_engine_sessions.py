"""Engines opened one after another in one process (a test run, a notebook, a service): a stopped
session that the garbage collector finalizes later leaves the next session's queries alone."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator as Reattach

from lakehouse.config import load_settings
from lakehouse.spark.session import open_engine

pytestmark = pytest.mark.e2e


def test_a_stopped_session_finalized_later_keeps_the_pool_the_next_sessions_queries_share(tmp_path: Path) -> None:
    """pyspark 4.0 closes a Spark Connect session's client again when it is finalized, which shuts
    down the release pool every session's queries share and waits for it: during another session's
    query, a hang (lakehouse.spark.session._disarm_finalizer)."""
    settings = load_settings(environ={}).with_overrides(lake_root=str(tmp_path / "lake"), engine="sail")
    with open_engine(settings) as first:
        assert first.spark.range(3).count() == 3
    stopped = [first.spark]
    del first
    with open_engine(settings) as second:
        assert second.spark.range(4).count() == 4
        pool = Reattach._release_thread_pool_instance
        assert pool is not None, "the second session's queries use the shared pool"
        stopped.clear()  # the first session is finalized now
        gc.collect()
        assert Reattach._release_thread_pool_instance is pool
        assert second.spark.range(5).count() == 5
