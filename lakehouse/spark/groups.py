"""Per-group Python functions over DataFrames, one engine call per Arrow batch of groups.

The pipelines' per-log and per-instance logic (:mod:`lakehouse.core.statuses`,
:mod:`lakehouse.core.gold`) runs once per group. ``applyInPandas`` builds a pandas DataFrame for
every group and costs milliseconds per group on the engine's Python worker (measured in
``tests/benchmarks/README.md``): with hundreds of thousands of instances that is most of a run.
Here each group is gathered by the engine (``collect_list`` of a struct per group), and the Python
function gets plain rows, with many groups per Arrow batch, through ``mapInArrow``. Nothing
depends on how the engine partitions data, so it runs the same on Sail, a Spark Connect cluster
and Apache Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakehouse.errors import LakehouseError
from lakehouse.spark import workers

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

Row = dict[str, Any]
Columns = dict[str, list[Any]]
"""A group's output a column at a time: every column of the output schema, each a list of the same
length. A per-group function that returns them spares the rows' dicts and their conversion to
Arrow (``RecordBatch.from_pylist`` took 1.0 s for the 137,000 rows of one instance pass task
of the 1M bench history, 20 columns mostly null; ``pa.array`` per column 0.14 s)."""
GroupFunction = Callable[[list[Row]], "list[Row] | Columns"]

_ARROW_TYPES = {
    "STRING": pa.string(), "BIGINT": pa.int64(), "INT": pa.int32(), "BOOLEAN": pa.bool_(),
    "BINARY": pa.binary(), "DOUBLE": pa.float64(), "TIMESTAMP": pa.timestamp("us", tz="UTC"),
}
_ROWS = "_rows"


def arrow_type(ddl_type: str) -> pa.DataType:
    """The Arrow type of a Spark DDL type: the scalar types above and ``ARRAY<...>`` of them.

    Raises:
        LakehouseError: a type this module does not map.
    """
    text = ddl_type.strip().upper()
    if text.startswith("ARRAY<") and text.endswith(">"):
        return pa.list_(arrow_type(text[6:-1]))
    if text not in _ARROW_TYPES:
        raise LakehouseError(f"no Arrow type for the DDL type {ddl_type!r}")
    return _ARROW_TYPES[text]


def arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a flat DDL string such as ``"a STRING, b BIGINT, c ARRAY<STRING>"``."""
    fields = []
    for part in ddl.split(", "):
        name, _, kind = part.strip().partition(" ")
        fields.append(pa.field(name.strip("`"), arrow_type(kind)))
    return pa.schema(fields)


def spark_schema(ddl: str) -> StructType:
    """The Spark schema of a flat DDL string (types :func:`arrow_type` maps), built locally: a DDL
    string handed to the engine costs a round trip to parse it on Spark Connect."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema(ddl))


def _apply_to_groups(fn: GroupFunction, schema: pa.Schema, batch: pa.RecordBatch) -> pa.RecordBatch:
    """``fn`` of each group of one batch of :func:`map_groups` (a task of a worker process)."""
    rows_out: list[Row] = []
    columns: Columns | None = None
    for group in batch.to_pylist():
        rows = group.pop(_ROWS)
        result = fn([{**group, **row} for row in rows])
        if isinstance(result, dict):
            columns = columns or {name: [] for name in schema.names}
            for name, values in columns.items():
                values.extend(result[name])
        else:
            rows_out.extend(result)
    if columns is None:
        return pa.RecordBatch.from_pylist(rows_out, schema=schema)
    for name, values in columns.items():
        values.extend(row.get(name) for row in rows_out)
    return batch_of([columns[name] for name in schema.names], schema)


def batch_of(columns: Sequence[list[Any]], schema: pa.Schema) -> pa.RecordBatch:
    """Lists of values, one per field of ``schema`` in its order, as a typed Arrow batch (a column
    at a time, no dict per row: :data:`Columns`)."""
    return pa.RecordBatch.from_arrays([pa.array(values, type=f.type) for values, f in zip(columns, schema, strict=True)],
                                      schema=schema)


def map_groups(df: DataFrame, keys: list[str], fn: GroupFunction, ddl: str, *,
               what: str = "per-group step") -> DataFrame:
    """Run ``fn`` once per group of ``df``'s rows with equal ``keys``.

    Args:
        df: the input rows.
        keys: the grouping columns.
        fn: one group's rows (dicts of every column of ``df``, keys included, in no particular
            order) -> its output rows (dicts with the columns of ``ddl``, a missing one null; may
            be empty), or the same as :data:`Columns` (every column of ``ddl``). Picklable
            (a module-level function, or a ``functools.partial`` of one): on the embedded engine it
            runs in worker processes (:func:`lakehouse.spark.workers.arrow_function`).
        ddl: the output schema, flat Spark DDL (types :func:`arrow_type` maps).
        what: the step's name, for the message when a worker process dies.

    Returns:
        The output rows of every group, typed as ``ddl`` says (exact int64, no pandas on the way).
    """
    from pyspark.sql import functions as F

    others = [c for c in df.columns if c not in keys]
    grouped = df.groupBy(*keys).agg(F.collect_list(F.struct(*others)).alias(_ROWS))
    task = partial(_apply_to_groups, fn, arrow_schema(ddl))
    return grouped.mapInArrow(workers.arrow_function(task, what, weight=group_sizes), spark_schema(ddl))


def group_sizes(batch: pa.RecordBatch) -> Any:
    """The number of rows of each group of a batch of :func:`map_groups` (the work it carries)."""
    import pyarrow.compute as pc

    return pc.list_value_length(batch.column(_ROWS)).to_numpy(zero_copy_only=False)
