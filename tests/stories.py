"""Histories built by hand: signed logs written entry by entry, and one story per semantic rule.

:class:`Log` writes the entries of one log as landing lines, so that a test shows exactly what
arrives. Each story of :data:`STORIES` is one rule of SEMANTICS.md sections 3-5 that a user can
see in gold (nulls, two-ends lenses, cascades by written version, validation-keeping updates,
conversions to varchar, deletes that never wait, pending per instance, ignored instances, renames). Its
lines arrive in two batches, the second being the one that tests the rule across runs. The unit
tests assert what the reference model makes of each story (``tests/unit/test_reference.py``);
the Spark tests run all of them through the pipelines, on every engine, and compare every table
with the reference (``tests/spark/test_stories.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nacl.signing import SigningKey

from lakehouse.core.entries import lipmaa, sign_entry, skiplink_required, yasmf_hash
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
from lakehouse.core.reference import Reference

ALICE, BOB, CAROL = SigningKey(b"\x01" * 32), SigningKey(b"\x02" * 32), SigningKey(b"\x03" * 32)
APPLIED = ("applied", None, None)
OTHER_HASH = yasmf_hash(b"nothing")
Line = dict[str, str]


# --------------------------------------------------------------------------------------------------
# Building histories by hand


@dataclass
class Log:
    """One log being written in a test: every entry's line and hash, in seq order."""

    key: SigningKey
    log_id: int
    hashes: list[bytes] = field(default_factory=list)

    @property
    def author(self) -> str:
        return bytes(self.key.verify_key).hex()

    @property
    def sid(self) -> SchemaId:
        return SchemaId(bytes(self.key.verify_key), self.log_id)

    def at(self, version: int) -> VersionedSchema:
        """This log, as a schema, at ``version``."""
        return VersionedSchema(bytes(self.key.verify_key), self.log_id, version)

    def add(self, message: Message | bytes, *, end_of_feed: bool = False) -> Line:
        """Sign ``message`` (or raw payload bytes) as the next entry; its line."""
        line = self.entry(len(self.hashes) + 1, message, end_of_feed=end_of_feed)
        self.hashes.append(yasmf_hash(bytes.fromhex(line["entry"])))
        return line

    def entry(
        self,
        seq: int,
        message: Message | bytes,
        *,
        backlink: bytes | None = None,
        skiplink: bytes | None = None,
        end_of_feed: bool = False,
    ) -> Line:
        """The line of an entry at ``seq`` whose links point into this log unless given; not added."""
        if seq > 1 and backlink is None:
            backlink = self.hashes[seq - 2]
        if skiplink_required(seq) and skiplink is None:
            skiplink = self.hashes[lipmaa(seq) - 1]
        payload = message if isinstance(message, bytes) else encode_message(message)
        data = sign_entry(
            self.key,
            log_id=self.log_id,
            seq_num=seq,
            payload=payload,
            backlink=backlink,
            skiplink=skiplink,
            end_of_feed=end_of_feed,
        )
        return {"entry": data.hex(), "payload": payload.hex()}


def hash_of(line: Line) -> str:
    """The entry hash (hex) of a line."""
    return yasmf_hash(bytes.fromhex(line["entry"])).hex()


def hash_of_bytes(line: Line) -> bytes:
    """The entry hash of a line."""
    return yasmf_hash(bytes.fromhex(line["entry"]))


def status(ref: Reference, line: Line) -> tuple[str, str | None, str | None]:
    """(status, reason_code, waits_for) of a line's entry."""
    row = ref.message(hash_of(line))
    return row.status, row.reason_code, row.waits_for


def log_row(ref: Reference, log: Log) -> Any:
    """The ``silver.logs`` row of a log."""
    return next(r for r in ref.logs if (r.author, r.log_id) == (log.author, log.log_id))


def text(name: str, **kwargs: Any) -> FieldChange:
    """A create of a field (``type`` text unless given); ``default`` given means it has one."""
    if "default" in kwargs:
        kwargs["has_default"] = True
    return FieldChange(name, "create", kwargs.pop("type", "text"), **kwargs)


def update(name: str, default: Any, **kwargs: Any) -> FieldChange:
    """An update of a field with its (required) default."""
    return FieldChange(name, "update", kwargs.pop("type", None), default=default, has_default=True, **kwargs)


def migration(*changes: FieldChange) -> SchemaMigration:
    return SchemaMigration(changes)


# --------------------------------------------------------------------------------------------------
# Stories: one rule each, in two arrival batches


@dataclass
class Story:
    """A hand-built history: its lines in two arrival batches, the gold names of its schemas, and
    the lines a test looks at, by name."""

    batches: tuple[list[Line], list[Line]]
    names: dict[SchemaId, str]
    lines: dict[str, Line] = field(default_factory=dict)

    @property
    def all_lines(self) -> list[Line]:
        return [*self.batches[0], *self.batches[1]]


def nulls(base: int) -> Story:
    """A null stays null whatever the field's default; a field added later shows its default.

    tasks v2: ``priority integer`` (default 3), ``title text``; v3 adds ``label`` (default "none").
    A: created {priority: 5}, then updated {priority: null}; B: created {priority: null}; C:
    created without priority.
    """
    tasks, bob = Log(ALICE, base), Log(BOB, base)
    a = bob.add(Create(tasks.at(2), {"priority": 5}))
    first = [tasks.add(SchemaMeta("tasks")),
             tasks.add(migration(text("priority", type="integer", default=3), text("title"))), a]
    second = [bob.add(Update(tasks.at(2), hash_of_bytes(a), {"priority": None})),
              bob.add(Create(tasks.at(2), {"priority": None})), bob.add(Create(tasks.at(2), {"title": "t"})),
              tasks.add(migration(text("label", default="none")))]
    return Story((first, second), {tasks.sid: f"tasks{base}"},
                 {"a": a, "b": second[1], "c": second[2]})


def cascades_by_written_version(base: int) -> Story:
    """Whether a relation value cascades is decided by the lens it was written under.

    posts v2 ``title``; comments v2 ``post`` (relation to posts, cascade); tags v2 ``post``
    (relation to posts, no cascade). Bob creates P; Carol comments C and tags T on it; Bob deletes
    P: C is removed, T stays. Then comments v3 removes ``post`` (C stays removed), and tags v3
    removes ``post`` and v4 creates it again with ``cascade: true`` (T stays).
    """
    posts, comments, tags = Log(ALICE, base), Log(ALICE, base + 1), Log(ALICE, base + 2)
    bob, carol_c, carol_t = Log(BOB, base), Log(CAROL, base), Log(CAROL, base + 1)
    p = bob.add(Create(posts.at(2), {"title": "hello"}))
    c = carol_c.add(Create(comments.at(2), {"post": hash_of_bytes(p)}))
    t = carol_t.add(Create(tags.at(2), {"post": hash_of_bytes(p)}))
    first = [
        posts.add(SchemaMeta("posts")), posts.add(migration(text("title"))),
        comments.add(SchemaMeta("comments")),
        comments.add(migration(text("post", type="relation", schema=posts.sid, cascade=True))),
        tags.add(SchemaMeta("tags")), tags.add(migration(text("post", type="relation", schema=posts.sid))),
        p, c, t, bob.add(Delete(hash_of_bytes(p), posts.at(2))),
    ]
    second = [
        comments.add(migration(FieldChange("post", "remove"), text("body"))),
        tags.add(migration(FieldChange("post", "remove"), text("name"))),
        tags.add(migration(text("post", type="relation", schema=posts.sid, cascade=True))),
    ]
    names = {posts.sid: f"posts{base}", comments.sid: f"comments{base}", tags.sid: f"tags{base}"}
    return Story((first, second), names, {"p": p, "c": c, "t": t})


def conversions(base: int) -> Story:
    """The two ends are compared, so a detour loses nothing; integer converts to varchar.

    v2 ``count text``, ``code integer``; v3 updates count to integer (default -1) and code to
    varchar (default "?"); v4 updates count back to text (default "unknown"). Created at v2:
    {count: "n/a", code: 42} and {count: "7", code: 7}.
    """
    stock, bob = Log(ALICE, base), Log(BOB, base)
    one = bob.add(Create(stock.at(2), {"count": "n/a", "code": 42}))
    two = bob.add(Create(stock.at(2), {"count": "7", "code": 7}))
    first = [stock.add(SchemaMeta("stock")),
             stock.add(migration(text("count"), text("code", type="integer"))), one, two]
    second = [stock.add(migration(update("count", -1, type="integer"), update("code", "?", type="varchar"))),
              stock.add(migration(update("count", "unknown", type="text")))]
    return Story((first, second), {stock.sid: f"stock{base}"}, {"one": one, "two": two})


def validation_kept(base: int) -> Story:
    """An update changes only what it names: a new default keeps the validation; ``""`` removes it.

    v2 ``subject text`` with validation ``^[^\\n]*$``; v3 updates only its default
    ("<Subject>"); v4 removes the validation (``validation: ""``). Written: "two\\nlines" at v3
    (rejected), "one line" at v3, "two\\nlines" at v4 (applied; shown at v2 and v3 as the default).
    """
    mails, bob = Log(ALICE, base), Log(BOB, base)
    first = [mails.add(SchemaMeta("mails")),
             mails.add(migration(text("subject", validation="^[^\\n]*$"))),
             mails.add(migration(update("subject", "<Subject>")))]
    rejected = bob.add(Create(mails.at(3), {"subject": "two\nlines"}))
    kept = bob.add(Create(mails.at(3), {"subject": "one line"}))
    first += [rejected, kept]
    later = bob.add(Create(mails.at(4), {"subject": "two\nlines"}))
    second = [mails.add(migration(update("subject", "<Subject>", validation=""))), later]
    return Story((first, second), {mails.sid: f"mails{base}"},
                 {"rejected": rejected, "kept": kept, "later": later})


def deletes_never_wait(base: int) -> Story:
    """A delete is applied whatever version it names; a version past a fork or an end of feed is
    rejected, never pending.

    notes: meta, v2 ``x``; later a fork at seq 3. ended: meta, v2 ``y`` with end of feed. Bob
    creates X {x: "secret"} and deletes it naming v3; creates at v3 and updates at v4 of notes,
    and a create at v3 of ended, wait in the first batch and are rejected once the fork is seen.
    Carol's instance log ends with her create of Z at ended v2; her update of Z, in the second
    batch, comes after that end and is rejected (a run that judges only what a log grew by knows
    its accepted prefix ends it).
    """
    notes, ended, bob, bob_ended = Log(ALICE, base), Log(ALICE, base + 1), Log(BOB, base), Log(BOB, base + 1)
    carol = Log(CAROL, base)
    x = bob.add(Create(notes.at(2), {"x": "secret"}))
    y = bob.add(Create(notes.at(2), {"x": "kept"}))
    z = carol.add(Create(ended.at(2), {"y": "last"}), end_of_feed=True)
    first = [notes.add(SchemaMeta("notes")), notes.add(migration(text("x"))),
             ended.add(SchemaMeta("ended")), ended.add(migration(text("y")), end_of_feed=True),
             x, bob.add(Delete(hash_of_bytes(x), notes.at(3))),
             y, bob.add(Create(notes.at(3), {"x": "never"})),
             bob.add(Update(notes.at(4), hash_of_bytes(y), {"x": "never"})),
             bob_ended.add(Create(ended.at(3), {"y": "never"})), z]
    second = [notes.entry(3, migration(text("left"))), notes.entry(3, migration(text("right"))),
              carol.add(Update(ended.at(2), hash_of_bytes(z), {"y": "after"}))]
    lines = {"x": x, "delete": first[5], "y": y, "create_v3": first[7], "update_v4": first[8],
             "after_end": first[9], "z": z, "after_log_end": second[2]}
    return Story((first, second), {notes.sid: f"notes{base}", ended.sid: f"ended{base}"}, lines)


def pending_per_instance(base: int) -> Story:
    """A pending message holds back only its own instance.

    A schema at v2 (v3 arrives in the second batch). Bob: A at v2, B at v3 (waits), an update of
    A (applied), an update and a delete of B (wait behind B), C at v9 (waits for good), D at v2.
    """
    things, bob = Log(ALICE, base), Log(BOB, base)
    meta, v2, v3 = things.add(SchemaMeta("things")), things.add(migration(text("f2"))), things.add(
        migration(text("f3")))
    a = bob.add(Create(things.at(2), {"f2": "a"}))
    b = bob.add(Create(things.at(3), {"f3": "b"}))
    lines = {
        "a": a, "b": b,
        "update_a": bob.add(Update(things.at(2), hash_of_bytes(a), {"f2": "a2"})),
        "update_b": bob.add(Update(things.at(2), hash_of_bytes(b), {"f2": "b2"})),
        "c": bob.add(Create(things.at(9), {"f2": "c"})),
        "delete_b": bob.add(Delete(hash_of_bytes(b))),
        "d": bob.add(Create(things.at(2), {"f2": "d"})),
    }
    return Story(([meta, v2, *lines.values()], [v3]), {things.sid: f"things{base}"}, lines)


def ignored_instances(base: int) -> Story:
    """An update of an ignored create is ``ignored_instance``; a delete of one cascades.

    notes: v2 ``title``, v3 removes it and creates ``count`` (abandoned), v4 reverts to v2. files
    v2: ``note`` (relation to notes, cascade). Bob creates K at v2 and I at v3 (ignored), updates
    I (rejected); Carol's F points at I, G at K. In the second batch Bob deletes I: F goes.
    """
    notes, files, bob, carol = Log(ALICE, base), Log(ALICE, base + 1), Log(BOB, base), Log(CAROL, base)
    k = bob.add(Create(notes.at(2), {"title": "kept"}))
    i = bob.add(Create(notes.at(3), {"count": 1}))
    first = [
        notes.add(SchemaMeta("notes")), notes.add(migration(text("title"))),
        notes.add(migration(FieldChange("title", "remove"), text("count", type="integer"))),
        notes.add(SchemaRevert(2)),
        files.add(SchemaMeta("files")),
        files.add(migration(text("note", type="relation", schema=notes.sid, cascade=True))),
        k, i, bob.add(Update(notes.at(2), hash_of_bytes(i), {"title": "x"})),
        carol.add(Create(files.at(2), {"note": hash_of_bytes(i)})),
        carol.add(Create(files.at(2), {"note": hash_of_bytes(k)})),
    ]
    second = [bob.add(Delete(hash_of_bytes(i), notes.at(2)))]
    lines = {"k": k, "i": i, "update_i": first[8], "f": first[9], "g": first[10], "delete_i": second[0]}
    return Story((first, second), {notes.sid: f"inotes{base}", files.sid: f"files{base}"}, lines)


def renames(base: int) -> Story:
    """A rename keeps the field: its values, and its cascades; a create of the name it left is a
    new field.

    posts v2 ``title``. notes v2: ``post`` (relation to posts, cascade), ``count`` (text). Carol
    creates N1 {post: P, count: "3"} and N2 {post: Q, count: "many"}. In the second batch notes v3
    renames ``post`` to ``parent_post`` and ``count`` to ``total``, updates ``total`` to integer
    (default -1) and creates a new ``post`` (text); Carol updates N2 at v3 {total: 7, post: "a
    note"} and creates N3 {parent_post: P, total: 1}; v4 renames ``total`` back to ``count``; Bob
    deletes P: N1 and N3 go (their values cascade, written under either name).
    """
    posts, notes, bob, carol = Log(ALICE, base), Log(ALICE, base + 1), Log(BOB, base), Log(CAROL, base)
    p, q = bob.add(Create(posts.at(2), {"title": "p"})), bob.add(Create(posts.at(2), {"title": "q"}))
    n1 = carol.add(Create(notes.at(2), {"post": hash_of_bytes(p), "count": "3"}))
    n2 = carol.add(Create(notes.at(2), {"post": hash_of_bytes(q), "count": "many"}))
    first = [
        posts.add(SchemaMeta("posts")), posts.add(migration(text("title"))),
        notes.add(SchemaMeta("notes")),
        notes.add(migration(text("post", type="relation", schema=posts.sid, cascade=True), text("count"))),
        p, q, n1, n2,
    ]
    second = [
        notes.add(migration(FieldChange("post", "rename", to="parent_post"), FieldChange("count", "rename", to="total"),
                            update("total", -1, type="integer"), text("post"))),
        carol.add(Update(notes.at(3), hash_of_bytes(n2), {"total": 7, "post": "a note"})),
        carol.add(Create(notes.at(3), {"parent_post": hash_of_bytes(p), "total": 1})),
        notes.add(migration(FieldChange("total", "rename", to="count"))),
        bob.add(Delete(hash_of_bytes(p), posts.at(2))),
    ]
    lines = {"p": p, "q": q, "n1": n1, "n2": n2, "n3": second[2]}
    return Story((first, second), {posts.sid: f"rposts{base}", notes.sid: f"rnotes{base}"}, lines)


STORIES: dict[str, Callable[[int], Story]] = {
    "nulls": nulls,
    "cascades_by_written_version": cascades_by_written_version,
    "conversions": conversions,
    "validation_kept": validation_kept,
    "deletes_never_wait": deletes_never_wait,
    "pending_per_instance": pending_per_instance,
    "ignored_instances": ignored_instances,
    "renames": renames,
}
"""Every story, by name; each takes the first log id its logs use (stories sharing a lake use
distinct ones)."""
