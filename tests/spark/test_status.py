"""``make status``: what it names (README, Operating)."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from rich.console import Console

from lakehouse.cli import render_status
from lakehouse.core.lensfile import parse_lens_file
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.publisher import Publisher
from pipelines.ingest import run_ingest
from pipelines.silver import run_silver
from pipelines.status import lake_status
from tests.publishing import landing_files

LENS = "kind: schema-migration\nfields:\n  - body:\n    action: create\n    type: text\n"


def status_text(spark: Any, settings: Any) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=400)
    for part in render_status(lake_status(spark, settings)):
        console.print(part)
    return buffer.getvalue()


@pytest.mark.parity
def test_status_names_a_log_that_waits_behind_a_rejected_entry(spark: Any, lake: Any) -> None:
    """Issue: an entry ingest rejected (payload_too_large) left every later write of that key to
    that schema ``pending, waits for seq 2`` for ever, with nothing saying so. The entry here is
    signed by a publisher that did not know the lake's limit (a client of another make)."""
    store = KeyStore(lake.keys)
    with Publisher(store, "alice", lake.landing, create_key=True) as publisher:
        publisher.schema_init(parse_lens_file("kind: schema-meta\nname: notes\n", file="meta.yaml"))  # type: ignore[arg-type]
        publisher.schema_message("notes", parse_lens_file(LENS, file="001.yaml"))  # type: ignore[arg-type]
        publisher.create("notes", {"body": "first"})
    with Publisher(store, "alice", lake.landing, max_payload=10 << 20) as careless:
        careless.create("notes", {"body": "x" * (2 << 20)})
        careless.create("notes", {"body": "third"})
    run_ingest(spark, lake)
    run_silver(spark, lake)
    text = status_text(spark, lake)
    assert "logs waiting behind a rejected entry" in text and "publish them again on a new log" in text
    author = store.get("alice").author
    big = landing_files(lake.landing)[-1].name
    rows = [line for line in text.splitlines() if author in line and "payload_too_large" in line]
    assert len(rows) == 1 and f"{big}:1" in rows[0], text
    assert re.search(rf"{author}\W+1\W+2\W+payload_too_large", rows[0]), rows[0]  # log 1 waits for seq 2


def notes_lake(spark: Any, lake: Any) -> None:
    """A lake with one schema, ``notes``, registered, with one instance in its gold table."""
    from pipelines.gold import run_gold
    from pipelines.register import register_schema

    with Publisher(KeyStore(lake.keys), "alice", lake.landing, create_key=True) as publisher:
        publisher.schema_init(parse_lens_file("kind: schema-meta\nname: notes\n", file="meta.yaml"))  # type: ignore[arg-type]
        publisher.schema_message("notes", parse_lens_file(LENS, file="001.yaml"))  # type: ignore[arg-type]
        publisher.create("notes", {"body": "first"})
    run_ingest(spark, lake)
    register_schema(spark, lake, "notes", None)
    run_silver(spark, lake)
    run_gold(spark, lake)


def read_only(settings: Any, *args: str) -> Any:
    """``lakehouse ARGS`` in a process that sees the lake root as a read-only file system (a
    read-only bind mount in a mount namespace of its own, as a read-only share would be)."""
    import subprocess
    import sys

    from tests.lakes import REPO, cli_env

    root = settings.lake_root
    script = 'mount --bind "$0" "$0" && mount -o remount,ro,bind "$0" && exec "$@"'
    return subprocess.run(["unshare", "-rm", "sh", "-c", script, root, sys.executable, "-m", "lakehouse.cli", *args],
                          cwd=REPO, env=cli_env(settings), capture_output=True, text=True, timeout=300, check=False)


def test_commands_that_only_read_work_on_a_read_only_lake_and_while_a_run_holds_the_lake(spark: Any,
                                                                                          lake: Any) -> None:
    """Issue: `status` and `history` failed on a read-only lake (`OSError: Read-only file system:
    '.lakehouse.lock' [unexpected]`), and `status` was refused while a materialize ran: commands
    that only read take no write lock."""
    from lakehouse.lock import lake_lock
    from tests.lakes import run_cli

    notes_lake(spark, lake)
    reads = (["status"], ["history", "notes"], ["sql", "SELECT count(*) AS n FROM gold.notes", "--format", "json"],
             ["changes", "notes", "--format", "json"])
    writes = read_only(lake, "ingest")
    assert writes.returncode == 1 and "Read-only file system" in writes.stderr  # the lake is read only there
    assert writes.stderr.rstrip().endswith("[not_writable]"), writes.stderr
    for args in reads:
        done = read_only(lake, *args)
        assert done.returncode == 0, (args, done.stderr)
    with lake_lock(str(lake.lake_root), "materialize"):
        for args in reads:
            done = run_cli(lake, *args)
            assert done.returncode == 0, (args, done.stderr)
        assert "in use by another run" in run_cli(lake, "ingest").stderr
    assert "notes" in read_only(lake, "status").stdout


def test_plain_bad_arguments_get_a_message_not_an_unexpected_failure(spark: Any, lake: Any) -> None:
    """Issue: `lakehouse changes X --limit -1` ended as a SparkRuntimeException [unexpected], and
    `SELECT ... VERSION AS OF 99` answered `Missing commit file: expected final version 99, replay
    reached 2` instead of naming the versions the table has."""
    from tests.lakes import run_cli

    notes_lake(spark, lake)
    limit = run_cli(lake, "changes", "notes", "--limit", "-1")
    assert limit.returncode == 2 and "--limit" in limit.stderr and "unexpected" not in limit.stderr, limit.stderr
    travel = run_cli(lake, "sql", "SELECT * FROM gold.notes VERSION AS OF 99")
    assert travel.returncode == 1 and "gold.notes has versions 0 to 0" in travel.stderr, travel.stderr
    assert travel.stderr.rstrip().endswith("[sql]")


def test_status_of_a_lake_that_does_not_exist_creates_nothing(lake: Any) -> None:
    """Issue: `status` created a missing lake folder (it took the write lock there)."""
    from pathlib import Path

    from tests.lakes import run_cli

    done = run_cli(lake, "status")
    assert done.returncode == 0, done.stderr
    assert not Path(lake.lake_root).exists()
