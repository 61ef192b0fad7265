"""Engines opened one after another in one process (a test run, a notebook, a service): a stopped
session that the garbage collector finalizes later leaves the next session's queries alone."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql.connect.client.reattach import ExecutePlanResponseReattachableIterator as Reattach

from lakehouse.config import load_settings
from lakehouse.spark.session import open_engine

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]


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


STOP_AFTER_A_QUERY = """
from lakehouse.config import load_settings
from lakehouse.spark.session import connect_session, start_sail_server, stop_session

server = start_sail_server()
host, port = server.listening_address
spark = connect_session(f"sc://{host}:{port}/", load_settings(environ={}))
spark.sql("SELECT 1").collect()  # its results' release goes to the server in the background
stop_session(spark)
server.stop()
print("stopped", flush=True)
"""


def test_a_process_that_stops_its_server_right_after_a_query_exits() -> None:
    """Issue: ``serve`` printed ``stopped`` on Ctrl-C and did not exit. A query's results are
    released in the background, and at exit the process waits for that call, which retried against
    the stopped server for minutes: stop_session waits for it while the server still answers."""
    done = subprocess.run([sys.executable, "-c", STOP_AFTER_A_QUERY], capture_output=True, text=True, timeout=90,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    assert done.returncode == 0 and done.stdout.strip() == "stopped", done.stdout + done.stderr
