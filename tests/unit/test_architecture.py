"""docs/architecture.md names the code as it is: every module and file it names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "architecture.md"


def test_every_module_the_architecture_page_names_exists() -> None:
    text = PAGE.read_text()
    named = set(re.findall(r"`((?:lakehouse|pipelines|tests|docs)/[A-Za-z0-9_/.-]+)`", text))
    assert len(named) > 20, "the page names the modules of every layer"
    missing = sorted(path for path in named if not (REPO / path.rstrip("/")).exists())
    assert missing == []


def test_every_module_of_the_core_the_engine_and_the_jobs_is_on_the_page() -> None:
    text = PAGE.read_text()
    unnamed = [f"{folder}/{path.name}" for folder in ("lakehouse/core", "lakehouse/spark", "pipelines")
               for path in sorted((REPO / folder).glob("*.py"))
               if path.name != "__init__.py" and f"`{folder}/{path.name}`" not in text]
    assert unnamed == []
