"""The gold tables' bucket layout (lakehouse.spark.buckets): how many buckets, and the values a merge names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lakehouse.spark import buckets


def test_a_table_gets_buckets_of_at_most_the_bucket_rows_in_a_power_of_two() -> None:
    assert buckets.count_for(0) == buckets.count_for(1) == buckets.count_for(buckets.BUCKET_ROWS) == 1
    assert buckets.count_for(buckets.BUCKET_ROWS + 1) == 2
    assert buckets.count_for(160_000) == 64
    assert buckets.count_for(10**12) == buckets.MAX_BUCKETS


@given(st.integers(min_value=0, max_value=12), st.sets(st.integers(min_value=0, max_value=65535), min_size=1))
def test_bucket_values_carry_their_tables_count(power: int, hashes: set[int]) -> None:
    count = 1 << power
    values = buckets.values_for(hashes, count)
    assert all(count <= v < 2 * count for v in values) and len(values) <= min(len(hashes), count)
    assert buckets.count_of(str(v) for v in values) == count


def test_a_table_with_mixed_counts_or_other_partitions_has_no_buckets() -> None:
    assert buckets.count_of(["64", "65", "130"]) is None  # written with 64 and with 128 buckets
    assert buckets.count_of([]) is None
    assert buckets.count_of([None]) is None
    assert buckets.count_of(["x"]) is None
    assert buckets.count_of(["0"]) is None
