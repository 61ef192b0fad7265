from __future__ import annotations

from pathlib import Path

import pytest

from lakehouse.config import SETTINGS, load_settings
from lakehouse.errors import ConfigError


def test_defaults_when_the_file_is_empty_and_no_environment(tmp_path: Path) -> None:
    settings = load_settings(environ={"LAKEHOUSE_CONFIG": str(_empty(tmp_path))})
    assert dict(settings.values) == {s.name: s.default for s in SETTINGS}
    assert set(settings.sources.values()) == {"default"}


def test_file_then_environment_win_in_order(tmp_path: Path) -> None:
    conf = tmp_path / "lake.yaml"
    conf.write_text("lake_root: /from/file\nengine: sail\nmax_payload: 100\n")
    settings = load_settings(environ={"LAKEHOUSE_ENGINE": "spark", "LAKEHOUSE_CONFIG": str(conf)})
    assert settings.lake_root == "/from/file"
    assert settings.sources["lake_root"] == str(conf)
    assert settings.engine == "spark"
    assert settings.sources["engine"] == "LAKEHOUSE_ENGINE"
    assert settings.max_payload == 100
    assert settings.sources["landing"] == "default"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"LAKEHOUSE_ENGINE": "flink"}, "engine (from LAKEHOUSE_ENGINE): must be one of sail, spark"),
        ({"LAKEHOUSE_MAX_PAYLOAD": "lots"}, "max_payload (from LAKEHOUSE_MAX_PAYLOAD): expected a whole number"),
        ({"LAKEHOUSE_MAX_PAYLOAD": "-1"}, "must not be negative"),
        ({"LAKEHOUSE_SPARK_CONF": "[1, 2]"}, "spark_conf (from LAKEHOUSE_SPARK_CONF): expected a mapping"),
    ],
)
def test_bad_values_name_the_setting_and_source(env: dict[str, str], message: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings(environ={**env, "LAKEHOUSE_CONFIG": str(_empty(tmp_path))})


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.yaml"
    path.write_text("")
    return path


def test_unknown_key_in_file_is_an_error(tmp_path: Path) -> None:
    conf = tmp_path / "bad.yaml"
    conf.write_text("lake_rot: x\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'lake_rot'"):
        load_settings(environ={"LAKEHOUSE_CONFIG": str(conf)})


def test_named_file_must_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="settings file not found"):
        load_settings(environ={"LAKEHOUSE_CONFIG": str(tmp_path / "nope.yaml")})


def test_spark_conf_from_environment_is_a_mapping(tmp_path: Path) -> None:
    settings = load_settings(environ={"LAKEHOUSE_SPARK_CONF": '{"spark.sql.shuffle.partitions": 4}',
                                      "LAKEHOUSE_CONFIG": str(_empty(tmp_path))})
    assert settings.spark_conf == {"spark.sql.shuffle.partitions": "4"}


def test_repo_defaults_file_lists_every_setting() -> None:
    import yaml

    repo_conf = Path(__file__).resolve().parents[2] / "conf" / "lakehouse.yaml"
    assert set(yaml.safe_load(repo_conf.read_text())) == {s.name for s in SETTINGS}


def test_an_unexpected_failure_reaches_the_user_as_one_line_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Not every failure is a LakehouseError (an engine's error, a defect): the CLI still prints
    one line with its type and code, and the traceback only with LAKEHOUSE_DEBUG."""
    from click.testing import CliRunner

    from lakehouse import cli

    def boom() -> None:
        raise ValueError("the first line\nand a second one")

    monkeypatch.setattr(cli, "_settings", boom)
    monkeypatch.delenv("LAKEHOUSE_DEBUG", raising=False)
    result = CliRunner().invoke(cli.main, ["config"])
    assert result.exit_code == 1 and result.exception is not None and isinstance(result.exception, SystemExit)
    assert "Error: ValueError: the first line [unexpected]" in result.output
    assert "second one" not in result.output and "Traceback" not in result.output
    monkeypatch.setenv("LAKEHOUSE_DEBUG", "1")
    debug = CliRunner().invoke(cli.main, ["config"])
    assert isinstance(debug.exception, ValueError)


def test_every_setting_is_a_typed_attribute_of_the_settings() -> None:
    from lakehouse.config import SETTINGS, Settings, load_settings

    settings = load_settings(environ={})
    for setting in SETTINGS:
        assert isinstance(getattr(Settings, setting.name, None), property), setting.name
        assert getattr(settings, setting.name) == settings.values[setting.name]


def test_config_shows_a_secret_setting_only_as_set(monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from click.testing import CliRunner

    from lakehouse import cli

    monkeypatch.setenv("LAKEHOUSE_S3_SECRET_ACCESS_KEY", "do-not-print-me")
    for fmt in ("table", "json"):
        result = CliRunner().invoke(cli.main, ["config", "--format", fmt])
        assert result.exit_code == 0, result.output
        assert "do-not-print-me" not in result.output and "(set)" in result.output
    shown = json.loads(CliRunner().invoke(cli.main, ["config", "--format", "json"]).output)
    assert shown["s3_secret_access_key"] == {"value": "(set)", "source": "LAKEHOUSE_S3_SECRET_ACCESS_KEY"}
