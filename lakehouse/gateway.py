"""A read-only Spark Connect gateway: what ``lakehouse serve`` listens with (LAKEHOUSE.md, Who uses it
and how: analysts read; only the pipelines write).

The engine serves Spark Connect on a loopback port that only this process knows; the gateway listens
on the address users connect to and forwards every call of ``spark.connect.SparkConnectService`` to
it, byte for byte, after :func:`check_request` has read the request. A request that could change the
lake, the shared catalog or the server is refused with ``PERMISSION_DENIED`` and a message that says
what was refused (pyspark raises it as ``SparkConnectGrpcException``). Refused:

- SQL that is not one query, ``SHOW``, ``DESCRIBE``, ``EXPLAIN`` or ``USE``
  (:func:`lakehouse.sql.check_read_only`), wherever it is: ``spark.sql``, a SQL relation inside a
  plan, an expression string (``F.expr``), in a query or only analysed (Apache Spark runs a command
  as soon as it analyses it);
- commands other than SQL, temporary views and the session's own cache bookkeeping (DataFrame
  writes, ``MERGE``, streaming, checkpoints, registering functions or data sources, ML);
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
from lakehouse.sql import JVM_FUNCTIONS, check_read_only, read_only_error

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


def check_message(message: Any) -> None:
    """Refuse a Spark Connect protobuf message (a request, a plan, a relation ...) that does not only
    read; see the module's docstring for what is refused. Every field is visited, so a write nested
    anywhere in a plan is found.

    Raises:
        SqlError: code ``read_only`` (or ``not_understood`` for SQL that does not parse), naming
            what was refused.
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
        check_read_only(message.query)
    elif name == "SqlCommand" and message.sql:
        check_read_only(message.sql)
    elif name == "Expression.ExpressionString" and message.expression:
        check_read_only(f"SELECT {message.expression}")
    elif name == "Expression.UnresolvedFunction" and message.function_name.lower() in JVM_FUNCTIONS:
        raise read_only_error(f"{message.function_name} calls into the server's JVM")
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            for item in value.values():
                if hasattr(item, "DESCRIPTOR"):
                    check_message(item)
        elif field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED:
            for item in value:
                check_message(item)
        else:
            check_message(value)


def check_request(method: str, request: bytes) -> None:
    """Read one serialized request of ``method`` (``ExecutePlan``, ``AnalyzePlan`` ...) and refuse it
    (:func:`check_message`) unless it only reads. Calls that carry no plan pass.

    Raises:
        SqlError: code ``read_only`` or ``not_understood``.
    """
    from pyspark.sql.connect.proto import base_pb2

    kinds: dict[str, Any] = {"ExecutePlan": base_pb2.ExecutePlanRequest, "AnalyzePlan": base_pb2.AnalyzePlanRequest,
             "AddArtifacts": base_pb2.AddArtifactsRequest}
    kind = kinds.get(method)
    if kind is None:
        return
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
        return
    try:
        check_message(message)
    except SqlError:
        raise
    except Exception as exc:  # noqa: BLE001 - what cannot be checked is not run
        raise read_only_error(f"the request could not be checked ({type(exc).__name__}: {exc})") from None


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


class ReadOnlyGateway:
    """Listen on ``host:port`` and forward Spark Connect calls that only read to ``backend``.

    Args:
        backend: ``host:port`` of the engine's Spark Connect server.
        host, port: where clients connect (port 0: a free one; see ``port`` once started).
        workers: calls served at once.

    Raises:
        EngineError: from :meth:`start`, when the address cannot be bound.
    """

    def __init__(self, backend: str, host: str = "127.0.0.1", port: int = 0, workers: int = 32) -> None:
        self._backend, self._host, self._requested, self._workers = backend, host, port, workers
        self._server: Any = None
        self._channel: Any = None
        self.port: int | None = None

    def start(self) -> ReadOnlyGateway:
        """Bind and start serving in background threads; returns self."""
        import grpc

        from lakehouse.errors import EngineError

        self._channel = grpc.insecure_channel(self._backend, options=_OPTIONS)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._workers), options=_OPTIONS)
        self._server.add_generic_rpc_handlers((_Handler(self._channel),))
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

    def __init__(self, channel: Any) -> None:
        self._channel = channel

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

    @staticmethod
    def _single(method: str, upstream: Any) -> Callable[[bytes, Any], bytes]:
        def handle(request: bytes, context: Any) -> bytes:
            import grpc

            try:
                check_request(method, request)
            except SqlError as exc:
                _deny(context, exc)
            try:
                reply: bytes = upstream(request, metadata=_forwarded(context))
                return reply
            except grpc.RpcError as exc:
                _relay(context, exc)
                raise  # abort raised already; for the type checker
        return handle

    @staticmethod
    def _streamed(method: str, upstream: Any) -> Callable[[bytes, Any], Iterator[bytes]]:
        def handle(request: bytes, context: Any) -> Iterator[bytes]:
            import grpc

            try:
                check_request(method, request)
            except SqlError as exc:
                _deny(context, exc)
            call = upstream(request, metadata=_forwarded(context))
            context.add_callback(call.cancel)  # the client went away: so does the engine's call
            try:
                yield from call
            except grpc.RpcError as exc:
                _relay(context, exc)
        return handle

    @staticmethod
    def _collected(method: str, upstream: Any) -> Callable[[Iterator[bytes], Any], bytes]:
        def handle(requests: Iterator[bytes], context: Any) -> bytes:
            import grpc

            chunks = list(requests)  # artifacts are small, and each is checked before any is sent
            try:
                for chunk in chunks:
                    check_request(method, chunk)
            except SqlError as exc:
                _deny(context, exc)
            try:
                reply: bytes = upstream(iter(chunks), metadata=_forwarded(context))
                return reply
            except grpc.RpcError as exc:
                _relay(context, exc)
                raise
        return handle
