"""Every ``make`` target that runs the CLI names a command that exists (README: the two commands first)."""

from __future__ import annotations

import re
from pathlib import Path

import click

from lakehouse.cli import main

MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def test_every_make_target_calls_an_existing_command() -> None:
    calls = re.findall(r"^\t\$\(LAKEHOUSE\) ([a-z-]+)", MAKEFILE.read_text(), flags=re.MULTILINE)
    assert {"demo", "ingest", "materialize", "register", "revert", "status", "sql", "serve"} <= set(calls)
    ctx = click.Context(main)
    missing = [name for name in calls if main.get_command(ctx, name) is None]
    assert missing == []


def test_the_readme_starts_with_the_two_commands() -> None:
    readme = (MAKEFILE.parent / "README.md").read_text().splitlines()
    block = readme[readme.index("```sh") + 1: readme.index("```sh") + 3]
    assert [line.split()[:2] for line in block] == [["make", "demo"], ["make", "test"]]
