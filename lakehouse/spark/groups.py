"""Per-group Python functions over DataFrames, one engine call per Arrow batch of groups.

The pipelines' per-log and per-instance logic (:mod:`lakehouse.core.statuses`,
:mod:`lakehouse.core.gold`) runs once per group. ``applyInPandas`` builds a pandas DataFrame for
every group and costs milliseconds per group on the engine's Python worker (measured in
``tests/benchmarks/README.md``): with hundreds of thousands of instances that is most of a run.
Here the engine only hash-partitions the rows by the group's keys (``repartition``), so that each
group is in one partition; the Python side gathers a partition's rows, orders them by group with
pyarrow's hash grouping (:func:`group_tasks`) and hands the function plain rows, many groups per
Arrow batch, through ``mapInArrow``. The engine does not build the groups: a ``collect_list`` of a
struct per row held about five times the rows' size in the embedded engine (a 1,000,000-entry
bronze grouped by log: 1.3 GB more resident memory against 0.25 GB, and 0.7-2.8 s against 0.2-0.4),
and Apache Spark's object hash aggregate falls back to sorting past 128 groups a task.
Nothing depends on how the engine sizes partitions, so it runs the same on Sail, a Spark Connect
cluster and Apache Spark.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

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
TASK_ROWS = 16384
"""Rows of whole groups per worker task (a larger group is a task alone): tasks of similar work,
so that the workers finish together; a task of 2,048 logs once held most of a history."""
TASK_BYTES = 64 << 20
"""Bytes of strings and binaries (payloads, mostly) of whole groups per worker task, beside
:data:`TASK_ROWS`: 16,384 rows of the bench history hold about 5 MB, but 16,384 payloads of the
largest size a landing file may hold (``max_payload``, 1 MiB) would be a 16 GiB task."""
_OFFSETS_LIMIT = 2**31 - 1  # bytes a string, binary or list column can hold with 32-bit offsets


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


def apply_to_groups(fn: GroupFunction, keys: tuple[str, ...], schema: pa.Schema, batch: pa.RecordBatch
                    ) -> pa.RecordBatch:
    """``fn`` of each group of one batch of :func:`map_groups` (a task of a worker process): the
    batch holds whole groups, each group's rows next to each other (:func:`group_tasks`); the
    result has ``schema``."""
    rows_out: list[Row] = []
    columns: Columns | None = None
    for _, group in itertools.groupby(batch.to_pylist(), key=operator.itemgetter(*keys)):
        result = fn(list(group))
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


def group_tasks(keys: Sequence[str], batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The rows of one partition (all of its ``batches``) as batches of whole groups (equal
    ``keys``, nulls equal), each group's rows next to each other: at most :data:`TASK_ROWS` rows
    and :data:`TASK_BYTES` bytes of strings and binaries a batch, or one group alone when it has
    more; a partition with no rows gives one empty batch, whose result carries the output schema.

    The groups are found by pyarrow's hash grouping (0.1 s for 1,000,000 rows of 15,000 groups,
    where sorting them took 0.7 s), and each batch is taken in group order from the partition's
    rows copied into one buffer a column: taking from the engine's batches as they came costs 1.8 s
    at 1,000,000 rows against 0.3 s (and the copy 0.5 s). Measured on the 1M bench history's silver
    rebuild on Sail, the copy holds 300 MB more at the peak (2.4 GB against 2.1) and saves 2-3 s of
    29 (filtering each batch out of the batches as they came, instead of taking it, was as slow).

    A string or binary column of more than 2 GiB (a partition of long payloads: 2,048 of the
    largest a landing file may hold, or about 15,000,000 of the bench history's; on Sail a group
    step is one partition) does not fit Arrow's 32-bit offsets in one buffer, and ``take`` on it
    fails ("offset overflow"): such a partition is held with 64-bit offsets (``large_binary``,
    ``large_string``), and each task cast back, so that the function always gets the types of the
    partition's rows."""
    import numpy as np

    parts = list(batches)
    if not parts:
        return
    table = pa.Table.from_batches(parts)
    del parts
    n = table.num_rows
    if n == 0:
        yield pa.RecordBatch.from_pylist([], schema=table.schema)
        return
    index = "_row"
    grouped = (table.select(list(keys)).append_column(index, pa.array(np.arange(n, dtype=np.int64)))
               .group_by(list(keys), use_threads=False).aggregate([(index, "list")]))
    lists = grouped.column(f"{index}_list").combine_chunks()
    order = lists.flatten()
    ends = np.cumsum(lists.value_lengths().to_numpy(zero_copy_only=False))
    schema = table.schema
    if any(column.nbytes > _OFFSETS_LIMIT for column in table.columns):
        table = table.cast(_wide_offsets(schema))
    table = table.combine_chunks()  # one buffer a column, for cheap takes
    sizes = np.zeros(n, dtype=np.int64)  # each row's bytes of strings and binaries
    for f, column in zip(schema, table.columns, strict=True):
        if pa.types.is_string(f.type) or pa.types.is_binary(f.type):  # large_ here when widened above
            sizes += pc.binary_length(column).fill_null(0).to_numpy().astype(np.int64)
    filled = np.concatenate(([0], np.cumsum(sizes[order.to_numpy()])))  # bytes of the first k rows in group order
    end_bytes = filled[ends]
    start = 0
    while start < n:
        # the groups ending within both limits
        fit = min(int(np.searchsorted(ends, start + TASK_ROWS, side="right")),
                  int(np.searchsorted(end_bytes, filled[start] + TASK_BYTES, side="right")))
        if fit and ends[fit - 1] > start:
            end = int(ends[fit - 1])
        else:  # the next group alone is larger than a task
            end = int(ends[np.searchsorted(ends, start, side="right")])
        yield table.take(order.slice(start, end - start)).cast(schema).combine_chunks().to_batches()[0]
        start = end


def _wide_offsets(schema: pa.Schema) -> pa.Schema:
    """``schema`` with 64-bit offsets: every string, binary and list type as its ``large_`` kind."""
    def wide(t: pa.DataType) -> pa.DataType:
        if pa.types.is_string(t):
            return pa.large_string()
        if pa.types.is_binary(t):
            return pa.large_binary()
        if pa.types.is_list(t):
            return pa.large_list(wide(t.value_type))
        return t

    return pa.schema([f.with_type(wide(f.type)) for f in schema])


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
    return map_group_batches(df, keys, partial(apply_to_groups, fn, tuple(keys), arrow_schema(ddl)), ddl, what=what)


def map_group_batches(df: DataFrame, keys: list[str], fn: Callable[[pa.RecordBatch], pa.RecordBatch], ddl: str, *,
                      what: str = "per-group step") -> DataFrame:
    """:func:`map_groups` for a function of a whole batch of groups, for a step that judges most
    groups with Arrow's vectorised kernels and hands only the others to a per-group function
    (:func:`apply_to_groups`).

    Args:
        df: the input rows.
        keys: the grouping columns.
        fn: a batch of whole groups (every row of a group in the batch, next to each other, in
            no particular order within the group; :func:`group_tasks`) -> its output rows, typed
            as ``ddl`` says. Picklable, as for :func:`map_groups`.
        ddl: the output schema, flat Spark DDL (types :func:`arrow_type` maps).
        what: the step's name, for the message when a worker process dies.
    """
    return df.repartition(*keys).mapInArrow(workers.arrow_function(fn, what, tasks=partial(group_tasks, tuple(keys))),
                                            spark_schema(ddl))


def parts_for(rows: int, group_rows: int) -> int:
    """How many parts a group step of about ``rows`` input rows is judged in, at most ``group_rows``
    each (setting ``group_rows``; 0: one part)."""
    return 1 if group_rows <= 0 else max(1, -(-rows // group_rows))


@dataclass(frozen=True)
class Lookup:
    """Columns a group step's input takes from another frame (:func:`staged_group_batches`): each
    input row's ``columns`` are those of the row of ``frame`` equal to it on ``on`` (a left join:
    null where none is; ``on`` is unique in ``frame``, and null in the input rows that take nothing).
    ``frame`` holds the step's keys too, and a row of it matches only input rows of its group, so
    that in parts each part of the input is joined with the same part of ``frame`` alone: the join
    holds a part of ``frame``, where the input joined before the split held all of it (silver's
    instance pass at 10,000,000 messages: every payload of bronze, 6.4 GiB)."""

    frame: DataFrame
    on: tuple[str, ...]
    columns: tuple[str, ...]

    def fill(self, rows: DataFrame, frame: DataFrame | None = None) -> DataFrame:
        """``rows`` (holding ``columns``) with ``columns`` taken from ``frame`` (by default
        :attr:`frame`), in ``rows``' order of columns."""
        source = self.frame if frame is None else frame
        return (rows.drop(*self.columns).join(source.select(*self.on, *self.columns), list(self.on), "left")
                .select(*rows.columns))

    def empty(self, rows: DataFrame) -> DataFrame:
        """``rows`` (holding ``columns``) with ``columns`` null: a part of the input whose part of
        ``frame`` has no rows."""
        from pyspark.sql import functions as F

        types = {f.name: f.dataType for f in self.frame.schema.fields}
        return rows.select(*(F.lit(None).cast(types[c]).alias(c) if c in self.columns else F.col(c)
                             for c in rows.columns))


def staged_group_batches(df: DataFrame, keys: list[str], fn: Callable[[pa.RecordBatch], pa.RecordBatch], ddl: str,
                         path: str, *, parts: int, what: str = "per-group step", lookup: Lookup | None = None
                         ) -> DataFrame:
    """:func:`map_group_batches` staged at ``path`` (:func:`lakehouse.spark.delta.stage`), in
    ``parts`` parts of whole groups judged one after another (:func:`parts_for`).

    A group step holds its input at once: the engine gathers the rows of a partition before the
    first group is complete, and more partitions do not help, since the engine runs them all at
    the same time (the 1M bench history's silver rebuild on Sail peaked at 2.3 GB in one
    partition, 2.8 GB in 8 and 3.4 GB in 32). With more than one part, the input is staged once,
    split by a hash of ``keys`` into a folder a part, and each part is judged from its folder in
    a job of its own and appended to ``path``: a part holds about 1/``parts`` of the input. One
    part is :func:`map_group_batches` staged as it is (no copy of the input).

    Args:
        lookup: columns of ``df`` to take from another frame (:class:`Lookup`): in parts, that
            frame is split as the input is, and each part joined with its own part of it.

    Returns:
        The staged output (``ddl``), read back.
    """
    from lakehouse.spark import delta

    if parts <= 1:
        rows = df if lookup is None else lookup.fill(df)
        return delta.stage(map_group_batches(rows, keys, fn, ddl, what=what), path, ddl)
    from pyspark.sql import functions as F

    spark = df.sparkSession
    split, looked_up = f"{path}_input", f"{path}_lookup"
    part_of = F.pmod(F.hash(*keys), F.lit(parts))
    delta.staged_writer(df.withColumn(_PART, part_of)).partitionBy(_PART).parquet(split)
    schema, found = df.schema, set[int]()
    if lookup is not None:
        frame = lookup.frame.select(*keys, *lookup.on, *lookup.columns)
        delta.staged_writer(frame.withColumn(_PART, part_of)).partitionBy(_PART).parquet(looked_up)
        found, frame_schema = set(delta.staged_parts(looked_up, _PART)), frame.schema
    for part in sorted(delta.staged_parts(split, _PART)):
        rows = spark.read.schema(schema).parquet(f"{split}/{_PART}={part}")
        if lookup is not None:
            rows = (lookup.fill(rows, spark.read.schema(frame_schema).parquet(f"{looked_up}/{_PART}={part}"))
                    if part in found else lookup.empty(rows))
        out = map_group_batches(rows, keys, fn, ddl, what=f"{what} (part {part + 1} of {parts})")
        delta.append_staged(out, path)
    return spark.read.schema(spark_schema(ddl)).parquet(path)


_PART = "lakehouse_part"  # no leading underscore: engines and pyarrow skip such folders
