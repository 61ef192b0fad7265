"""Generated histories: deterministic landing lines with every kind of message and log defect.

:func:`simulate` plays a small world from a seed: a few authors (ed25519 keys drawn from the
seed), schema logs and instance logs, and returns what they publish as landing lines (FORMAT.md
section 2). What it writes is steered by :class:`Knobs`:

- schema logs: ``schema-meta`` at seq 1; at seq 2 a base migration (fields of several types and,
  for every schema after the first, a cascading relation ``parent`` to the schema before it);
  then migrations of every kind (create; update with a type conversion, a new, kept or removed
  validation, or only a new default; remove, ``parent`` included, and re-create; rename, rename
  back to an earlier name, a rename then an update of the renamed field, a create of a name a
  rename left; text validations, defaults, relations with and without cascade), invalid
  migrations (one kind of reason each, renames of removed fields and to taken names among them), reverts (valid ones, to a version >= 2, and ignored ones)
  and later ``schema-meta`` updates;
- instance logs, one per author and schema: creates, updates and deletes at the current, older,
  abandoned and future versions (past the end of the schema log: they wait, maybe for good), nulls,
  invalid field values, updates and deletes of another author's instance,
  deletes of instances that others point at through ``parent`` (cascades across schemas);
- log defects: entries withheld (gaps: their successors stay pending), forks (a second valid
  entry at the same seq), entries with a wrong backlink or skiplink, duplicate deliveries,
  malformed lines (not JSON, bad hex, no payload, bad signature, wrong payload) and logs that go
  on after their end-of-feed entry.

:attr:`History.claims` counts what was written, by kind (the keys of :data:`CLAIMS`), so that
tests can check the lake shows it. :func:`generate` is the fast, mostly valid variant for
benchmarks; :func:`write_landing` writes lines as landing files; :func:`split_batches` deals a
history into arrival batches.

Deterministic given the seed (one ``random.Random(seed)`` drives everything).
"""

from __future__ import annotations

import json
import string
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from random import Random
from typing import Any, Final, TypeAlias

from nacl.signing import SigningKey

from lakehouse.core.entries import lipmaa, sign_entry, skiplink_required, yasmf_hash
from lakehouse.core.lenses import FieldType, Lens, LensField, parse_type
from lakehouse.core.messages import (
    Create,
    Delete,
    FieldChange,
    Message,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    Update,
    VersionedSchema,
    encode_message,
)
from lakehouse.core.schemas import SchemaMessage, SchemaVersions, build_versions

__all__ = ["CLAIMS", "History", "Knobs", "Line", "generate", "simulate", "split_batches", "write_landing"]

Line: TypeAlias = str | dict[str, str]
"""A landing line: a ``{"entry": hex, "payload": hex}`` object, or raw text (a malformed line)."""

CLAIMS: Final[Mapping[str, str]] = {
    "gap": "an entry withheld: later entries of its log wait for it",
    "fork": "a second valid entry at the same seq of a log",
    "wrong_backlink": "an extra entry whose backlink is not the hash of the entry before it",
    "wrong_skiplink": "an extra entry whose skiplink is not the hash of its lipmaa entry",
    "duplicate": "a line delivered twice",
    "not_json": "a line that is not JSON",
    "bad_hex": "a line whose entry is not hexadecimal",
    "missing_payload": "a line without payload",
    "bad_signature": "a line whose entry has a damaged signature",
    "wrong_payload": "a line whose payload is not the one its entry signs",
    "after_end_of_feed": "an entry after an end-of-feed entry of its log",
    "invalid_migration": "a migration that is invalid as a whole",
    "revert": "a valid revert",
    "ignored_revert": "a revert to an abandoned version or to itself",
    "meta_update": "a schema-meta after seq 1",
    "recreate": "a removed field created again with its type",
    "rename": "a field renamed, its values kept",
    "rename_back": "a field renamed back to a name it had",
    "create_after_rename": "a new field created under a name a rename left",
    "old_version": "a create or update at a version older than the current one",
    "bad_value": "a create or update whose field values do not fit the lens",
    "unauthorised": "an update or delete of another author's instance",
    "abandoned_write": "a create at an abandoned version",
    "future_version": "a create or update at a version past the end of its schema log",
    "not_cbor": "a payload that is not CBOR, in an instance log",
    "wrong_log": "a schema migration, or a create of another schema, in an instance log",
    "no_log_purpose": "a log that starts with an update",
    "not_a_schema": "a log that starts with a create naming an instance log as its schema",
    "cascade_delete": "a delete of an instance that a live instance points at through parent",
}
"""Kinds of :attr:`History.claims`, with what each stands for."""

_DEFECTS: Final = (
    "invalid_migration",
    "revert",
    "meta_update",
    "bad_value",
    "unauthorised",
    "abandoned_write",
    "future_version",
    "stray",
    "gap",
    "fork",
    "bad_link",
    "duplicate",
    "malformed",
    "end_of_feed",
)
"""The knobs :meth:`Knobs.clean` turns off."""
_START: Final = datetime(2020, 5, 22, 11, 58, 50, tzinfo=timezone.utc)
# Validation patterns the generator uses, each with a maker of a matching and a failing value.
_PATTERNS: Final[Mapping[str, tuple[Callable[[Random], str], str]]] = {
    "^[a-z]+$": (lambda rng: _word(rng), "Not Lowercase"),
    "^[0-9]{3}$": (lambda rng: f"{rng.randrange(1000):03d}", "12"),
    "@": (lambda rng: f"{_word(rng)}@{_word(rng)}", "no at sign"),
}
_BASES: Final = ("varchar", "text", "integer", "float", "boolean", "timestamp", "relation", "blob")
# Type updates: each is a conversion of SEMANTICS.md section 4 (values that fail it show the default).
# A field may go back to an earlier type later (a detour: the two ends are compared).
_CONVERSIONS: Final[Mapping[str, tuple[str, ...]]] = {
    "varchar": ("text", "integer", "varchar[]"),
    "text": ("varchar", "boolean", "float", "integer"),
    "integer": ("float", "text", "varchar", "boolean", "integer[]"),
    "float": ("integer", "text", "varchar"),
    "boolean": ("integer", "text", "varchar"),
    "timestamp": ("text", "varchar", "timestamp[]"),
    "relation": ("text", "relation[]"),
    "blob": ("blob[]",),
}


def _stray_hash(rng: Random) -> bytes:
    """A YASMF hash of nothing in the history."""
    return yasmf_hash(rng.randbytes(8))


def _word(rng: Random, size: int = 0) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=size or rng.randint(1, 8)))


# --------------------------------------------------------------------------------------------------
# Knobs and histories


@dataclass(frozen=True)
class Knobs:
    """What a generated history holds. Probabilities are per occasion (per message or entry).

    Attributes:
        authors: number of authors (keys).
        schemas: number of schemas (each written by one author on its own log).
        migrations: schema messages per schema after its ``schema-meta`` (the first is the base
            migration).
        messages: instance messages, in total.
        invalid_migration: a schema message is an invalid migration.
        revert: a schema message is a revert (valid, or ignored when ``ignored_revert`` wins).
        ignored_revert: a revert is one that gets ignored.
        meta_update: a schema message is a ``schema-meta``.
        update: an instance message updates one of the author's live instances.
        delete: an instance message deletes one of the author's live instances.
        bad_value: a create or update carries a value that does not fit the lens.
        unauthorised: an instance message updates or deletes another author's instance.
        abandoned_write: an instance message is a create at an abandoned version.
        future_version: a create or update names a version past the end of its schema log (it
            waits until the version arrives, or for good, and the later messages of its instance
            wait behind it).
        stray: an instance message is one that fits no log: not CBOR, in the wrong log, first in
            a log without a purpose, or naming a log that is not a schema log.
        old_version: a create or update names an older version than the current one.
        gap: an entry is withheld.
        fork: an entry gets a second valid entry at its seq.
        bad_link: an entry (seq > 1) gets an extra entry with a wrong backlink or skiplink.
        duplicate: a line is delivered twice.
        malformed: an entry comes with a malformed line beside it.
        end_of_feed: an instance log ends with an end-of-feed entry, and one more after it.
    """

    authors: int = 3
    schemas: int = 2
    migrations: int = 6
    messages: int = 40
    invalid_migration: float = 0.15
    revert: float = 0.15
    ignored_revert: float = 0.3
    meta_update: float = 0.1
    update: float = 0.3
    delete: float = 0.15
    bad_value: float = 0.08
    unauthorised: float = 0.05
    abandoned_write: float = 0.1
    future_version: float = 0.03
    stray: float = 0.03
    old_version: float = 0.3
    gap: float = 0.02
    fork: float = 0.02
    bad_link: float = 0.03
    duplicate: float = 0.05
    malformed: float = 0.03
    end_of_feed: float = 0.1

    def __post_init__(self) -> None:
        for knob in fields(self):
            value = getattr(self, knob.name)
            if isinstance(value, float) and not 0.0 <= value <= 1.0:
                raise ValueError(f"{knob.name} is a probability, not {value}")
        if self.authors < 1 or self.schemas < 1 or self.migrations < 1 or self.messages < 0:
            raise ValueError("a history needs authors >= 1, schemas >= 1, migrations >= 1 and messages >= 0")

    @classmethod
    def clean(cls, **overrides: Any) -> Knobs:
        """Knobs with every defect, invalid message and revert turned off, then ``overrides`` applied."""
        return cls(**{**dict.fromkeys(_DEFECTS, 0.0), **overrides})

    @classmethod
    def realistic(cls, messages: int) -> Knobs:
        """Benchmark knobs: many authors, three schemas with several migrations, few invalid messages.

        No reverts: a revert abandons the versions it jumps over, and every write that named them.
        """
        return cls.clean(
            authors=max(2, messages // 200),
            schemas=3,
            migrations=8,
            messages=messages,
            invalid_migration=0.1,
            meta_update=0.1,
            bad_value=0.01,
            unauthorised=0.005,
        )


@dataclass(frozen=True)
class History:
    """A generated history.

    Attributes:
        lines: the landing lines, in the order they were written.
        names: every schema with a gold table name (``s0``, ``s1``, ...), to register it.
        claims: what was written, by kind of :data:`CLAIMS` (kinds never written are absent).
        keys: author (64 hex) -> signing key, to write more entries (e.g. a revert) later.
    """

    lines: tuple[Line, ...]
    names: Mapping[SchemaId, str]
    claims: Counter[str]
    keys: Mapping[str, SigningKey] = field(default_factory=dict)


def simulate(knobs: Knobs | None = None, seed: int = 0) -> History:
    """Generate a history (see the module docstring).

    Args:
        knobs: what to write; the defaults of :class:`Knobs` when None.
        seed: the seed of everything: keys, messages, defects.

    Returns:
        The history; the same knobs and seed give the same history.
    """
    return _World(knobs or Knobs(), Random(seed)).run()


def generate(messages: int, *, seed: int = 0) -> list[Line]:
    """A realistic, mostly valid history of ``messages`` instance messages, for benchmarks.

    Many authors (one per 200 messages), three schemas with eight schema messages each, creates,
    updates and deletes at mixed versions; no log defects. About 0.13 ms per entry (200,000
    entries in under 30 s on one core).

    Args:
        messages: the number of instance messages.
        seed: the seed.

    Returns:
        The landing lines (``{"entry", "payload"}`` objects).
    """
    return list(simulate(Knobs.realistic(messages), seed).lines)


def schema_line(history: History, sid: SchemaId, message: SchemaMessage) -> dict[str, str]:
    """The landing line of ``message`` as the next entry of schema ``sid``'s log in ``history``,
    signed with the schema author's key (``history.keys``)."""
    from lakehouse.core.entries import decode_entry

    hashes: dict[int, bytes] = {}
    for line in history.lines:
        if isinstance(line, str):
            continue
        entry = decode_entry(bytes.fromhex(line["entry"]))
        if entry.author == sid.author and entry.log_id == sid.log_id:
            hashes[entry.seq_num] = yasmf_hash(bytes.fromhex(line["entry"]))
    seq = max(hashes) + 1
    payload = encode_message(message)
    data = sign_entry(history.keys[sid.author.hex()], log_id=sid.log_id, seq_num=seq, payload=payload,
                      backlink=hashes[seq - 1], skiplink=hashes[lipmaa(seq)] if skiplink_required(seq) else None)
    return {"entry": data.hex(), "payload": payload.hex()}


def next_migration(sv: SchemaVersions, sid: SchemaId, rng: Random, changes: int = 2) -> SchemaMigration:
    """A valid migration of a schema at its latest version, as the generator writes them: an
    update of one field (a type conversion, a validation, a default) and ``changes`` more
    (updates, removals, re-creates of hidden fields, renames, new fields)."""
    world = _World(Knobs(), rng)
    schema = _Schema(0, sid, world.new_log(0), [SchemaMeta("s")] * len(sv), sv)  # only their number is read
    schema.fields_made = 1000 + len(sv.field_history)  # names no earlier field has
    world.schemas = [schema]  # a new relation field points at the schema itself
    made = world.valid_changes(schema, changes)
    named = {c.name for c in made}
    free = [f for f in sv.lens(len(sv)) if f.name not in named and f.name != "parent"]
    if free:
        made.append(world.field_update(rng.choice(free)))
    return SchemaMigration(tuple(made))


def split_batches(lines: Sequence[Line], n: int, rng: Random) -> list[list[Line]]:
    """Shuffle lines and deal them into ``n`` arrival batches of random sizes (some may be empty).

    Args:
        lines: the lines of a history.
        n: the number of batches, >= 1.
        rng: the source of randomness.

    Returns:
        ``n`` lists whose concatenation is a permutation of ``lines``.
    """
    if n < 1:
        raise ValueError(f"at least one batch, not {n}")
    shuffled = list(lines)
    rng.shuffle(shuffled)
    cuts = sorted(rng.randint(0, len(shuffled)) for _ in range(n - 1))
    bounds = [0, *cuts, len(shuffled)]
    return [shuffled[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def write_landing(lines: Sequence[Line], folder: str | Path, *, lines_per_file: int = 50_000) -> list[Path]:
    """Write lines as landing files ``landing-00000.jsonl``, ``landing-00001.jsonl``, ... (FORMAT.md section 2).

    Args:
        lines: the lines; objects are written as JSON, text as it is.
        folder: the landing folder (created when missing).
        lines_per_file: lines per file.

    Returns:
        The files written, in order.
    """
    if lines_per_file < 1:
        raise ValueError(f"lines_per_file must be >= 1, not {lines_per_file}")
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for number, start in enumerate(range(0, len(lines), lines_per_file)):
        path = root / f"landing-{number:05d}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for line in lines[start : start + lines_per_file]:
                out.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
        written.append(path)
    return written


# --------------------------------------------------------------------------------------------------
# The world


@dataclass
class _Log:
    """One log being written: its key, id and the hashes of its entries so far."""

    key: SigningKey
    log_id: int
    hashes: list[bytes] = field(default_factory=list)


@dataclass
class _Schema:
    """One schema: its log, the messages written to it and their versions."""

    index: int
    sid: SchemaId
    log: _Log
    messages: list[SchemaMessage]
    versions: SchemaVersions
    fields_made: int = 0

    def usable(self) -> list[int]:
        """Versions a write may name: not abandoned."""
        return [v.version for v in self.versions if not v.abandoned]


@dataclass
class _Instance:
    """A create as its author sees it: alive unless invalid, at an abandoned version, or deleted."""

    id: bytes
    author: int
    alive: bool
    parent: bytes | None = None


class _World:
    """The state of a generation run: keys, logs, schemas, instances, lines and claims."""

    def __init__(self, knobs: Knobs, rng: Random) -> None:
        self.knobs, self.rng = knobs, rng
        self.keys = [SigningKey(rng.randbytes(32)) for _ in range(knobs.authors)]
        self.next_log_id = [0] * knobs.authors
        self.lines: list[Line] = []
        self.claims: Counter[str] = Counter()
        self.schemas: list[_Schema] = []
        self.instance_logs: dict[tuple[int, int], _Log] = {}
        self.instances: list[list[_Instance]] = [[] for _ in range(knobs.schemas)]  # every create, by schema
        self.live: dict[tuple[int, int], list[_Instance]] = defaultdict(list)  # (author, schema) -> live
        self.children: dict[bytes, set[bytes]] = defaultdict(set)  # instance -> live ones whose parent it is

    def chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def new_log(self, author: int) -> _Log:
        log = _Log(self.keys[author], self.next_log_id[author])
        self.next_log_id[author] += 1
        return log

    def run(self) -> History:
        k = self.knobs
        for index in range(k.schemas):
            author = index % k.authors
            log = self.new_log(author)
            sid = SchemaId(bytes(log.key.verify_key), log.log_id)
            meta = SchemaMeta(f"s{index}", description=f"generated schema {index}")
            self.schemas.append(_Schema(index, sid, log, [meta], build_versions([(1, meta)])))
            self.append(log, encode_message(meta))
        for schema in self.schemas:
            self.schema_message(schema, self.base_migration(schema))
        steps = [s for s in self.schemas for _ in range(k.migrations - 1)] + [None] * k.messages
        self.rng.shuffle(steps)
        for step in steps:
            if step is None:
                self.instance_message()
            else:
                self.schema_step(step)
        for (_, index), log in sorted(self.instance_logs.items()):
            if self.chance(k.end_of_feed):
                self.end_feed(log, self.schemas[index])
        return History(tuple(self.lines), {s.sid: f"s{s.index}" for s in self.schemas}, self.claims,
                       {bytes(k.verify_key).hex(): k for k in self.keys})

    # -- entries and lines -----------------------------------------------------------------------

    def sign(
        self,
        log: _Log,
        seq: int,
        payload: bytes,
        *,
        end_of_feed: bool = False,
        backlink: bytes | None = None,
        skiplink: bytes | None = None,
    ) -> bytes:
        """Sign the entry at ``seq`` with links into ``log.hashes``, unless given."""
        if seq > 1 and backlink is None:
            backlink = log.hashes[seq - 2]
        if skiplink_required(seq) and skiplink is None:
            skiplink = log.hashes[lipmaa(seq) - 1]
        return sign_entry(
            log.key,
            log_id=log.log_id,
            seq_num=seq,
            payload=payload,
            backlink=backlink,
            skiplink=skiplink,
            end_of_feed=end_of_feed,
        )

    def append(self, log: _Log, payload: bytes, *, end_of_feed: bool = False) -> bytes:
        """Append one entry to ``log``, write its line (or withhold it) and any defects beside it.

        Returns:
            The entry hash.
        """
        k, seq = self.knobs, len(log.hashes) + 1
        entry = self.sign(log, seq, payload, end_of_feed=end_of_feed)
        line = {"entry": entry.hex(), "payload": payload.hex()}
        if self.chance(k.gap):
            self.claims["gap"] += 1
        else:
            self.lines.append(line)
            if self.chance(k.duplicate):
                self.lines.append(dict(line))
                self.claims["duplicate"] += 1
        if self.chance(k.fork):
            other = encode_message(Delete(_stray_hash(self.rng)))
            self.lines.append({"entry": self.sign(log, seq, other).hex(), "payload": other.hex()})
            self.claims["fork"] += 1
        if seq > 1 and self.chance(k.bad_link):
            wrong = _stray_hash(self.rng)
            if skiplink_required(seq) and self.rng.random() < 0.5:
                self.lines.append(
                    {"entry": self.sign(log, seq, payload, skiplink=wrong).hex(), "payload": payload.hex()}
                )
                self.claims["wrong_skiplink"] += 1
            else:
                self.lines.append(
                    {"entry": self.sign(log, seq, payload, backlink=wrong).hex(), "payload": payload.hex()}
                )
                self.claims["wrong_backlink"] += 1
        if self.chance(k.malformed):
            self.malformed(entry, payload)
        log.hashes.append(yasmf_hash(entry))
        return log.hashes[-1]

    def malformed(self, entry: bytes, payload: bytes) -> None:
        kind = self.rng.choice(("not_json", "bad_hex", "missing_payload", "bad_signature", "wrong_payload"))
        if kind == "not_json":
            self.lines.append('{"entry": "' + entry.hex()[:16])
        elif kind == "bad_hex":
            self.lines.append({"entry": "zz" + entry.hex(), "payload": payload.hex()})
        elif kind == "missing_payload":
            self.lines.append({"entry": entry.hex()})
        elif kind == "bad_signature":
            damaged = entry[:-1] + bytes([entry[-1] ^ 1])
            self.lines.append({"entry": damaged.hex(), "payload": payload.hex()})
        else:
            self.lines.append({"entry": entry.hex(), "payload": (payload + b"\x00").hex()})
        self.claims[kind] += 1

    def end_feed(self, log: _Log, schema: _Schema) -> None:
        """End an instance log with an end-of-feed create, then write one more create after it."""
        for end in (True, False):
            message = Create(VersionedSchema(schema.sid.author, schema.sid.log_id, 1), {})
            self.append(log, encode_message(message), end_of_feed=end)
        self.claims["after_end_of_feed"] += 1

    # -- values -------------------------------------------------------------------------------------

    def value(self, f: LensField) -> Any:
        """A value that fits ``f`` (type, length, validation)."""
        if f.type.is_array:
            return [self.scalar(f) for _ in range(self.rng.randrange(3))]
        return self.scalar(f)

    def scalar(self, f: LensField) -> Any:
        rng, base = self.rng, f.type.base
        if base in ("varchar", "text"):
            if f.validation is not None:
                return _PATTERNS[f.validation][0](rng)
            if base == "text" and rng.random() < 0.1:
                return _word(rng, 300)  # too long to become a varchar
            return rng.choice((_word(rng), str(rng.randrange(100)), "true", "2021-01-02T03:04:05Z"))
        if base == "integer":
            return rng.choice((rng.randrange(-1000, 1000), rng.randrange(2), rng.randrange(-(2**63), 2**63)))
        if base == "float":
            return rng.choice((float(rng.randrange(-100, 100)), rng.uniform(-1e6, 1e6)))
        if base == "boolean":
            return rng.random() < 0.5
        if base == "timestamp":
            moment = _START + timedelta(seconds=rng.randrange(10**8), microseconds=rng.randrange(2) * 1234)
            offset = timezone(timedelta(hours=rng.randrange(-12, 13)))
            return rng.choice(
                (
                    moment,
                    moment.astimezone(offset),
                    moment.strftime("%Y-%m-%dT%H:%M:%S+0000"),
                    moment.astimezone(offset).isoformat(),
                )
            )
        if base == "relation":
            return self.instance_of(self.schema_index(f.schema) if f.schema is not None else None)
        return rng.randbytes(rng.randrange(8))

    def bad_value(self, lens: Sequence[LensField]) -> tuple[str, Any]:
        """A field and a value that lens(v) rejects: unknown field, wrong type, too long, out of range, ..."""
        if not lens or self.rng.random() < 0.2:
            return "no_such_field", 1
        f = self.rng.choice(lens)
        base = f.type.base
        if f.type.is_array:
            return f.name, 5
        if f.validation is not None:
            return f.name, _PATTERNS[f.validation][1]
        if base == "varchar":
            return f.name, _word(self.rng, 256)
        if base == "integer":
            return f.name, 2**63
        if base == "relation":
            return f.name, b"\x01\x02"
        return f.name, True if base != "boolean" else "yes"

    def schema_index(self, sid: SchemaId) -> int:
        return next(s.index for s in self.schemas if s.sid == sid)

    # -- schema messages ---------------------------------------------------------------------------

    def schema_message(self, schema: _Schema, message: SchemaMessage) -> None:
        self.append(schema.log, encode_message(message))
        schema.messages.append(message)
        schema.versions = build_versions(list(enumerate(schema.messages, start=1)))

    def field_name(self, schema: _Schema, base: str, taken: set[str]) -> str:
        """A name no field of the log has had, nor ``taken`` (the names the migration uses so far,
        to which it is added)."""
        schema.fields_made += 1
        had = {f.name for v in schema.versions for f in (*v.lens, *v.hidden)} | taken
        name = f"{base}_{schema.fields_made}"
        if self.rng.random() < 0.05 and "author" not in had:
            name = "author"  # shown as _field_author in gold (note 16)
        taken.add(name)
        return name

    def new_field(self, schema: _Schema, taken: set[str]) -> FieldChange:
        """A create of a new field of a random type, maybe validated, defaulted, relational."""
        rng = self.rng
        base = rng.choice(_BASES)
        type_text = base + ("[]" if rng.random() < 0.2 else "")
        name = self.field_name(schema, base, taken)
        validation = (
            rng.choice(list(_PATTERNS)) if base in ("varchar", "text") and rng.random() < 0.4 else None
        )
        target = rng.choice(self.schemas).sid if base == "relation" else None
        draft = LensField(name, parse_type(type_text), validation, schema=target)
        has_default = rng.random() < 0.4
        default = self.default(draft) if has_default else None
        return FieldChange(
            name,
            "create",
            type_text,
            validation,
            default,
            has_default,
            target,
            cascade=target is not None and rng.random() < 0.5,
        )

    def default(self, f: LensField) -> Any:
        if f.type.base == "relation":  # not an instance: defaults do not cascade here
            value: Any = _stray_hash(self.rng)
            return [value] if f.type.is_array else value
        return self.value(f)

    def base_migration(self, schema: _Schema) -> SchemaMigration:
        taken: set[str] = set()
        changes = [self.new_field(schema, taken) for _ in range(3)]
        if schema.index > 0:
            parent = self.schemas[schema.index - 1].sid
            changes.append(FieldChange("parent", "create", "relation", schema=parent, cascade=True))
        return SchemaMigration(tuple(changes))

    def schema_step(self, schema: _Schema) -> None:
        k, rng = self.knobs, self.rng
        if self.chance(k.meta_update):
            self.claims["meta_update"] += 1
            message: SchemaMessage = SchemaMeta(
                f"s{schema.index}", description=f"version {len(schema.messages) + 1}"
            )
        elif self.chance(k.revert):
            message = self.revert(schema)
        elif self.chance(k.invalid_migration):
            self.claims["invalid_migration"] += 1
            # first, so that it is judged against the previous lens, whatever the others change
            message = SchemaMigration(
                (self.invalid_change(schema), *self.valid_changes(schema, rng.randint(0, 1)))
            )
        else:
            message = SchemaMigration(tuple(self.valid_changes(schema, rng.randint(1, 3))))
        self.schema_message(schema, message)

    def revert(self, schema: _Schema) -> SchemaRevert:
        seq = len(schema.messages) + 1
        abandoned = sorted(schema.versions.abandoned)
        if self.chance(self.knobs.ignored_revert):
            self.claims["ignored_revert"] += 1
            return SchemaRevert(self.rng.choice(abandoned) if abandoned else seq)
        self.claims["revert"] += 1
        return SchemaRevert(self.rng.choice([v for v in schema.usable() if v >= 2]))

    def valid_changes(self, schema: _Schema, count: int) -> list[FieldChange]:
        """Up to ``count`` valid changes, each on a different field."""
        lens = schema.versions.lens(len(schema.messages))
        visible = [f for f in lens if f.name != "parent"]
        hidden = list(schema.versions[len(schema.messages)].hidden)
        taken = {f.name for f in (*lens, *hidden)}  # names a create of a name a rename left avoids
        self.rng.shuffle(visible)
        changes: list[FieldChange] = []
        for _ in range(count):
            roll = self.rng.random()
            if roll < 0.25 and visible:
                changes.append(self.field_update(visible.pop()))
            elif roll < 0.4 and "parent" in lens and "parent" not in {c.name for c in changes} and (
                    not visible or self.rng.random() < 0.2):
                changes.append(FieldChange("parent", "remove"))  # cascades decided before it stay decided
            elif roll < 0.4 and visible:
                changes.append(FieldChange(visible.pop().name, "remove"))
            elif roll < 0.5 and hidden:
                old = hidden.pop()
                self.claims["recreate"] += 1
                changes.append(
                    FieldChange(old.name, "create", str(old.type), schema=old.schema, cascade=old.cascade)
                )
            elif roll < 0.65 and visible:
                changes.extend(self.rename(schema, visible.pop(), taken))
            elif roll < 0.7 and (left := sorted({r.name for r in schema.versions.field_history
                                                  if r.action == "rename"} - taken)):
                self.claims["create_after_rename"] += 1
                name = self.rng.choice(left)
                taken.add(name)
                changes.append(FieldChange(name, "create", self.rng.choice(_BASES[:6])))
            else:
                changes.append(self.new_field(schema, taken))
        return changes

    def rename(self, schema: _Schema, f: LensField, taken: set[str]) -> list[FieldChange]:
        """A rename of ``f``: back to a name it had, when it had one no other field had, else to a
        new name; maybe followed by an update of the renamed field (valid in one migration)."""
        had = schema.versions.names_had
        back = sorted(name for name, keys in had.items() if keys == {f.key} and name != f.name and name not in taken)
        if back and self.rng.random() < 0.5:
            self.claims["rename_back"] += 1
            to = self.rng.choice(back)
        else:
            self.claims["rename"] += 1
            to = self.field_name(schema, "renamed", taken)
        taken.add(to)
        changes = [FieldChange(f.name, "rename", to=to)]
        if self.rng.random() < 0.3:
            changes.append(self.field_update(replace(f, name=to)))
        return changes

    def field_update(self, f: LensField) -> FieldChange:
        """An update of ``f``: a type conversion, a new, kept or removed validation on a text type,
        or only a new default; always a default. An update keeps what it does not name, so a
        validated field that becomes a non-text type says ``validation: ""``."""
        rng = self.rng
        if f.type.is_array:
            new_type = rng.choice((f.type.element, f.type))
        elif rng.random() < 0.2:
            new_type = f.type  # only the default changes
        else:
            new_type = parse_type(rng.choice(_CONVERSIONS[f.type.base]))
        validation: str | None = None  # keep
        if new_type.is_text:
            validation = rng.choice((*_PATTERNS, None, None, ""))
        elif f.validation is not None:
            validation = ""
        kept = f.validation if validation is None else validation or None
        draft = LensField(f.name, new_type, kept, schema=f.schema)
        type_text = None if new_type == f.type and rng.random() < 0.5 else str(new_type)
        return FieldChange(f.name, "update", type_text, validation, self.default(draft), True)

    def invalid_change(self, schema: _Schema) -> FieldChange:
        """A change that makes its migration invalid, of a random kind of reason."""
        version = schema.versions[len(schema.messages)]
        fresh = f"never_{len(schema.messages)}"
        options: list[FieldChange] = [
            FieldChange(fresh, "create", "number"),  # bad_type
            FieldChange(fresh, "create", "integer", validation="^1$"),  # validation_not_allowed
            FieldChange(fresh, "create", "text", validation="(a)\\1"),  # bad_validation
            FieldChange(fresh, "create", "integer", default="x", has_default=True),  # bad_default
            FieldChange(fresh, "remove"),  # no_such_field
            FieldChange(fresh, "create", "relation"),  # missing_schema
        ]
        if len(version.lens):
            visible = self.rng.choice(version.lens.fields)
            options.append(FieldChange(visible.name, "create", "integer"))  # field_exists
            options.append(FieldChange(visible.name, "update", "text"))  # missing_default
        for old in version.hidden:
            other = "blob" if old.type != FieldType("blob") else "integer"
            options.append(FieldChange(old.name, "create", other))  # type_changed_on_recreate
            options.append(FieldChange(old.name, "rename", to=fresh))  # field_removed
        options.append(FieldChange(fresh, "rename", to=f"{fresh}_b"))  # no_such_field
        for f in version.lens:
            others = [g.name for g in (*version.lens, *version.hidden) if g.key != f.key]
            others += sorted(name for name, keys in schema.versions.names_had.items() if keys - {f.key})
            if others:  # name_taken: a visible, hidden or earlier name of another field
                options.append(FieldChange(f.name, "rename", to=self.rng.choice(others)))
        return self.rng.choice(options)

    # -- instance messages -------------------------------------------------------------------------

    def instance_message(self) -> None:
        k, rng = self.knobs, self.rng
        author = rng.randrange(k.authors)
        schema = rng.choice(self.schemas)
        own = self.live[(author, schema.index)]
        if self.chance(k.unauthorised) and self.unauthorised(author, schema):
            return
        if own and self.chance(k.delete):
            self.delete(author, schema, own.pop(rng.randrange(len(own))))
            return
        if own and self.chance(k.update) and self.update(author, schema, rng.choice(own)):
            return
        if self.chance(k.abandoned_write) and schema.versions.abandoned:
            self.abandoned_write(author, schema)
            return
        if self.chance(k.stray) and self.stray(author, schema):
            return
        self.create(author, schema)

    def pick(self, pool: Sequence[_Instance], ok: Callable[[_Instance], bool]) -> _Instance | None:
        """A random instance of ``pool`` that is ``ok``, found in a few tries, else None."""
        for _ in range(8):
            if not pool:
                return None
            candidate = self.rng.choice(pool)
            if ok(candidate):
                return candidate
        return None

    def log_of(self, author: int, schema: _Schema) -> _Log:
        log = self.instance_logs.get((author, schema.index))
        if log is None:
            log = self.instance_logs[(author, schema.index)] = self.new_log(author)
        return log

    def write(self, author: int, schema: _Schema, message: Message) -> bytes:
        return self.append(self.log_of(author, schema), encode_message(message))

    def versioned(self, schema: _Schema, version: int) -> VersionedSchema:
        return VersionedSchema(schema.sid.author, schema.sid.log_id, version)

    def pick_version(self, schema: _Schema) -> int:
        if self.chance(self.knobs.future_version):
            self.claims["future_version"] += 1
            return len(schema.messages) + self.rng.randint(1, 3)
        usable = schema.usable()
        if self.chance(self.knobs.old_version) and len(usable) > 1:
            self.claims["old_version"] += 1
            return self.rng.choice(usable[:-1])
        return usable[-1]

    @staticmethod
    def lens_at(schema: _Schema, version: int) -> Lens:
        """lens(version), or the latest lens for a future version (the author writes for what it knows)."""
        return schema.versions.lens(min(version, len(schema.messages)))

    def values_for(self, schema: _Schema, version: int, *, some: bool = False) -> dict[str, Any]:
        """Values for the fields of lens(version): each field or, with ``some``, one or two of them."""
        lens = list(self.lens_at(schema, version))
        if some:
            chosen = self.rng.sample(lens, min(len(lens), self.rng.randint(1, 2)))
        else:
            chosen = [f for f in lens if self.rng.random() < 0.8]
        values = {f.name: None if self.rng.random() < 0.05 else self.value(f) for f in chosen}
        if "parent" in values:
            values["parent"] = self.instance_of(schema.index - 1)
        return values

    def instance_of(self, schema: int | None) -> bytes:
        """The id of a live instance of ``schema`` (any author), else a hash that is no instance."""
        found = self.pick(self.instances[schema], lambda i: i.alive) if schema is not None else None
        return found.id if found is not None else _stray_hash(self.rng)

    def spoil(self, schema: _Schema, version: int, values: dict[str, Any]) -> bool:
        """Make one value of ``values`` unfit for lens(version), maybe (the bad_value knob)."""
        if not self.chance(self.knobs.bad_value):
            return False
        name, value = self.bad_value(list(self.lens_at(schema, version)))
        values[name] = value
        self.claims["bad_value"] += 1
        return True

    def create(self, author: int, schema: _Schema) -> None:
        version = self.pick_version(schema)
        values = self.values_for(schema, version)
        bad = self.spoil(schema, version, values)
        instance_id = self.write(author, schema, Create(self.versioned(schema, version), values))
        instance = _Instance(instance_id, author, alive=not bad)
        self.instances[schema.index].append(instance)
        if not bad:
            self.live[(author, schema.index)].append(instance)
            self.set_parent(instance, values.get("parent"))

    def abandoned_write(self, author: int, schema: _Schema) -> None:
        version = self.rng.choice(sorted(schema.versions.abandoned))
        message = Create(self.versioned(schema, version), self.values_for(schema, version))
        self.instances[schema.index].append(
            _Instance(self.write(author, schema, message), author, alive=False)
        )
        self.claims["abandoned_write"] += 1

    def update(self, author: int, schema: _Schema, instance: _Instance) -> bool:
        version = self.pick_version(schema)
        values = self.values_for(schema, version, some=True)
        if not values:
            return False
        bad = self.spoil(schema, version, values)
        self.write(author, schema, Update(self.versioned(schema, version), instance.id, values))
        if not bad and "parent" in values:
            self.set_parent(instance, values["parent"])
        return True

    def set_parent(self, instance: _Instance, parent: bytes | None) -> None:
        if instance.parent is not None:
            self.children[instance.parent].discard(instance.id)
        instance.parent = parent
        if parent is not None:
            self.children[parent].add(instance.id)

    def delete(self, author: int, schema: _Schema, instance: _Instance) -> None:
        named = self.versioned(schema, self.pick_version(schema)) if self.rng.random() < 0.7 else None
        self.write(author, schema, Delete(instance.id, named))
        if self.children[instance.id]:
            self.claims["cascade_delete"] += 1
        instance.alive = False
        self.set_parent(instance, None)

    def unauthorised(self, author: int, schema: _Schema) -> bool:
        """Update or delete another author's instance, from a log that already has its purpose."""
        victim = self.pick(self.instances[schema.index], lambda i: i.author != author)
        if victim is None or (author, schema.index) not in self.instance_logs:
            return False
        version = self.pick_version(schema)
        values = self.values_for(schema, version, some=True)
        if values:
            self.write(author, schema, Update(self.versioned(schema, version), victim.id, values))
        else:
            self.write(author, schema, Delete(victim.id, self.versioned(schema, version)))
        self.claims["unauthorised"] += 1
        return True

    def stray(self, author: int, schema: _Schema) -> bool:
        """Write a message that fits no log (notes 4, 5 and 9), of a random kind."""
        kind = self.rng.choice(("not_cbor", "wrong_log", "no_log_purpose", "not_a_schema"))
        own = self.instance_logs.get((author, schema.index))
        if kind == "not_cbor" and own is not None:
            self.append(own, b"\xff\x00")
        elif kind == "wrong_log" and own is not None:
            self.append(own, encode_message(SchemaMigration((FieldChange("stray", "create", "text"),))))
        elif kind == "no_log_purpose":
            self.append(
                self.new_log(author),
                encode_message(Update(self.versioned(schema, 1), _stray_hash(self.rng), {"x": 1})),
            )
        elif kind == "not_a_schema" and own is not None:
            named = VersionedSchema(bytes(own.key.verify_key), own.log_id, 1)
            self.append(self.new_log(author), encode_message(Create(named, {})))
        else:
            return False
        self.claims[kind] += 1
        return True
