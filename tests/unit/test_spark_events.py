"""The event-log counts of the trickle benchmark (tests/benchmarks/spark_events.py) on a made-up log."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks import spark_events as E


def _log(folder: Path, events: list[dict[str, Any]]) -> Path:
    folder.mkdir()
    (folder / "local-1").write_text("".join(json.dumps(e) + "\n" for e in events))
    return folder


def _job(job: int, start: float, end: float, sql: str | None, tasks: int = 2) -> list[dict[str, Any]]:
    props = {"spark.sql.execution.id": sql} if sql is not None else {}
    return [{"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": start * 1000, "Properties": props,
             "Stage Infos": [{"Number of Tasks": tasks}]},
            {"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": end * 1000}]


def _sql(key: int, start: float, end: float, description: str, root: int | None = None) -> list[dict[str, Any]]:
    start_event = "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart"
    return [{"Event": start_event, "executionId": key, "time": start * 1000, "description": description,
             "rootExecutionId": key if root is None else root},
            {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd", "executionId": key,
             "time": end * 1000}]


def test_jobs_and_statements_counted_in_the_step_they_start(tmp_path: Path) -> None:
    events = [
        *_sql(1, 100.0, 104.0, "sql at <unknown>:0"),  # a MERGE: it starts "MERGE operation" executions
        *_sql(2, 100.5, 101.0, "MERGE operation - scanning files for matches", root=1),
        *_job(1, 100.6, 100.9, "2"), *_job(2, 101.0, 103.0, "1", tasks=3),
        *_sql(3, 104.5, 105.5, "save at <unknown>:0"),
        *_job(3, 104.6, 105.4, "3"),
        *_job(4, 106.0, 106.5, None),  # no statement: a job of the driver's own
    ]
    logged = E.read(_log(tmp_path / "log", events))
    steps = E.per_step(logged, E.step_windows(100.0, {"tables": 4.2, "finish": 3.0}))
    assert steps["tables"]["jobs"] == 2 and steps["tables"]["tasks"] == 5
    assert steps["tables"]["job_seconds"] == pytest.approx(2.3)
    assert steps["tables"]["merges"] == {"count": 1, "median_seconds": 4.0, "median_jobs": 2}
    assert "saves" not in steps["tables"]
    assert steps["finish"]["jobs"] == 2 and steps["finish"]["saves"]["count"] == 1


def test_a_compressed_log_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "log"
    folder.mkdir()
    (folder / "events_1_local-1.zstd").write_bytes(b"\x28\xb5\x2f\xfd")
    with pytest.raises(ValueError, match="compressed"):
        E.read(folder)
