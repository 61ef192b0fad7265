"""The publisher: log tips, schema and instance checks, atomic landing, recovery (lakehouse.publish)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from lakehouse.core.entries import lipmaa
from lakehouse.core.messages import (
    Create,
    Delete,
    FieldChange,
    SchemaId,
    SchemaMeta,
    SchemaMigration,
    SchemaRevert,
    Update,
    VersionedSchema,
)
from lakehouse.errors import LensFileError, PublishError
from lakehouse.publish.keys import KeyStore
from lakehouse.publish.lensfiles import load_lens_file
from lakehouse.publish.publisher import Publisher
from tests.publishing import assert_logs_accepted, landing_files, read_landing

LENSES = Path(__file__).resolve().parents[2] / "lenses"
WHEN = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
NOTE = SchemaMigration((
    FieldChange("title", "create", type="varchar"),
    FieldChange("stars", "create", type="integer"),
    FieldChange("tags", "create", type="text[]", validation="^[a-z]+$"),
))


@pytest.fixture
def store(tmp_path: Path) -> KeyStore:
    keys = KeyStore(tmp_path / "keys")
    keys.create("sloth")
    keys.create("panda")
    return keys


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    return tmp_path / "landing"


def snapshot(store: KeyStore, landing: Path) -> dict[str, bytes]:
    """Every file of the key store and the landing folder (locks aside), with its bytes."""
    out: dict[str, bytes] = {}
    for folder in (store.folder, landing):
        if folder.is_dir():
            out.update({str(p): p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix != ".lock"})
    return out


@pytest.fixture
def note(store: KeyStore, landing: Path) -> str:
    """Sloth's schema ``note`` (title varchar, stars integer, tags text[]), landed; returns its id."""
    with Publisher(store, "sloth", landing) as pub:
        schema = pub.schema_init(SchemaMeta(name="note"))
        assert pub.schema_message("note", NOTE) == 2
    return str(schema)


@pytest.fixture
def unchanged(store: KeyStore, landing: Path) -> Iterator[Callable[[], None]]:
    """Call the yielded function to assert nothing changed on disk since the test began."""
    before: dict[str, bytes] = {}

    def check() -> None:
        assert snapshot(store, landing) == before

    def start() -> Callable[[], None]:
        before.update(snapshot(store, landing))
        return check

    yield start  # type: ignore[misc]


# -- log tips ----------------------------------------------------------------------------------
def test_log_tips_stay_right_across_many_publishes_and_publishers(store: KeyStore, landing: Path,
                                                                   note: str) -> None:
    """55+ entries on one instance log, written by many Publisher instances and flushes."""
    created: list[str] = []
    for batch in range(6):
        with Publisher(store, "sloth", landing) as pub:  # state reloaded from disk each time
            for i in range(6):
                created.append(pub.create("note", {"title": f"n{batch}.{i}", "stars": i}))
            pub.flush()  # several flushes in one publisher continue the same tips
            pub.update("note", created[batch], {"stars": 99, "tags": ["x", "y"]})
            pub.update("note", created[-1], {"title": "changed"})
    with Publisher(store, "sloth", landing) as pub:
        for instance in created[:10]:
            pub.delete("note", instance)
    logs = assert_logs_accepted(landing)
    sloth = store.get("sloth").author
    assert sorted(logs) == [(sloth, 0), (sloth, 1)]
    instance_log = logs[(sloth, 1)]
    assert len(instance_log) == 36 + 12 + 10
    # long enough that skiplinks point far back, not only to the previous entry
    assert any(lipmaa(item.entry.seq_num) < item.entry.seq_num - 1 for item in instance_log)
    assert lipmaa(40) == 13 and instance_log[39].entry.skiplink == instance_log[12].entry.hash
    creates = [i for i in instance_log if isinstance(i.message, Create)]
    assert [i.entry.hash_hex for i in creates] == created
    sid = SchemaId.parse(note)
    assert all(i.message.schema == VersionedSchema(sid.author, sid.log_id, 2) for i in creates)  # type: ignore[union-attr]
    updates = [i.message for i in instance_log if isinstance(i.message, Update)]
    assert all(u.instance.hex() in created for u in updates)
    deletes = [i.message for i in instance_log if isinstance(i.message, Delete)]
    assert [d.instance.hex() for d in deletes] == created[:10]
    # the state kept on disk is exactly the landed log
    state = json.loads((store.folder / "sloth.state.json").read_text())
    assert state["logs"]["1"]["hashes"] == [i.entry.hash_hex for i in instance_log]
    assert state["logs"]["0"]["hashes"] == [i.entry.hash_hex for i in logs[(sloth, 0)]]


def test_long_schema_log_with_reverts_is_accepted(store: KeyStore, landing: Path) -> None:
    with Publisher(store, "sloth", landing) as pub:
        pub.schema_init(SchemaMeta(name="wide"))
    for i in range(24):
        with Publisher(store, "sloth", landing) as pub:
            version = pub.schema_message("wide", SchemaMigration((FieldChange(f"f{i}", "create", type="integer"),)))
            assert version == i + 2
    with Publisher(store, "sloth", landing) as pub:
        assert pub.schema_message("wide", SchemaRevert(20)) == 26
        assert pub.schema_message("wide", SchemaMeta(name="wide", description="after the revert")) == 27
        types = pub.field_types("wide")
        assert types is not None and list(types) == [f"f{i}" for i in range(19)]  # the lens of version 20
        instance = pub.create("wide", {"f0": 1, "f18": 2})
    logs = assert_logs_accepted(landing)
    assert [len(log) for log in logs.values()] == [27, 1]
    assert isinstance(logs[(store.get("sloth").author, 1)][0].message, Create)
    assert logs[(store.get("sloth").author, 1)][0].entry.hash_hex == instance


def test_two_keys_keep_separate_logs(store: KeyStore, landing: Path, note: str) -> None:
    with Publisher(store, "panda", landing) as pub:
        a = pub.create(note, {"title": "from panda"})
        b = pub.create("note", {"title": "by name"})  # sloth's schema, found by name in the store
        pub.update("note", a, {"stars": 1})
    with Publisher(store, "sloth", landing) as pub:
        pub.create("note", {"title": "from sloth"})
    logs = assert_logs_accepted(landing)
    panda = store.get("panda").author
    assert [i.entry.hash_hex for i in logs[(panda, 0)]][:2] == [a, b]  # panda's first log is log 0
    assert len(logs) == 3  # sloth's schema and instance logs, panda's instance log


# -- schema messages refused -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("message", "code"),
    [
        (SchemaMigration((FieldChange("title", "create", type="text"),)), "field_exists"),
        (SchemaMigration((FieldChange("nope", "update", default=None, has_default=True),)), "no_such_field"),
        (SchemaMigration((FieldChange("nope", "remove"),)), "no_such_field"),
        (SchemaMigration((FieldChange("n", "create", type="integer", validation="^1$"),)), "validation_not_allowed"),
        (SchemaMigration((FieldChange("n", "create", type="text", validation="(?<=a)b"),)), "bad_validation"),
        (SchemaMigration((FieldChange("n", "create", type="varchar", default=5, has_default=True),)), "bad_default"),
        (SchemaMigration((FieldChange("n", "create", type="relation"),)), "missing_schema"),
        (SchemaMigration((FieldChange("ok", "create", type="text"),
                          FieldChange("title", "create", type="text"))), "field_exists"),
        (SchemaRevert(3), "bad_target"),
        (SchemaRevert(7), "bad_target"),
    ],
)
def test_invalid_schema_message_is_refused_and_nothing_lands(
    store: KeyStore, landing: Path, note: str, unchanged: Any, message: Any, code: str
) -> None:
    check = unchanged()
    with pytest.raises(PublishError) as info, Publisher(store, "sloth", landing) as pub:
        pub.schema_message("note", message)
    assert info.value.code == code
    assert "note version 3 would be" in str(info.value)
    check()
    # the refused message used no seq: the next one is version 3
    with Publisher(store, "sloth", landing) as pub:
        assert pub.schema_message("note", SchemaMigration((FieldChange("extra", "create", type="text"),))) == 3
    assert_logs_accepted(landing)


def test_message_the_encoder_refuses_is_a_publish_error(store: KeyStore, landing: Path, note: str,
                                                       unchanged: Any) -> None:
    check = unchanged()
    with pytest.raises(PublishError, match="target") as info, Publisher(store, "sloth", landing) as pub:
        pub.schema_message("note", SchemaRevert(0))
    assert info.value.code == "bad_value"
    with pytest.raises(PublishError) as info, Publisher(store, "sloth", landing) as pub:
        pub.schema_message("note", SchemaMeta(name=""))
    assert info.value.code == "bad_name"
    with pytest.raises(PublishError) as info, Publisher(store, "sloth", landing) as pub:
        pub.create("11" * 32 + ":4", {"x": object()}, version=1)  # no lens to check it against
    check()
    assert not [log for log in Publisher(store, "sloth", landing).state.logs.values() if log.purpose == "instance"]


def test_revert_to_an_abandoned_version_is_refused(store: KeyStore, landing: Path, note: str) -> None:
    with Publisher(store, "sloth", landing) as pub:
        assert pub.schema_message("note", SchemaMigration((FieldChange("a", "create", type="text"),))) == 3
        assert pub.schema_message("note", SchemaRevert(2)) == 4
        with pytest.raises(PublishError) as info:
            pub.schema_message("note", SchemaRevert(3))
        assert info.value.code == "target_abandoned"
        # creating at the abandoned version is refused too; at the current one it works
        with pytest.raises(PublishError) as info:
            pub.create("note", {"a": "x"}, version=3)
        assert info.value.code == "abandoned_version"
        with pytest.raises(PublishError) as info:
            pub.create("note", {"a": "x"})
        assert info.value.code == "unknown_field"
        with pytest.raises(PublishError) as info:
            pub.create("note", {}, version=9)
        assert info.value.code == "unknown_version"


def test_a_refusal_discards_the_whole_block(store: KeyStore, landing: Path, note: str, unchanged: Any) -> None:
    check = unchanged()
    with pytest.raises(PublishError), Publisher(store, "sloth", landing) as pub:
        pub.create("note", {"title": "fine"})
        pub.schema_message("note", SchemaMigration((FieldChange("x", "create", type="text"),)))
        pub.create("note", {"nope": 1})
    check()
    with Publisher(store, "sloth", landing) as pub:  # the discarded entries left no trace in the tips
        pub.create("note", {"title": "again"})
        assert pub.schema_message("note", SchemaMigration((FieldChange("x", "create", type="text"),))) == 3
    assert_logs_accepted(landing)


def test_schema_init_twice_and_schema_of_another_key(store: KeyStore, landing: Path, note: str,
                                                     unchanged: Any) -> None:
    check = unchanged()
    with Publisher(store, "sloth", landing) as pub, pytest.raises(PublishError) as info:
        pub.schema_init(SchemaMeta(name="note"))
    assert info.value.code == "schema_exists"
    with Publisher(store, "panda", landing) as pub, pytest.raises(PublishError) as info:
        pub.schema_message(note, SchemaRevert(1))
    assert info.value.code == "not_author"
    check()


def test_resolve_schema(store: KeyStore, landing: Path, note: str) -> None:
    with Publisher(store, "panda", landing) as pub:
        assert str(pub.resolve_schema("note")) == note
        assert str(pub.resolve_schema(note)) == note
        with pytest.raises(PublishError, match=r"unknown schema 'nope' \(known: note\)") as info:
            pub.resolve_schema("nope")
        assert info.value.code == "unknown_schema"
        with pytest.raises(PublishError) as info:
            pub.resolve_schema("zz:1")
        assert info.value.code == "bad_schema_id"
        pub.schema_init(SchemaMeta(name="note"))  # names are not unique across keys
        with pytest.raises(PublishError, match="several keys") as info:
            pub.resolve_schema("note")
        assert info.value.code == "ambiguous_schema"


# -- instance messages -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "code"),
    [
        ({"nope": 1}, "unknown_field"),
        ({"title": 5}, "wrong_type"),
        ({"stars": "5"}, "wrong_type"),
        ({"stars": True}, "wrong_type"),
        ({"title": "x" * 256}, "too_long"),
        ({"tags": ["ok", "Not OK"]}, "validation_failed"),
        ({"tags": "ok"}, "wrong_type"),
        ({"stars": 2**63}, "out_of_range"),
    ],
)
def test_create_and_update_check_the_lens(store: KeyStore, landing: Path, note: str, unchanged: Any,
                                          fields: dict[str, Any], code: str) -> None:
    with Publisher(store, "sloth", landing) as pub:
        instance = pub.create("note", {"title": "ok"})
    check = unchanged()
    with pytest.raises(PublishError) as info, Publisher(store, "sloth", landing) as pub:
        pub.create("note", fields)
    assert info.value.code == code
    with pytest.raises(PublishError) as info, Publisher(store, "sloth", landing) as pub:
        pub.update("note", instance, fields)
    assert info.value.code == code
    check()


def test_values_of_every_kind_round_trip(store: KeyStore, landing: Path) -> None:
    with Publisher(store, "sloth", landing) as pub:
        pub.schema_init(SchemaMeta(name="profile"))
        pub.schema_message("profile", load_lens_file(LENSES / "profile" / "001.yaml"))
        pub.schema_init(SchemaMeta(name="slothmail"))
        pub.schema_message("slothmail", load_lens_file(LENSES / "slothmail" / "001.yaml",
                                                       resolve_schema=pub.resolve_schema))
        ada = pub.create("profile", {"name": "Ada", "email": "ada@example.org"})
        mail = pub.create("slothmail", {"subject": "hi", "body": None, "recipient": bytes.fromhex(ada),
                                        "created": WHEN})
        pub.update("slothmail", mail, {"created": "2020-05-22T11:58:50+0000"})
    landed = read_landing(landing)
    create = next(i.message for i in landed if i.entry.hash_hex == mail)
    assert isinstance(create, Create)
    assert create.fields["recipient"] == bytes.fromhex(ada)
    assert create.fields["body"] is None
    assert_logs_accepted(landing)


def test_update_needs_fields(store: KeyStore, landing: Path, note: str) -> None:
    with Publisher(store, "sloth", landing) as pub:
        instance = pub.create("note", {})
        with pytest.raises(PublishError) as info:
            pub.update("note", instance, {})
        assert info.value.code == "no_fields"


def test_update_and_delete_of_an_unknown_instance(store: KeyStore, landing: Path, note: str,
                                                  unchanged: Any) -> None:
    with Publisher(store, "sloth", landing) as pub:
        mine = pub.create("note", {"title": "sloth's"})
    with Publisher(store, "sloth", landing) as pub:
        pub.schema_init(SchemaMeta(name="other"))
        pub.schema_message("other", SchemaMigration((FieldChange("title", "create", type="varchar"),)))
    check = unchanged()
    unknown = "0020" + "ab" * 32
    cases: list[tuple[str, str, str]] = [
        ("sloth", "note", unknown),   # no such instance
        ("sloth", "note", "not hex"),
        ("sloth", "other", mine),     # an instance of another schema
        ("panda", "note", mine),      # another key's instance
    ]
    for key, schema, instance in cases:
        for act in ("update", "delete"):
            with pytest.raises(PublishError) as info, Publisher(store, key, landing) as pub:
                if act == "update":
                    pub.update(schema, instance, {"title": "x"})
                else:
                    pub.delete(schema, instance)
            assert info.value.code == "unknown_instance", (key, schema, instance, act)
            assert instance.lower() in str(info.value)
    check()


def test_update_or_delete_after_delete_is_refused(store: KeyStore, landing: Path, note: str,
                                                  unchanged: Any) -> None:
    with Publisher(store, "sloth", landing) as pub:
        instance = pub.create("note", {"title": "a"})
        pub.delete("note", instance)
        with pytest.raises(PublishError) as info:
            pub.delete("note", instance)
        assert info.value.code == "deleted_instance"
    check = unchanged()
    with pytest.raises(PublishError) as info, Publisher(store, "sloth", landing) as pub:  # after a reload
        pub.update("note", instance, {"title": "b"})
    assert info.value.code == "deleted_instance"
    check()


def test_update_of_a_create_abandoned_by_a_revert_is_refused(store: KeyStore, landing: Path, note: str) -> None:
    with Publisher(store, "sloth", landing) as pub:
        kept = pub.create("note", {"title": "at v2"})
        assert pub.schema_message("note", SchemaMigration((FieldChange("extra", "create", type="text"),))) == 3
        dropped = pub.create("note", {"title": "at v3", "extra": "x"})
        assert pub.schema_message("note", SchemaRevert(2)) == 4
    with Publisher(store, "sloth", landing) as pub:
        pub.update("note", kept, {"title": "still here"})
        with pytest.raises(PublishError, match="abandoned") as info:
            pub.update("note", dropped, {"title": "gone"})
        assert info.value.code == "unknown_instance"
        pub.delete("note", dropped)  # a delete is never ignored: it counts the create as created
    assert_logs_accepted(landing)


def test_state_written_before_create_versions_were_recorded(store: KeyStore, landing: Path, note: str) -> None:
    with Publisher(store, "sloth", landing) as pub:
        instance = pub.create("note", {"title": "a"})
    path = store.folder / "sloth.state.json"
    state = json.loads(path.read_text())
    state["logs"]["1"]["instances"] = [instance]
    path.write_text(json.dumps(state))
    with Publisher(store, "sloth", landing) as pub:
        pub.update("note", instance, {"title": "b"})
    assert_logs_accepted(landing)


def test_instances_survive_a_reload(store: KeyStore, landing: Path, note: str) -> None:
    with Publisher(store, "sloth", landing) as pub:
        instance = pub.create("note", {"title": "a"})
    with Publisher(store, "sloth", landing) as pub:
        pub.update("note", instance.upper(), {"title": "b"})  # hex in either case
        pub.delete("note", instance)
    assert_logs_accepted(landing)


def test_foreign_schema_needs_a_version(store: KeyStore, landing: Path, unchanged: Any) -> None:
    foreign = "11" * 32 + ":4"
    check = unchanged()
    with pytest.raises(PublishError) as info, Publisher(store, "sloth", landing) as pub:
        pub.create(foreign, {"anything": 1})
    assert info.value.code == "unknown_lens"
    check()
    with Publisher(store, "sloth", landing) as pub:
        assert pub.field_types(foreign, 2) is None
        instance = pub.create(foreign, {"anything": 1}, version=2)
        pub.update(foreign, instance, {"anything": 2}, version=2)
    (item, update) = read_landing(landing)
    assert isinstance(item.message, Create) and item.message.schema == VersionedSchema(b"\x11" * 32, 4, 2)
    assert isinstance(update.message, Update)


@pytest.mark.parametrize("content", ["{not json", "[]", '{"logs": []}', '{"logs": {"0": {"hashes": []}}}',
                                     '{"logs": {"x": {"purpose": "schema", "hashes": []}}}'])
def test_damaged_state_is_a_clear_error(store: KeyStore, landing: Path, content: str) -> None:
    (store.folder / "sloth.state.json").write_text(content)
    with pytest.raises(PublishError, match="sloth.state.json") as info:
        Publisher(store, "sloth", landing)
    assert info.value.code == "bad_state"


def test_state_of_another_author_is_refused(store: KeyStore, landing: Path, note: str) -> None:
    """A state file copied or left beside another key would sign links into someone else's log."""
    (store.folder / "panda.state.json").write_bytes((store.folder / "sloth.state.json").read_bytes())
    (store.folder / "ghost.state.json").write_bytes((store.folder / "sloth.state.json").read_bytes())
    with pytest.raises(PublishError, match="author") as info:
        Publisher(store, "panda", landing)
    assert info.value.code == "bad_state"
    with pytest.raises(PublishError, match="author") as info:
        Publisher(store, "ghost", landing, create_key=True)  # a new key is a new author too
    legacy = json.loads((store.folder / "sloth.state.json").read_text())
    del legacy["author"]  # as written before the author was recorded
    (store.folder / "ghost.state.json").write_text(json.dumps(legacy))
    with pytest.raises(PublishError, match="does not") as info:
        Publisher(store, "ghost", landing, create_key=True)
    assert info.value.code == "bad_state"
    assert not store.has("ghost")
    (store.folder / "panda.state.json").unlink()
    (store.folder / "sloth.state.json").write_text(json.dumps(legacy))
    with Publisher(store, "sloth", landing) as pub:  # the key's own legacy state is fine
        pub.create("note", {})
    assert json.loads((store.folder / "sloth.state.json").read_text())["author"] == store.get("sloth").author


def test_two_publishers_of_one_key_never_fork_a_log(store: KeyStore, landing: Path, note: str) -> None:
    first = Publisher(store, "sloth", landing)
    second = Publisher(store, "sloth", landing)  # read the same log tips
    first.create("note", {"title": "first"})
    second.create("note", {"title": "second"})
    first.flush()
    files = landing_files(landing)
    with pytest.raises(PublishError, match="publish again") as info:
        second.flush()
    assert info.value.code == "concurrent_publish"
    assert landing_files(landing) == files and not list(landing.glob(".*"))
    with Publisher(store, "sloth", landing) as again:
        again.create("note", {"title": "second, again"})
    logs = assert_logs_accepted(landing)
    assert len(logs[(store.get("sloth").author, 1)]) == 2


def test_a_publisher_waits_for_the_keys_lock(store: KeyStore, landing: Path, note: str) -> None:
    """Reading the tips and recovering happen while no other publisher of the key is landing."""
    import fcntl
    import threading
    import time

    released = threading.Event()
    fd = os.open(store.folder / "sloth.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)

    def release() -> None:
        time.sleep(0.2)
        released.set()
        os.close(fd)

    thread = threading.Thread(target=release)
    thread.start()
    try:
        Publisher(store, "sloth", landing)
        assert released.is_set()
    finally:
        thread.join()


def test_missing_key(store: KeyStore, landing: Path) -> None:
    with pytest.raises(PublishError) as info:
        Publisher(store, "ghost", landing)
    assert info.value.code == "no_key"
    with pytest.raises(PublishError) as info:
        Publisher(store, "../ghost", landing, create_key=True)
    assert info.value.code == "bad_key_name"


def test_a_new_key_is_stored_only_when_its_publisher_lands(store: KeyStore, landing: Path, note: str,
                                                           unchanged: Any) -> None:
    check = unchanged()
    with pytest.raises(PublishError), Publisher(store, "ghost", landing, create_key=True) as pub:
        assert pub.key_created
        pub.create("note", {"title": "fine"})
        pub.create("note", {"nope": 1})
    check()  # no key, no state, nothing landed
    with Publisher(store, "ghost", landing, create_key=True) as pub:
        # the new key's own schemas resolve and have lenses before the key is stored
        schema = pub.schema_init(SchemaMeta(name="ghostly"))
        pub.schema_message("ghostly", SchemaMigration((FieldChange("to", "create", type="relation",
                                                                   schema=SchemaId.parse(note)),)))
        pub.schema_message("ghostly", load_lens_file(LENSES / "profile" / "001.yaml"))
        assert str(pub.resolve_schema("ghostly")) == str(schema)
        pub.create("ghostly", {"name": "Casper"})
        assert not store.has("ghost")
    assert store.get("ghost").public_key == pub.key.public_key
    logs = assert_logs_accepted(landing)
    assert sorted(len(items) for (author, _), items in logs.items() if author == pub.key.author) == [1, 3]
    with Publisher(store, "ghost", landing, create_key=True) as again:
        assert not again.key_created and again.key.public_key == pub.key.public_key


def test_nothing_published_lands_nothing(store: KeyStore, landing: Path) -> None:
    with Publisher(store, "sloth", landing) as pub:
        pass
    assert pub.last_landed is None
    assert not landing.exists() or not any(landing.iterdir())


# -- atomic landing and recovery ---------------------------------------------------------------
class Crash(Exception):
    """The process died here."""


def crash_on_replace(monkeypatch: pytest.MonkeyPatch, when: Callable[[str, str], bool]) -> None:
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if when(str(src), str(dst)):
            raise Crash(f"crashed before renaming {src}")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)


def test_crash_before_the_state_is_committed_lands_nothing(
    store: KeyStore, landing: Path, note: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = (store.folder / "sloth.state.json").read_bytes()
    files = landing_files(landing)
    pub = Publisher(store, "sloth", landing)
    pub.create("note", {"title": "lost"})
    crash_on_replace(monkeypatch, lambda src, dst: src.endswith("sloth.state.tmp"))
    with pytest.raises(Crash):
        pub.flush()
    monkeypatch.undo()
    assert len(list(landing.glob(".*.staged"))) == 1  # the staged file is all that was written
    assert (store.folder / "sloth.state.json").read_bytes() == before
    with Publisher(store, "sloth", landing) as pub:  # the next publisher drops the staged file
        assert not list(landing.glob(".*.staged"))
        assert landing_files(landing) == files
        pub.create("note", {"title": "kept"})
    logs = assert_logs_accepted(landing)
    instance_log = logs[(store.get("sloth").author, 1)]
    assert [i.message.fields for i in instance_log] == [{"title": "kept"}]  # type: ignore[union-attr]


def test_crash_between_state_and_rename_is_finished_by_the_next_publisher(
    store: KeyStore, landing: Path, note: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = landing_files(landing)
    pub = Publisher(store, "sloth", landing)
    first = pub.create("note", {"title": "first"})
    crash_on_replace(monkeypatch, lambda src, dst: src.endswith(".staged"))
    with pytest.raises(Crash):
        pub.flush()
    monkeypatch.undo()
    assert landing_files(landing) == files  # not landed yet...
    (staged,) = landing.glob(".*.staged")
    with Publisher(store, "panda", landing) as other:  # ...another key leaves it alone...
        other.create("note", {"title": "panda's"})
    assert staged.exists()
    with Publisher(store, "sloth", landing) as pub:  # ...and the next publisher of the key lands it
        assert not staged.exists()
        assert len(landing_files(landing)) == len(files) + 2
        second = pub.create("note", {"title": "second"})
    logs = assert_logs_accepted(landing)
    instance_log = logs[(store.get("sloth").author, 1)]
    assert [i.entry.hash_hex for i in instance_log] == [first, second]


def test_landing_file_is_never_seen_half_written(store: KeyStore, landing: Path, note: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """While the state is committed, the landing folder holds the new lines only as a hidden file."""
    seen: list[list[str]] = []
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        seen.append([p.name for p in landing_files(landing)])
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    before = [p.name for p in landing_files(landing)]
    with Publisher(store, "sloth", landing) as pub:
        pub.create("note", {"title": "x"})
    assert seen == [before, before]
    assert len(landing_files(landing)) == len(before) + 1


# -- lens files from disk ----------------------------------------------------------------------
def test_every_repository_lens_file_loads(store: KeyStore, landing: Path) -> None:
    with Publisher(store, "sloth", landing) as pub:
        for name in ("profile", "attachment", "slothmail"):
            pub.schema_init(SchemaMeta(name=name))
        for name in ("profile", "attachment", "slothmail"):
            for path in sorted((LENSES / name).glob("*.yaml")):
                pub.schema_message(name, load_lens_file(path, resolve_schema=pub.resolve_schema))
    assert_logs_accepted(landing)


@pytest.mark.parametrize("make", ["missing", "folder", "not utf-8"])
def test_unreadable_lens_file(tmp_path: Path, make: str) -> None:
    path = tmp_path / "001.yaml"
    if make == "folder":
        path.mkdir()
    elif make == "not utf-8":
        path.write_bytes(b"kind: schema-revert\ntarget: \xff\n")
    with pytest.raises(LensFileError) as info:
        load_lens_file(path)
    assert info.value.code == "unreadable" and info.value.file == str(path)
    assert str(path) in str(info.value)


def test_lens_file_naming_an_unknown_schema(store: KeyStore, landing: Path) -> None:
    with Publisher(store, "sloth", landing) as pub, pytest.raises(LensFileError) as info:
        load_lens_file(LENSES / "slothmail" / "001.yaml", resolve_schema=pub.resolve_schema)
    assert info.value.code == "unresolved_schema" and info.value.line == 14
    assert "unknown schema 'profile'" in str(info.value)
