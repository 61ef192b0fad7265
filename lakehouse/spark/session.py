"""One Spark session per run: embedded Sail, Apache Spark with Delta Lake, or a Spark Connect endpoint.

LAKEHOUSE.md, Engine. The pipelines only use APIs that Spark Connect serves, so the same code runs
on all of them (``docs/engines.md`` lists where the engines differ and what the code does):

- ``engine: sail`` (default): a Sail Spark Connect server (``pysail``) started in this process on
  a free loopback port, with its logging kept quiet; no JVM, nothing downloaded.
- ``engine: spark``: Apache Spark in this process (PySpark classic, ``local[*]``) with Delta Lake:
  delta-spark's jars, of the version that matches the installed delta-spark, are fetched from
  Maven Central on first use into a cache (:mod:`lakehouse.spark.jars`).
- ``engine: spark-connect``: a local Apache Spark Spark Connect server with Delta Lake (the server
  ships with PySpark 4), started as a child process on a free loopback port; the pipelines run
  through Spark Connect, exactly as against a cluster.
- ``spark_remote: sc://host:port``: any Spark Connect endpoint (an Apache Spark 4 cluster with
  delta-spark, or Sail's); nothing is started.

This module is the only place that starts or stops an engine.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lakehouse.config import Settings
from lakehouse.errors import EngineError
from lakehouse.store import export_environment, hadoop_options, is_store_root, store_settings

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
        kind: ``"sail"``, ``"spark"``, ``"spark-connect"`` or ``"remote"``.
        address: ``sc://host:port`` for Spark Connect engines, else ``None``.
    """

    def __init__(self, spark: SparkSession, kind: str, address: str | None, server: Any = None) -> None:
        self.spark = spark
        self.kind = kind
        self.address = address
        self._server = server

    def stop(self) -> None:
        """Stop the session and, for the embedded engine, its server. Idempotent."""
        stop_session(self.spark)
        if self._server is not None:
            self._server.stop()
            self._server = None


def stop_session(spark: SparkSession) -> None:
    """Stop a session, before its engine's server stops. Idempotent; a session already gone is stopped.

    A Spark Connect client tells the server in the background, once a query's results are read,
    that it may release them (``ReleaseExecute``), and at exit the process waits for those calls;
    one still pending when the server stopped retried against it for up to 10 minutes (pyspark's
    default retry policy), and the process did not exit (``serve`` after Ctrl-C just after a
    query). Stopping the session waits for them while the server still answers.
    """
    with contextlib.suppress(Exception):  # a session that is already gone is stopped
        spark.stop()
    _disarm_finalizer(spark)


def _disarm_finalizer(spark: SparkSession) -> None:
    """Make a stopped Spark Connect session's finalizer harmless.

    pyspark 4.0's Spark Connect session closes its client again when the garbage collector
    finalizes it, and closing a client shuts down, and waits for, the thread pool that every
    session's queries share: a stopped session collected while a later session's query reads
    its results deadlocks that query (a hang seen in a test process that opens one engine after
    another; SPARK-55406, fixed in pyspark 4.1). The stopped session's client is closed already:
    its second close is made a no-op. A classic session has no such client and is left as it is.
    """
    client = getattr(spark, "_client", None)
    if client is not None and hasattr(client, "close"):
        client.close = lambda: None


COMMAND_SESSION_TIMEOUT = 7 * 24 * 3600
"""Seconds an idle session of the embedded engine lives when it serves one command: as long as
the command, in effect. Sail drops a session idle for 900 s by default (its
``spark.session_timeout_secs``), and a command that leaves its engine alone that long (the SQL
prompt between two statements, a long step of Python work) would find its session and its
catalog gone."""


RELEASE_MEMORY_PURGE_DELAY = "0"
"""``MIMALLOC_PURGE_DELAY`` with setting ``release_memory: on``: milliseconds Sail's memory allocator
(mimalloc) keeps freed pages before it gives them back to the system. With mimalloc's own default
the pages a step had freed stayed until the thread that freed them allocated again, which for most
of the engine's threads is never, so a run's memory followed its largest step so far, and grew with
the lake: a silver and gold rebuild of the bench history (the engine's process, its Python workers
and the driver together) peaked at 2.23 GB at 1,000,000 messages and 3.61 GB at 3,000,000; with 0,
1.85 and 2.36 GB, for about a quarter more time (1M: silver 42 s against 33.5, gold 23.5 against
18.5, two runs each, alternating). A delay of 100 or 1,000 ms kept the pages as the default did.
An environment variable ``MIMALLOC_PURGE_DELAY`` set before the engine starts wins."""


def start_sail_server(host: str = "127.0.0.1", port: int = 0, *, session_timeout: int | None = None,
                      release_memory: bool = True) -> Any:
    """Start an embedded Sail Spark Connect server in this process.

    Args:
        host: address to bind; loopback by default.
        port: TCP port, 0 for a free one.
        session_timeout: seconds an idle session lives (Sail's ``spark.session_timeout_secs``);
            None: as the environment says (``SAIL_SPARK__SESSION_TIMEOUT_SECS``), else Sail's
            default (900), which ``serve`` keeps (its clients' sessions end that way).
        release_memory: give freed memory back to the system at once (setting ``release_memory``,
            :data:`RELEASE_MEMORY_PURGE_DELAY`); read when pysail loads, so the first server of a
            process decides.

    Returns:
        The running ``pysail.spark.SparkConnectServer`` (``listening_address`` gives host, port).

    Raises:
        EngineError: pysail is missing or the server did not start.
    """
    os.environ.setdefault("RUST_LOG", "error")
    if release_memory:  # read by Sail's allocator (mimalloc) when pysail loads
        os.environ.setdefault("MIMALLOC_PURGE_DELAY", RELEASE_MEMORY_PURGE_DELAY)
    try:
        from pysail.spark import SparkConnectServer
    except ImportError as exc:  # pragma: no cover - an installation defect
        raise EngineError(f"the embedded engine needs pysail: {exc}; run `make install`") from None
    if session_timeout is not None:  # read by the server when it starts
        os.environ["SAIL_SPARK__SESSION_TIMEOUT_SECS"] = str(session_timeout)
    server = SparkConnectServer(ip=host, port=port)
    try:
        server.start(background=True)
    except Exception as exc:
        raise EngineError(f"could not start the embedded Sail server on {host}:{port}: {exc}") from None
    if server.listening_address is None:
        raise EngineError(f"the embedded Sail server on {host}:{port} did not start listening")
    return server


def keep_ctrl_c_for_python(*, sigterm: bool = False) -> None:
    """Give SIGINT back to Python's handler. The embedded server installs its own once it serves
    (so this runs after a first request), and shuts itself down on the first Ctrl-C, even one
    Python catches (the SQL prompt's): every later statement then waits for a server that is
    gone. With Python's handler, Ctrl-C is a KeyboardInterrupt in the main thread, which the
    prompt turns into a cancelled statement and the other commands into a stop. Only the main
    thread may set a handler; elsewhere this does nothing.

    Args:
        sigterm: SIGTERM too is a KeyboardInterrupt (a long-running ``serve`` stops cleanly on
            ``kill``, whose default would end the process without its ``finally``). The handler is
            set whatever the signal's disposition was: a shell starts a background job with
            SIGINT ignored, and ``kill -INT`` must stop it all the same.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if sigterm:
        signal.signal(signal.SIGTERM, signal.default_int_handler)


def wait_for_endpoint(address: str, timeout: float) -> None:
    """Wait until something accepts TCP connections at a Spark Connect address (``sc://host:port/...``).

    The Spark Connect client retries an unreachable endpoint for minutes without a word; this
    says at once what is wrong once ``timeout`` seconds have passed.

    Raises:
        EngineError: the address is malformed, or nothing answers at it within ``timeout`` seconds.
    """
    import socket
    import time
    from urllib.parse import urlsplit

    parts = urlsplit(address.split(";", 1)[0])
    try:
        host, port = parts.hostname, parts.port or 15002
    except ValueError as exc:
        raise EngineError(f"{address} is not a Spark Connect address (sc://host:port): {exc}") from None
    if parts.scheme != "sc" or not host:
        raise EngineError(f"{address} is not a Spark Connect address (sc://host:port)")
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(5.0, deadline - time.monotonic()))):
                return
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise EngineError(
                    f"no Spark Connect server answers at {address} ({host} port {port}) within {timeout:g} s: "
                    f"{exc.strerror or exc}; check spark_remote (LAKEHOUSE_SPARK_REMOTE) and that the server runs, "
                    "or raise connect_timeout (LAKEHOUSE_CONNECT_TIMEOUT)") from None
            time.sleep(0.2)


def connect_session(address: str, settings: Settings) -> SparkSession:
    """A new Spark Connect session at ``address`` (``sc://host:port/;...``) with the settings every
    engine's session gets (UTC session time zone, then ``spark_conf``).

    Raises:
        EngineError: the session could not be opened (the message names the address).
    """
    return _connect(address, session_conf(settings))


ENGINE_START_SETTINGS = ("spark.master", "spark.driver.", "spark.executor.", "spark.jars", "spark.pyspark.",
                         "spark.eventLog.", "spark.ui.", "spark.submit.")
"""Prefixes of the ``spark_conf`` settings an Apache Spark engine takes only when it starts (its
master, the memory of its driver and executors, its jars, Python, event log, web UI): a Spark
Connect session refuses the master (``CANNOT_CONFIGURE_SPARK_CONNECT_MASTER``) and warns of the
others (``CANNOT_MODIFY_CONFIG``), so they go to the engine's start only."""


def session_conf(settings: Settings, *, sail: bool = False) -> dict[str, str]:
    """The settings every engine's session gets: UTC session time zone; for a lake on object
    storage, on an engine that may be Apache Spark, the store's Hadoop S3A options (a session
    setting reaches the file systems its queries open); then ``spark_conf`` but the settings an
    engine takes only when it starts (:data:`ENGINE_START_SETTINGS`: the master, the driver's and
    executors' memory, jars, ...; :func:`apache_spark_conf`), which wins.

    Args:
        sail: the engine is the embedded Sail, which reads the store's settings from this process's
            environment (:func:`lakehouse.store.export_environment`) instead.
    """
    conf = dict(_DEFAULT_CONF)
    if is_store_root(settings.lake_root) and not sail:
        conf.update(hadoop_options(store_settings(settings)))
    return {**conf, **{k: v for k, v in settings.spark_conf.items() if not k.startswith(ENGINE_START_SETTINGS)}}


def _connect(address: str, conf: dict[str, str]) -> SparkSession:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.remote(address)
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:  # a new session: getOrCreate would hand back any session this process already has, wherever it is
        session: SparkSession = builder.create()
    except Exception as exc:
        raise EngineError(f"could not open a Spark Connect session at {address}: {exc}") from None
    return session


# Delta Lake on Apache Spark: the session extension and catalog delta-spark documents
DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def apache_spark_conf(settings: Settings, conf: dict[str, str]) -> dict[str, str]:
    """The settings an Apache Spark engine starts with: Delta Lake's jars (:func:`lakehouse.spark.jars.delta_jars`)
    and extension, the Python of this process for Python functions, no web UI, timestamps written as
    Sail reads them, the catalog's warehouse folder in the lake root (not ``spark-warehouse/`` in
    the working directory), and for one machine a Delta log replayed in as many partitions as there are
    cores (its default, 50, is meant for a cluster), compiled query code kept for the next run in the same
    engine; then ``conf`` (``spark_conf`` and the defaults), which wins.

    Raises:
        EngineError: Java is missing or the jars cannot be fetched.
    """
    from lakehouse.spark.jars import delta_jars, store_jars

    cores = str(os.cpu_count() or 1)
    base = {
        **DELTA_CONF,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": "4g",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.databricks.delta.snapshotPartitions": cores,
        "spark.sql.shuffle.partitions": cores,
        # compiled query code kept for more queries than the default 100: a run asks a few hundred
        # queries (several per gold table, each table's columns its own code), so the next run in
        # the same engine (a Spark Connect server, a session that runs again) finds its code
        # compiled. The last 1 % of a 100,000-message history, after a first run in the same
        # engine: 43.4 and 45.1 s against 49.3 and 51.4 s; a run in a fresh engine is unchanged
        "spark.sql.codegen.cache.maxEntries": "1000",
        # timestamps as parquet TIMESTAMP_MICROS, not Spark's INT96: Sail reads INT96 files that
        # Apache Spark appended to a table Sail created as a timestamp without time zone, and fails
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={_LOG4J}",
        # the catalog's database folders (bronze.db, ...) in the lake, not in the working directory:
        # the lake's tables are named with their locations, so the folders stay empty
        "spark.sql.warehouse.dir": f"{settings.lake_root}/_catalog",
    }
    if "spark.jars" not in conf:
        jars = delta_jars(settings.jars_cache or None)
        if is_store_root(settings.lake_root):
            jars += store_jars(settings.jars_cache or None)
        base["spark.jars"] = ",".join(jars)
    if is_store_root(settings.lake_root):
        base.update({f"spark.hadoop.{k}": v for k, v in hadoop_options(store_settings(settings)).items()})
    return {**base, **conf}


_LOG4J = Path(__file__).with_name("log4j2.properties")
_CREDENTIALS = frozenset(f"spark.hadoop.fs.s3a.{k}" for k in ("access.key", "secret.key", "session.token",
                                                              "aws.credentials.provider"))
"""Store credentials among the Spark settings: a child server gets them from the environment
(:func:`lakehouse.store.export_environment`, S3A's default chain reads ``AWS_*``), never from its
command line, which every user of the machine can read."""


def _start_classic(settings: Settings, conf: dict[str, str]) -> SparkSession:
    """Apache Spark in this process (``local[*]``) with Delta Lake."""
    full = apache_spark_conf(settings, conf)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(full.pop("spark.master", "local[*]")).appName("lakehouse")
    for key, value in full.items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:
        raise EngineError(f"Apache Spark in-process did not start: {exc}") from None
    spark.sparkContext.setLogLevel("ERROR")
    return spark


class SparkConnectServer:
    """A local Apache Spark Spark Connect server with Delta Lake, run as a child process.

    The server is ``org.apache.spark.sql.connect.service.SparkConnectServer`` started with
    PySpark's own ``spark-submit`` (what ``start-connect-server.sh`` does), ``local[*]``, the settings
    of :func:`apache_spark_conf`, listening on ``host:port``. Its log is kept in a temporary file and
    its last lines are part of the error when it does not start. It ends with this process.

    Attributes:
        listening_address: ``(host, port)`` once started.
    """

    def __init__(self, settings: Settings, conf: dict[str, str], host: str = "127.0.0.1", port: int = 0) -> None:
        self._settings, self._conf, self._host, self._port = settings, conf, host, port
        self._process: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None
        self.listening_address: tuple[str, int] | None = None

    def start(self, timeout: float = 180.0) -> None:
        """Start the server and wait until it accepts connections.

        Raises:
            EngineError: it exited or did not listen within ``timeout`` seconds (with its log's end).
        """
        from lakehouse.spark.jars import pyspark_home

        port = self._port or _free_port(self._host)
        full = apache_spark_conf(self._settings, self._conf)
        full.update({"spark.connect.grpc.binding.address": self._host, "spark.connect.grpc.binding.port": str(port)})
        home = pyspark_home()
        command = [str(home / "bin" / "spark-submit"), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
                   "--name", "lakehouse Spark Connect server", "--master", full.pop("spark.master", "local[*]")]
        for key, value in full.items():
            if key not in _CREDENTIALS:  # not on a command line others can read: S3A finds them in the environment
                command += ["--conf", f"{key}={value}"]
        command.append("spark-internal")
        # its Python workers run this process's functions: the same interpreter, the same module path
        env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        handle, name = tempfile.mkstemp(prefix="lakehouse-spark-connect-", suffix=".log")
        self._log = Path(name)
        with os.fdopen(handle, "wb") as log:
            self._process = start_child(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            if self._process.poll() is not None:
                self._fail(f"exited with status {self._process.returncode}")
            with contextlib.suppress(OSError), socket.create_connection((self._host, port), timeout=0.5):
                break
            if time.monotonic() > deadline:
                self._fail(f"did not listen on {self._host}:{port} within {timeout:.0f} s")
            time.sleep(0.2)
        self.listening_address = (self._host, port)

    def _fail(self, what: str) -> None:
        """Stop the server and raise, with the end of its log (Java stack frames left out); the log is
        kept, since the error names it."""
        log, self._log = self._log, None
        self.stop()
        tail = ""
        if log is not None and log.exists():
            lines = [line for line in log.read_text(errors="replace").splitlines()
                     if line.strip() and not line.lstrip().startswith("at ")]  # not Java's stack frames
            tail = "\n  ".join(lines[-12:])
        raise EngineError(f"the local Apache Spark Connect server {what}; its log ({log}) ends:\n  {tail}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 30 s) and remove its log. Idempotent."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.unlink(missing_ok=True)
            self._log = None


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


# Runs in a fresh interpreter: Linux is asked to send it SIGTERM when the process that started it
# ends (even by a kill), then it becomes the command (exec keeps that request). Its first argument
# is the starting process's pid: if that ended already, there is no one to ask about.
_END_WITH_PARENT = """
import contextlib, ctypes, os, signal, sys
with contextlib.suppress(Exception):
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG, Linux only
if os.getppid() != int(sys.argv[1]):
    sys.exit(143)
os.execvp(sys.argv[2], sys.argv[2:])
"""


def start_child(command: list[str], **popen: Any) -> subprocess.Popen[bytes]:
    """Start ``command`` as a child process that gets SIGTERM when this process ends, even by a kill.

    The request to Linux (``PR_SET_PDEATHSIG``) is made by a short Python launcher that then becomes
    the command, not by a ``preexec_fn``: with ``preexec_fn``, ``subprocess.Popen`` forks this
    process and gRPC's fork handlers run in the child, which, while Spark Connect channels are busy,
    can abort it before it starts (status -6, "epoll_wait error: Bad file descriptor",
    grpc/grpc#43055); without one, Popen uses ``vfork``, where no fork handler runs.

    Args:
        command: the program and its arguments.
        popen: further arguments of ``subprocess.Popen`` (not ``preexec_fn``).

    Returns:
        The running child (the launcher's pid is the command's).

    Raises:
        OSError: the launcher could not be started (as ``subprocess.Popen``).
    """
    return subprocess.Popen([sys.executable, "-c", _END_WITH_PARENT, str(os.getpid()), *command], **popen)


def start_spark_connect_server(settings: Settings, conf: dict[str, str] | None = None, host: str = "127.0.0.1",
                               port: int = 0) -> SparkConnectServer:
    """Start a local Apache Spark Spark Connect server with Delta Lake (:class:`SparkConnectServer`).

    Args:
        settings: ``jars_cache`` and ``spark_conf`` (added to ``conf``).
        conf: further Spark settings.
        host: address to bind; loopback by default.
        port: TCP port, 0 for a free one.

    Raises:
        EngineError: Java or the jars are missing, or the server did not start.
    """
    server = SparkConnectServer(settings, {**_DEFAULT_CONF, **dict(settings.spark_conf), **(conf or {})}, host, port)
    server.start()
    return server


@contextmanager
def open_engine(settings: Settings) -> Iterator[Engine]:
    """Start (or connect to) the engine the settings name; stop it on exit.

    Args:
        settings: effective settings (``engine``, ``spark_remote``, ``spark_conf``, ``jars_cache``).

    Yields:
        The :class:`Engine`, with the session time zone set to UTC.

    Raises:
        EngineError: the engine could not be started or reached; says which and what to do.
    """
    if is_store_root(settings.lake_root):
        export_environment(settings)  # the embedded engine and the readers beside it read the store's settings there
    conf = session_conf(settings, sail=settings.embedded_sail)
    engine: Engine
    if settings.spark_remote:
        address = settings.spark_remote
        wait_for_endpoint(address, float(settings.connect_timeout))
        engine = Engine(_connect(address, conf), "remote", address)
    elif settings.engine == "spark":
        engine = Engine(_start_classic(settings, {**conf, **dict(settings.spark_conf)}), "spark", None)
    else:
        server: Any = (start_spark_connect_server(settings) if settings.engine == "spark-connect"
                       else start_sail_server(session_timeout=COMMAND_SESSION_TIMEOUT,
                                                release_memory=settings.release_memory == "on"))
        host, port = server.listening_address
        address = f"sc://{host}:{port}"
        try:
            spark = _connect(address, conf)
        except BaseException:
            server.stop()
            raise
        if settings.engine == "sail":
            keep_ctrl_c_for_python()  # _connect made a first request: the server's handler is in place
        engine = Engine(spark, str(settings.engine), address, server)
    try:
        yield engine
    finally:
        engine.stop()
