"""A read-only Spark Connect gateway: what ``lakehouse serve`` listens with (LAKEHOUSE.md, Who uses it
and how: analysts read; only the pipelines write).

The engine serves Spark Connect on a loopback port that only this process knows; the gateway listens
on the address users connect to and forwards every call of ``spark.connect.SparkConnectService`` to
it, byte for byte, after :func:`check_request` has read the request. A request that could change the
lake, the shared catalog or the server is refused with ``PERMISSION_DENIED`` and a message that says
what was refused (pyspark raises it as ``SparkConnectGrpcException``). Refused:

- SQL that is not one query, ``SHOW``, ``DESCRIBE``, ``EXPLAIN``, ``USE`` or a temporary view of a
  query (:func:`lakehouse.sql.check_read_only`), wherever it is: ``spark.sql``, a SQL relation
  inside a plan, an expression string (``F.expr``), in a query or only analysed (Apache Spark runs a
  command as soon as it analyses it);
- reads of anything but the lake's tables, in SQL or through the DataFrame API: a file path
  (``spark.read.text(path)``, ``text.`<path>```), another data source, a Delta table outside the
  lake root, a table function that may read (:func:`lakehouse.sql.check_table_name`); a Delta table
  read by a path under the lake root is a read of the lake;
- commands other than SQL, temporary views and the session's own cache bookkeeping (DataFrame
  writes, ``MERGE``, streaming, checkpoints, registering functions or data sources, ML), and global
  temporary views (every session sees those);
- code sent to the server: Python, Scala or Java functions, ``mapInPandas`` and the like, and
  artifacts other than the client's cached local relations;
- catalog calls that create, drop or recover tables (listing, reading and caching are kept).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from concurrent import futures
from typing import Any

from lakehouse.errors import SqlError
from lakehouse.sql import (
    JVM_FUNCTIONS,
    check_read_only,
    check_table_function,
    check_table_name,
    outside_error,
    path_in_lake,
    read_only_error,
    table_name_parts,
)

SERVICE = "spark.connect.SparkConnectService"

_ALLOWED_COMMANDS = frozenset({"sql_command", "create_dataframe_view", "get_resources_command",
                               "remove_cached_remote_relation_command"})
_ALLOWED_CATALOG = frozenset({
    "current_database", "set_current_database", "list_databases", "list_tables", "list_functions", "list_columns",
    "get_database", "get_table", "get_function", "database_exists", "table_exists", "function_exists",
    "drop_temp_view", "is_cached", "cache_table", "uncache_table", "clear_cache", "refresh_table",
    "refresh_by_path", "current_catalog", "set_current_catalog", "list_catalogs"})
# message types that carry code to run on the server, or an opaque extension
_CODE = frozenset({"CommonInlineUserDefinedFunction", "CommonInlineUserDefinedTableFunction",
                   "CommonInlineUserDefinedDataSource", "PythonUDF", "ScalarScalaUDF", "JavaUDF", "PythonUDTF",
                   "PythonDataSource", "MapPartitions", "GroupMap", "CoGroupMap", "ApplyInPandasWithState",
                   "google.protobuf.Any"})


# catalog calls that name a table by table_name (and db_name)
_NAMED_IN_CATALOG = frozenset({"ListColumns", "GetTable", "TableExists", "IsCached", "CacheTable", "UncacheTable",
                               "RefreshTable"})


def check_message(message: Any, lake_root: str | None = None) -> None:
    """Refuse a Spark Connect protobuf message (a request, a plan, a relation ...) that does not only
    read the lake at ``lake_root``; see the module's docstring for what is refused. Every field is
    visited, so a write or a read of a file nested anywhere in a plan is found.

    Raises:
        SqlError: code ``read_only``, ``outside_lake`` (or ``not_understood`` for SQL that does not
            parse), naming what was refused.
    """
    name = message.DESCRIPTOR.full_name.removeprefix("spark.connect.")
    if name in _CODE or message.DESCRIPTOR.name in _CODE:
        raise read_only_error(f"code sent to the server ({message.DESCRIPTOR.name}) would run there")
    kind = message.WhichOneof("command_type") if name == "Command" else None
    if kind is not None and kind not in _ALLOWED_COMMANDS:
        raise read_only_error(f"the command {kind} changes the lake or the server")
    kind = message.WhichOneof("cat_type") if name == "Catalog" else None
    if kind is not None and kind not in _ALLOWED_CATALOG:
        raise read_only_error(f"the catalog call {kind} changes the catalog")
    if name == "SQL" and message.query:
        check_read_only(message.query, lake_root)
    elif name == "SqlCommand" and message.sql:
        check_read_only(message.sql, lake_root)
    elif name == "Expression.ExpressionString" and message.expression:
        check_read_only(f"SELECT {message.expression}", lake_root)
    elif name == "Read.DataSource":
        _check_data_source(message, lake_root)
    elif name == "Read.NamedTable":
        check_table_name(table_name_parts(message.unparsed_identifier), lake_root)
    elif name == "UnresolvedTableValuedFunction":
        check_table_function(message.function_name)
    elif name in _NAMED_IN_CATALOG and message.table_name:
        db = getattr(message, "db_name", "")
        check_table_name(([db] if db else []) + table_name_parts(message.table_name), lake_root)
    elif name == "CreateDataFrameViewCommand" and message.is_global:
        raise read_only_error("a global temporary view is seen by every session")
    elif name == "Expression.UnresolvedFunction" and message.function_name.lower() in JVM_FUNCTIONS:
        raise read_only_error(f"{message.function_name} calls into the server's JVM")
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            for item in value.values():
                if hasattr(item, "DESCRIPTOR"):
                    check_message(item, lake_root)
        elif field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED:
            for item in value:
                check_message(item, lake_root)
        else:
            check_message(value, lake_root)


def _check_data_source(source: Any, lake_root: str | None) -> None:
    """A ``spark.read`` of paths: only Delta tables under the lake root (the paths, and any
    ``path`` / ``paths`` option) are reads of the lake.

    Raises:
        SqlError: code ``outside_lake``.
    """
    fmt = source.format.lower() if source.HasField("format") else ""
    if fmt != "delta":
        raise outside_error(f"a read of the data source {fmt or '(the default)'}")
    paths = list(source.paths) + [v for k, v in source.options.items() if k.lower() in ("path", "paths")]
    if not paths:
        raise outside_error("a Delta read with no path")
    outside = [p for p in paths if not path_in_lake(p, lake_root)]
    if outside:
        raise outside_error(f"a read of {', '.join(outside)}, outside the lake root")


def check_request(method: str, request: bytes, lake_root: str | None = None) -> Any:
    """Read one serialized request of ``method`` (``ExecutePlan``, ``AnalyzePlan`` ...) and refuse it
    (:func:`check_message`) unless it only reads the lake at ``lake_root``. Calls that carry no plan
    pass.

    Returns:
        The request as read (a protobuf message), or None for a call that carries no plan (not read).

    Raises:
        SqlError: code ``read_only``, ``outside_lake`` or ``not_understood``.
    """
    from pyspark.sql.connect.proto import base_pb2

    kinds: dict[str, Any] = {"ExecutePlan": base_pb2.ExecutePlanRequest, "AnalyzePlan": base_pb2.AnalyzePlanRequest,
             "AddArtifacts": base_pb2.AddArtifactsRequest}
    kind = kinds.get(method)
    if kind is None:
        return None
    try:
        message = kind.FromString(request)
    except Exception as exc:  # noqa: BLE001 - what cannot be read is not run
        raise read_only_error(f"the request could not be read ({exc})") from None
    if method == "AddArtifacts":
        names = [a.name for a in message.batch.artifacts]
        if message.HasField("begin_chunk"):
            names.append(message.begin_chunk.name)
        sent = [n for n in names if not n.startswith("cache/")]
        if sent:
            raise read_only_error(f"artifacts ({', '.join(sent)}) are code or files for the server")
        return message
    try:
        check_message(message, lake_root)
    except SqlError:
        raise
    except Exception as exc:  # noqa: BLE001 - what cannot be checked is not run
        raise read_only_error(f"the request could not be checked ({type(exc).__name__}: {exc})") from None
    return message


# how each method streams: (request stream, response stream)
_METHODS: dict[str, tuple[bool, bool]] = {
    "ExecutePlan": (False, True), "AnalyzePlan": (False, False), "Config": (False, False),
    "AddArtifacts": (True, False), "ArtifactStatus": (False, False), "Interrupt": (False, False),
    "ReattachExecute": (False, True), "ReleaseExecute": (False, False), "ReleaseSession": (False, False),
    "FetchErrorDetails": (False, False)}
_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
_HOP_HEADERS = ("user-agent", "te", "content-type", "grpc-")


def _forwarded(context: Any) -> list[tuple[str, Any]]:
    """The client's metadata without what gRPC sets itself for each hop."""
    return [(k, v) for k, v in context.invocation_metadata()
            if not k.startswith(":") and not k.startswith(_HOP_HEADERS)]


def _deny(context: Any, error: SqlError) -> None:
    from google.rpc import code_pb2, status_pb2
    from grpc_status import rpc_status

    context.abort_with_status(rpc_status.to_status(status_pb2.Status(code=code_pb2.PERMISSION_DENIED,
                                                                     message=str(error))))


def _relay(context: Any, error: Any) -> None:
    """Pass the engine's error on as it came, with its details (pyspark reads them from the trailers)."""
    with contextlib.suppress(Exception):
        context.set_trailing_metadata(error.trailing_metadata() or ())
    context.abort(error.code(), error.details() or "")


SessionHook = Callable[[str, str], None]
"""Called with a request's ``(user_id, session_id)`` (``user_id`` may be empty)."""


def session_of(method: str, request: bytes) -> tuple[str, str] | None:
    """The ``(user_id, session_id)`` a serialized request of ``method`` belongs to, or None when it
    cannot be read (every request of the service names its session)."""
    from pyspark.sql.connect.proto import base_pb2

    kind = getattr(base_pb2, f"{method}Request", None)
    if kind is None and method == "ArtifactStatus":
        kind = base_pb2.ArtifactStatusesRequest
    try:
        message = kind.FromString(request) if kind is not None else None
    except Exception:  # noqa: BLE001 - check_request refuses what cannot be read
        return None
    if message is None or not message.session_id:
        return None
    return message.user_context.user_id, message.session_id


class ReadOnlyGateway:
    """Listen on ``host:port`` and forward Spark Connect calls that only read the lake to ``backend``.

    Args:
        backend: ``host:port`` of the engine's Spark Connect server.
        host, port: where clients connect (port 0: a free one; see ``port`` once started).
        workers: calls served at once.
        lake_root: the lake the clients read (:func:`check_request`).
        on_session: called with each request's session (:data:`SessionHook`) before the request
            is forwarded, for instance to name the lake's tables in a session the engine keeps its
            catalog per; a request waits for it.
        on_release: called with a session its client released (``spark.stop()``), once the engine
            has released it.

    Raises:
        EngineError: from :meth:`start`, when the address cannot be bound.
    """

    def __init__(self, backend: str, host: str = "127.0.0.1", port: int = 0, workers: int = 32, *,
                 lake_root: str | None = None, on_session: SessionHook | None = None,
                 on_release: SessionHook | None = None) -> None:
        self._backend, self._host, self._requested, self._workers = backend, host, port, workers
        self._lake_root, self._on_session, self._on_release = lake_root, on_session, on_release
        self._server: Any = None
        self._channel: Any = None
        self.port: int | None = None

    def start(self) -> ReadOnlyGateway:
        """Bind and start serving in background threads; returns self."""
        import grpc

        from lakehouse.errors import EngineError

        self._channel = grpc.insecure_channel(self._backend, options=_OPTIONS)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._workers), options=_OPTIONS)
        self._server.add_generic_rpc_handlers((_Handler(self._channel, self._lake_root, self._on_session,
                                                        self._on_release),))
        try:
            port = self._server.add_insecure_port(f"{self._host}:{self._requested}")
        except RuntimeError as exc:
            raise EngineError(f"cannot listen on {self._host}:{self._requested}: {exc}") from None
        if not port:
            raise EngineError(f"cannot listen on {self._host}:{self._requested} (in use?)")
        self._server.start()
        self.port = port
        return self

    def stop(self) -> None:
        """Stop listening (calls under way get 2 s) and close the engine channel. Idempotent."""
        server, self._server = self._server, None
        if server is not None:
            server.stop(2).wait()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()


class _Handler:
    """The generic gRPC handler: every method of the service, forwarded as raw bytes."""

    def __init__(self, channel: Any, lake_root: str | None, on_session: SessionHook | None,
                 on_release: SessionHook | None) -> None:
        self._channel, self._lake_root = channel, lake_root
        self._on_session, self._on_release = on_session, on_release

    def service(self, details: Any) -> Any:
        import grpc

        prefix = f"/{SERVICE}/"
        if not details.method.startswith(prefix):
            return None
        method = details.method[len(prefix):]
        streams = _METHODS.get(method)
        if streams is None:
            return None
        path = details.method
        if streams == (False, True):
            upstream = self._channel.unary_stream(path)
            return grpc.unary_stream_rpc_method_handler(self._streamed(method, upstream))
        if streams == (True, False):
            upstream = self._channel.stream_unary(path)
            return grpc.stream_unary_rpc_method_handler(self._collected(method, upstream))
        upstream = self._channel.unary_unary(path)
        return grpc.unary_unary_rpc_method_handler(self._single(method, upstream))

    def _admit(self, method: str, requests: list[bytes], context: Any) -> None:
        """Refuse (abort the call) unless every request only reads the lake; then let the session
        hook see the request's session."""
        read: list[Any] = []
        try:
            read = [check_request(method, request, self._lake_root) for request in requests]
        except SqlError as exc:
            _deny(context, exc)
        if self._on_session is not None and method != "ReleaseSession" and requests:
            first = read[0] if read else None  # read once: a plan may carry a large local relation
            key = ((first.user_context.user_id, first.session_id) if first is not None and first.session_id
                   else session_of(method, requests[0]))
            if key is not None:
                self._on_session(*key)

    def _released(self, method: str, request: bytes) -> None:
        if self._on_release is not None and method == "ReleaseSession":
            key = session_of(method, request)
            if key is not None:
                self._on_release(*key)

    def _single(self, method: str, upstream: Any) -> Callable[[bytes, Any], bytes]:
        def handle(request: bytes, context: Any) -> bytes:
            import grpc

            self._admit(method, [request], context)
            try:
                reply: bytes = upstream(request, metadata=_forwarded(context))
            except grpc.RpcError as exc:
                _relay(context, exc)
                raise  # abort raised already; for the type checker
            self._released(method, request)
            return reply
        return handle

    def _streamed(self, method: str, upstream: Any) -> Callable[[bytes, Any], Iterator[bytes]]:
        def handle(request: bytes, context: Any) -> Iterator[bytes]:
            import grpc

            self._admit(method, [request], context)
            call = upstream(request, metadata=_forwarded(context))
            context.add_callback(call.cancel)  # the client went away: so does the engine's call
            try:
                yield from call
            except grpc.RpcError as exc:
                _relay(context, exc)
        return handle

    def _collected(self, method: str, upstream: Any) -> Callable[[Iterator[bytes], Any], bytes]:
        def handle(requests: Iterator[bytes], context: Any) -> bytes:
            import grpc

            chunks = list(requests)  # artifacts are small, and each is checked before any is sent
            self._admit(method, chunks, context)
            try:
                reply: bytes = upstream(iter(chunks), metadata=_forwarded(context))
                return reply
            except grpc.RpcError as exc:
                _relay(context, exc)
                raise
        return handle
