"""``make serve``: another process reaches the lake's catalog over Spark Connect (README, Analysts)."""

from __future__ import annotations

import json
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import Settings, load_settings
from lakehouse.spark.tables import delta_version, table
from pipelines.ingest import run_ingest
from tests.lakes import REPO, cli_env, run_cli, write_landing
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


@dataclass(frozen=True)
class Served:
    """A lake (the p2panda corpus ingested) served by ``lakehouse serve`` in another process."""

    settings: Settings
    url: str
    engine_setting: str
    server: subprocess.Popen[str]


@pytest.fixture(scope="module", params=["sail", "spark-connect"])
def served(request: pytest.FixtureRequest, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``make serve`` on Sail, and on Apache Spark with Delta Lake (``make serve ENGINE=spark``),
    one server per engine for the tests of this module."""
    folder = tmp_path_factory.mktemp(f"served-{request.param}")
    settings = load_settings(environ={}).with_overrides(
        lake_root=str(folder / "lake"), landing=str(folder / "landing"), keys=str(folder / "keys"))
    write_landing(settings, "corpus.jsonl", fixture_lines("corpus.jsonl"))
    run_ingest(spark, settings)
    server = subprocess.Popen([sys.executable, "-m", "lakehouse.cli", "serve", "--port", str(free_port())], cwd=REPO,
                              env=cli_env(settings, LAKEHOUSE_ENGINE=request.param), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
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
        yield Served(settings, url, request.param, server)
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_client(script: str, *args: str, timeout: float = 180) -> Any:
    """Run a client script in another process; its last line of output, as JSON."""
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_client_in_another_process_reads_the_served_catalog_and_cannot_write(spark: Any, served: Served) -> None:
    """Issue: a client of ``serve`` could change the lake (any statement ran); and tables the
    pipelines made after the server started were not seen."""
    from pipelines.silver import run_silver

    lake = served.settings
    entries = table(str(lake.lake_root), "bronze", "entries")
    before = delta_version(entries.location)
    out = run_client(CLIENT, served.url, entries.location)
    assert out["count"] == ["ok", 360] and out["count_again"] == ["ok", 360]
    assert out["describe"] == ["ok", ["entry_hash", "author", "log_id"]]
    refused = {name for name, (outcome, _) in out.items() if outcome == "refused"}
    assert refused == {"insert", "delete", "drop", "analysed_only", "write", "create_table", "udf", "jvm"}, out
    assert [(name, message) for name, (_, message) in out.items() if name in refused and "not run" not in message] == []
    assert delta_version(entries.location) == before
    assert not (Path(entries.location + "_copy")).exists()

    run_silver(spark, lake)  # the pipelines make the silver tables while the server runs
    seen = subprocess.run([sys.executable, "-c", WAIT_FOR_SILVER, served.url], capture_output=True, text=True,
                          timeout=120, check=False)
    assert seen.stdout.strip() == "360", seen.stderr[-2000:]


READER = """
import json, sys
from pyspark.sql import SparkSession
s = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
key, outside, entries = sys.argv[2], sys.argv[3], sys.argv[4]
attempts = {
    "passwd": lambda: s.read.text("/etc/passwd").count(),
    "key_json": lambda: s.read.json(key).collect(),
    "key_option": lambda: s.read.format("json").option("path", key).load().collect(),
    "key_sql": lambda: s.sql(f"SELECT * FROM json.`{key}`").collect(),
    "key_text_sql": lambda: s.sql(f"SELECT * FROM text.`{key}`").collect(),
    "key_table": lambda: s.table(f"text.`{key}`").collect(),
    "key_view": lambda: s.sql(f"CREATE TEMPORARY VIEW k USING text OPTIONS (path '{key}')").collect(),
    "key_columns": lambda: s.sql(f"SHOW COLUMNS IN text.`{key}`").collect(),
    "key_explain": lambda: s.sql(f"EXPLAIN SELECT * FROM text.`{key}`").collect(),
    "key_in_subquery": lambda: s.sql(f"SELECT * FROM gold_x WHERE 1 IN (SELECT 1 FROM csv.`{key}`)").collect(),
    "delta_outside": lambda: s.read.format("delta").load(outside).count(),
    "delta_outside_sql": lambda: s.sql(f"SELECT count(*) FROM delta.`{outside}`").collect(),
    "delta_climbing_out": lambda: s.read.format("delta").load(entries + "/../../../outside").count(),
    "delta_glob": lambda: s.read.format("delta").load(entries.rsplit("/", 2)[0] + "/{..}/outside").count(),
    "read_files": lambda: s.sql(f"SELECT * FROM read_files('{key}')").collect(),
    "delta_in_lake": lambda: s.read.format("delta").load(entries).count(),
    "delta_in_lake_sql": lambda: s.sql(f"SELECT count(*) FROM delta.`{entries}`").collect()[0][0],
    "by_name": lambda: s.table("bronze.entries").count(),
}
out = {}
for name, attempt in attempts.items():
    try:
        out[name] = ["ok", str(attempt())]
    except Exception as exc:
        out[name] = ["refused", str(exc).strip().splitlines()[0]]
print(json.dumps(out))
"""


def test_a_served_client_reads_the_lake_and_nothing_else(served: Served) -> None:
    """Issue: from a plain PySpark client, ``spark.read.text("/etc/passwd")`` answered and
    ``spark.read.json("<keys>/<name>.key.json")`` printed a ``secret_key``: reads were not confined
    to the lake. A client reads the lake's tables, by name or by a Delta path under the lake root."""
    lake = served.settings
    made = run_cli(lake, "keys", "new", "alice")
    assert made.returncode == 0, made.stderr
    key = Path(str(lake.keys), "alice.key.json")
    secret = json.loads(key.read_text())["secret_key"]
    entries = table(str(lake.lake_root), "bronze", "entries").location
    outside = str(Path(str(lake.lake_root)).parent / "outside")
    if not Path(outside).exists():  # a Delta table beside the lake, not in it
        shutil.copytree(entries, outside)
    out = run_client(READER, served.url, str(key), outside, entries)
    assert secret not in json.dumps(out)
    read = {name for name, (outcome, _) in out.items() if outcome == "ok"}
    assert read == {"delta_in_lake", "delta_in_lake_sql", "by_name"}, out
    assert out["delta_in_lake"][1] == out["delta_in_lake_sql"][1] == out["by_name"][1] == "360"
    assert [(name, message) for name, (outcome, message) in out.items()
            if outcome == "refused" and "not run" not in message] == []


TWO_CLIENTS = """
import json, sys
from pyspark.sql import SparkSession
s = SparkSession.builder.remote(sys.argv[1]).getOrCreate()
me, database = sys.argv[2], sys.argv[3]
def seen():
    views = sorted(t.name for t in s.catalog.listTables() if t.isTemporary)
    mine = {v: s.table(v).collect()[0][0] for v in views}
    return {"database": s.catalog.currentDatabase(), "views": mine,
            "entries": s.table("bronze.entries").count()}
first = seen()
s.sql(f"USE DATABASE {database}")
s.sql(f"CREATE OR REPLACE TEMPORARY VIEW from_sql AS SELECT '{me}' AS who")
s.range(1).selectExpr(f"'{me}' AS who").createOrReplaceTempView("from_api")
print("ready", flush=True)
sys.stdin.readline()  # the other client made its own in the meantime
refused = []
for attempt in (lambda: s.range(1).createOrReplaceGlobalTempView("everyone"),
                lambda: s.sql("CREATE GLOBAL TEMPORARY VIEW everyone AS SELECT 1").collect()):
    try:
        attempt()
    except Exception as exc:
        refused.append(str(exc).strip().splitlines()[0])
print(json.dumps({"first": first, "then": seen(), "refused": refused}))
"""


def test_two_served_clients_keep_their_own_database_and_temporary_views(served: Served) -> None:
    """Issue: a temporary view made by one client of ``serve`` (``df.createOrReplaceTempView``) and a
    ``USE DATABASE`` seemed to reach another client. Two clients connected at once each keep their
    own current database and temporary views (both forms), and global temporary views, which every
    session sees, are refused."""
    clients = []
    for me, database in (("a", "silver"), ("b", "bronze")):
        client = subprocess.Popen([sys.executable, "-c", TWO_CLIENTS, served.url, me, database], text=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        clients.append(client)
        assert client.stdout is not None
        line = client.stdout.readline()
        assert line.strip() == "ready", (line, client.stderr.read() if client.stderr else "")
    results = []
    for client in clients:
        output, errors = client.communicate("go\n", timeout=180)
        assert client.returncode == 0, errors[-2000:]
        results.append(json.loads(output.strip().splitlines()[-1]))
    a, b = results
    for result in results:  # each began in the default database, with no view, the lake's tables named
        assert result["first"]["views"] == {} and result["first"]["entries"] == 360
        assert result["first"]["database"] == "default"
        assert len(result["refused"]) == 2 and all("not run" in m for m in result["refused"]), result["refused"]
    assert a["then"]["database"] == "silver" and b["then"]["database"] == "bronze"
    assert a["then"]["views"] == {"from_api": "a", "from_sql": "a"}
    assert b["then"]["views"] == {"from_api": "b", "from_sql": "b"}


@pytest.mark.parametrize(("serve_engine", "stop"), [("sail", signal.SIGINT), ("sail", signal.SIGTERM),
                                              ("spark-connect", signal.SIGINT)],
                         ids=["sail-SIGINT", "sail-SIGTERM", "spark-connect-SIGINT"])
def test_a_background_serve_stops_on_sigint_and_sigterm(serve_engine: str, stop: int, tmp_path: Path) -> None:
    """Issue: a background ``serve`` ignored SIGINT. A shell starts a background job with SIGINT
    ignored, and the embedded server took the signal for itself; ``kill -INT`` (and ``kill``) must
    stop the server cleanly, through its ``finally``, and print that it stopped."""
    settings = load_settings(environ={}).with_overrides(
        lake_root=str(tmp_path / "lake"), landing=str(tmp_path / "landing"), keys=str(tmp_path / "keys"))
    # SIGINT ignored as a shell's `serve &` leaves it, by a shell: a preexec_fn runs Python between
    # fork and exec in a process whose engine threads run (a serve started so once died at start)
    command = [sys.executable, "-m", "lakehouse.cli", "serve", "--port", str(free_port())]
    server = subprocess.Popen(["bash", "-c", 'trap "" INT; exec "$@"', "serve", *command], cwd=REPO,
                              env=cli_env(settings, LAKEHOUSE_ENGINE=serve_engine), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        assert server.stdout is not None
        deadline = time.monotonic() + 240
        said = ""
        while "sc://" not in said and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line:
                break
            said += line
        assert "sc://" in said, f"serve printed no URL (exit status {server.poll()}):\n{said}"
        server.send_signal(stop)
        rest, _ = server.communicate(timeout=60)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0 and rest.strip().endswith("stopped"), rest
