"""Rows named by their columns (:func:`lakehouse.spark.delta.row`): what the pipelines hand to
``createDataFrame`` for their small tables (``silver.gold_versions``, ``silver.schema_fields`` ...)."""

from __future__ import annotations

import pytest

from lakehouse.spark import catalog, delta


def test_a_row_takes_its_values_by_column_name_in_the_order_of_the_ddl() -> None:
    assert delta.row("a STRING, b BIGINT, c BOOLEAN", c=True, a="x") == ("x", None, True)
    row = delta.row(catalog.GOLD_VERSIONS_DDL, gold_run=3, table_name="notes_v2", written_at="now")
    named = dict(zip(delta.columns(catalog.GOLD_VERSIONS_DDL), row, strict=True))
    assert named["gold_run"] == 3 and named["table_name"] == "notes_v2" and named["written_at"] == "now"
    assert {k for k, v in named.items() if v is not None} == {"gold_run", "table_name", "written_at"}


def test_a_value_for_no_column_is_an_error_that_names_it() -> None:
    with pytest.raises(KeyError, match="tabel_name"):
        delta.row(catalog.GOLD_VERSIONS_DDL, tabel_name="notes_v2")
