"""Apache Spark's event log, counted per step of a run: where a run's fixed cost on Apache Spark goes.

A run on Apache Spark pays per engine job (scheduling, tasks, their Python workers) and per Delta
commit (a MERGE is a couple of dozen jobs), more than per row. With ``spark.eventLog.enabled`` the
engine writes a JSON line per event (:func:`event_log_conf`); :func:`per_step` counts the jobs
that started in each step of a run's timeline, and their seconds, and :func:`statements` the
MERGEs and the writes a step ran, with their seconds and jobs.

The event log is Apache Spark's (``org.apache.spark.scheduler.SparkListener*`` events, the
``SparkListenerSQLExecutionStart``/``End`` of Spark SQL); Sail has none.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def event_log_conf(folder: Path) -> dict[str, str]:
    """The Spark settings that write an event log into ``folder`` (created), uncompressed and in one
    file per application, which :func:`read` reads."""
    folder.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": folder.resolve().as_uri(),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false"}


@dataclass
class Events:
    """The jobs and SQL executions of an event log; times in seconds since the epoch.

    ``jobs``: job id -> ``start``, ``end`` (absent while running), ``sql`` (its execution id or
    None), ``tasks``. ``statements``: execution id -> ``start``, ``end``, ``description``, ``root``
    (the execution that started it; itself for a statement a caller ran).
    """

    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    statements: dict[str, dict[str, Any]] = field(default_factory=dict)


def _lines(folder: Path) -> Iterator[str]:
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        if path.suffix in {".zstd", ".lz4", ".snappy", ".lzf"}:
            raise ValueError(f"{path}: a compressed event log; write it with event_log_conf (uncompressed)")
        with path.open(encoding="utf-8") as f:
            yield from f


def read(folder: Path) -> Events:
    """Every job and SQL execution of the event logs in ``folder``.

    Raises:
        ValueError: a compressed event log (see :func:`event_log_conf`).
    """
    out = Events()
    for line in _lines(folder):
        e = json.loads(line)
        kind = e.get("Event", "")
        if kind == "SparkListenerJobStart":
            props = e.get("Properties") or {}
            out.jobs[e["Job ID"]] = {"start": e["Submission Time"] / 1000, "sql": props.get("spark.sql.execution.id"),
                                     "tasks": sum(s["Number of Tasks"] for s in e.get("Stage Infos", []))}
        elif kind == "SparkListenerJobEnd" and e["Job ID"] in out.jobs:
            out.jobs[e["Job ID"]]["end"] = e["Completion Time"] / 1000
        elif kind.endswith("SQLExecutionStart"):
            key = str(e["executionId"])
            out.statements[key] = {"start": e["time"] / 1000, "description": e.get("description", ""),
                                   "root": str(e.get("rootExecutionId", e["executionId"]))}
        elif kind.endswith("SQLExecutionEnd") and str(e["executionId"]) in out.statements:
            out.statements[str(e["executionId"])]["end"] = e["time"] / 1000
    return out


def step_windows(start: float, steps: dict[str, float]) -> list[tuple[str, float, float]]:
    """The wall-clock window of each step of a :class:`lakehouse.progress.Timeline` that began at
    ``start`` (seconds since the epoch): ``(name, begin, end)``, in order."""
    out, at = [], start
    for name, seconds in steps.items():
        out.append((name, at, at + seconds))
        at += seconds
    return out


def per_step(events: Events, windows: Sequence[tuple[str, float, float]]) -> dict[str, dict[str, Any]]:
    """Per step: ``jobs`` that started in its window, ``job_seconds`` (their durations summed: more than
    the wall time when jobs overlap), ``tasks``, and the statements a caller ran in it by kind
    (:func:`statements`)."""
    out: dict[str, dict[str, Any]] = {}
    for name, begin, end in windows:
        jobs = [j for j in events.jobs.values() if begin <= j["start"] < end]
        out[name] = {"jobs": len(jobs), "job_seconds": round(sum(j.get("end", end) - j["start"] for j in jobs), 2),
                     "tasks": sum(j["tasks"] for j in jobs), **statements(events, begin, end)}
    return out


def _kind(description: str, merged: bool) -> str | None:
    """``merge``, ``save`` or None (a statement neither counts) for a root SQL execution."""
    if merged or description.lstrip().upper().startswith("MERGE"):
        return "merge"
    return "save" if description.startswith("save") else None


def statements(events: Events, begin: float, end: float) -> dict[str, Any]:
    """The MERGEs and the writes a caller ran (root SQL executions) that started in ``[begin, end)``:
    ``merges`` (known by their SQL text or by the ``MERGE operation`` executions they started) and
    ``saves`` (a DataFrame written: a table, an append, a staged folder), each with its count, the
    median seconds and the median jobs of the statement and of what it started; a kind with none
    is left out."""
    roots = {k: s for k, s in events.statements.items() if s["root"] == k and begin <= s["start"] < end}
    merged = {s["root"] for k, s in events.statements.items()
              if s["root"] in roots and s["root"] != k and "MERGE operation" in s["description"]}
    jobs_of: dict[str, int] = {}
    for j in events.jobs.values():
        root = events.statements.get(j["sql"] or "", {}).get("root")
        if root in roots:
            jobs_of[root] = jobs_of.get(root, 0) + 1
    by_kind: dict[str, list[tuple[float, int]]] = {}
    for k, s in roots.items():
        kind = _kind(s["description"], k in merged)
        if kind is not None:
            by_kind.setdefault(kind, []).append((s.get("end", end) - s["start"], jobs_of.get(k, 0)))
    return {f"{kind}s": {"count": len(v), "median_seconds": round(statistics.median(t for t, _ in v), 2),
                         "median_jobs": statistics.median(n for _, n in v)}
            for kind, v in sorted(by_kind.items())}
