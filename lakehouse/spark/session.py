"""One Spark session per run: embedded Sail, a Spark Connect endpoint, or Apache Spark in-process.

LAKEHOUSE.md, Engine. The pipelines only use APIs that Spark Connect serves, so the same code runs
on all three:

- ``engine: sail`` (default): a Sail Spark Connect server (``pysail``) started in this process on
  a free loopback port, with its logging kept quiet; no JVM, nothing downloaded.
- ``spark_remote: sc://host:port``: any Spark Connect endpoint; nothing is started.
- ``engine: spark``: PySpark classic with delta-spark's ``configure_spark_with_delta_pip``. It
  needs Java and the Delta jars; where the jars are not in the local Ivy cache they would be
  fetched from a Maven repository, so this fails fast with a message saying so.

This module is the only place that starts or stops an engine.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.config import Settings
from lakehouse.errors import EngineError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# Sail writes a Delta checkpoint every N commits and then cannot time-travel before it
# (LAKEHOUSE.md, engine caveats); tables read back in time are created with a larger interval.
TIME_TRAVEL_CHECKPOINT_INTERVAL = 1_000_000

_DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
}


class Engine:
    """A running engine and its session; use :func:`open_engine` rather than this directly.

    Attributes:
        spark: the Spark session (Spark Connect for ``sail`` and remote, classic for ``spark``).
        kind: ``"sail"``, ``"remote"`` or ``"spark"``.
        address: ``sc://host:port`` for Spark Connect engines, else ``None``.
    """

    def __init__(self, spark: SparkSession, kind: str, address: str | None, server: Any = None) -> None:
        self.spark = spark
        self.kind = kind
        self.address = address
        self._server = server

    def stop(self) -> None:
        """Stop the session and, for the embedded engine, its server. Idempotent."""
        with contextlib.suppress(Exception):  # a session that is already gone is stopped
            self.spark.stop()
        if self._server is not None:
            self._server.stop()
            self._server = None


def start_sail_server(host: str = "127.0.0.1", port: int = 0) -> Any:
    """Start an embedded Sail Spark Connect server in this process.

    Args:
        host: address to bind; loopback by default.
        port: TCP port, 0 for a free one.

    Returns:
        The running ``pysail.spark.SparkConnectServer`` (``listening_address`` gives host, port).

    Raises:
        EngineError: pysail is missing or the server did not start.
    """
    os.environ.setdefault("RUST_LOG", "error")
    try:
        from pysail.spark import SparkConnectServer
    except ImportError as exc:  # pragma: no cover - an installation defect
        raise EngineError(f"the embedded engine needs pysail: {exc}; run `make install`") from None
    server = SparkConnectServer(ip=host, port=port)
    try:
        server.start(background=True)
    except Exception as exc:
        raise EngineError(f"could not start the embedded Sail server on {host}:{port}: {exc}") from None
    if server.listening_address is None:
        raise EngineError(f"the embedded Sail server on {host}:{port} did not start listening")
    return server


def _connect(address: str, conf: dict[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(address)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as exc:
        raise EngineError(f"could not open a Spark Connect session at {address}: {exc}") from None


def _delta_jars_present() -> bool:
    home = Path.home()
    patterns = [str(p / "jars" / "io.delta_delta-spark_*.jar") for p in home.glob(".ivy2*")]
    return any(glob.glob(pattern) for pattern in patterns)


def _start_classic(conf: dict[str, str]) -> SparkSession:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise EngineError("engine `spark` (Apache Spark in-process) needs Java 17+; none was found. "
                          "Install a JDK or use the default engine (LAKEHOUSE_ENGINE=sail).")
    has_jars = "spark.jars" in conf or _delta_jars_present()
    if not has_jars:
        raise EngineError(
            "engine `spark` (Apache Spark in-process) needs the Delta Lake jars "
            "(io.delta:delta-spark_2.13), which are not in the local Ivy cache (~/.ivy2*/jars) and "
            "would be resolved from a Maven repository this machine cannot reach. Fetch them once "
            "where Maven Central is reachable (or list local jars in spark_conf `spark.jars`), or use "
            "the default engine (LAKEHOUSE_ENGINE=sail)."
        )
    from delta import configure_spark_with_delta_pip
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[*]")
        .appName("lakehouse")
        .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
        .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
        .config("spark.ui.enabled", "false")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    if "spark.jars" not in conf:
        builder = configure_spark_with_delta_pip(builder)
    try:
        return builder.getOrCreate()
    except Exception as exc:
        raise EngineError(f"Apache Spark in-process did not start: {exc}") from None


@contextmanager
def open_engine(settings: Settings) -> Iterator[Engine]:
    """Start (or connect to) the engine the settings name; stop it on exit.

    Args:
        settings: effective settings (``engine``, ``spark_remote``, ``spark_conf``).

    Yields:
        The :class:`Engine`, with the session time zone set to UTC.

    Raises:
        EngineError: the engine could not be started or reached; says which and what to do.
    """
    conf = {**_DEFAULT_CONF, **dict(settings.spark_conf)}
    engine: Engine
    if settings.spark_remote:
        address = str(settings.spark_remote)
        engine = Engine(_connect(address, conf), "remote", address)
    elif settings.engine == "spark":
        engine = Engine(_start_classic(conf), "spark", None)
    else:
        server = start_sail_server()
        host, port = server.listening_address
        address = f"sc://{host}:{port}"
        try:
            spark = _connect(address, conf)
        except BaseException:
            server.stop()
            raise
        engine = Engine(spark, "sail", address, server)
    try:
        yield engine
    finally:
        engine.stop()
