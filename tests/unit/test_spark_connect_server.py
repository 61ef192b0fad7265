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
