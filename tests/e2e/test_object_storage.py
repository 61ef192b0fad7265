"""A lake on object storage (issue 47): an S3 API server on loopback (``tests.s3``), each engine
reading and writing the lake there with the store's settings taken from one place
(:mod:`lakehouse.store`): the embedded engine from this process's environment, Apache Spark through
Hadoop's S3A file system (its jars fetched like Delta's, its options from the same settings)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from lakehouse.config import Settings
from tests.e2e.test_slothmail_story import slothmail_story

pytestmark = pytest.mark.parity


@contextmanager
def session_on_store(engine: Any, settings: Settings) -> Iterator[Any]:
    """A Spark session for a lake on the store: the test run's embedded engine (it reads the store's
    settings from the environment), or for Apache Spark an engine of its own, started as a user's
    run starts it for such a lake (S3A jars and options), since the test run's engine has no S3A."""
    from lakehouse.spark.session import open_engine

    if engine.kind == "sail":
        yield engine.spark
        return
    with open_engine(settings.with_overrides(engine="spark-connect", spark_remote="")) as own:
        yield own.spark


@pytest.fixture(scope="module")
def on_store(engine: Any, store: Any) -> Iterator[Any]:
    """:func:`session_on_store` once per module and test process: an Apache Spark engine with the S3A
    jars costs half a minute to start, and serves every lake on the store (each test's lake
    registers its own catalog names)."""
    from lakehouse.config import load_settings

    with session_on_store(engine, load_settings(environ={}).with_overrides(lake_root="s3://lake/_engine")) as spark:
        yield spark


def store_keys(prefix: str) -> list[str]:
    import boto3

    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket="lake", Prefix=f"{prefix}/")
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


@pytest.mark.slow_on_spark(why="about 470 s on Apache Spark (eight runs at its fixed cost, 1.7x on the store), the "
                               "longest test of `make test`, whose time is bounded; it runs the story on Apache Spark on "
                               "local disk (tests/e2e/test_slothmail_story.py, about 270 s) and the register import "
                               "on the store")
def test_the_slothmail_story_on_object_storage_ends_as_on_local_disk(on_store: Any, lake: Any,
                                                                     tmp_path: Path, monkeypatch: Any) -> None:
    """The seeds' story with the lake root ``s3://lake/<name>``: every expectation of the story
    holds, the staging folders lived on the store, the gold tables' logs got their checkpoints
    there (:func:`lakehouse.spark.delta.checkpoint_log`), and nothing of the lake was written to
    local disk (the landing folder and the keys are local settings)."""
    from lakehouse.spark import delta

    monkeypatch.setattr(delta, "LOG_CHECKPOINT_COMMITS", 2)
    here = tmp_path / "working-directory"
    here.mkdir()
    monkeypatch.chdir(here)  # a lake root taken for a local path would show up here
    prefix = f"story-{uuid.uuid4().hex[:8]}"
    settings = lake.with_overrides(lake_root=f"s3://lake/{prefix}", spark_remote="")
    slothmail_story(on_store, settings)
    keys = store_keys(prefix)
    tables = {"/".join(k.split("/")[1:3]) for k in keys if "/_delta_log/" in k}
    assert {"bronze/entries", "silver/messages", "gold/slothmail_v5"} <= tables
    # the gold runs checkpointed their tables' logs on the store (once in 2 commits here), hint-free
    gold_logs = [k for k in keys if k.split("/")[1:2] == ["gold"] and "/_delta_log/" in k]
    assert [k for k in gold_logs if k.endswith(".checkpoint.parquet")]
    assert not [k for k in gold_logs if k.endswith("/_last_checkpoint")]
    assert not [k for k in keys if k.startswith(f"{prefix}/_staging/") and not k.endswith("/")], \
        "a run left its staging files"
    assert sorted(p.name for p in here.iterdir()) == [], "a run wrote into the working directory"


CLUSTER = "local-cluster[2,1,1536]"
"""Apache Spark as a cluster on one machine: a master and two workers, each with an executor
process of its own (one core, 1,536 MiB), the shape of a real cluster."""


def _executor_of_this_worker() -> str:
    """The command line of the JVM that started this Python worker (through PySpark's daemon): its
    executor's."""
    import os
    from pathlib import Path

    pid = os.getppid()
    for _ in range(5):
        line = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        if "java" in line.split(" ", 1)[0]:
            return line
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return "no JVM among the worker's ancestors"


@pytest.mark.cluster
def test_the_slothmail_story_on_a_two_executor_cluster_with_the_lake_on_the_store(lake: Any, store: Any,
                                                                                    tmp_path: Path,
                                                                                    monkeypatch: Any) -> None:
    """Apache Spark as a two-executor cluster (:data:`CLUSTER`) behind its Spark Connect server, the
    lake on the store: the pipelines' Python functions run in the executors' processes, and the
    story's every expectation holds, as on local disk and on Sail; so does the register import
    (:func:`register_on_store`)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from lakehouse.spark.session import open_engine

    monkeypatch.chdir(tmp_path)
    prefix = f"cluster-{uuid.uuid4().hex[:8]}"
    settings = lake.with_overrides(lake_root=f"s3://lake/{prefix}", spark_remote="", engine="spark-connect",
                                   spark_conf={"spark.master": CLUSTER})
    with open_engine(settings) as cluster:
        spark = cluster.spark
        where = F.udf(_executor_of_this_worker, StringType())
        ran = {r[0] for r in spark.range(0, 64, 1, 8).select(where().alias("by")).distinct().collect()}
        assert ran and all("CoarseGrainedExecutorBackend" in by for by in ran), ran
        slothmail_story(spark, settings)
        register_on_store(spark, lake.with_overrides(engine="spark-connect", spark_conf={"spark.master": CLUSTER}),
                          tmp_path)
    tables = {"/".join(k.split("/")[1:3]) for k in store_keys(prefix) if "/_delta_log/" in k}
    assert {"bronze/entries", "silver/messages", "gold/slothmail_v5"} <= tables


@pytest.mark.slow_on_spark(why="about 330 s on Apache Spark (two batches, each table in slices and compacted, at its fixed "
                               "cost, 1.7x on the store), which brought `make test` to its bound; on Apache Spark the "
                               "register import runs on the store, the sliced writes and compaction on local disk "
                               "(tests/spark/test_delta.py, tests/spark/test_optimize.py), where a generated history "
                               "draws them too (tests/spark/test_against_reference.py)")
def test_a_generated_history_on_object_storage_equals_the_reference(on_store: Any, lake: Any,
                                                                    monkeypatch: Any) -> None:
    """A generated history in two batches (every defect on) into a lake on the store, its tables
    compacted after each (``lakehouse optimize``, a run of two small files enough), in buckets of
    about four rows, silver's written whole in slices (their staging and markers on the store
    too): bronze, silver, gold and the change feeds equal the reference model's, as on local disk
    (:func:`tests.spark.test_against_reference.check_lake`)."""
    from random import Random

    from lakehouse.spark import buckets, compaction
    from lakehouse.spark import gold as gold_writes
    from tests.simulate import Knobs, simulate, split_batches
    from tests.spark import test_against_reference as against

    monkeypatch.setattr(compaction, "MIN_SMALL_FILES", 2)
    monkeypatch.setattr(buckets, "BUCKET_ROWS", 4)
    monkeypatch.setattr(gold_writes, "BUCKET_ROWS", 4)
    against.slice_every_table(monkeypatch)
    written = against.slices_noted(monkeypatch)
    history = simulate(Knobs(authors=3, schemas=2, migrations=5, messages=60), seed=11)
    batches = split_batches(list(history.lines), 2, Random(5))
    settings = lake.with_overrides(lake_root=f"s3://lake/history-{uuid.uuid4().hex[:8]}", spark_remote="")
    against.COMPACTED.clear()
    arrived: list[Any] = []
    ends: list[int] = []
    for n, batch in enumerate(batches):
        arrived += against.run_batches(on_store, settings, history, [batch], first=n, optimize=True)
        ends.append(len(arrived))
    against.check_lake(on_store, settings, arrived, history, ends)
    assert against.COMPACTED, "optimize compacted tables on the store"
    assert "messages" in written, written


def register_on_store(spark: Any, lake: Any, tmp_path: Path) -> None:
    """The country register's first two snapshots imported, ingested and materialized one by one
    into a lake of its own on the store: the gold table as of the Delta version written after each
    equals that snapshot, as on local disk (:func:`tests.e2e.test_registers.check_register`), the
    second run an incremental one over the store's tables."""
    from tests.e2e.test_registers import check_register, some_snapshots

    settings = lake.with_overrides(lake_root=f"s3://lake/register-{uuid.uuid4().hex[:8]}", spark_remote="")
    check_register(spark, settings, some_snapshots(tmp_path, "country", ("0001", "0002")), "country")


def test_the_register_import_on_object_storage_gives_each_snapshot_as_on_local_disk(on_store: Any, lake: Any,
                                                                                   tmp_path: Path) -> None:
    """:func:`register_on_store` with the test run's engine."""
    register_on_store(on_store, lake, tmp_path)
