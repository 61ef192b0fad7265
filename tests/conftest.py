"""Shared fixtures: paths to the shared fixtures and data, and one Spark session per test run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def shared_path(*parts: str) -> Path:
    """A path under ``../shared``; fails (never skips) when it is missing."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"{path} is missing: the tests need ../shared beside the repository")
    return path


@pytest.fixture(scope="session")
def engine() -> Iterator[Any]:
    """One embedded engine (or LAKEHOUSE_SPARK_REMOTE) for the whole run."""
    from lakehouse.config import load_settings
    from lakehouse.spark.session import open_engine

    with open_engine(load_settings()) as running:
        yield running


@pytest.fixture(scope="session")
def spark(engine: Any) -> Any:
    """The session-scoped Spark session."""
    return engine.spark


@pytest.fixture
def lake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Settings for a fresh lake, landing folder and key store under ``tmp_path``."""
    from lakehouse.config import load_settings

    for name in ("LAKE_ROOT", "LANDING", "KEYS", "CONFIG"):
        monkeypatch.delenv(f"LAKEHOUSE_{name}", raising=False)
    return load_settings(environ={}).with_overrides(
        lake_root=str(tmp_path / "lake"), landing=str(tmp_path / "landing"), keys=str(tmp_path / "keys"))
