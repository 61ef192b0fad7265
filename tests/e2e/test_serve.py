"""``make serve``: another process reaches the lake's catalog over Spark Connect (README, Analysts)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lakehouse.spark.tables import delta_version, table
from pipelines.ingest import run_ingest
from tests.lakes import REPO, cli_env, write_landing
from tests.spark.test_ingest import fixture_lines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


CLIENT = """
import json, sys
from pyspark.sql import SparkSession, functions as F
s = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
entries = sys.argv[2]
attempts = {
    "count": lambda: s.sql("SELECT count(*) FROM bronze.entries").collect()[0][0],
    "describe": lambda: [r[0] for r in s.sql("DESCRIBE TABLE bronze.entries").collect()][:3],
    "insert": lambda: s.sql("INSERT INTO bronze.entries SELECT * FROM bronze.entries").collect(),
    "delete": lambda: s.sql("DELETE FROM bronze.entries").collect(),
    "drop": lambda: s.sql("DROP TABLE bronze.entries").collect(),
    "analysed_only": lambda: s.sql("INSERT INTO bronze.entries SELECT * FROM bronze.entries").schema,
    "write": lambda: s.table("bronze.entries").write.format("delta").mode("append").save(entries),
    "create_table": lambda: s.catalog.createTable("bronze.copy", path=entries + "_copy", source="delta"),
    "udf": lambda: s.range(1).select(F.udf(lambda x: x)("id")).collect(),
    "jvm": lambda: s.range(1).select(F.expr("reflect('java.lang.System', 'getenv', 'HOME')")).collect(),
    "count_again": lambda: s.table("bronze.entries").count(),
}
out = {}
for name, attempt in attempts.items():
    try:
        out[name] = ["ok", attempt()]
    except Exception as exc:
        out[name] = ["refused", str(exc).strip().splitlines()[0]]
print(json.dumps(out))
"""

WAIT_FOR_SILVER = """
import sys, time
from pyspark.sql import SparkSession
s = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
deadline = time.monotonic() + 60
while True:
    try:
        print(s.sql("SELECT count(*) FROM silver.messages").collect()[0][0]); break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(1)
"""


@pytest.mark.parametrize("engine_setting", ["sail", "spark-connect"])
def test_a_client_in_another_process_reads_the_served_catalog_and_cannot_write(spark: Any, lake: Any,
                                                                               engine_setting: str) -> None:
    """``make serve`` on Sail, and on Apache Spark with Delta Lake (``make serve ENGINE=spark``).

    Issue: a client of ``serve`` could change the lake (any statement ran); and tables the
    pipelines made after the server started were not seen."""
    from pipelines.silver import run_silver

    write_landing(lake, "corpus.jsonl", fixture_lines("corpus.jsonl"))
    run_ingest(spark, lake)
    entries = table(str(lake.lake_root), "bronze", "entries")
    before = delta_version(entries.location)
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
        done = subprocess.run([sys.executable, "-c", CLIENT, url, entries.location], capture_output=True, text=True,
                              timeout=180, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["count"] == ["ok", 360] and out["count_again"] == ["ok", 360]
        assert out["describe"] == ["ok", ["entry_hash", "author", "log_id"]]
        refused = {name for name, (outcome, _) in out.items() if outcome == "refused"}
        assert refused == {"insert", "delete", "drop", "analysed_only", "write", "create_table", "udf", "jvm"}, out
        assert [(name, message) for name, (_, message) in out.items() if name in refused and "not run" not in message] == []
        assert delta_version(entries.location) == before
        assert not (Path(entries.location + "_copy")).exists()

        run_silver(spark, lake)  # the pipelines make the silver tables while the server runs
        seen = subprocess.run([sys.executable, "-c", WAIT_FOR_SILVER, url], capture_output=True, text=True,
                              timeout=120, check=False)
        assert seen.stdout.strip() == "360", seen.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
