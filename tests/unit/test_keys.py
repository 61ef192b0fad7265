"""The key store: named ed25519 keys, one private file each (lakehouse.publish.keys)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from nacl.signing import SigningKey

from lakehouse.errors import PublishError
from lakehouse.publish.keys import DEFAULT_KEY, KeyStore

SEED = bytes(range(32))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_create_then_get_gives_the_same_key(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys")
    created = store.create("sloth")
    again = store.get("sloth")
    assert again.name == "sloth"
    assert again.public_key == created.public_key
    assert bytes(again.signing_key) == bytes(created.signing_key)
    assert len(created.public_key) == 32
    assert created.author == created.public_key.hex()
    # the key signs what its public key verifies
    signed = again.signing_key.sign(b"hello")
    assert created.signing_key.verify_key.verify(signed) == b"hello"


def test_create_imports_a_seed(tmp_path: Path) -> None:
    key = KeyStore(tmp_path).create("imported", seed=SEED)
    assert key.public_key == bytes(SigningKey(SEED).verify_key)


def test_default_name(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    assert store.create().name == DEFAULT_KEY
    assert store.get().name == DEFAULT_KEY


def test_key_file_is_private_and_holds_name_public_and_secret(tmp_path: Path) -> None:
    folder = tmp_path / "keys"
    KeyStore(folder).create("sloth", seed=SEED)
    path = folder / "sloth.key.json"
    assert mode(path) == 0o600
    assert mode(folder) == 0o700
    record = json.loads(path.read_text())
    assert record == {"name": "sloth", "public_key": bytes(SigningKey(SEED).verify_key).hex(),
                      "secret_key": SEED.hex()}
    assert sorted(p.name for p in folder.iterdir()) == ["sloth.key.json"]  # no temporary left


def test_key_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    import os

    old = os.umask(0)
    try:
        KeyStore(tmp_path / "keys").create("sloth")
    finally:
        os.umask(old)
    assert mode(tmp_path / "keys" / "sloth.key.json") == 0o600
    assert mode(tmp_path / "keys") == 0o700


def test_refuses_a_duplicate_name_and_keeps_the_first_key(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    first = store.create("sloth")
    with pytest.raises(PublishError) as info:
        store.create("sloth")
    assert info.value.code == "key_exists"
    assert "sloth" in str(info.value)
    assert store.get("sloth").public_key == first.public_key


@pytest.mark.parametrize("name", ["", "-x", ".hidden", "a/b", "../up", "a b", "x" * 65, "sloth\n"])
def test_refuses_a_malformed_name(tmp_path: Path, name: str) -> None:
    with pytest.raises(PublishError) as info:
        KeyStore(tmp_path).create(name)
    assert info.value.code == "bad_key_name"
    assert not any(tmp_path.iterdir())


def test_missing_key_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(PublishError) as info:
        KeyStore(tmp_path / "nowhere").get("sloth")
    assert info.value.code == "no_key"
    assert "lakehouse keys new sloth" in str(info.value)


@pytest.mark.parametrize(
    "content",
    [
        "not json",
        "[1, 2]",
        '"text"',
        "{}",
        '{"name": "sloth", "public_key": "00"}',
        '{"name": "sloth", "secret_key": "zz"}',
        '{"name": "sloth", "secret_key": "0011"}',
        '{"name": "sloth", "secret_key": 5}',
        b"\xff\xfe".decode("latin-1"),
    ],
)
def test_damaged_key_file_is_a_clear_error(tmp_path: Path, content: str) -> None:
    (tmp_path / "sloth.key.json").write_text(content, encoding="latin-1")
    with pytest.raises(PublishError) as info:
        KeyStore(tmp_path).get("sloth")
    assert info.value.code == "bad_key_file"
    assert "sloth.key.json" in str(info.value)


def test_public_key_that_does_not_match_the_secret_is_refused(tmp_path: Path) -> None:
    other = bytes(SigningKey(b"\x01" * 32).verify_key).hex()
    (tmp_path / "sloth.key.json").write_text(json.dumps(
        {"name": "sloth", "public_key": other, "secret_key": SEED.hex()}))
    with pytest.raises(PublishError, match="does not match") as info:
        KeyStore(tmp_path).get("sloth")
    assert info.value.code == "bad_key_file"


def test_names_and_keys_are_sorted_and_ignore_other_files(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    assert store.names() == [] and store.keys() == []
    for name in ("panda", "sloth", "ant"):
        store.create(name)
    (tmp_path / "sloth.state.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("")
    (tmp_path / ".stray.key.json").write_text("{}")
    assert store.names() == ["ant", "panda", "sloth"]
    stored = store.keys()
    assert [k.name for k in stored] == ["ant", "panda", "sloth"]


def test_names_of_a_missing_folder(tmp_path: Path) -> None:
    assert KeyStore(tmp_path / "nowhere").names() == []


def test_get_or_create(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    key, created = store.get_or_create("sloth")
    assert created
    again, created = store.get_or_create("sloth")
    assert not created and again.public_key == key.public_key


def test_find_author(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    sloth = store.create("sloth")
    panda = store.create("panda")
    found = store.find_author(panda.public_key)
    assert found is not None and found.name == "panda"
    found = store.find_author(sloth.public_key)
    assert found is not None and found.name == "sloth"
    assert store.find_author(bytes(32)) is None
    assert KeyStore(tmp_path / "empty").find_author(sloth.public_key) is None
