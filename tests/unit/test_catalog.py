"""The table catalog (:mod:`lakehouse.spark.catalog`): each lake table declared once, and no job
spelling a table's name or a gold table's ``_v<n>`` itself."""

from __future__ import annotations

import re
from pathlib import Path

from lakehouse.spark import catalog
from lakehouse.spark.delta import columns
from lakehouse.spark.groups import arrow_schema

REPO = Path(__file__).resolve().parents[2]
DECLARED = (*catalog.BRONZE, *catalog.SILVER, *catalog.GOLD_STATE)


def test_every_table_is_declared_once_with_columns_the_engine_and_arrow_read() -> None:
    assert len({t.qualified for t in DECLARED}) == len(DECLARED)
    for declared in DECLARED:
        names = columns(declared.ddl)
        assert len(set(names)) == len(names) and declared.doc
        assert arrow_schema(declared.ddl).names == names
        assert declared.row(**{names[0]: "x"})[0] == "x"


def test_the_lake_readers_locate_tables_through_the_catalog(tmp_path: Path) -> None:
    from lakehouse.spark.lake import gold_state_tables, silver_tables

    root = str(tmp_path)
    assert set(silver_tables(root)) == {t.name for t in catalog.SILVER}
    assert set(gold_state_tables(root)) == {t.name for t in catalog.GOLD_STATE}
    assert catalog.gold_table(root, "notes", 2).location == f"{tmp_path}/gold/notes_v2"
    assert catalog.changes_table(root, "notes_v2").location == f"{tmp_path}/gold/notes_v2_changes"


def test_no_job_spells_a_table_name_or_a_versioned_gold_name() -> None:
    """Each table is declared once: outside the catalog (and the registry's name rules), no code
    locates a table by a literal layer and name, and none builds ``<name>_v<n>`` itself."""
    literal_table = re.compile(r"""\btable\([^()]*,\s*["'](bronze|silver|gold)["']\s*,\s*["'][a-z_]+["']\)""")
    versioned = re.compile(r"""_v\{""")
    found = []
    for path in [*REPO.glob("lakehouse/**/*.py"), *REPO.glob("pipelines/*.py")]:
        if path.name in ("catalog.py", "registry.py"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            if literal_table.search(line) or versioned.search(line):
                found.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert found == []


def test_the_gold_tables_a_run_looks_back_at_keep_a_lake_uri_whole(tmp_path: Path) -> None:
    """The locations the gold job reads its last run's tables from (those whose instances an entry
    that lost its place may have written) are the catalog's: a lake on object storage keeps its
    ``s3://`` (a path join makes it ``s3:/``, a table no engine finds), a local lake its folder."""
    from types import SimpleNamespace

    from pipelines.gold import _shown

    last = [{"schema": "s1", "table_name": "notes_v2", "location": "gold/notes_v2", "is_current": True},
            {"schema": "s1", "table_name": "notes_v1", "location": "gold/notes_v1", "is_current": False},
            {"schema": "s2", "table_name": None, "location": None, "is_current": True}]
    for root, expected in (("s3://lake/x/", "s3://lake/x/gold/notes_v2"), (str(tmp_path), f"{tmp_path}/gold/notes_v2")):
        assert _shown(SimpleNamespace(root=root, last=last)) == {"s1": expected}  # type: ignore[arg-type]
