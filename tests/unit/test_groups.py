"""The Arrow schemas that per-group functions write (lakehouse.spark.groups)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lakehouse.errors import LakehouseError
from lakehouse.spark import silver
from lakehouse.spark.delta import columns
from lakehouse.spark.groups import arrow_schema, arrow_type


def test_every_ddl_of_a_per_group_function_has_an_arrow_schema_with_the_same_columns() -> None:
    for ddl in (silver.STATES_DDL, silver.LOG_PASS_DDL, silver.INSTANCE_PASS_DDL):
        assert arrow_schema(ddl).names == columns(ddl)


def test_types_map_exactly() -> None:
    schema = arrow_schema("a STRING, b BIGINT, c ARRAY<STRING>, d BINARY, e BOOLEAN")
    assert schema.types == [pa.string(), pa.int64(), pa.list_(pa.string()), pa.binary(), pa.bool_()]
    assert arrow_type("array<array<bigint>>") == pa.list_(pa.list_(pa.int64()))


def test_an_unmapped_type_is_refused_by_name() -> None:
    with pytest.raises(LakehouseError, match="DECIMAL"):
        arrow_schema("a DECIMAL(10,2)")
