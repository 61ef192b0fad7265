"""The seeds' slothmail story, end to end on every engine (SEMANTICS.md sections 2-6).

Create the schema, add attachments, remove them and restrict subjects (old multi-line subjects
become ``<Subject>``), revert to the version with attachments (they come back), while deletes made
in between stay deleted; rename ``created`` to ``sent_at`` (every value kept, and a value written
under the new name shows under the old one at older versions), then revert to before the rename
(the old name again, with every value written before it).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from lakehouse.core.messages import SchemaMeta, SchemaRevert
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.lensfiles import load_lens_file
from lakehouse.publish.publisher import Publisher
from pipelines.gold import run_gold
from pipelines.ingest import run_ingest
from pipelines.register import register_schema
from pipelines.silver import run_silver
from tests.lakes import REPO, gold_data

pytestmark = pytest.mark.parity

LENSES = REPO / "lenses"


def rel(instance: str) -> bytes:
    """A relation value as a message carries it (the entry hash's bytes)."""
    return bytes.fromhex(instance)


def materialize(spark: Any, lake: Any) -> None:
    run_ingest(spark, lake)
    run_silver(spark, lake)
    run_gold(spark, lake)


def gold(spark: Any, name: str) -> dict[str, dict[str, Any]]:
    """The rows of ``gold.<name>`` as the catalog names it, by instance id."""
    return {r["instance_id"]: gold_data(r.asDict()) for r in spark.table(f"gold.{name}").collect()}


def catalog(spark: Any) -> set[str]:
    return {r["tableName"] for r in spark.sql("SHOW TABLES IN gold").collect()}


def migrate(pub: Publisher, schema: str, lens: str) -> int:
    return pub.schema_message(schema, load_lens_file(LENSES / schema / lens, resolve_schema=pub.resolve_schema))


def test_slothmail_story(spark: Any, lake: Any) -> None:
    slothmail_story(spark, lake)


def slothmail_story(spark: Any, lake: Any) -> None:
    """The story, its expectations asserted along the way, on the lake of ``lake`` (settings)."""
    store = KeyStore(lake.keys)
    store.create("sloth")
    store.create("panda")
    when = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    with Publisher(store, "sloth", lake.landing) as pub:
        ids = {name: str(pub.schema_init(SchemaMeta(name=name))) for name in ("profile", "attachment", "slothmail")}
        migrate(pub, "profile", "001.yaml")
        migrate(pub, "attachment", "001.yaml")
        assert migrate(pub, "slothmail", "001.yaml") == 2
        ada = pub.create("profile", {"name": "Ada", "email": "ada@example.org"})
        plain = pub.create("slothmail", {"subject": "hi", "body": "v2 mail", "recipient": rel(ada), "created": when})
        multi = pub.create("slothmail", {"subject": "two\nlines", "body": "x", "recipient": rel(ada), "created": when})
        assert migrate(pub, "slothmail", "002.yaml") == 3
    with Publisher(store, "panda", lake.landing) as pub:
        doc = pub.create(ids["attachment"], {"filename": "doc.pdf", "size": 1024})
    materialize(spark, lake)
    for name, schema in ids.items():
        register_schema(spark, lake, schema, name)
    materialize(spark, lake)
    assert {"slothmail_v2", "slothmail_v3", "slothmail"} <= catalog(spark)

    with Publisher(store, "sloth", lake.landing) as pub:
        with_att = pub.create("slothmail", {"subject": "see attached", "body": "b", "recipient": rel(ada),
                                            "created": when, "attachments": [rel(doc)]})
        pub.update("slothmail", plain, {"attachments": [rel(doc)]})
    materialize(spark, lake)
    v3 = gold(spark, "slothmail_v3")
    assert v3[with_att]["attachments"] == [doc] and v3[plain]["attachments"] == [doc]
    assert "attachments" not in gold(spark, "slothmail_v2")[plain]

    # version 4 removes attachments and restricts subjects: old multi-line subjects show <Subject>
    with Publisher(store, "sloth", lake.landing) as pub:
        assert migrate(pub, "slothmail", "003.yaml") == 4
        pub.delete("slothmail", with_att)
        later = pub.create("slothmail", {"subject": "after v4", "body": "c", "recipient": rel(ada), "created": when})
    materialize(spark, lake)
    v4 = gold(spark, "slothmail_v4")
    assert set(v4) == {plain, multi, later}
    assert v4[multi]["subject"] == "<Subject>" and v4[plain]["subject"] == "hi"
    assert "attachments" not in v4[plain]
    assert gold(spark, "slothmail_v2")[multi]["subject"] == "two\nlines"
    assert set(gold(spark, "slothmail")) == set(v4)

    # revert to version 3: attachments come back, v4 leaves the catalog; the delete made at v4
    # stays (deletes are never ignored) while the create made at v4 is ignored (abandoned version)
    with Publisher(store, "sloth", lake.landing) as pub:
        assert pub.schema_message("slothmail", SchemaRevert(3)) == 5
    materialize(spark, lake)
    v5 = gold(spark, "slothmail_v5")
    assert set(v5) == {plain, multi}
    assert v5[plain]["attachments"] == [doc] and v5[multi]["subject"] == "two\nlines"
    statuses = {r["entry_hash"]: r["status"] for r in spark.table("silver.messages").collect()}
    assert statuses[later] == "ignored" and statuses[with_att] == "applied"
    assert "slothmail_v4" not in catalog(spark) and "slothmail_v5" in catalog(spark)
    assert gold(spark, "slothmail") == v5 == gold(spark, "slothmail_v3")

    # version 6 renames created to sent_at: one schema message, no instance rewritten
    later_when = datetime(2024, 6, 1, 8, 30, tzinfo=timezone.utc)
    with Publisher(store, "sloth", lake.landing) as pub:
        assert migrate(pub, "slothmail", "004.yaml") == 6
        renamed = pub.create("slothmail", {"subject": "renamed", "body": "d", "recipient": rel(ada),
                                           "sent_at": later_when})
        pub.update("slothmail", multi, {"sent_at": later_when})
    materialize(spark, lake)
    v6 = gold(spark, "slothmail_v6")
    assert set(v6) == {plain, multi, renamed}
    naive, naive_later = when.replace(tzinfo=None), later_when.replace(tzinfo=None)  # gold reads UTC, naive
    assert "created" not in v6[plain] and v6[plain]["sent_at"] == naive
    assert v6[multi]["sent_at"] == naive_later and v6[renamed]["sent_at"] == naive_later
    v3 = gold(spark, "slothmail_v3")  # the older versions show the same values under the old name
    assert v3[renamed]["created"] == naive_later and v3[multi]["created"] == naive_later
    assert v3[plain]["created"] == naive and "sent_at" not in v3[plain]
    assert [c for c in spark.table("gold.slothmail_v6").columns if c in ("created", "sent_at")] == ["sent_at"]

    # revert to version 5, before the rename: created again, with every value written before it;
    # the create and update written at version 6 are ignored
    with Publisher(store, "sloth", lake.landing) as pub:
        assert pub.schema_message("slothmail", SchemaRevert(5)) == 7
    materialize(spark, lake)
    v7 = gold(spark, "slothmail_v7")
    assert set(v7) == {plain, multi}
    assert v7[plain]["created"] == naive and v7[multi]["created"] == naive and "sent_at" not in v7[plain]
    assert "slothmail_v6" not in catalog(spark) and gold(spark, "slothmail") == v7
