"""A lake on object storage: the store's settings, from one place, handed to every reader and writer.

LAKEHOUSE.md, Configuration. A lake root ``s3://bucket/path`` (or ``s3a://bucket/path``, the same
lake) is read and written by the engine (Sail in this process, Apache Spark through Hadoop's S3A
file system), by the ``deltalake`` and ``pyarrow.fs`` readers beside it, and by the lease lock
(boto3). Each takes its store settings from a different place; here they are taken once:

- the settings ``s3_endpoint``, ``s3_region``, ``s3_access_key_id``, ``s3_secret_access_key`` and
  ``s3_addressing`` (``LAKEHOUSE_S3_*``), where set;
- else the standard ``AWS_*`` environment variables (``AWS_ENDPOINT_URL``, ``AWS_REGION`` or
  ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
  ``AWS_VIRTUAL_HOSTED_STYLE_REQUEST``), or for credentials AWS's own chain (profile, instance role).

:func:`export_environment` writes the effective values into this process's ``AWS_*`` variables,
which Sail, ``deltalake``, ``pyarrow`` and boto3 read (with ``AWS_ALLOW_HTTP`` for an ``http://``
endpoint, which the Rust readers refuse otherwise); :func:`hadoop_options` gives the same as
``fs.s3a.*`` options for Apache Spark, whose S3A file system also serves ``s3://`` here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlparse

from lakehouse.config import Settings

STORE_SCHEMES: Final = ("s3", "s3a")
"""Lake roots with these schemes are on object storage."""


def is_store_root(lake_root: str) -> bool:
    """Whether ``lake_root`` is on object storage (``s3://`` or ``s3a://``)."""
    return urlparse(lake_root).scheme in STORE_SCHEMES


def absolute_root(lake_root: str) -> str:
    """``lake_root`` as a location that does not depend on the working folder: a URI
    (``s3://bucket/path``, ``file:///path``) as given, less a trailing slash (which would make an
    empty key part on a store); a local path resolved (``..``, symbolic links). A URI goes through no
    path join: ``Path`` makes ``s3://lake/x`` into ``s3:/lake/x``, which no engine finds."""
    if "://" in lake_root:
        return lake_root.rstrip("/")
    return str(Path(lake_root).resolve())


@dataclass(frozen=True)
class StoreSettings:
    """How to reach the S3 API store of a lake; empty strings are "not set" (AWS's own defaults).

    Attributes:
        endpoint: the store's URL (``http://127.0.0.1:9000``); empty: AWS S3 of ``region``.
        region: the store's region (``us-east-1``).
        access_key_id, secret_access_key, session_token: credentials; empty: AWS's chain.
        path_style: buckets addressed as ``endpoint/bucket`` (True) or ``bucket.endpoint``.
    """

    endpoint: str = ""
    region: str = ""
    access_key_id: str = ""
    secret_access_key: str = ""
    session_token: str = ""
    path_style: bool = True

    @property
    def allow_http(self) -> bool:
        """Whether the endpoint is plain ``http://`` (a store on loopback or a private network)."""
        return self.endpoint.lower().startswith("http://")


def store_settings(settings: Settings | None = None, environ: Mapping[str, str] | None = None) -> StoreSettings:
    """The effective store settings: each of ``settings`` where set, else the ``AWS_*`` variables.

    Args:
        settings: the lakehouse settings (None: the environment alone).
        environ: the environment to read (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    values: Mapping[str, Any] = settings.values if settings is not None else {}

    def first(setting: str, *variables: str) -> str:
        given = str(values.get(setting) or "")
        return given or next((env[v] for v in variables if env.get(v)), "")

    addressing = str(values.get("s3_addressing") or "auto")
    if addressing == "auto":
        path_style = env.get("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "").lower() not in ("true", "1")
    else:
        path_style = addressing == "path"
    return StoreSettings(
        endpoint=first("s3_endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
        region=first("s3_region", "AWS_REGION", "AWS_DEFAULT_REGION"),
        access_key_id=first("s3_access_key_id", "AWS_ACCESS_KEY_ID"),
        secret_access_key=first("s3_secret_access_key", "AWS_SECRET_ACCESS_KEY"),
        session_token="" if values.get("s3_access_key_id") else env.get("AWS_SESSION_TOKEN", ""),
        path_style=path_style)


def export_environment(settings: Settings, environ: MutableMapping[str, str] | None = None) -> StoreSettings:
    """Write the effective store settings (:func:`store_settings`) into the ``AWS_*`` variables of
    this process, which the embedded engine (read when it first opens the store), ``deltalake``,
    ``pyarrow.fs`` and boto3 read. Variables of settings that are not set are left as they are.

    Returns:
        The store settings written.
    """
    env = os.environ if environ is None else environ
    store = store_settings(settings, env)
    pairs = {"AWS_ENDPOINT_URL": store.endpoint, "AWS_REGION": store.region, "AWS_DEFAULT_REGION": store.region,
             "AWS_ACCESS_KEY_ID": store.access_key_id, "AWS_SECRET_ACCESS_KEY": store.secret_access_key}
    for name, value in pairs.items():
        if value:
            env[name] = value
    if settings.values.get("s3_access_key_id"):  # a token of other credentials would not match these
        env.pop("AWS_SESSION_TOKEN", None)
    if store.endpoint and env.get("AWS_ENDPOINT_URL_S3"):
        env["AWS_ENDPOINT_URL_S3"] = store.endpoint  # the more specific variable wins with boto3
    if store.allow_http:
        env["AWS_ALLOW_HTTP"] = "true"
    env["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] = "false" if store.path_style else "true"
    return store


def hadoop_options(store: StoreSettings) -> dict[str, str]:
    """The store settings as Hadoop S3A options (``fs.s3a.*``; Apache Spark takes them prefixed with
    ``spark.hadoop.`` when it starts, or as session settings), with the S3A file system serving
    ``s3://`` too, so that one lake root works on both engines. Credentials not set are left to
    S3A's own chain (the ``AWS_*`` variables, a profile, an instance role).

    The parquet folders a run stages (not the Delta tables, which Delta commits itself) are
    committed by Hadoop's file committer, which renames each file into place, and a rename on S3
    is a copy and a delete: its algorithm 2 renames a file once, at its task's commit, where
    algorithm 1 renames it twice (task, then job), and no ``_SUCCESS`` marker is written (nothing
    reads it). A job that fails halfway may leave some of its files in the folder, which no run
    reads: a staging folder is written again whole by the next run.
    """
    options = {
        "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
        "fs.s3a.path.style.access": str(store.path_style).lower(),
        "mapreduce.fileoutputcommitter.algorithm.version": "2",
        "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    }
    if store.endpoint:
        options["fs.s3a.endpoint"] = store.endpoint
        options["fs.s3a.connection.ssl.enabled"] = str(not store.allow_http).lower()
    if store.region:
        options["fs.s3a.endpoint.region"] = store.region
    if store.access_key_id and store.secret_access_key:
        options["fs.s3a.access.key"] = store.access_key_id
        options["fs.s3a.secret.key"] = store.secret_access_key
        if store.session_token:
            options["fs.s3a.session.token"] = store.session_token
            options["fs.s3a.aws.credentials.provider"] = \
                "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
    return options


def s3_client(store: StoreSettings | None = None) -> Any:
    """A boto3 S3 client for ``store`` (default: :func:`store_settings` of the environment)."""
    import boto3
    from botocore.config import Config

    store = store if store is not None else store_settings()
    arguments: dict[str, Any] = {"config": Config(s3={"addressing_style": "path" if store.path_style else "virtual"})}
    if store.endpoint:
        arguments["endpoint_url"] = store.endpoint
    if store.region:
        arguments["region_name"] = store.region
    if store.access_key_id and store.secret_access_key:
        arguments.update(aws_access_key_id=store.access_key_id, aws_secret_access_key=store.secret_access_key,
                         aws_session_token=store.session_token or None)
    return boto3.client("s3", **arguments)


def arrow_uri(location: str) -> str:
    """``location`` as ``pyarrow.fs`` reads it: ``s3a://`` is the same store as ``s3://``."""
    return "s3://" + location[len("s3a://"):] if location.startswith("s3a://") else location
