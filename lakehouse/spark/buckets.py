"""The bucketed layout of the gold tables: a partition column of the instance id's hash, so that a
run that replaces the rows of a few instances reads only their buckets.

Why: a run replaces the rows of the instances it touched (:func:`lakehouse.spark.delta.replace_rows`,
a MERGE), and finding the rows to take out is a scan of the table; the ids are hashes, spread over
every file, and Sail 0.7.2 does not prune a MERGE's target by file statistics, even with the ids
as literals (``python -m tests.benchmarks.merge_scan``, Run AK). Partition values in the MERGE's
condition do prune it (on Apache Spark too: Delta Lake prunes a MERGE's target by the condition's
predicates on the target alone): with a table cut into buckets of about :data:`BUCKET_ROWS` rows, a run that touches k
instances of a table reads at most k buckets, however large the table.

The column, :data:`COLUMN` (INT): ``count + (h mod count)``, where ``h`` is the id's first two bytes
after its two-byte YASMF prefix (characters 5 to 8 of its hex, FORMAT.md section 1: uniform, as
a BLAKE3 hash's) and ``count`` the table's number of buckets, a power of two. The value carries the
count (the highest power of two not above it), so that a merge finds it in any file's partition
value, in the Delta log, without a table property the engines store differently. The count is
chosen when a table is written whole (:func:`count_for`, from its rows) and kept until it is
written whole again (a first run, a rebuild, a compaction).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column

COLUMN = "_bucket"
DDL = f"`{COLUMN}` INT"
BUCKET_ROWS = 4096
"""Rows a bucket holds about, when its table is written whole: a merge that touches a bucket reads
all of it, and a read of the whole table opens a file per bucket at least."""
MAX_BUCKETS = 4096


def count_for(rows: int) -> int:
    """The number of buckets for a table of ``rows`` rows: the power of two nearest above
    ``rows / BUCKET_ROWS``, at least 1, at most :data:`MAX_BUCKETS`."""
    count = 1
    while count * BUCKET_ROWS < rows and count < MAX_BUCKETS:
        count *= 2
    return count


def hash_column(key: str = "instance_id") -> Column:
    """The 16-bit hash of the id in column ``key`` (0..65535), in the engine; 0 when the id has no
    hex there (not an entry hash: every row of such ids is in one bucket)."""
    from pyspark.sql import functions as F

    return F.coalesce(F.conv(F.substring(key, 5, 4), 16, 10).cast("int"), F.lit(0))


def column(count: int, key: str = "instance_id") -> Column:
    """The :data:`COLUMN` of each row, for a table of ``count`` buckets, named so."""
    from pyspark.sql import functions as F

    return (F.lit(count) + F.pmod(hash_column(key), F.lit(count))).cast("int").alias(COLUMN)


def count_of(values: Iterable[str | None]) -> int | None:
    """A table's number of buckets, from the partition values of its files (strings, as the Delta
    log keeps them): None when it has none (no file yet) or one is not a bucket value."""
    counts = set()
    for value in values:
        if value is None or not value.isdigit() or int(value) < 1:
            return None
        counts.add(1 << (int(value).bit_length() - 1))
    return counts.pop() if len(counts) == 1 else None


def values_for(hashes: Iterable[int], count: int) -> list[int]:
    """The :data:`COLUMN` values of ids with these 16-bit hashes (:func:`hash_column`), in a table of
    ``count`` buckets: what a merge's condition names, so that the engine reads only their files."""
    return sorted({count + h % count for h in hashes})
