"""Settings, declared as data: name, default, help (LAKEHOUSE.md, Configuration).

Where a value comes from, weakest first: the built-in default, then ``conf/lakehouse.yaml`` (or
the file named by ``LAKEHOUSE_CONFIG``), then the environment variable ``LAKEHOUSE_<NAME>``.
:func:`load_settings` returns the effective values and the source of each, which
``lakehouse config`` prints.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from lakehouse.errors import ConfigError

Kind = Literal["path", "str", "int", "choice", "mapping"]
Engine = Literal["sail", "spark", "spark-connect"]


@dataclass(frozen=True)
class Setting:
    """One setting: its name (snake_case; env var ``LAKEHOUSE_<NAME>``), default and help."""

    name: str
    default: Any
    help: str
    kind: Kind = "str"
    choices: tuple[str, ...] = ()
    secret: bool = False

    @property
    def env_var(self) -> str:
        return f"LAKEHOUSE_{self.name.upper()}"


SETTINGS: tuple[Setting, ...] = (
    Setting("lake_root", "lake", "root folder (or URI) of the Delta tables", "path"),
    Setting("landing", "data/landing", "folder that `ingest` reads landing files from", "path"),
    Setting("keys", ".keys", "key store: ed25519 keys and their publishers' log tips (keep private)", "path"),
    Setting("engine", "sail", "`sail` (embedded Spark Connect server), `spark` (Apache Spark with Delta Lake "
            "in-process) or `spark-connect` (a local Apache Spark Spark Connect server with Delta Lake)",
            "choice", ("sail", "spark", "spark-connect")),
    Setting("spark_remote", "", "a Spark Connect endpoint (sc://host:port); when set, no engine is started"),
    Setting("connect_timeout", 30, "seconds to wait for the Spark Connect endpoint of spark_remote to answer", "int"),
    Setting("jars_cache", "", "where Apache Spark's Delta Lake jars are kept once fetched from Maven Central "
            "(empty: ~/.cache/lakehouse/jars)"),
    Setting("index_cache", "", "where this machine keeps its copy of the cascade edge index of a lake on object "
            "storage, read by memory map instead of downloaded each run (empty: ~/.cache/lakehouse/edge-index)"),
    Setting("max_payload", 1 << 20, "largest accepted payload, in bytes", "int"),
    Setting("batch_rows", 200_000, "landing lines handed to the engine per ingest step", "int"),
    Setting("group_rows", 1_000_000, "input rows a per-log group step (log pass, instance pass) holds at once: a "
            "larger input is judged in parts of whole logs, one after another, so that memory does not grow with "
            "the lake (0: in one part)", "int"),
    Setting("release_memory", "on", "embedded engine: give freed memory back to the system at once (`on`: a run's "
            "memory follows its work, not the lake; `off`: about a quarter faster, memory grows with the lake)",
            "choice", ("on", "off")),
    Setting("lock_timeout", 0, "seconds to wait for another run's lake lock (0: stop at once)", "int"),
    Setting("spark_conf", {}, "extra Spark settings (a mapping) for the session, and for the start of an "
            "Apache Spark engine this process starts (spark.master, spark.driver.memory, ...: its start only)",
            "mapping"),
    Setting("s3_endpoint", "", "S3 API endpoint of a lake on object storage, `s3://bucket/path` (empty: "
            "AWS_ENDPOINT_URL, else AWS S3 itself)"),
    Setting("s3_region", "", "region of the S3 store (empty: AWS_REGION, else AWS_DEFAULT_REGION)"),
    Setting("s3_access_key_id", "", "access key of the S3 store (empty: AWS_ACCESS_KEY_ID, else AWS's own chain: "
            "a profile, an instance role)"),
    Setting("s3_secret_access_key", "", "secret key of the S3 store (empty: AWS_SECRET_ACCESS_KEY); shown masked",
            secret=True),
    Setting("s3_addressing", "auto", "how buckets of the S3 store are addressed: `path` (endpoint/bucket), "
            "`virtual` (bucket.endpoint) or `auto` (virtual if AWS_VIRTUAL_HOSTED_STYLE_REQUEST=true, else path)",
            "choice", ("auto", "path", "virtual")),
    Setting("change_feed", "on", "keep each gold table's change feed, gold.<name>_v<n>_changes (`on`), or not (`off`: "
            "a run then costs less; turned on again, the feed goes on from where it stopped)", "choice", ("on", "off")),
)
SETTINGS_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}
DEFAULT_CONFIG_FILE = Path("conf/lakehouse.yaml")


@dataclass(frozen=True)
class Settings:
    """Effective settings.

    Attributes:
        values: setting name -> value (paths as :class:`str`, ints as int).
        sources: setting name -> where the value came from (``default``, the config file's path,
            or the environment variable's name).
    """

    values: Mapping[str, Any]
    sources: Mapping[str, str] = field(default_factory=dict)

    # each setting of SETTINGS, typed (tests/unit/test_config.py checks that every setting has one)
    @property
    def lake_root(self) -> str:
        return str(self.values["lake_root"])

    @property
    def landing(self) -> str:
        return str(self.values["landing"])

    @property
    def keys(self) -> str:
        return str(self.values["keys"])

    @property
    def engine(self) -> Engine:
        return cast(Engine, self.values["engine"])

    @property
    def spark_remote(self) -> str:
        return str(self.values["spark_remote"])

    @property
    def embedded_sail(self) -> bool:
        """Whether the engine is Sail run in this process (``engine: sail`` and no ``spark_remote``)."""
        return self.engine == "sail" and not self.spark_remote

    @property
    def connect_timeout(self) -> int:
        return int(self.values["connect_timeout"])

    @property
    def jars_cache(self) -> str:
        return str(self.values["jars_cache"])

    @property
    def index_cache(self) -> str:
        return str(self.values["index_cache"])

    @property
    def max_payload(self) -> int:
        return int(self.values["max_payload"])

    @property
    def batch_rows(self) -> int:
        return int(self.values["batch_rows"])

    @property
    def group_rows(self) -> int:
        return int(self.values["group_rows"])

    @property
    def release_memory(self) -> Literal["on", "off"]:
        return cast(Literal["on", "off"], self.values["release_memory"])

    @property
    def lock_timeout(self) -> int:
        return int(self.values["lock_timeout"])

    @property
    def spark_conf(self) -> Mapping[str, str]:
        return cast("Mapping[str, str]", self.values["spark_conf"])

    @property
    def s3_endpoint(self) -> str:
        return str(self.values["s3_endpoint"])

    @property
    def s3_region(self) -> str:
        return str(self.values["s3_region"])

    @property
    def s3_access_key_id(self) -> str:
        return str(self.values["s3_access_key_id"])

    @property
    def s3_secret_access_key(self) -> str:
        return str(self.values["s3_secret_access_key"])

    @property
    def s3_addressing(self) -> Literal["auto", "path", "virtual"]:
        return cast(Literal["auto", "path", "virtual"], self.values["s3_addressing"])

    @property
    def change_feed(self) -> Literal["on", "off"]:
        return cast(Literal["on", "off"], self.values["change_feed"])

    def with_overrides(self, **overrides: Any) -> Settings:
        """A copy with some values replaced (source ``override``); for tests and the CLI."""
        unknown = set(overrides) - set(SETTINGS_BY_NAME)
        if unknown:
            raise ConfigError(f"unknown setting(s): {', '.join(sorted(unknown))}")
        values = dict(self.values)
        sources = dict(self.sources)
        for name, value in overrides.items():
            values[name] = _coerce(SETTINGS_BY_NAME[name], value, "override")
            sources[name] = "override"
        return Settings(values, sources)


def _coerce(setting: Setting, value: Any, source: str) -> Any:
    where = f"{setting.name} (from {source})"
    if setting.kind == "int":
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: expected a whole number, got {value!r}") from None
        if number < 0:
            raise ConfigError(f"{where}: must not be negative, got {number}")
        return number
    if setting.kind == "mapping":
        if isinstance(value, str):
            try:
                value = yaml.safe_load(value) if value.strip() else {}
            except yaml.YAMLError as exc:
                raise ConfigError(f"{where}: not a YAML/JSON mapping: {exc}") from None
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if value is None:
        value = ""
    if not isinstance(value, (str, int, float)):
        raise ConfigError(f"{where}: expected text, got {value!r}")
    text = str(value)
    if setting.kind == "choice" and text not in setting.choices:
        raise ConfigError(f"{where}: must be one of {', '.join(setting.choices)}, got {text!r}")
    if setting.kind == "path" and not text:
        raise ConfigError(f"{where}: must not be empty")
    return text


def load_settings(
    environ: Mapping[str, str] | None = None, config_file: str | os.PathLike[str] | None = None
) -> Settings:
    """Read the effective settings.

    Args:
        environ: the environment to read (default ``os.environ``).
        config_file: the YAML file to read; default ``LAKEHOUSE_CONFIG`` or ``conf/lakehouse.yaml``
            (a missing default file is fine; a missing named file is an error).

    Returns:
        The settings and where each value came from.

    Raises:
        ConfigError: unreadable or malformed file, unknown key in it, or a bad value (names the
            setting and its source).
    """
    env = os.environ if environ is None else environ
    named = config_file if config_file is not None else env.get("LAKEHOUSE_CONFIG")
    path = Path(named) if named else DEFAULT_CONFIG_FILE
    values: dict[str, Any] = {s.name: s.default for s in SETTINGS}
    sources: dict[str, str] = {s.name: "default" for s in SETTINGS}
    if path.exists():
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{path}: cannot read settings: {exc}") from None
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: expected a mapping of setting names to values")
        for key, value in data.items():
            setting = SETTINGS_BY_NAME.get(str(key))
            if setting is None:
                known = ", ".join(SETTINGS_BY_NAME)
                raise ConfigError(f"{path}: unknown setting {key!r} (known: {known})")
            values[setting.name] = _coerce(setting, value, str(path))
            sources[setting.name] = str(path)
    elif named:
        raise ConfigError(f"{path}: settings file not found (named by LAKEHOUSE_CONFIG)")
    for setting in SETTINGS:
        if setting.env_var in env:
            values[setting.name] = _coerce(setting, env[setting.env_var], setting.env_var)
            sources[setting.name] = setting.env_var
    for setting in SETTINGS:
        if setting.kind not in ("int", "mapping"):
            values[setting.name] = _coerce(setting, values[setting.name], sources[setting.name])
    return Settings(values, sources)


def landing_folder(landing: str | os.PathLike[str]) -> Path:
    """The landing folder named by the setting ``landing`` (it may not exist yet).

    Raises:
        LandingError: code ``not_a_folder`` when the path exists and is not a folder (a typo in
            the setting would otherwise read as an empty landing folder).
    """
    from lakehouse.errors import LandingError

    path = Path(landing)
    if path.exists() and not path.is_dir():
        raise LandingError(f"the landing setting (landing, LAKEHOUSE_LANDING) names {path}, which is a file, not a "
                           "folder: landing files go in a folder", code="not_a_folder")
    return path


def user_cache(name: str) -> Path:
    """This machine's cache folder ``name`` of the project, the default of the settings that name
    one (``jars_cache``, ``index_cache``): ``$XDG_CACHE_HOME/lakehouse/<name>``, else
    ``~/.cache/lakehouse/<name>`` (the XDG base directory specification). Not created here."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lakehouse" / name
