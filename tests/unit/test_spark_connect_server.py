"""A local Apache Spark Connect server that does not start says why (:class:`lakehouse.spark.session.SparkConnectServer`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lakehouse.config import load_settings
from lakehouse.errors import EngineError
from lakehouse.spark.session import SparkConnectServer


def _log_named(message: str) -> Path:
    found = re.search(r"its log \((\S+)\) ends", message)
    assert found, message
    return Path(found.group(1))


def test_a_server_that_exits_is_an_error_with_its_log() -> None:
    server = SparkConnectServer(load_settings(environ={}), {"spark.master": "no-such-master"})
    with pytest.raises(EngineError, match="exited with status") as failed:
        server.start(timeout=120)
    log = _log_named(str(failed.value))
    assert log.read_text().strip()
    assert "Master must" in str(failed.value), "the cause, not Java's stack frames, ends the message"
    log.unlink()


def test_a_server_that_does_not_listen_in_time_is_stopped_and_its_log_kept() -> None:
    server = SparkConnectServer(load_settings(environ={}), {})
    with pytest.raises(EngineError, match="did not listen") as failed:
        server.start(timeout=0)
    log = _log_named(str(failed.value))
    assert log.exists(), "the log the error names is kept"
    assert server._process is None, "the server was stopped"
    log.unlink()


def test_an_unreachable_spark_connect_address_fails_fast_and_names_the_address() -> None:
    """Issue: sc://localhost:1 hung for minutes without a word."""
    import socket
    import time

    from lakehouse.spark.session import wait_for_endpoint

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(EngineError) as excinfo:
        wait_for_endpoint(f"sc://127.0.0.1:{port}", 1.0)
    assert time.monotonic() - started < 5
    assert f"sc://127.0.0.1:{port}" in str(excinfo.value) and "connect_timeout" in str(excinfo.value)
    with pytest.raises(EngineError, match="not a Spark Connect address"):
        wait_for_endpoint("http://127.0.0.1:15002", 1.0)
    with socket.socket() as server:  # something that answers: no error
        server.bind(("127.0.0.1", 0))
        server.listen()
        wait_for_endpoint(f"sc://127.0.0.1:{server.getsockname()[1]}/;session_id=x", 1.0)


def test_apache_spark_keeps_its_catalog_folders_in_the_lake(tmp_path: Path) -> None:
    """Issue: runs on Apache Spark left spark-warehouse/ (bronze.db, ...) in the working directory."""
    from lakehouse.spark.session import apache_spark_conf

    settings = load_settings(environ={}).with_overrides(lake_root=str(tmp_path / "lake"))
    conf = apache_spark_conf(settings, {"spark.jars": "none.jar"})  # given jars: nothing is fetched
    assert conf["spark.sql.warehouse.dir"] == f"{tmp_path / 'lake'}/_catalog"
