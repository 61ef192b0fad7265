"""The store settings of a lake on object storage, from one place (:mod:`lakehouse.store`): the
settings where set, else the ``AWS_*`` variables, handed alike to every reader and to Apache Spark."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.config import load_settings
from lakehouse.spark.session import apache_spark_conf, session_conf
from lakehouse.store import (
    absolute_root,
    arrow_uri,
    export_environment,
    hadoop_options,
    is_store_root,
    s3_client,
    store_settings,
)

AWS = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9000", "AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "env-key",
       "AWS_SECRET_ACCESS_KEY": "env-secret", "AWS_SESSION_TOKEN": "env-token"}


def test_the_aws_variables_are_used_where_no_setting_is_set() -> None:
    store = store_settings(load_settings(environ={}), AWS)
    assert (store.endpoint, store.region, store.access_key_id, store.secret_access_key, store.session_token) == \
        ("http://127.0.0.1:9000", "eu-west-1", "env-key", "env-secret", "env-token")
    assert store.allow_http and store.path_style
    assert store_settings(load_settings(environ={}), {"AWS_DEFAULT_REGION": "us-west-2"}).region == "us-west-2"
    assert not store_settings(load_settings(environ={}),
                              {"AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "true"}).path_style


def test_settings_win_over_the_aws_variables_and_drop_a_token_of_other_credentials() -> None:
    settings = load_settings(environ={"LAKEHOUSE_S3_ENDPOINT": "https://store.example:443",
                                      "LAKEHOUSE_S3_ACCESS_KEY_ID": "mine", "LAKEHOUSE_S3_SECRET_ACCESS_KEY": "s",
                                      "LAKEHOUSE_S3_ADDRESSING": "virtual"})
    store = store_settings(settings, AWS)
    assert (store.endpoint, store.region, store.access_key_id, store.secret_access_key, store.session_token) == \
        ("https://store.example:443", "eu-west-1", "mine", "s", "")
    assert not store.allow_http and not store.path_style
    env = dict(AWS)
    export_environment(settings, env)
    assert env["AWS_ENDPOINT_URL"] == "https://store.example:443" and env["AWS_ACCESS_KEY_ID"] == "mine"
    assert "AWS_SESSION_TOKEN" not in env and "AWS_ALLOW_HTTP" not in env
    assert env["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "true"


def test_an_http_endpoint_is_allowed_for_the_rust_readers() -> None:
    env = dict(AWS)
    export_environment(load_settings(environ={}), env)
    assert env["AWS_ALLOW_HTTP"] == "true" and env["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"] == "false"


def test_apache_spark_gets_the_same_settings_as_s3a_options_and_serves_s3_with_s3a() -> None:
    options = hadoop_options(store_settings(load_settings(environ={}), AWS))
    assert options["fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert options["fs.s3a.connection.ssl.enabled"] == "false"
    assert options["fs.s3a.endpoint.region"] == "eu-west-1"
    assert options["fs.s3a.path.style.access"] == "true"
    assert (options["fs.s3a.access.key"], options["fs.s3a.secret.key"], options["fs.s3a.session.token"]) == \
        ("env-key", "env-secret", "env-token")
    assert options["fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    # a staged folder's files renamed once, not twice, and no _SUCCESS marker: fewer copies on S3
    assert options["mapreduce.fileoutputcommitter.algorithm.version"] == "2"
    assert options["mapreduce.fileoutputcommitter.marksuccessfuljobs"] == "false"
    no_keys = hadoop_options(store_settings(load_settings(environ={}), {}))
    assert not any(k in no_keys for k in ("fs.s3a.access.key", "fs.s3a.endpoint")), "S3A's own chain decides"


def test_only_a_lake_on_a_store_gives_apache_spark_s3a(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    for name, value in AWS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("lakehouse.spark.jars.delta_jars", lambda *a, **k: ["delta.jar"])
    monkeypatch.setattr("lakehouse.spark.jars.store_jars", lambda *a, **k: ["hadoop-aws.jar"])
    local = load_settings(environ={}).with_overrides(lake_root=str(tmp_path))
    remote = local.with_overrides(lake_root="s3a://lake/x")
    assert apache_spark_conf(local, {})["spark.jars"] == "delta.jar"
    assert not any(k.startswith("spark.hadoop.fs.s3") for k in apache_spark_conf(local, {}))
    conf = apache_spark_conf(remote, {})
    assert conf["spark.jars"] == "delta.jar,hadoop-aws.jar"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert session_conf(remote)["fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert "fs.s3a.endpoint" not in session_conf(remote, sail=True), "Sail reads the environment"
    assert "fs.s3a.endpoint" not in session_conf(local)


def test_s3a_and_s3_name_the_same_store() -> None:
    assert is_store_root("s3://lake/x") and is_store_root("s3a://lake/x")
    assert not is_store_root("/tmp/lake") and not is_store_root("file:///tmp/lake")
    assert arrow_uri("s3a://lake/x/gold") == "s3://lake/x/gold" and arrow_uri("/tmp/lake") == "/tmp/lake"


def test_the_lock_s_client_uses_the_store_settings() -> None:
    client = s3_client(store_settings(load_settings(environ={}), AWS))
    assert client.meta.endpoint_url == "http://127.0.0.1:9000"
    assert client.meta.region_name == "eu-west-1"
    assert client.meta.config.s3["addressing_style"] == "path"


def test_a_master_in_spark_conf_starts_the_engine_and_stays_out_of_its_sessions(tmp_path: object) -> None:
    """A Spark Connect session refuses ``spark.master`` (CANNOT_CONFIGURE_SPARK_CONNECT_MASTER) and
    warns of the driver's memory (CANNOT_MODIFY_CONFIG): such settings of ``spark_conf`` are the
    engine's start, as a cluster and its memory are chosen there."""
    start = {"spark.master": "local-cluster[2,1,1536]", "spark.driver.memory": "1g", "spark.executor.memory": "2g"}
    settings = load_settings(environ={}).with_overrides(lake_root=str(tmp_path), spark_conf={**start, "spark.sql.x": "1"})
    assert session_conf(settings) == {"spark.sql.session.timeZone": "UTC", "spark.sql.x": "1"}
    assert start.items() <= apache_spark_conf(settings, {**start, "spark.jars": ""}).items()  # no jars fetched


def test_a_child_spark_server_gets_store_credentials_from_its_environment_not_its_command_line(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A process's command line is readable by every user of the machine (``ps``): the store's keys
    reach the local Spark Connect server through the environment, where S3A's chain finds them."""
    import subprocess

    from lakehouse.spark import session

    for name, value in AWS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("lakehouse.spark.jars.delta_jars", lambda *a, **k: ["delta.jar"])
    monkeypatch.setattr("lakehouse.spark.jars.store_jars", lambda *a, **k: ["hadoop-aws.jar"])
    started: dict[str, object] = {}

    class Refused(Exception):
        pass

    def start_child(command: list[str], **popen: object) -> subprocess.Popen[bytes]:
        started.update(command=command, env=popen["env"])
        raise Refused

    monkeypatch.setattr(session, "start_child", start_child)
    settings = load_settings(environ={}).with_overrides(lake_root="s3://lake/x", engine="spark-connect")
    with pytest.raises(Refused):
        session.SparkConnectServer(settings, {}).start(timeout=1)
    line = " ".join(map(str, started["command"]))  # type: ignore[call-overload]
    assert "env-secret" not in line and "env-key" not in line
    assert "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000" in line
    env = started["env"]
    assert env["AWS_SECRET_ACCESS_KEY"] == "env-secret"  # type: ignore[index]


def test_a_lake_root_is_made_absolute_without_a_path_join_of_a_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reader of the lake root (the catalog's tables, ``serve``, the demo) gets it whole: a
    URI less its trailing slash (``s3://`` kept, where a path join gives ``s3:/``), a local path
    resolved against the working folder."""
    monkeypatch.chdir(tmp_path)
    assert absolute_root("s3://lake/x/") == "s3://lake/x"
    assert absolute_root("s3a://lake/x") == "s3a://lake/x"
    assert absolute_root("file:///srv/lake/") == "file:///srv/lake"
    assert absolute_root("lake/../lake2/") == str(tmp_path.resolve() / "lake2")
