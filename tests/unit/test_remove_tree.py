"""Staging folders live under the lake root, a local path or a URI (``tables.remove_tree``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lakehouse.spark.tables import remove_tree


def test_a_folder_is_removed_whole_by_path_and_by_uri(tmp_path: Path) -> None:
    for name, location in (("a", str(tmp_path / "a")), ("b", (tmp_path / "b").as_uri())):
        (tmp_path / name / "part=1").mkdir(parents=True)
        (tmp_path / name / "part=1" / "x.parquet").write_bytes(b"x")
        assert remove_tree(location) is True
        assert not (tmp_path / name).exists()
        assert remove_tree(location) is False  # nothing left: no error


def test_a_staging_folder_on_object_storage_is_removed_on_the_store(store: Any) -> None:
    """Issue 47: a run on a lake at ``s3://...`` made a local folder ``s3:/...`` for its staging."""
    import boto3

    client = boto3.client("s3")
    for key in ("st/_staging/silver/log_pass/a.parquet", "st/_staging/silver/judge/b.parquet", "st/bronze/keep"):
        client.put_object(Bucket="lake", Key=key, Body=b"x")
    assert remove_tree("s3://lake/st/_staging/silver") is True
    left = [o["Key"] for o in client.list_objects_v2(Bucket="lake", Prefix="st/").get("Contents", [])]
    assert not [key for key in left if key.startswith("st/_staging/silver")] and "st/bronze/keep" in left
    assert not Path("s3:").exists()


def test_a_folder_the_store_lists_but_that_holds_nothing_counts_as_removed(store: Any) -> None:
    """A run died on it (the seeds' story on the store, Apache Spark): the last run's staging folder,
    removed, still showed as a folder on the S3 server (S3Proxy sometimes leaves the emptied
    directory on its disk), and the next run's removal of it stopped on "Path does not exist".
    Each round lands a staging folder, removes it and removes it again at once (a look right
    after the removal saw the empty folder in 0 to 3 rounds of 40 a run)."""
    import boto3

    client = boto3.client("s3")
    for n in range(40):
        for key in (f"again-{n}/_staging/silver/log_pass/", f"again-{n}/_staging/silver/log_pass/a.parquet",
                    f"again-{n}/_staging/silver/judge/b.parquet"):
            client.put_object(Bucket="lake", Key=key, Body=b"" if key.endswith("/") else b"x")
        assert remove_tree(f"s3://lake/again-{n}/_staging/silver") is True
        remove_tree(f"s3://lake/again-{n}/_staging/silver")  # there or not: no error
        left = client.list_objects_v2(Bucket="lake", Prefix=f"again-{n}/_staging/silver/").get("Contents", [])
        assert not left


def test_a_listed_folder_that_the_delete_finds_empty_is_removed_and_one_with_files_left_is_an_error(
        monkeypatch: Any) -> None:
    """The same, whatever the store's timing: a folder listed as there whose delete finds nothing is
    removed; one whose delete fails with files still under it raises."""
    from pyarrow import fs

    from lakehouse.spark import tables

    class Store:
        def __init__(self, files: list[str]) -> None:
            self.files = files

        def get_file_info(self, what: Any) -> Any:
            if isinstance(what, fs.FileSelector):
                return [fs.FileInfo(f, fs.FileType.File) for f in self.files]
            return fs.FileInfo(what, fs.FileType.Directory)

        def delete_dir(self, path: str) -> None:
            raise FileNotFoundError(f"Path does not exist '{path}'")

    for files, raises in (([], False), (["x/_staging/silver/a.parquet"], True)):
        monkeypatch.setattr(tables, "filesystem_of", lambda location, files=files: (Store(files), "x/_staging/silver"))
        if raises:
            with pytest.raises(FileNotFoundError):
                remove_tree("s3://lake/x/_staging/silver")
        else:
            assert remove_tree("s3://lake/x/_staging/silver") is True


def test_every_job_stages_under_the_lake_root_with_no_empty_path_part() -> None:
    from lakehouse.spark.tables import staging_folder

    assert staging_folder("s3://lake/x/", "silver") == staging_folder("s3://lake/x", "silver") == \
        "s3://lake/x/_staging/silver"
    assert staging_folder("/data/lake", "gold") == "/data/lake/_staging/gold"
