"""A lake on object storage (issue 47): an S3 API server on loopback (``tests.s3``), the embedded
engine reading and writing the lake there through the standard ``AWS_*`` settings."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from tests.e2e.test_slothmail_story import slothmail_story


def test_the_slothmail_story_on_object_storage_ends_as_on_local_disk(spark: Any, lake: Any, store: Any,
                                                                     tmp_path: Path, monkeypatch: Any) -> None:
    """The seeds' story with the lake root ``s3://lake/<name>``: every expectation of the story
    holds, the staging folders lived on the store, and nothing of the lake was written to local
    disk (the landing folder and the keys are local settings)."""
    import boto3

    here = tmp_path / "working-directory"
    here.mkdir()
    monkeypatch.chdir(here)  # a lake root taken for a local path would show up here
    prefix = f"story-{uuid.uuid4().hex[:8]}"
    slothmail_story(spark, lake.with_overrides(lake_root=f"s3://lake/{prefix}"))
    keys = [o["Key"] for page in boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket="lake",
                                                                                               Prefix=f"{prefix}/")
            for o in page.get("Contents", [])]
    tables = {"/".join(k.split("/")[1:3]) for k in keys if "/_delta_log/" in k}
    assert {"bronze/entries", "silver/messages", "gold/slothmail_v5"} <= tables
    assert not [k for k in keys if k.startswith(f"{prefix}/_staging/") and not k.endswith("/")], \
        "a run left its staging files"
    assert sorted(p.name for p in here.iterdir()) == [], "a run wrote into the working directory"
