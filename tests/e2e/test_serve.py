"""``make serve``: another process reaches the lake's catalog over Spark Connect (README, Analysts)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from typing import Any

import pytest

from pipelines.ingest import run_ingest
from tests.lakes import REPO, cli_env, write_landing
from tests.spark.test_ingest import fixture_lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("engine_setting", ["sail", "spark-connect"])
def test_a_client_in_another_process_queries_the_served_catalog(spark: Any, lake: Any, engine_setting: str) -> None:
    """``make serve`` on Sail, and on Apache Spark with Delta Lake (``make serve ENGINE=spark``)."""
    write_landing(lake, "corpus.jsonl", fixture_lines("corpus.jsonl"))
    run_ingest(spark, lake)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "lakehouse.cli", "serve", "--port", str(port)], cwd=REPO,
                              env=cli_env(lake, LAKEHOUSE_ENGINE=engine_setting), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        deadline = time.monotonic() + 240
        assert server.stdout is not None
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            match = re.search(r"'(sc://[^']+)'", line)
            url = match.group(1) if match else None
        assert url is not None, "serve printed no URL"
        client = ("from pyspark.sql import SparkSession\n"
                  f"s = SparkSession.builder.remote({url!r}).getOrCreate()\n"
                  "print(s.sql('SELECT count(*) FROM bronze.entries').collect()[0][0])\n")
        done = subprocess.run([sys.executable, "-c", client], capture_output=True, text=True, timeout=120, check=False)
        assert done.stdout.strip() == "360", done.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
