"""The key store: named ed25519 keys, one JSON file each, in a private folder.

Each key ``NAME`` lives in ``<folder>/NAME.key.json`` (mode 0600, folder 0700) as
``{"name", "public_key", "secret_key"}`` (hex; the secret is the 32-byte seed). The publisher's
log tips for that key (``NAME.state.json``) and its lock (``NAME.lock``) live beside it (see
:mod:`lakehouse.publish.publisher`).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from nacl.signing import SigningKey

from lakehouse.errors import PublishError

_KEY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
DEFAULT_KEY = "default"


@dataclass(frozen=True)
class Key:
    """A named ed25519 key pair.

    Attributes:
        name: the key's name in the store.
        signing_key: the private key (pynacl).
    """

    name: str
    signing_key: SigningKey

    @property
    def public_key(self) -> bytes:
        """The 32-byte public key: the author of every entry this key signs."""
        return bytes(self.signing_key.verify_key)

    @property
    def author(self) -> str:
        """The public key as 64 hex characters."""
        return self.public_key.hex()


class KeyStore:
    """Named ed25519 keys under one folder.

    Args:
        folder: where the keys live; created (mode 0700) on first write.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def key_file(self, name: str) -> Path:
        """Where key ``name`` lives (``<folder>/<name>.key.json``), whether or not it exists.

        Raises:
            PublishError: code ``bad_key_name`` for a name that is not 1-64 letters, digits, '_',
                '.' or '-' starting with a letter or digit (so that it never names another file).
        """
        if not _KEY_NAME.fullmatch(name):
            raise PublishError(f"key name {name!r} must be 1-64 letters, digits, '_', '.' or '-', starting "
                               "with a letter or digit", code="bad_key_name")
        return self.folder / f"{name}.key.json"

    def create(self, name: str = DEFAULT_KEY, *, seed: bytes | None = None) -> Key:
        """Create and store a new key.

        Args:
            name: the key's name.
            seed: a 32-byte secret to import instead of a random one.

        Raises:
            PublishError: a key of that name exists, or the name is malformed.
        """
        path = self.key_file(name)
        if path.exists():
            raise PublishError(f"a key named {name!r} exists already in {self.folder}", code="key_exists")
        signing_key = SigningKey(seed) if seed is not None else SigningKey.generate()
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)
        record = {"name": name, "public_key": bytes(signing_key.verify_key).hex(),
                  "secret_key": bytes(signing_key).hex()}
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)  # whatever the umask, or the mode of a temporary left by a crash
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        os.replace(tmp, path)
        return Key(name, signing_key)

    def get(self, name: str = DEFAULT_KEY) -> Key:
        """The key called ``name``.

        Raises:
            PublishError: no such key (says how to create one), or its file is damaged.
        """
        path = self.key_file(name)
        if not path.exists():
            raise PublishError(
                f"no key named {name!r} in {self.folder}; create one with `lakehouse keys new {name}`",
                code="no_key",
            )
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            signing_key = SigningKey(bytes.fromhex(record["secret_key"]))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise PublishError(f"{path}: damaged key file: {exc}", code="bad_key_file") from None
        if bytes(signing_key.verify_key).hex() != record.get("public_key"):
            raise PublishError(f"{path}: public key does not match the secret key", code="bad_key_file")
        return Key(name, signing_key)

    def has(self, name: str) -> bool:
        """Whether a key called ``name`` is stored (PublishError if the name is malformed)."""
        return self.key_file(name).exists()

    def get_or_create(self, name: str = DEFAULT_KEY) -> tuple[Key, bool]:
        """The key called ``name``, created if missing; the flag says whether it was created."""
        if self.key_file(name).exists():
            return self.get(name), False
        return self.create(name), True

    def names(self) -> list[str]:
        """Names of the stored keys, sorted (files whose name is not a key name are not keys)."""
        if not self.folder.is_dir():
            return []
        names = (p.name[: -len(".key.json")] for p in self.folder.glob("*.key.json"))
        return sorted(name for name in names if _KEY_NAME.fullmatch(name))

    def keys(self) -> list[Key]:
        """Every stored key, by name."""
        return [self.get(name) for name in self.names()]

    def find_author(self, author: bytes) -> Key | None:
        """The stored key whose public key is ``author``, if any."""
        for key in self.keys():
            if key.public_key == author:
                return key
        return None
