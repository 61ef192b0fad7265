"""Shared fixtures: paths to the repository's fixtures and data, and one engine per test run and engine.

Engine parity (LAKEHOUSE.md, Engine): a test marked ``parity`` runs on every engine of
:data:`ENGINES`, the others on embedded Sail only. ``sail`` is the embedded Sail server (or
``LAKEHOUSE_SPARK_REMOTE``), ``spark`` a local Apache Spark Spark Connect server with Delta Lake.
Both are Spark Connect servers, so one test process holds both sessions; each starts once, on
first use, and stops when the run ends (``make test`` runs two test processes, pytest-xdist's
workers, each with its own). ``--engines sail`` runs the parity tests on one engine
only (a quicker run while working; ``make test`` runs both).

A parity test marked ``slow_on_spark(why=...)`` runs on Apache Spark only with ``--slow-on-spark``
(``make test-parity``): Apache Spark pays some tenths of a second per job, and ``make test`` must
stay within CI's time. Each says why, and which test covers its case on both engines in
``make test``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest_plugins = ["tests.s3"]  # the S3 API server fixture, `store`

REPO = Path(__file__).resolve().parents[1]
ENGINES = ("sail", "spark")
_RUNNING: dict[str, Any] = {}
# pytest-xdist's workers (make test runs two) are given COLUMNS=80 and LINES=24: the commands the
# tests run write to pipes, whose tables keep their natural width, as they do for a user
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
_STOP = ExitStack()


def project_path(*parts: str) -> Path:
    """A path in the repository (``fixtures/``, ``data/registers/``); fails (never skips) when it is missing."""
    path = REPO.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"{path} is missing from the repository")
    return path


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--engines", default=",".join(ENGINES),
                     help=f"engines the parity tests run on, comma-separated (default: {','.join(ENGINES)})")
    parser.addoption("--slow-on-spark", action="store_true",
                     help="run the parity tests marked slow_on_spark on Apache Spark too (make test-parity)")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "engine" not in metafunc.fixturenames:
        return
    chosen = [e.strip() for e in metafunc.config.getoption("engines").split(",") if e.strip()]
    unknown = set(chosen) - set(ENGINES)
    if unknown:
        raise pytest.UsageError(f"--engines: unknown engine(s) {', '.join(sorted(unknown))}; known: {', '.join(ENGINES)}")
    parity = bool(metafunc.definition.get_closest_marker("parity"))
    if metafunc.definition.get_closest_marker("slow_on_spark") and not metafunc.config.getoption("slow_on_spark"):
        parity = False
    names = chosen if parity else ["sail"]
    metafunc.parametrize("engine", names, indirect=True, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``all_engines`` need every engine: they are deselected when ``--engines`` names
    fewer. Tests marked ``cluster`` run Apache Spark as a cluster: they are deselected unless
    ``--slow-on-spark`` is given and ``--engines`` names ``spark``. A parameter case marked
    ``slow_on_spark`` that runs on Apache Spark is deselected unless ``--slow-on-spark`` is given, and
    so is a test or case marked ``slow(why=...)`` on any engine."""
    chosen = {e.strip() for e in config.getoption("engines").split(",") if e.strip()}
    slow_on_spark = bool(config.getoption("slow_on_spark"))
    with_cluster = slow_on_spark and "spark" in chosen

    def on_spark(item: pytest.Item) -> bool:
        params = getattr(getattr(item, "callspec", None), "params", {})
        return params.get("engine") == "spark" or bool(item.get_closest_marker("all_engines"))

    def dropped_here(item: pytest.Item) -> bool:
        return bool((item.get_closest_marker("all_engines") and not chosen >= set(ENGINES))
                    or (item.get_closest_marker("cluster") and not with_cluster)
                    # a case marked slow_on_spark on its own (pytest.param(..., marks=...)) of a test
                    # that runs on Apache Spark
                    or (item.get_closest_marker("slow_on_spark") and on_spark(item) and not slow_on_spark)
                    or (item.get_closest_marker("slow") and not slow_on_spark))

    dropped = [item for item in items if dropped_here(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if not dropped_here(item)]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _STOP.close()
    _RUNNING.clear()


def engine_for(name: str) -> Any:
    """The running engine ``name`` (``sail`` or ``spark``), started on first use, kept for the run."""
    if name not in _RUNNING:
        from lakehouse.config import load_settings
        from lakehouse.spark.session import open_engine

        settings = load_settings()
        if name == "spark":
            settings = settings.with_overrides(engine="spark-connect", spark_remote="")
        elif not settings.spark_remote:
            settings = settings.with_overrides(engine="sail")
        running = _STOP.enter_context(open_engine(settings))
        # each name is its own engine: a Delta feature only Apache Spark offers tells them apart
        folder = tempfile.mkdtemp(prefix="lakehouse-engine-probe-")
        try:
            running.spark.range(1).write.format("delta").save(f"{folder}/t")
            offers_history = bool(running.spark.sql(f"DESCRIBE HISTORY delta.`{folder}/t`").collect())
        except Exception:  # noqa: BLE001 - Sail refuses the statement
            offers_history = False
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if offers_history != (name == "spark"):
            raise pytest.UsageError(f"the session opened for engine {name!r} is not that engine")
        _RUNNING[name] = running
    return _RUNNING[name]



@pytest.fixture(scope="session")
def engine(request: pytest.FixtureRequest) -> Any:
    """The engine of this test (see the module docstring): ``sail`` unless the test is ``parity``."""
    return engine_for(getattr(request, "param", "sail"))


@pytest.fixture(scope="session")
def spark(engine: Any) -> Any:
    """The session-scoped Spark session of the test's engine."""
    return engine.spark


@pytest.fixture
def engine_name(request: pytest.FixtureRequest) -> str:
    """``sail`` or ``spark``: the engine of this test (parity tests run on both)."""
    return "spark" if request.getfixturevalue("engine").kind == "spark-connect" else "sail"


@pytest.fixture(autouse=True)
def _tables_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """An incremental run in this process merges the touched rows into every gold table and the
    replaced states into silver's, however few their rows (:data:`lakehouse.spark.gold.WHOLE_TABLE_ROWS`,
    50,000 outside the tests, and :data:`pipelines.silver.WHOLE_STATES_ROWS`, 8,192): the tests'
    lakes are small, and the merge is the write their users' large tables take. Tests of the whole
    write set them (the generated histories draw it); commands a test runs in other processes
    write small tables whole."""
    from lakehouse.spark import gold
    from pipelines import silver

    monkeypatch.setattr(gold, "WHOLE_TABLE_ROWS", 0)
    monkeypatch.setattr(silver, "WHOLE_STATES_ROWS", 0)


@pytest.fixture(autouse=True)
def _logs_checkpointed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gold table or change table written in this process gets a checkpoint of its log once in 5
    commits (:data:`lakehouse.spark.delta.LOG_CHECKPOINT_COMMITS`, 100 outside the tests), so that
    the tests' few runs read, revert and travel in time over logs with checkpoints, as a lake's gold
    tables have after a hundred runs (once in 2 cost the suite about two minutes more)."""
    from lakehouse.spark import delta

    monkeypatch.setattr(delta, "LOG_CHECKPOINT_COMMITS", 5)


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    """Settings for a fresh lake, landing folder, key store and edge index cache under ``tmp_path``.

    In a test on Apache Spark, ``spark_remote`` names the test run's Spark Connect server, so that
    commands the test runs in other processes (:func:`tests.lakes.run_cli`) use it too.
    """
    from lakehouse.config import load_settings

    for name in ("LAKE_ROOT", "LANDING", "KEYS", "CONFIG"):
        monkeypatch.delenv(f"LAKEHOUSE_{name}", raising=False)
    settings = load_settings(environ={}).with_overrides(
        lake_root=str(tmp_path / "lake"), landing=str(tmp_path / "landing"), keys=str(tmp_path / "keys"),
        index_cache=str(tmp_path / "index-cache"))
    if "engine" in request.fixturenames:
        running = request.getfixturevalue("engine")
        if running.kind == "spark-connect":
            settings = settings.with_overrides(spark_remote=running.address)
    return settings
