"""The demo's lake named apart (``lakehouse demo --lake s3://...``): emptied first, but only when it
is empty or one the demo made (:func:`pipelines.demo.prepare_lake`)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lakehouse.errors import DemoError
from pipelines.demo import DEMO_MARK, prepare_lake


def keys(prefix: str) -> list[str]:
    import boto3

    listed = boto3.client("s3").list_objects_v2(Bucket="lake", Prefix=f"{prefix}/")
    return sorted(o["Key"] for o in listed.get("Contents", []) if not o["Key"].endswith("/"))  # not folder marks


def test_a_demo_lake_on_the_store_is_emptied_only_when_the_demo_made_it(store: Any) -> None:
    import boto3

    client = boto3.client("s3")
    prefix = f"demo-{uuid.uuid4().hex[:8]}"
    prepare_lake(f"s3://lake/{prefix}")  # an empty place: taken, and marked
    assert keys(prefix) == [f"{prefix}/{DEMO_MARK}"]
    client.put_object(Bucket="lake", Key=f"{prefix}/gold/t/_delta_log/0.json", Body=b"{}")
    prepare_lake(f"s3a://lake/{prefix}")  # the demo's own lake (s3a names the same): emptied
    assert keys(prefix) == [f"{prefix}/{DEMO_MARK}"]

    other = f"prod-{uuid.uuid4().hex[:8]}"
    client.put_object(Bucket="lake", Key=f"{other}/silver/messages/_delta_log/0.json", Body=b"{}")
    with pytest.raises(DemoError, match="not a lake the demo made"):
        prepare_lake(f"s3://lake/{other}")
    assert keys(other) == [f"{other}/silver/messages/_delta_log/0.json"], "nothing of it was removed"


def test_the_demo_empties_its_lake_under_the_lake_s_lock_and_keeps_the_lock(store: Any, tmp_path: Any) -> None:
    """The demo takes its lake's lock, then empties the lake: the lock object (on a store) or the
    lock files (on local disk) are the run's own, not content, and stay."""
    from lakehouse.leaselock import LOCK_OBJECT
    from lakehouse.lock import lake_lock

    prefix = f"locked-{uuid.uuid4().hex[:8]}"
    with lake_lock(f"s3://lake/{prefix}", "demo"):
        prepare_lake(f"s3://lake/{prefix}")  # an empty place but for the lock: taken
        assert keys(prefix) == sorted([f"{prefix}/{DEMO_MARK}", f"{prefix}/{LOCK_OBJECT}"])
    local = tmp_path / "lake"
    with lake_lock(str(local), "demo"):
        prepare_lake(str(local))
        (local / "gold").mkdir()
        prepare_lake(str(local))
        assert sorted(p.name for p in local.iterdir()) == sorted([".lakehouse.lock", ".lakehouse.lock.holder",
                                                                  DEMO_MARK])
