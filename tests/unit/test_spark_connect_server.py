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


def _ended(pid: int) -> bool:
    """Whether process ``pid`` is gone or a zombie (its new parent may not reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state in {"Z", "X"}


def test_the_server_process_ends_when_the_process_that_started_it_is_killed() -> None:
    """The server must not outlive a run killed with SIGKILL (no ``finally`` stops it then)."""
    import signal
    import subprocess
    import sys
    import time

    starter = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "from lakehouse.spark.session import start_child\n"
         "child = start_child(['sleep', '120'])\n"
         "print(child.pid, flush=True)\n"
         "time.sleep(120)\n"],
        stdout=subprocess.PIPE, text=True)
    assert starter.stdout is not None
    child = int(starter.stdout.readline())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0] != b"sleep":  # the launcher became it
        assert time.monotonic() < deadline and not _ended(child), "the launcher did not start the command"
        time.sleep(0.05)
    starter.send_signal(signal.SIGKILL)
    starter.wait()
    deadline = time.monotonic() + 10
    while not _ended(child):
        assert time.monotonic() < deadline, "the child outlived the process that started it"
        time.sleep(0.05)


def test_starting_the_server_survives_live_spark_connect_channels(spark: object) -> None:
    """Regression: a server started while another engine's gRPC channels were busy could abort at once
    (status -6, "epoll_wait error: Bad file descriptor"): ``Popen`` with a ``preexec_fn`` forks, and
    gRPC's fork handlers restart its poller in the child (grpc/grpc#43055). The old launch failed
    about one start in forty here; 150 starts with queries running all exit cleanly."""
    import subprocess
    import sys
    import threading

    from lakehouse.spark.session import start_child

    done = threading.Event()

    def busy() -> None:
        while not done.is_set():
            spark.range(10).collect()  # type: ignore[attr-defined]

    worker = threading.Thread(target=busy, daemon=True)
    worker.start()
    try:
        codes = [start_child([sys.executable, "-S", "-c", "pass"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL).wait() for _ in range(150)]
    finally:
        done.set()
        worker.join()
    assert codes == [0] * 150
