"""The ``lakehouse`` command line (LAKEHOUSE.md, Who uses it and how).

Every command reads the effective settings (:mod:`lakehouse.config`); a
:class:`~lakehouse.errors.LakehouseError` ends the command with its message and exit code 1,
without a traceback.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from lakehouse.config import SETTINGS, Settings, load_settings
from lakehouse.core.messages import SchemaMeta
from lakehouse.errors import EngineError, LakehouseError, PublishError
from lakehouse.publish.keys import DEFAULT_KEY, KeyStore
from lakehouse.spark import catalog

F = TypeVar("F", bound=Callable[..., Any])
UNFOLDED_WIDTH = 10_000
"""The width tables are laid out at when the output is a file or a pipe: their natural width."""


def output_width(stream: Any) -> int | None:
    """The width to lay tables out at on ``stream``: None (the terminal's own width, or ``COLUMNS``)
    on a terminal or when ``COLUMNS`` is set; :data:`UNFOLDED_WIDTH` otherwise, so that a table
    written to a file or a pipe keeps each row on one line instead of being folded at rich's
    guess of 80 columns."""
    isatty = getattr(stream, "isatty", None)
    if os.environ.get("COLUMNS") or (isatty is not None and isatty()):
        return None
    return UNFOLDED_WIDTH


console = Console(highlight=False, soft_wrap=True, width=output_width(sys.stdout))
err_console = Console(stderr=True, highlight=False, soft_wrap=True, width=output_width(sys.stderr))


def _settings() -> Settings:
    ctx = click.get_current_context()
    settings = ctx.find_object(Settings)
    if settings is None:
        from lakehouse.store import export_environment, is_store_root

        settings = load_settings()
        if is_store_root(settings.lake_root):  # every reader of the store in this process reads them there
            export_environment(settings)
        ctx.obj = settings
    return settings


def friendly(func: F) -> F:
    """Turn a LakehouseError into ``Error: <message> [code]`` and exit status 1; any other failure
    (an engine's error, a defect) into its type and first line with the code ``unexpected``, and
    its traceback only when ``LAKEHOUSE_DEBUG`` is set."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except LakehouseError as exc:
            raise click.ClickException(f"{exc} [{exc.code}]") from None
        except (click.ClickException, click.exceptions.Abort, click.exceptions.Exit):
            raise
        except Exception as exc:
            if os.environ.get("LAKEHOUSE_DEBUG"):
                raise
            lines = str(exc).strip().splitlines()
            raise click.ClickException(
                f"{type(exc).__name__}: {lines[0] if lines else 'no message'} [unexpected]; the lake keeps its "
                "last whole commits, so the command can be run again; LAKEHOUSE_DEBUG=1 shows the traceback"
            ) from None

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.pass_context
@friendly
def main(ctx: click.Context) -> None:
    """lens-lakehouse: signed, append-only logs with evolving schemas, queryable in Spark SQL."""
    ctx.obj = load_settings()
    # laid out for the streams the command writes to (a caller may have replaced them since import)
    console.width, err_console.width = output_width(sys.stdout), output_width(sys.stderr)  # type: ignore[assignment]
    ctx.call_on_close(_stop_workers)


def _stop_workers() -> None:
    """End the pipelines' worker processes before the interpreter does (when a command started
    them): :func:`lakehouse.spark.workers.stop`."""
    workers = sys.modules.get("lakehouse.spark.workers")
    if workers is not None:
        workers.stop()


@main.command("config")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table")
@friendly
def config_cmd(fmt: str) -> None:
    """Print the effective settings and where each came from."""
    settings = _settings()
    if fmt == "json":
        click.echo(json.dumps({s.name: {"value": _shown(s, settings.values[s.name]), "source": settings.sources[s.name]}
                               for s in SETTINGS}, indent=2))
        return
    table = Table("setting", "value", "source", "environment variable", title="lakehouse settings")
    for column in table.columns:  # fold long paths rather than cut them when the terminal is narrow
        column.overflow = "fold"
    for s in SETTINGS:
        value = json.dumps(settings.values[s.name]) if s.kind == "mapping" else str(_shown(s, settings.values[s.name]))
        table.add_row(escape(s.name), escape(value), escape(settings.sources[s.name]), s.env_var)
    console.print(table)


def _shown(setting: Any, value: Any) -> Any:
    """A setting's value as `config` shows it: a secret's only as whether it is set."""
    return ("(set)" if value else "") if setting.secret else value


# -- keys ------------------------------------------------------------------------------------
@main.group()
def keys() -> None:
    """Manage the ed25519 keys that sign entries."""


@keys.command("new")
@click.argument("name", default=DEFAULT_KEY)
@friendly
def keys_new(name: str) -> None:
    """Create a new key NAME (default: `default`)."""
    key = KeyStore(_settings().keys).create(name)
    console.print(f"created key [bold]{escape(key.name)}[/]: author {key.author}")


@keys.command("list")
@friendly
def keys_list() -> None:
    """List the keys in the key store."""
    store = KeyStore(_settings().keys)
    table = Table("name", "author (public key)", title=escape(f"keys in {store.folder}"))
    for column in table.columns:  # fold rather than cut an author when the terminal is narrow
        column.overflow = "fold"
    stored = store.keys()
    for key in stored:
        table.add_row(escape(key.name), key.author)
    console.print(table)


# -- publishing -------------------------------------------------------------------------------
def _publisher(key: str | None, *, schema: str | None = None, create_key: bool = False) -> Any:
    from lakehouse.publish.publisher import Publisher

    settings = _settings()
    store = KeyStore(settings.keys)
    if key is None and schema is not None:
        if not store.names():  # nobody here can be the schema's author: create no key
            raise PublishError(f"unknown schema {schema!r}: the key store {store.folder} holds no keys; only "
                               "a schema's author can publish its schema messages (`lakehouse schema init` "
                               "creates a key and a schema)", code="unknown_schema")
        probe = Publisher(store, store.names()[0], settings.landing)
        schema_id = probe.resolve_schema(schema)
        owner = store.find_author(schema_id.author)
        if owner is None:
            raise PublishError(f"no key in {store.folder} is the author of schema {schema_id}; only a "
                               "schema's author can publish its schema messages", code="no_key")
        key = owner.name
    return Publisher(store, key or DEFAULT_KEY, settings.landing, create_key=create_key,
                     max_payload=settings.max_payload)


def _landed(path: Path | None, publisher: Any = None) -> None:
    """Say where ``path`` landed, and that ``publisher``'s key is new (it is stored once it flushed)."""
    if publisher is not None and publisher.key_created:
        key = publisher.key
        err_console.print(f"created key [bold]{escape(key.name)}[/] (author {key.author}) "
                          f"in {escape(str(publisher.store.folder))}")
    if path is not None:
        err_console.print(f"landed in {escape(str(path))}; run `make ingest` to take it in")


@main.group()
def schema() -> None:
    """Publish schema messages (init, migrate, revert), or check one on the lake first (check)."""


@schema.command("init")
@click.argument("name")
@click.option("--description")
@click.option("--display-name")
@click.option("--homepage")
@click.option("--license", "license_")
@click.option("--contact")
@click.option("--key", default=DEFAULT_KEY, show_default=True, help="the key that signs (created if missing)")
@friendly
def schema_init(name: str, description: str | None, display_name: str | None, homepage: str | None,
                license_: str | None, contact: str | None, key: str) -> None:
    """Publish a schema-meta on a new log; prints the schema id."""
    meta = SchemaMeta(name=name, description=description, display_name=display_name, homepage=homepage,
                      license=license_, contact=contact)
    with _publisher(key, create_key=True) as publisher:
        schema_id = publisher.schema_init(meta)
    _landed(publisher.last_landed, publisher)
    console.print(f"published schema [bold]{escape(name)}[/] at log {schema_id.log_id}: {schema_id} (its gold "
                  f"tables come once it is registered: make register SCHEMA={escape(name)})")


GATE_OUTCOMES = ("hidden", "defaulted", "converted", "restored")
"""What ``--fail-on`` can name: a field outcome of ``schema check`` (``restored``: a revert's)."""
GATE_EXIT = 3
"""Exit status of ``schema check``/``migrate``/``revert --fail-on ...`` when a named outcome would
happen (1: an error or an invalid message, 2: a usage error)."""


class GateFailed(click.ClickException):
    """A lossy migration stopped by ``--fail-on``: exit status :data:`GATE_EXIT`, nothing published."""

    exit_code = GATE_EXIT


def _fail_on_option(func: F) -> F:
    def parse(ctx: click.Context, param: click.Parameter, value: str | None) -> frozenset[str]:
        names = frozenset(v.strip() for v in (value or "").split(",") if v.strip())
        unknown = names - set(GATE_OUTCOMES)
        if unknown:
            raise click.BadParameter(f"unknown outcome(s) {', '.join(sorted(unknown))}; "
                                     f"known: {', '.join(GATE_OUTCOMES)}")
        return names

    return click.option("--fail-on", "fail_on", callback=parse, metavar="OUTCOMES",
                        help=f"exit with status {GATE_EXIT} (and publish nothing) when any value would be one of "
                             f"these, comma-separated: {', '.join(GATE_OUTCOMES)}")(func)


def _gate(impact: Any, fail_on: frozenset[str]) -> None:
    """Stop when the checked message would give any value an outcome named in ``fail_on``.

    Raises:
        GateFailed: names each failed outcome, its count and fields.
    """
    failed = []
    for outcome in sorted(fail_on):
        fields = {name: f.counts.get(outcome, 0) for name, f in sorted(impact.fields.items())}
        total = sum(fields.values())
        if total:
            failed.append(f"{outcome} {total:,} ({', '.join(f'{n}: {c:,}' for n, c in fields.items() if c)})")
    if failed:
        raise GateFailed(f"{impact.name} version {impact.version} would leave values {'; '.join(failed)}: "
                         f"stopped by --fail-on {','.join(sorted(fail_on))} [lossy]")


@schema.command("check")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@_fail_on_option
@friendly
def schema_check(name: str, file: Path, fmt: str, fail_on: frozenset[str]) -> None:
    """What publishing the lens file FILE as the next message of schema NAME (gold name, schema
    name or id) would do to the lake: valid or not, and per field how many values would be kept,
    converted, defaulted, hidden or shown again. Publishes nothing; exit status 1 when invalid, 3
    when ``--fail-on`` names an outcome that some value would have (a gate for a schema author's CI)."""
    from lakehouse.publish.lensfiles import load_lens_file
    from pipelines.impact import check_message, lake_resolver

    def job(spark: Any, settings: Settings) -> Any:
        message = load_lens_file(file, resolve_schema=lake_resolver(spark, settings),
                                 max_payload=settings.max_payload)
        if isinstance(message, SchemaMeta):
            raise PublishError(f"{file} is a schema-meta: it changes no value; nothing to check", code="nothing_to_check")
        return check_message(spark, settings, name, message)

    impact = _run_job("check", job, lock=False)
    if fmt == "json":
        click.echo(json.dumps(impact.to_json(), default=str))
    else:
        _print_impact(impact)
    if not impact.valid:
        raise click.exceptions.Exit(1)
    _gate(impact, fail_on)


def _print_impact(impact: Any) -> None:
    """The report of :func:`pipelines.impact.check_message`, as tables."""
    verdict = "valid" if impact.valid else f"[bold red]{impact.status}[/]"
    console.print(f"check: {escape(impact.name)} version {impact.version} ({impact.kind}, now at version "
                  f"{impact.current}): {verdict}" + (f", {escape(impact.reason)}: {escape(impact.detail or '')}"
                                                    if impact.reason else ""))
    if not impact.valid:
        return
    if impact.fields:
        outcomes = ("kept", *(("renamed",) if any("renamed" in f.counts for f in impact.fields.values()) else ()),
                    "converted", *(("restored",) if impact.kind == "revert" else ()), "defaulted", "hidden",
                    "shown_again")
        table = Table("field", *(o.replace("_", " ") for o in outcomes), "examples (instance: before -> after)",
                      title=f"values of {impact.instances - impact.removed:,} live instance(s)", title_justify="left")
        for name, f in sorted(impact.fields.items()):
            shown = [(o, e) for o in ("defaulted", "hidden", "restored", "converted", "shown_again")
                     for e in f.examples.get(o, [])]
            table.add_row(escape(name), *(f"{f.counts.get(o, 0):,}" for o in outcomes),
                          escape("\n".join(f"{o}: {i[:12]}…: {b!r} -> {a!r}" for o, (i, b, a) in shown[:2])))
        console.print(table)
    if impact.abandoned:
        ignored = ", ".join(f"{n:,} applied {k}(s)" for k, n in sorted(impact.ignored.items()))
        console.print(f"abandons version(s) {', '.join(map(str, impact.abandoned))}: "
                      f"{ignored + ' become' if ignored else 'no applied create or update becomes'} ignored; "
                      f"{impact.removed:,} of {impact.instances:,} live instance(s) leave gold")
    for label, names in (("adds", impact.added), ("shows again", impact.shown_again), ("hides", impact.hidden),
                         ("renames", impact.renamed)):
        if names:
            console.print(f"{label}: {escape(', '.join(names))}")
    if impact.tables:
        console.print(f"adds {', '.join(impact.tables)}")
    if impact.waits:
        console.print(f"gold would wait: {escape(impact.waits)}")


def _confirm(publisher: Any, name: str, message: Any, yes: bool, fail_on: frozenset[str] = frozenset()) -> None:
    """Before a migration or revert of schema ``name`` is published: its check on the lake (when
    the lake holds the schema), and a question when it would default, hide or drop anything
    (``--yes`` answers it).

    Raises:
        PublishError: code ``needs_confirmation`` when no one can answer (stdin is not a terminal).
        GateFailed: it would give a value an outcome named in ``fail_on``.
        click.Abort: the answer was no.
    """
    from lakehouse.spark.tables import is_delta_table

    if not is_delta_table(catalog.INSTANCE_STATES.at(_settings().lake_root).location):
        return  # nothing materialized yet: no value to lose (and no engine to start for it)
    sid = publisher.resolve_schema(name)
    versions = publisher.schema_versions(sid)
    _run_job("check", lambda spark, settings: _check_and_ask(
        spark, settings, str(sid), message, yes, verb="publish it",
        published=len(versions) if versions is not None else None, fail_on=fail_on), lock=False)


def _check_and_ask(spark: Any, settings: Settings, schema: str, message: Any, yes: bool, *, verb: str,
                   published: int | None = None, fail_on: frozenset[str] = frozenset()) -> None:
    """Check ``message`` on the lake (``schema check``), print what it would do and, when it
    would default, hide or drop anything, ask before going on (``yes`` answers).

    Args:
        published: the versions of the schema its publisher has signed (None: not known here).
            When the lake has fewer (the others are not ingested and materialized yet), the lake
            cannot show what the message does after them: that is said, and nothing is asked
            (with ``fail_on``, that is a failed gate: the values cannot be counted).
        fail_on: outcomes that stop the publishing (:func:`_gate`), whatever ``yes`` says.

    Raises:
        PublishError: code ``needs_confirmation`` when no one can answer (stdin is not a terminal).
        GateFailed: a value would have an outcome named in ``fail_on``, or the lake cannot count them.
        click.Abort: the answer was no.
    """
    from lakehouse.errors import HistoryError
    from lakehouse.spark.tables import is_delta_table
    from pipelines.impact import check_message

    if not is_delta_table(catalog.INSTANCE_STATES.at(settings.lake_root).location):
        return  # nothing materialized yet: no value to lose
    try:
        impact = check_message(spark, settings, schema, message)
    except HistoryError:
        return  # the lake has not seen the schema yet
    if published is not None and impact.current < published:
        console.print(f"check: the lake holds versions 1-{impact.current} of {escape(impact.name)}, and versions "
                      f"{impact.current + 1}-{published} are published but not yet ingested and materialized: what "
                      f"version {published + 1} does to the lake's values cannot be seen before they are (make ingest "
                      "materialize, then `schema check`); it is checked against the published versions only")
        if fail_on:
            raise GateFailed(f"--fail-on {','.join(sorted(fail_on))}: the lake lacks versions "
                             f"{impact.current + 1}-{published} of {impact.name}, so what this message does to its "
                             "values cannot be counted; ingest and materialize them first [lossy]")
        return
    _print_impact(impact)
    if impact.valid:
        _gate(impact, fail_on)
    if not impact.valid or not impact.loses or yes:
        return
    summary = "; ".join(impact.loses)
    if not sys.stdin.isatty():
        raise PublishError(f"it would change what readers see: {summary}; give --yes to {verb} anyway",
                           code="needs_confirmation")
    if not click.confirm(f"{summary}. {verb.capitalize()}?", default=False):
        raise click.Abort()


@schema.command("migrate")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--key", default=None, help="the signing key (default: the schema author's)")
@click.option("--yes", is_flag=True, help="publish without asking when values would be defaulted or hidden")
@_fail_on_option
@friendly
def schema_migrate(name: str, file: Path, key: str | None, yes: bool, fail_on: frozenset[str]) -> None:
    """Publish the lens file FILE as the next message of schema NAME; prints the new version. The
    lake is checked first (`schema check`): a migration that would default or hide values is
    published only when confirmed."""
    from lakehouse.publish.lensfiles import load_lens_file

    with _publisher(key, schema=name) as publisher:
        message = load_lens_file(file, resolve_schema=publisher.resolve_schema, max_payload=publisher.max_payload)
        if not isinstance(message, SchemaMeta):
            _confirm(publisher, name, message, yes, fail_on)
        version = publisher.schema_message(name, message)
    _describe_schema_step(message)
    _landed(publisher.last_landed)
    console.print(f"published [bold]{escape(name)}[/] version {version}")


def _describe_schema_step(message: Any) -> None:
    for change in getattr(message, "fields", ()):
        detail = f"<{change.type}>" if change.type else ""
        extra = f" validation {change.validation!r}" if change.validation else ""
        default = f" default {change.default!r}" if change.has_default else ""
        console.print(escape(f"  {change.action:<6} {change.name}{detail}{extra}{default}"))


@schema.command("revert")
@click.argument("name")
@click.option("--target", type=int, required=True, help="the version to revert to")
@click.option("--key", default=None, help="the signing key (default: the schema author's)")
@click.option("--yes", is_flag=True, help="publish without asking when writes would be ignored or values hidden")
@_fail_on_option
@friendly
def schema_revert(name: str, target: int, key: str | None, yes: bool, fail_on: frozenset[str]) -> None:
    """Publish a schema-revert of schema NAME to version TARGET; prints the new version. The lake
    is checked first: which versions it abandons, how many writes become ignored, which values come
    back."""
    from lakehouse.core.messages import SchemaRevert

    with _publisher(key, schema=name) as publisher:
        _confirm(publisher, name, SchemaRevert(target), yes, fail_on)
        version = publisher.schema_message(name, SchemaRevert(target))
    console.print(f"published [bold]{escape(name)}[/] version {version}: revert to version {target}")
    _landed(publisher.last_landed)


@main.group()
def publish() -> None:
    """Publish instance messages: create, update, delete."""


def _fields(publisher: Any, schema_name: str, version: int | None, pairs: tuple[str, ...],
            json_text: str | None, file: Path | None) -> dict[str, Any]:
    from lakehouse.publish.fields import field_values

    try:
        file_text = file.read_text(encoding="utf-8") if file else None
    except (OSError, UnicodeDecodeError) as exc:
        raise PublishError(f"--file {file}: cannot read it: {exc}", code="unreadable") from None
    objects = [(source, text) for source, text in (("--json", json_text), (f"--file {file}", file_text))
               if text is not None]
    return field_values(publisher.field_types(schema_name, version), pairs, objects, schema_name=schema_name)


_field_options = [
    click.option("--field", "-f", "pairs", multiple=True, help="name=value (repeatable)"),
    click.option("--json", "json_text", help="fields as a JSON object"),
    click.option("--file", type=click.Path(dir_okay=False, path_type=Path), help="fields from a JSON file"),
    click.option("--version", type=int, help="schema version to write at (default: current)"),
    click.option("--key", default=DEFAULT_KEY, show_default=True, help="the signing key"),
]


def field_options(func: F) -> F:
    for option in reversed(_field_options):
        func = option(func)
    return func


@publish.command("create")
@click.argument("schema_name", metavar="SCHEMA")
@field_options
@friendly
def publish_create(schema_name: str, pairs: tuple[str, ...], json_text: str | None, file: Path | None,
                   version: int | None, key: str) -> None:
    """Create an instance of SCHEMA (a name in the key store or <author hex>:<log_id>)."""
    with _publisher(key, create_key=True) as publisher:
        fields = _fields(publisher, schema_name, version, pairs, json_text, file)
        instance = publisher.create(schema_name, fields, version=version)
    console.print(instance)
    _landed(publisher.last_landed, publisher)


@publish.command("update")
@click.argument("schema_name", metavar="SCHEMA")
@click.argument("instance")
@field_options
@friendly
def publish_update(schema_name: str, instance: str, pairs: tuple[str, ...], json_text: str | None,
                   file: Path | None, version: int | None, key: str) -> None:
    """Update fields of INSTANCE (one this key created)."""
    with _publisher(key) as publisher:
        fields = _fields(publisher, schema_name, version, pairs, json_text, file)
        entry = publisher.update(schema_name, instance, fields, version=version)
    console.print(entry)
    _landed(publisher.last_landed)


@publish.command("delete")
@click.argument("schema_name", metavar="SCHEMA")
@click.argument("instance")
@click.option("--version", type=int, help="schema version to name (default: current)")
@click.option("--key", default=DEFAULT_KEY, show_default=True, help="the signing key")
@friendly
def publish_delete(schema_name: str, instance: str, version: int | None, key: str) -> None:
    """Delete INSTANCE (one this key created)."""
    with _publisher(key) as publisher:
        entry = publisher.delete(schema_name, instance, version=version)
    console.print(entry)
    _landed(publisher.last_landed)


# -- pipelines -------------------------------------------------------------------------------
def _run_job(command: str, job: Callable[[Any, Settings], Any], *, lock: bool = True) -> Any:
    """Run a job with one engine session, lake tables registered first.

    Jobs that write hold the lake lock (``lock``); readers (``sql``) do not, since Delta readers see
    a consistent version whatever a writer does.
    """
    from contextlib import nullcontext

    from lakehouse.lock import lake_lock
    from lakehouse.spark.session import open_engine
    from lakehouse.spark.tables import register_lake

    settings = _settings()
    guard = lake_lock(settings.lake_root, command, timeout=float(settings.lock_timeout)) if lock \
        else nullcontext()
    with guard, open_engine(settings) as engine:
        register_lake(engine.spark, settings.lake_root)
        return job(engine.spark, settings)


def _summary_table(title: str, rows: list[tuple[str, Any]]) -> Table:
    table = Table(title=title, show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column(justify="right")
    for name, value in rows:
        table.add_row(name, f"{value:,}" if isinstance(value, int) else str(value))
    return table


@main.command("ingest")
@friendly
def ingest_cmd() -> None:
    """Landing files -> bronze (entries checked on their own; rejects kept with their reason)."""
    from lakehouse.spark import bronze
    from pipelines.ingest import run_ingest

    bronze.start_workers()  # the processes that check lines start while the engine does
    summary = _run_job("ingest", run_ingest)
    for name, same in sorted(summary.copies.items()):
        console.print(f"ingest: {escape(name)} skipped: the same content as {escape(same)}, ingested before")
    if not summary.files_new:
        landing = _settings().landing
        if not Path(landing).is_dir():
            console.print(f"ingest: the landing folder {landing} does not exist (setting landing, "
                          "LAKEHOUSE_LANDING): nothing to ingest")
        else:
            console.print(f"ingest: nothing new in {landing} ({summary.files_seen} landing file(s) already ingested)")
        return
    rows: list[tuple[str, Any]] = [("batch", summary.batch_id), ("files", summary.files_new)]
    if summary.copies:
        rows.append(("files skipped as repeats", len(summary.copies)))
    rows += [
        ("lines read", summary.lines),
        ("new entries", summary.new), ("duplicate", summary.duplicate),
        ("rejected", sum(summary.rejected.values())),
    ]
    rows += [(f"  {code}", n) for code, n in sorted(summary.rejected.items())]
    rows.append(("time", f"{summary.seconds:.1f} s ({summary.entries_per_second:,.0f} lines/s)"))
    rows += _retried_rows(summary.retried)
    console.print(_summary_table("ingest", rows))
    for name, why in sorted(summary.bad_files.items()):
        console.print(f"ingest: {name} cannot be read: {why}. It is recorded in bronze.rejected (reason bad_file) "
                      "and not read again; land a good copy under another name or with other content")


@main.command("materialize")
@click.option("--rebuild", is_flag=True, help="recompute silver and gold from all of bronze")
@friendly
def materialize_cmd(rebuild: bool) -> None:
    """Bronze -> silver (log state, message statuses, schemas) -> gold (registered schemas)."""
    from pipelines.gold import run_gold
    from pipelines.silver import run_silver

    def job(spark: Any, settings: Settings) -> Any:
        return run_silver(spark, settings, rebuild=rebuild), run_gold(spark, settings, rebuild=rebuild)

    summary, gold = _run_job("materialize", job)
    if summary.up_to_date:
        console.print(f"silver: up to date (bronze batch {summary.watermark})")
    else:
        rows: list[tuple[str, Any]] = [
            ("run", summary.run_id), ("bronze up to batch", summary.watermark),
            ("new entries", summary.new_entries), ("logs judged", summary.logs_judged),
            ("  past their old prefix", summary.logs_extended),
            ("instance logs judged", summary.instance_logs_judged),
            ("  instances judged again (logs judged in part)", summary.instances_judged_again), ("schemas", summary.schemas),
            ("schemas changed", len(summary.changed_schemas)),
        ]
        rows += [(f"  {status}", n) for status, n in sorted(summary.statuses.items())]
        rows.append(("time", f"{summary.seconds:.1f} s"))
        rows += _retried_rows(summary.retried)
        rebuilt = " (rebuild)" if rebuild else f" (rebuild: {summary.rebuilt})" if summary.rebuilt else ""
        console.print(_summary_table("silver" + rebuilt, rows))
    _print_gold(gold)


def _retried_rows(retried: list[str]) -> list[tuple[str, Any]]:
    """Summary rows of the transient engine failures a step survived (run again each time)."""
    return [("retried after", line) for line in retried]


def _print_gold(gold: Any) -> None:
    for line in gold.retried:
        console.print(f"gold: run again after a transient engine failure ({line})")
    for schema, why in sorted(gold.waiting.items()):
        console.print(f"gold: schema {schema} waits: {why}")
    if gold.up_to_date:
        console.print("gold: up to date")
    elif gold.tables or gold.modes:
        table = Table(title=f"gold (run {gold.run_id}, {gold.seconds:.1f} s)", title_justify="left")
        for column in ("table", "rows", "Delta version"):
            table.add_column(column, justify="left" if column == "table" else "right")
        for t in gold.tables:
            table.add_row(f"gold.{t.name}", f"{t.rows:,}", str(t.delta_version))
        console.print(table)
        console.print(f"instances: {gold.instances:,} live, {gold.deleted:,} deleted, "
                      f"{gold.cascaded:,} removed by cascade")
        how = {"full": "built", "merge": "merged", "revert": "reverted by time travel + replay"}
        modes = ", ".join(f"{schema.split(':')[0][:8]}:{schema.split(':')[1]} {how[m]}"
                          for schema, m in sorted(gold.modes.items()))
        console.print(f"schemas: {modes}")
    if gold.unregistered:
        console.print("schemas seen but not registered (no gold tables):")
        for schema, name in sorted(gold.unregistered.items(), key=lambda kv: kv[1]):
            console.print(f"  {name}: make register SCHEMA={schema} NAME={name}")


@main.command("revert")
@click.argument("schema")
@click.option("--target", type=int, required=True, help="the version to revert to")
@click.option("--yes", is_flag=True, help="revert without asking when writes would be ignored, instances leave "
              "gold or values be defaulted or hidden")
@friendly
def revert_cmd(schema: str, target: int, yes: bool) -> None:
    """Revert SCHEMA (gold name, schema name or id) to version TARGET, then ingest and materialize.

    The lake is checked first, as `schema revert` does: which versions it abandons, how many writes
    become ignored, how many instances leave gold, which values come back; when it would take
    anything from readers it asks (`--yes`, or `make revert ... YES=1`, answers), and it is
    refused where no one can answer. The schema-revert is signed with the schema author's key from
    the key store; without that key nothing is published or changed.
    """
    from lakehouse.core.messages import SchemaRevert
    from pipelines.revert import revert_schema

    def job(spark: Any, settings: Settings) -> Any:
        _check_and_ask(spark, settings, schema, SchemaRevert(target), yes, verb="revert")
        return revert_schema(spark, settings, schema, target)

    summary = _run_job("revert", job)
    if summary.resumed:
        console.print(f"{schema} version {summary.version} is already the revert to version {summary.target} "
                      "(published by a run that stopped before it ended): finishing its ingest and materialize")
    else:
        console.print(f"published {schema} version {summary.version}: revert to version {summary.target}")
    console.print(f"ingest: {summary.ingest.new} new entries; silver run {summary.silver.run_id}: "
                  f"{len(summary.silver.changed_schemas)} schema(s) changed")
    _print_gold(summary.gold)


@main.command("history")
@click.argument("schema")
@friendly
def history_cmd(schema: str) -> None:
    """A schema's versions (what each changed, abandoned or not) and its gold tables' Delta versions."""
    from pipelines.history import schema_history

    history = _run_job("history", lambda spark, settings: schema_history(spark, settings, schema), lock=False)
    versions = Table("version", "kind", "status", "changes", "gold table",
                     title=f"{history.name} ({history.schema})", title_justify="left")
    for v in history.versions:
        status = v["status"] + (f" ({v['reason']})" if v["reason"] else "")
        if v["target"] is not None:
            status += f" -> {v['target']}"
        if v["abandoned"]:
            status += ", abandoned"
        versions.add_row(str(v["version"]), v["kind"] or "-", status, "\n".join(v["changes"]),
                         f"gold.{v['gold_table']}" if v["gold_table"] else "")
    console.print(versions)
    for name, writes in history.tables.items():
        t = Table("Delta version", "gold run", "bronze batch", "rows", "written at",
                  title=f"gold.{name}: SELECT * FROM gold.{name} VERSION AS OF <Delta version>",
                  title_justify="left")
        for w in writes:
            t.add_row(str(w["delta_version"]), str(w["gold_run"]), str(w["watermark"]), f"{w['rows']:,}",
                      f"{w['written_at']:%Y-%m-%d %H:%M:%S}")
        console.print(t)


@main.command("changes")
@click.argument("name")
@click.option("--version", type=click.IntRange(min=1), help="the schema version (default: the latest with a gold table)")
@click.option("--since", type=click.IntRange(min=0), default=0, show_default=True,
              help="only the changes of gold runs after this one")
@click.option("--limit", type=click.IntRange(min=0), default=100, show_default=True,
              help="print at most this many changes")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
@friendly
def changes_cmd(name: str, version: int | None, since: int, limit: int, fmt: str) -> None:
    """The change feed of NAME's gold table of one version: per gold run, every instance inserted,
    updated (before → after, per changed column) or deleted (the row removed) (SQL:
    gold.<name>_v<n>_changes)."""
    from pipelines.changes import as_read, change_feed

    feed = _run_job("changes", lambda spark, settings: change_feed(spark, settings, name, version, since, limit),
                    lock=False)
    if fmt == "json":
        click.echo(json.dumps({"table": feed.table, "version": feed.version, "since": feed.since, "total": feed.total,
                               "runs": feed.runs, "changes": feed.rows}, default=str))
        return
    runs = Table("gold run", "bronze batch", "Delta version", "inserts", "updates", "deletes",
                 title=f"{feed.table}: {feed.total:,} change(s) after gold run {feed.since}", title_justify="left")
    for r in feed.runs:
        runs.add_row(*(f"{r[c]:,}" for c in ("gold_run", "watermark", "delta_version", "inserts", "updates", "deletes")))
    console.print(runs)
    hidden = {"_silver_run", "_watermark", "_delta_version", "author", "_last_entry"}
    shown = [c for c in feed.columns if c not in hidden]
    rows = Table(*("run" if c == "_gold_run" else c.lstrip("_") if c in ("_change", "_cause") else c for c in shown),
                 title_justify="left")
    def cell(column: str, value: Any) -> str:
        if isinstance(value, tuple):  # an update's column that changed: before → after
            return f"{cell(column, value[0])} → {cell(column, value[1])}"
        return "" if value is None else f"{value[:12]}…" if column == "instance_id" else str(value)

    for r in as_read(feed.rows):
        rows.add_row(*(cell(c, r[c]) for c in shown))
    console.print(rows)
    if feed.total > len(feed.rows):
        console.print(f"{feed.total - len(feed.rows):,} more: --limit, --since, or SELECT * FROM {feed.table}")


@main.command("sql")
@click.argument("statement", required=False)
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@friendly
def sql_cmd(statement: str | None, fmt: str) -> None:
    """Run STATEMENT over the lake's catalog, or open an interactive SQL prompt without one."""
    from lakehouse.sql import history_file, render, run_statement, shell

    if statement is None:
        failures = _run_job("sql", lambda spark, settings: shell(spark, console, history=history_file(),
                                                                     lake_root=settings.lake_root),
                            lock=False)
        sys.exit(1 if failures else 0)
    columns, rows = _run_job("sql", lambda spark, settings: run_statement(spark, statement, settings.lake_root),
                             lock=False)
    out = render(columns, rows, fmt)  # type: ignore[arg-type]
    if isinstance(out, str):
        click.echo(out)
    else:
        console.print(out)


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", default=15002, show_default=True, help="Spark Connect port")
@friendly
def serve_cmd(host: str, port: int) -> None:
    """Serve the lake over Spark Connect (sc://HOST:PORT), read only, until interrupted.

    The engine listens on a loopback port of its own; clients reach it through a read-only gateway
    (:mod:`lakehouse.gateway`) that refuses anything that would write or read other than the lake's
    tables. Each client has a session of its own (current database, temporary views). On the
    default engine (Sail) the catalog is kept per Spark Connect session: the server names the lake's
    tables in each client's session before its first request (:mod:`lakehouse.spark.serving`).
    With ``engine: spark`` or ``spark-connect`` it is an Apache Spark Spark Connect server with
    Delta Lake, whose catalog every session shares. Tables the pipelines create or replace while
    it serves (a new schema version, a new registration) are named within seconds.
    """
    import time
    import uuid

    from lakehouse.gateway import ReadOnlyGateway
    from lakehouse.spark.serving import SessionCatalogs
    from lakehouse.spark.session import (
        connect_session,
        keep_ctrl_c_for_python,
        start_sail_server,
        start_spark_connect_server,
        stop_session,
    )
    from lakehouse.spark.tables import catalog_stamp, register_lake
    from lakehouse.store import absolute_root

    settings = _settings()
    root = absolute_root(settings.lake_root)
    apache = settings.engine in ("spark", "spark-connect")
    shown = "localhost" if host == "127.0.0.1" else host
    url = f"sc://{shown}:{port}"
    if apache:
        err_console.print("starting Apache Spark with Delta Lake ...")
    server = (start_spark_connect_server(settings) if apache
              else start_sail_server(release_memory=settings.release_memory == "on"))
    if server.listening_address is None:
        raise EngineError("the engine's Spark Connect server did not start listening")
    backend_host, backend_port = server.listening_address
    backend = f"sc://{backend_host}:{backend_port}/"

    def open_session(user_id: str = "", session_id: str = "") -> Any:
        session_id = session_id or str(uuid.uuid4())  # the server's own session: no client joins it
        return connect_session(f"{backend};session_id={session_id};user_id={user_id}", settings)

    # Sail keeps a catalog per session: each client's session gets the lake's tables named in it
    sessions = None if apache else SessionCatalogs(open_session, lambda spark: len(register_lake(spark, root)))
    gateway = ReadOnlyGateway(f"{backend_host}:{backend_port}", host, port, lake_root=root,
                              on_session=sessions.prepare if sessions is not None else None,
                              on_release=sessions.release if sessions is not None else None)
    spark = None
    try:
        gateway.start()
        spark = open_session()
        stamp: tuple[Any, ...] | None = catalog_stamp(root)
        tables = len(register_lake(spark, root))
        keep_ctrl_c_for_python(sigterm=True)  # the server's first requests are made: its handler is in place
        engine = "Apache Spark with Delta Lake" if apache else "Sail"
        console.print(f"Spark Connect server ({engine}) for the lake at {root} ({tables} tables), read only; "
                      "Ctrl-C stops it.")
        console.print("Connect to its catalog (bronze.*, silver.*, gold.*) with:")
        console.print(f"  SparkSession.builder.remote({url!r}).getOrCreate()")
        quiet = 0.0
        while True:
            time.sleep(2)
            quiet += 2
            try:
                now = catalog_stamp(root)
                if now != stamp:  # the pipelines made or replaced tables: name them
                    stamp = now
                    tables = len(register_lake(spark, root))
                    if sessions is not None:
                        sessions.refresh()
                    console.print(f"the lake changed: {tables} tables named")
                    quiet = 0.0
                elif quiet >= 30:  # keep the catalog's session alive
                    spark.sql("SELECT 1").collect()
                    quiet = 0.0
            except Exception:  # noqa: BLE001 - any failure means a new session is needed
                spark, stamp = open_session(), None
    except KeyboardInterrupt:
        console.print("stopped")
    finally:
        gateway.stop()  # no client request comes in any more ...
        if spark is not None:
            stop_session(spark)  # ... and the engine answers the last releases of results
        server.stop()


@main.command("demo")
@click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=Path("demo"),
              show_default=True, help="the demo's own lake, landing folder and keys (recreated)")
@click.option("--lake", default="", metavar="URI",
              help="the demo's lake elsewhere, such as s3://bucket/demo (emptied first; only an empty place or "
                   "a lake the demo made)")
@friendly
def demo_cmd(workdir: Path, lake: str) -> None:
    """Import a real register history, materialize it, query it, travel in time, revert it."""
    from lakehouse.lock import lake_lock
    from lakehouse.spark.session import open_engine
    from lakehouse.store import export_environment, is_store_root
    from pipelines.demo import demo_settings, prepare_lake, prepare_workdir, run_demo

    settings = demo_settings(_settings(), workdir, lake)
    if is_store_root(settings.lake_root):
        export_environment(settings)
    prepare_workdir(workdir)
    with lake_lock(settings.lake_root, "demo", timeout=float(settings.lock_timeout)):
        if lake:  # emptied under its lock, which it keeps
            prepare_lake(lake)
        with open_engine(settings) as engine:
            run_demo(engine.spark, settings, console if console.is_terminal else Console(soft_wrap=True, width=120))


@main.command("register")
@click.argument("schema")
@click.option("--name", default="", help="gold table name (default: the schema's name)")
@click.option("--drop", is_flag=True, help="drop the registration of SCHEMA (its gold name or id) instead")
@friendly
def register_cmd(schema: str, name: str, drop: bool) -> None:
    """Register SCHEMA (<author hex>:<log_id>, or its name where only one schema has it) for gold
    tables ``gold.<name>_v<n>``; possible as soon as its log is ingested. With --drop, SCHEMA is a
    registered gold name (or id) whose tables leave the catalog at the next materialize."""
    from pipelines.register import drop_registration, register_schema

    if not schema.strip():
        raise click.UsageError("SCHEMA is missing: give the schema's <author hex>:<log_id>, or its name "
                               "(make register SCHEMA=<name or id>)")

    if drop:
        dropped = _run_job("register", lambda spark, settings: drop_registration(spark, settings, schema))
        console.print(f"dropped the registration of {dropped} ({schema}); the next `make materialize` no longer "
                      "names its gold tables (their data stays in the lake)")
        return
    sid, chosen, new = _run_job("register", lambda spark, settings: register_schema(spark, settings, schema,
                                                                                     name or None))
    if new:
        console.print(f"registered {sid} as gold.{chosen}; run `make materialize` to build its tables")
    else:
        console.print(f"{sid} is already registered as gold.{chosen}")


@main.command("optimize")
@click.option("--table", "tables", multiple=True, metavar="LAYER.NAME",
              help="compact only this table (repeatable; default: every table of the lake)")
@click.option("--check", is_flag=True, help="list what would be compacted, write nothing")
@friendly
def optimize_cmd(tables: tuple[str, ...], check: bool) -> None:
    """Compact the lake's tables: the same rows in fewer files, without deletion vectors (buckets
    of more than one file, an appended table's small files at its end). Earlier versions stay
    readable by time travel."""
    from pipelines.optimize import run_optimize

    summary = _run_job("optimize", lambda spark, settings: run_optimize(spark, settings, tables, check=check),
                       lock=not check)
    for name, why in sorted(summary.unread.items()):
        console.print(f"optimize: {name} left as it is: its Delta log was not read here ({why})")
    for name, why in sorted(summary.left.items()):
        console.print(f"optimize: {name} left as it is: {why}")
    if not summary.compacted:
        console.print(f"optimize: nothing to compact in {summary.tables} table(s) (each bucket a file, "
                      "no deletion vector, no run of small files)")
        return
    title = ("optimize --check: would write again" if check
             else f"optimize ({summary.commits} commit(s), {summary.seconds:.1f} s)")
    table = Table(title=title, title_justify="left")
    for column in ("table", "files", "deletion vectors", "written again", "files after"):
        table.add_column(column, justify="left" if column in ("table", "written again") else "right")
    for c in summary.compacted:
        table.add_row(c.table, f"{c.files:,}", f"{c.deletion_vectors:,}", c.describe(), f"{c.files_after:,}")
    console.print(table)


@main.command("status")
@friendly
def status_cmd() -> None:
    """Counts per layer and status, pending and forked logs, schemas and their versions."""
    from pipelines.status import lake_status

    for part in render_status(_run_job("status", lake_status, lock=False)):
        console.print(part)


def render_status(status: Any) -> list[Any]:
    """``make status``'s report (:class:`pipelines.status.LakeStatus`) as rich tables and lines."""
    from rich.text import Text

    def table(title: str, *columns: str) -> Table:
        return Table(*columns, title=title, title_justify="left")

    out: list[Any] = []
    layers = table("lake " + status.root, "table", "rows")
    for name, rows in status.rows.items():
        layers.add_row(name, f"{rows:,}" if rows is not None else "-")
    out.append(layers)
    if status.bronze_batch is not None:
        behind = f"bronze batch {status.bronze_batch}; silver has materialized up to batch {status.silver_watermark}"
        if status.silver_watermark < status.bronze_batch:
            behind += " (run `make materialize`)"
        out.append(Text(behind))
    exists = status.rows.get
    sections = [  # (the table, its rows as shown, whether it is shown)
        (table("bronze.rejected by reason", "reason", "lines"), [(code, f"{n:,}") for code, n in status.rejected],
         exists("bronze.rejected") is not None),
        (table("silver.messages by status", "status", "reason", "entries"),
         [(st, reason, f"{n:,}") for st, reason, n in status.statuses], exists("silver.messages") is not None),
        (table("pending", "waits for", "entries"), [(w, f"{n:,}") for w, n in status.pending], bool(status.pending)),
        (table("logs waiting behind a rejected entry: a rejected entry never becomes part of its log, so the "
               "entries after it wait for good; its author must publish them again on a new log (the line's "
               "reason says what to change)", "author", "log_id", "waits for seq", "rejected at ingest", "line"),
         [(b.author, str(b.log_id), str(b.seq_num), b.reason_code, b.where) for b in status.blocked],
         bool(status.blocked)),
        (table("forked logs", "author", "log_id", "fork at seq", "accepted up to"),
         [(a, str(log), str(fork), str(seq)) for a, log, fork, seq in status.forks], bool(status.forks)),
        (table("schemas", "schema", "name", "versions", "current", "abandoned"),
         [(sid, name, str(n), str(cur), str(ab)) for sid, name, n, cur, ab in status.schemas],
         exists("silver.schema_versions") is not None),
        (table("waiting schemas (no gold tables written until the wait ends; `lakehouse register NAME --drop` "
               "drops a registration)", "registered as", "schema", "waits for"), status.waiting, bool(status.waiting)),
        (table("gold tables", "table", "schema version", "rows", "Delta version"),
         [(f"gold.{name}" + (f" (gold.{current})" if current else ""), str(version), f"{rows:,}", str(dv))
          for name, current, version, rows, dv in status.gold], bool(status.gold)),
        (table("tables to compact (`make optimize`: the same rows in fewer files, without deletion vectors)",
               "table", "files", "deletion vectors", "written again"),
         [(name, f"{files:,}", f"{dvs:,}", what) for name, files, dvs, what in status.to_compact],
         bool(status.to_compact)),
    ]
    for rendered, rows, shown in sections:
        for row in rows:
            rendered.add_row(*row)
        if shown:
            out.append(rendered)
    return out


# -- snapshot import ---------------------------------------------------------------------------
@main.group("import")
def import_group() -> None:
    """Import data from outside the lake as signed messages (landing files, then `make ingest`)."""


def _print_snapshot(report: Any) -> None:
    from rich.markup import escape

    def n(count: int, what: str) -> str:
        return f"{count:,} {what}{'' if count == 1 else 's'}"

    rec = report.record
    if report.status == "skipped":
        console.print(f"  {escape(report.file)}  [dim]skipped: imported before (schema version "
                      f"{rec.schema_version}, {n(rec.messages, 'message')})[/]")
        return
    console.print(f"  {escape(report.file)}  [bold]imported[/]: schema version {rec.schema_version}, "
                  f"{n(rec.messages, 'message')} ({n(rec.creates, 'create')}, {n(rec.updates, 'update')}, "
                  f"{n(rec.deletes, 'delete')}), {n(rec.rows, 'row')}, {report.seconds:.2f} s")
    added = {c.name for c in report.migration if c.action == "create"}
    mapping = [f"{escape(c.header)} -> {c.field}" + (" (key)" if c.field == report.key_field else "")
               for c in report.columns if report.first or c.field in added]
    if mapping:
        console.print(f"      columns: {', '.join(mapping)}")
    if report.migration:
        steps = " ".join(f"~{c.name}>{c.to}" if c.action == "rename" else ("+" if c.action == "create" else "-") + c.name
                         for c in report.migration)
        console.print(f"      migration: {steps}")
    for r in report.renames:
        how = ("published as one rename" if r.published else
               f"published as remove + create + an update per row: a field of the schema was called {r.new} before")
        console.print(f"      renamed: {r.old} -> {r.new} ({r.similarity:.0%} of values equal; {how})")
    for issue in report.issues:
        style = "yellow" if issue.level == "warning" else "dim"
        console.print(f"      [{style}]{escape(str(issue))}[/]")


@import_group.command("snapshots")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--schema", "schema_name", required=True, help="the schema to import into (created on first import)")
@click.option("--key", "key_column", default=None,
              help="the key column, a header or field name (default: the first column)")
@click.option("--signer", default=DEFAULT_KEY, show_default=True, help="the signing key (created if missing)")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="import at most N new snapshots")
@friendly
def import_snapshots_cmd(folder: Path, schema_name: str, key_column: str | None, signer: str,
                         limit: int | None) -> None:
    """Turn FOLDER's TSV/CSV snapshots of one table (names sort oldest first) into signed messages.

    The first snapshot publishes a schema (one text field per column) and a create per row; each
    later one a migration for its header change, then creates, updates and deletes from the row
    diff by key. Snapshots imported before are skipped; one changed since is refused.
    """
    from lakehouse.publish.importer import import_snapshots

    settings = _settings()
    console.print(f"importing snapshots from {folder} into schema [bold]{schema_name}[/] (key {signer})")
    summary = import_snapshots(folder, schema=schema_name, store=KeyStore(settings.keys), landing=settings.landing,
                               max_payload=settings.max_payload,
                               signer=signer, key_column=key_column, limit=limit, on_snapshot=_print_snapshot)
    if summary.key_created:
        err_console.print(f"created key [bold]{signer}[/] in {settings.keys}")
    if summary.settled:
        err_console.print(summary.settled)
    versions = summary.versions
    rows: list[tuple[str, Any]] = [("snapshots imported", summary.imported), ("snapshots skipped", summary.skipped)]
    if summary.pending:
        rows.append(("snapshots left (--limit)", len(summary.pending)))
    rows += [("creates", summary.creates), ("updates", summary.updates), ("deletes", summary.deletes),
             ("messages", summary.messages),
             ("schema version", f"{versions[0] or 'new'} -> {versions[1]}" if versions else "unchanged"),
             ("warnings", summary.warnings), ("notes", summary.notes)]
    if summary.missing:
        rows.append(("imported before, now missing", ", ".join(summary.missing)))
    if summary.ignored:
        rows.append(("ignored (not .tsv/.csv)", ", ".join(summary.ignored)))
    console.print(_summary_table("import", rows))
    if summary.schema_id:
        console.print(f"schema {schema_name}: {summary.schema_id}")
    if summary.imported:
        err_console.print(f"landed in {settings.landing}; run `make ingest` to take it in")
    else:
        console.print("nothing new to import")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
