"""Bamboo entries, p2panda variant: Ed25519 signatures and YASMF/BLAKE3 hashes (FORMAT.md section 1).

An entry is the signed envelope of one payload on an author's append-only log:

    tag | author | log_id | seq_num | [skiplink] | [backlink] | payload_size | payload_hash | signature

This module encodes and strictly decodes entries, computes their hashes, signs them and verifies
them against their payload. It judges an entry on its own; whether an entry fits the log it
claims to extend is decided by :mod:`lakehouse.core.logs`.

Every defect raises :class:`~lakehouse.errors.EntryError` with a stable ``code``:

=========================== ==============================================================
code                        meaning
=========================== ==============================================================
``truncated``               the bytes end before the entry does
``trailing_bytes``          bytes follow the signature
``non_canonical_varu64``    a varu64 not in its shortest form
``bad_hash``                a hash whose id is not 0 (BLAKE3) or whose length is not 32
``seq_num_zero``            seq_num is 0
``unexpected_skiplink``     a skiplink where lipmaa(seq_num) == seq_num - 1
``missing_skiplink``        no skiplink where one is required
``unexpected_backlink``     links on seq_num 1
``missing_backlink``        no backlink on seq_num > 1
``skiplink_equals_backlink`` a required skiplink equal to the backlink
``bad_tag``                 an end-of-feed tag other than 0 or 1
``too_large``               more than :data:`MAX_ENTRY_SIZE` bytes
``out_of_range``            log_id, seq_num or payload_size beyond a signed 64-bit integer
``bad_author``              an author that is not 32 bytes
``bad_signature``           the Ed25519 signature does not verify
``wrong_payload``           the payload's size or hash differs from the entry's
``payload_too_large``       the payload exceeds the configured maximum
=========================== ==============================================================

Pure: no Spark, no I/O. Signature checks run in libsodium (through pynacl), which releases the
GIL, so verification scales across threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Final, TypeAlias

import blake3
import nacl.bindings
import nacl.exceptions
import nacl.signing

from lakehouse.errors import EntryError

__all__ = [
    "AUTHOR_SIZE",
    "BytesLike",
    "DEFAULT_MAX_PAYLOAD",
    "HASH_SIZE",
    "INT64_MAX",
    "MAX_ENTRY_SIZE",
    "SIGNATURE_SIZE",
    "UINT64_MAX",
    "Entry",
    "decode_entry",
    "decode_varu64",
    "encode_varu64",
    "is_yasmf_hash",
    "lipmaa",
    "sign_entry",
    "skiplink_required",
    "verify_entry",
    "verify_payload",
    "verify_signature",
    "yasmf_hash",
]

MAX_ENTRY_SIZE: Final = 226
"""Bamboo's maximum entry size in bytes."""
DEFAULT_MAX_PAYLOAD: Final = 1 << 20
"""Default payload limit in bytes (1 MiB); configurable per call."""
INT64_MAX: Final = (1 << 63) - 1
"""Largest log_id, seq_num and payload_size accepted (the tables store BIGINT)."""
UINT64_MAX: Final = (1 << 64) - 1
"""Largest value a varu64 can hold."""
HASH_SIZE: Final = 34
"""Bytes in a YASMF hash: id 0x00, length 0x20, 32-byte BLAKE3 digest."""
AUTHOR_SIZE: Final = 32
"""Bytes in an Ed25519 public key."""
SIGNATURE_SIZE: Final = 64
"""Bytes in an Ed25519 signature."""

BytesLike: TypeAlias = bytes | bytearray | memoryview
"""What the decoders accept; anything but ``bytes`` is copied once."""

_YASMF_PREFIX: Final = b"\x00\x20"
_BLAKE3_ID: Final = 0
_DIGEST_SIZE: Final = 32
# Codes a wrong link layout can surface as when the decoder reads fields at shifted offsets.
_MISPARSE_CODES: Final = frozenset(
    {"truncated", "trailing_bytes", "bad_hash", "non_canonical_varu64", "out_of_range"}
)


# --------------------------------------------------------------------------------------------
# varu64
# --------------------------------------------------------------------------------------------


def encode_varu64(n: int) -> bytes:
    """Encode an unsigned integer as a varu64 (FORMAT.md section 1), in its shortest form.

    A value below 248 is one byte; otherwise a byte ``247 + k`` is followed by the value in ``k``
    big-endian bytes (``k`` = 1..8, the fewest that hold it).

    Args:
        n: the value, 0 <= n < 2**64.

    Returns:
        The encoding, 1 to 9 bytes.

    Raises:
        ValueError: n is negative or does not fit 64 bits.
    """
    if n < 248:
        if n < 0:
            raise ValueError(f"varu64 cannot encode a negative value ({n})")
        return bytes((n,))
    if n > UINT64_MAX:
        raise ValueError(f"varu64 cannot encode {n}: larger than 2**64 - 1")
    k = (n.bit_length() + 7) >> 3
    return bytes((247 + k,)) + n.to_bytes(k, "big")


def _read_varu64(data: bytes, pos: int, what: str) -> tuple[int, int]:
    """Read one strict varu64 of ``data`` at ``pos``; ``what`` names the field in errors."""
    try:
        first = data[pos]
    except IndexError:
        raise EntryError(f"{what}: truncated (no bytes left at offset {pos})", code="truncated") from None
    if first < 248:
        return first, pos + 1
    k = first - 247
    stop = pos + 1 + k
    if stop > len(data):
        raise EntryError(
            f"{what}: truncated (varu64 at offset {pos} needs {k} more bytes, {len(data) - pos - 1} left)",
            code="truncated",
        )
    value = int.from_bytes(data[pos + 1 : stop], "big")
    if value < (248 if k == 1 else 1 << (8 * (k - 1))):
        raise EntryError(
            f"{what}: non-canonical varu64 at offset {pos} ({data[pos:stop].hex()} encodes {value}, "
            f"whose shortest form is {encode_varu64(value).hex()})",
            code="non_canonical_varu64",
        )
    return value, stop


def decode_varu64(data: BytesLike, offset: int = 0) -> tuple[int, int]:
    """Decode one varu64 (FORMAT.md section 1), accepting only its shortest form.

    Args:
        data: the bytes to read from (bytes, bytearray or memoryview).
        offset: where the varu64 starts.

    Returns:
        ``(value, offset just past the varu64)``.

    Raises:
        EntryError: ``truncated`` when the bytes end inside the varu64, ``non_canonical_varu64``
            when a shorter encoding of the same value exists.
    """
    return _read_varu64(data if isinstance(data, bytes) else bytes(data), offset, "varu64")


# --------------------------------------------------------------------------------------------
# YASMF hashes and lipmaa links
# --------------------------------------------------------------------------------------------


def yasmf_hash(data: bytes) -> bytes:
    """Hash bytes the way entries and payloads are hashed (FORMAT.md section 1).

    Args:
        data: the bytes to hash.

    Returns:
        34 bytes: ``0x00`` (BLAKE3), ``0x20`` (length 32), then the BLAKE3 digest.
    """
    return _YASMF_PREFIX + blake3.blake3(data).digest()


def is_yasmf_hash(b: bytes) -> bool:
    """Tell whether ``b`` is a well-formed YASMF BLAKE3 hash (FORMAT.md section 1).

    Args:
        b: candidate bytes.

    Returns:
        True when ``b`` is 34 bytes starting ``00 20``.
    """
    return len(b) == HASH_SIZE and b[0] == 0 and b[1] == 0x20


def lipmaa(n: int) -> int:
    """The seq_num an entry's skiplink points to (FORMAT.md section 1, crate lipmaa-link 0.2.2).

    Args:
        n: a seq_num, >= 1.

    Returns:
        lipmaa(n), with 0 < lipmaa(n) < n for n > 1 and lipmaa(1) == 0.

    Raises:
        ValueError: n < 1.
    """
    if n < 1:
        raise ValueError(f"lipmaa is defined for seq_num >= 1, got {n}")
    m, po3, u = 1, 3, n
    while m < n:
        po3 *= 3
        m = (po3 - 1) // 2
    po3 //= 3
    if m != n:
        while u != 0:
            m = (po3 - 1) // 2
            po3 //= 3
            u %= m
        if m != po3:
            po3 = m
    return n - po3


def skiplink_required(seq_num: int) -> bool:
    """Tell whether the entry at ``seq_num`` carries a skiplink (FORMAT.md section 1).

    Args:
        seq_num: the entry's seq_num, >= 1.

    Returns:
        True when seq_num > 1 and lipmaa(seq_num) != seq_num - 1.
    """
    return seq_num > 1 and lipmaa(seq_num) != seq_num - 1


# --------------------------------------------------------------------------------------------
# The entry
# --------------------------------------------------------------------------------------------


def _encode_unsigned(
    end_of_feed: bool,
    author: bytes,
    log_id: int,
    seq_num: int,
    skiplink: bytes | None,
    backlink: bytes | None,
    payload_size: int,
    payload_hash: bytes,
) -> bytes:
    parts = [b"\x01" if end_of_feed else b"\x00", author, encode_varu64(log_id), encode_varu64(seq_num)]
    if skiplink is not None:
        parts.append(skiplink)
    if backlink is not None:
        parts.append(backlink)
    parts.append(encode_varu64(payload_size))
    parts.append(payload_hash)
    return b"".join(parts)


@dataclass(frozen=True)
class Entry:
    """One decoded bamboo entry (FORMAT.md section 1).

    Instances normally come from :func:`decode_entry` or :func:`verify_entry` (which check every
    field); one built by hand is encoded as given. The encoded bytes and the entry hash are
    computed once and cached (``dataclasses.replace`` makes a new entry with fresh caches).

    Attributes:
        end_of_feed: the tag: True when this entry closes its log.
        author: the author's Ed25519 public key, 32 bytes.
        log_id: the log of this author the entry belongs to.
        seq_num: the position in the log, from 1.
        skiplink: the hash of the entry at :attr:`skiplink_seq`, or None when not required.
        backlink: the hash of the entry at seq_num - 1, or None at seq_num 1.
        payload_size: the payload's length in bytes.
        payload_hash: YASMF hash of the payload, 34 bytes.
        signature: Ed25519 signature over :meth:`unsigned_bytes`, 64 bytes.
    """

    end_of_feed: bool
    author: bytes
    log_id: int
    seq_num: int
    skiplink: bytes | None
    backlink: bytes | None
    payload_size: int
    payload_hash: bytes
    signature: bytes

    @cached_property
    def _encoded(self) -> bytes:
        return (
            _encode_unsigned(
                self.end_of_feed,
                self.author,
                self.log_id,
                self.seq_num,
                self.skiplink,
                self.backlink,
                self.payload_size,
                self.payload_hash,
            )
            + self.signature
        )

    def to_bytes(self) -> bytes:
        """The entry's bytes, signature included (FORMAT.md section 1).

        Returns:
            The encoding; for a decoded entry, the very bytes it was decoded from.
        """
        return self._encoded

    def unsigned_bytes(self) -> bytes:
        """The bytes the signature covers: all entry bytes except the last 64.

        Returns:
            The encoding without the signature.
        """
        encoded = self._encoded
        return encoded[: len(encoded) - len(self.signature)]

    @cached_property
    def hash(self) -> bytes:
        """The entry hash: YASMF(BLAKE3) of :meth:`to_bytes`, 34 bytes; the instance id of a create."""
        return yasmf_hash(self._encoded)

    @property
    def hash_hex(self) -> str:
        """The entry hash as 68 hex characters."""
        return self.hash.hex()

    @property
    def backlink_seq(self) -> int | None:
        """The seq_num the backlink must point to, or None at seq_num 1."""
        return self.seq_num - 1 if self.seq_num > 1 else None

    @property
    def skiplink_seq(self) -> int | None:
        """The seq_num the skiplink must point to (lipmaa), or None when no skiplink is required."""
        return lipmaa(self.seq_num) if skiplink_required(self.seq_num) else None


def _seed_cache(entry: Entry, encoded: bytes, entry_hash: bytes | None = None) -> Entry:
    """Store already-known bytes (and hash) in ``entry``'s caches, sparing a re-encode."""
    object.__setattr__(entry, "_encoded", encoded)
    if entry_hash is not None:
        object.__setattr__(entry, "hash", entry_hash)
    return entry


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def _read_hash(data: bytes, pos: int, what: str) -> tuple[bytes, int]:
    """Read one YASMF hash of ``data`` at ``pos``."""
    stop = pos + HASH_SIZE
    if stop <= len(data) and data[pos] == 0 and data[pos + 1] == 0x20:
        return data[pos:stop], stop
    # Slow path: say precisely what is wrong.
    hash_id, p = _read_varu64(data, pos, f"{what} hash id")
    if hash_id != _BLAKE3_ID:
        raise EntryError(f"{what}: hash id {hash_id} at offset {pos} is not 0 (BLAKE3)", code="bad_hash")
    length, p = _read_varu64(data, p, f"{what} hash length")
    if length != _DIGEST_SIZE:
        raise EntryError(f"{what}: hash length {length} at offset {pos + 1} is not 32", code="bad_hash")
    raise EntryError(
        f"{what}: truncated (hash at offset {pos} needs 34 bytes, {len(data) - pos} left)",
        code="truncated",
    )


def _link_count(seq_num: int) -> int:
    if seq_num == 1:
        return 0
    return 2 if skiplink_required(seq_num) else 1


def _parse(data: bytes, links: int | None) -> Entry:
    """Decode ``data`` strictly; ``links`` forces the number of link hashes (None: from seq_num)."""
    end = len(data)
    if end > MAX_ENTRY_SIZE:
        raise EntryError(f"entry is {end} bytes, more than the maximum {MAX_ENTRY_SIZE}", code="too_large")
    if end == 0:
        raise EntryError("entry is empty", code="truncated")
    tag = data[0]
    if tag > 1:
        raise EntryError(f"end-of-feed tag is {tag:#04x}, not 0x00 or 0x01", code="bad_tag")
    if end < 1 + AUTHOR_SIZE:
        raise EntryError(f"author: truncated ({end - 1} of 32 bytes)", code="truncated")
    author = data[1:33]

    # log_id and seq_num: the common one-byte case inline.
    first = data[33] if end > 33 else 256
    if first < 248:
        log_id, pos = first, 34
    else:
        log_id, pos = _read_varu64(data, 33, "log_id")
        if log_id > INT64_MAX:
            raise EntryError(f"log_id {log_id} does not fit a signed 64-bit integer", code="out_of_range")
    first = data[pos] if end > pos else 256
    if first < 248:
        seq_num = first
        pos += 1
    else:
        seq_num, pos = _read_varu64(data, pos, "seq_num")
        if seq_num > INT64_MAX:
            raise EntryError(f"seq_num {seq_num} does not fit a signed 64-bit integer", code="out_of_range")
    if seq_num == 0:
        raise EntryError("seq_num is 0; logs start at 1", code="seq_num_zero")

    if links is None:
        links = _link_count(seq_num)
    skiplink: bytes | None = None
    backlink: bytes | None = None
    if links == 2:
        skiplink, pos = _read_hash(data, pos, "skiplink")
    if links >= 1:
        backlink, pos = _read_hash(data, pos, "backlink")
        if skiplink is not None and skiplink == backlink:
            raise EntryError(
                f"skiplink equals backlink, but they must point to different entries "
                f"(seq {lipmaa(seq_num)} and seq {seq_num - 1})",
                code="skiplink_equals_backlink",
            )

    first = data[pos] if end > pos else 256
    if first < 248:
        payload_size = first
        pos += 1
    else:
        payload_size, pos = _read_varu64(data, pos, "payload_size")
        if payload_size > INT64_MAX:
            raise EntryError(
                f"payload_size {payload_size} does not fit a signed 64-bit integer", code="out_of_range"
            )
    payload_hash, pos = _read_hash(data, pos, "payload_hash")

    sig_end = pos + SIGNATURE_SIZE
    if sig_end != end:
        if sig_end > end:
            raise EntryError(f"signature: truncated ({end - pos} of 64 bytes)", code="truncated")
        raise EntryError(f"{end - sig_end} trailing bytes after the signature", code="trailing_bytes")
    return Entry(
        tag == 1, author, log_id, seq_num, skiplink, backlink, payload_size, payload_hash, data[pos:]
    )


def _diagnose_links(data: bytes, seq_num: int) -> EntryError | None:
    """Explain a failed decode as a wrong link layout, when the bytes parse under another one.

    The decoder takes the number of links from seq_num, so an extra or missing link shows up as a
    mis-parse later on. If the bytes decode cleanly with another number of links, that is the
    defect.
    """
    expected = _link_count(seq_num)
    for actual in (0, 1, 2):
        if actual == expected:
            continue
        try:
            _parse(data, actual)
        except EntryError:
            continue
        if expected == 0:
            return EntryError(
                f"seq_num 1 takes no links, but the entry carries {actual}", code="unexpected_backlink"
            )
        if actual > expected:
            return EntryError(
                f"seq_num {seq_num} takes no skiplink (lipmaa({seq_num}) = {seq_num - 1}), "
                "but the entry carries one",
                code="unexpected_skiplink",
            )
        if actual == 0:
            return EntryError(
                f"seq_num {seq_num} requires a backlink, but the entry has none", code="missing_backlink"
            )
        return EntryError(
            f"seq_num {seq_num} requires a skiplink to seq {lipmaa(seq_num)}, but the entry has none",
            code="missing_skiplink",
        )
    return None


def _decode(data: bytes) -> Entry:
    """Decode without attaching the entry hash to errors."""
    try:
        return _parse(data, None)
    except EntryError as exc:
        if exc.code not in _MISPARSE_CODES:
            raise
        try:
            seq_num = _header_seq_num(data)
        except EntryError:
            raise exc from None
        better = _diagnose_links(data, seq_num)
        if better is None:
            raise
        raise better from None


def _header_seq_num(data: bytes) -> int:
    """The seq_num of ``data``, reading only up to it; raises EntryError if that fails."""
    if len(data) < 1 + AUTHOR_SIZE:
        raise EntryError("truncated", code="truncated")
    _, pos = _read_varu64(data, 33, "log_id")
    seq_num, _ = _read_varu64(data, pos, "seq_num")
    if seq_num == 0:
        raise EntryError("seq_num is 0", code="seq_num_zero")
    return seq_num


def decode_entry(data: BytesLike) -> Entry:
    """Decode entry bytes strictly (FORMAT.md section 1). The signature is not checked.

    Whether a skiplink is present follows from seq_num; an entry whose links do not match its
    seq_num is reported as ``unexpected_skiplink`` / ``missing_skiplink`` (or
    ``unexpected_backlink`` / ``missing_backlink``) when the bytes parse under the other layout.

    Args:
        data: the entry bytes (bytes, bytearray or memoryview).

    Returns:
        The decoded entry; its :meth:`Entry.to_bytes` returns ``data`` unchanged.

    Raises:
        EntryError: with ``entry_hash`` set (hex of the hash of ``data``) and one of the codes
            ``too_large``, ``truncated``, ``trailing_bytes``, ``non_canonical_varu64``,
            ``bad_hash``, ``bad_tag``, ``seq_num_zero``, ``out_of_range``,
            ``unexpected_skiplink``, ``missing_skiplink``, ``unexpected_backlink``,
            ``missing_backlink``, ``skiplink_equals_backlink``.
    """
    raw = data if type(data) is bytes else bytes(data)
    try:
        entry = _decode(raw)
    except EntryError as exc:
        exc.entry_hash = yasmf_hash(raw).hex()
        raise
    return _seed_cache(entry, raw)


# --------------------------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------------------------


def _check_signature(author: bytes, unsigned: bytes, signature: bytes, entry_hash: bytes) -> None:
    if len(author) != AUTHOR_SIZE:
        raise EntryError(
            f"author is {len(author)} bytes, not an Ed25519 public key (32 bytes)",
            code="bad_author",
            entry_hash=entry_hash.hex(),
        )
    if len(signature) != SIGNATURE_SIZE:
        raise EntryError(
            f"signature is {len(signature)} bytes, not 64", code="bad_signature", entry_hash=entry_hash.hex()
        )
    try:
        nacl.bindings.crypto_sign_open(signature + unsigned, author)
    except nacl.exceptions.CryptoError:
        raise EntryError(
            f"signature does not verify against author {author.hex()}",
            code="bad_signature",
            entry_hash=entry_hash.hex(),
        ) from None


def verify_signature(entry: Entry) -> None:
    """Check the entry's Ed25519 signature over :meth:`Entry.unsigned_bytes` (FORMAT.md section 1).

    Args:
        entry: a decoded entry.

    Raises:
        EntryError: ``bad_signature`` (the signature does not verify, including for an author
            key that is not a valid curve point) or ``bad_author`` (the author is not 32 bytes);
            ``entry_hash`` is set.
    """
    _check_signature(entry.author, entry.unsigned_bytes(), entry.signature, entry.hash)


def _check_payload(entry: Entry, payload: bytes, max_payload: int, entry_hash: bytes) -> None:
    size = len(payload)
    if size > max_payload or entry.payload_size > max_payload:
        raise EntryError(
            f"payload is {max(size, entry.payload_size)} bytes, more than the maximum {max_payload}",
            code="payload_too_large",
            entry_hash=entry_hash.hex(),
        )
    if size != entry.payload_size:
        raise EntryError(
            f"payload size mismatch: the payload is {size} bytes, the entry says {entry.payload_size}",
            code="wrong_payload",
            entry_hash=entry_hash.hex(),
        )
    actual = yasmf_hash(payload)
    if actual != entry.payload_hash:
        raise EntryError(
            f"payload hash mismatch: the payload hashes to {actual.hex()}, "
            f"the entry says {entry.payload_hash.hex()}",
            code="wrong_payload",
            entry_hash=entry_hash.hex(),
        )


def verify_payload(entry: Entry, payload: bytes, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> None:
    """Check that ``payload`` is the one the entry signs (FORMAT.md section 1).

    Args:
        entry: a decoded entry.
        payload: the payload bytes that came with it.
        max_payload: the largest payload accepted, in bytes.

    Raises:
        EntryError: ``payload_too_large`` (the payload or the entry's payload_size exceeds
            ``max_payload``) or ``wrong_payload`` (the message says whether the size or the hash
            differs); ``entry_hash`` is set.
    """
    _check_payload(entry, payload, max_payload, entry.hash)


def verify_entry(entry_bytes: BytesLike, payload: bytes, *, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Entry:
    """Check everything an entry can be checked for on its own (FORMAT.md section 1).

    Decodes strictly, verifies the signature, then checks the payload's size and hash. Whether
    the entry fits its log is :func:`lakehouse.core.logs.judge_append`'s business.

    Args:
        entry_bytes: the entry bytes.
        payload: the payload bytes that came with the entry.
        max_payload: the largest payload accepted, in bytes.

    Returns:
        The decoded entry, its hash already computed.

    Raises:
        EntryError: any code of :func:`decode_entry`, :func:`verify_signature` or
            :func:`verify_payload`, always with ``entry_hash`` (hex of the hash of
            ``entry_bytes``).
    """
    raw = entry_bytes if type(entry_bytes) is bytes else bytes(entry_bytes)
    entry_hash = yasmf_hash(raw)
    try:
        entry = _decode(raw)
    except EntryError as exc:
        exc.entry_hash = entry_hash.hex()
        raise
    _seed_cache(entry, raw, entry_hash)
    _check_signature(entry.author, raw[:-SIGNATURE_SIZE], entry.signature, entry_hash)
    _check_payload(entry, payload, max_payload, entry_hash)
    return entry


# --------------------------------------------------------------------------------------------
# Signing
# --------------------------------------------------------------------------------------------


def _check_link(name: str, link: bytes | None) -> None:
    if link is not None and not is_yasmf_hash(link):
        raise EntryError(f"{name} is not a YASMF hash (34 bytes starting 00 20)", code="bad_hash")


def sign_entry(
    signing_key: nacl.signing.SigningKey,
    *,
    log_id: int,
    seq_num: int,
    payload: bytes,
    backlink: bytes | None,
    skiplink: bytes | None,
    end_of_feed: bool = False,
) -> bytes:
    """Build and sign the entry for ``payload`` (FORMAT.md section 1).

    Args:
        signing_key: the author's Ed25519 key.
        log_id: the log, 0 <= log_id <= INT64_MAX.
        seq_num: the position in the log, 1 <= seq_num <= INT64_MAX.
        payload: the payload bytes; the entry carries their size and hash.
        backlink: hash of the entry at seq_num - 1; required exactly when seq_num > 1.
        skiplink: hash of the entry at lipmaa(seq_num); required exactly when
            :func:`skiplink_required` says so.
        end_of_feed: write tag 1 (this entry closes the log).

    Returns:
        The signed entry bytes.

    Raises:
        EntryError: inconsistent arguments: ``out_of_range``, ``seq_num_zero``, ``bad_hash``
            (a link that is not a YASMF hash), ``missing_backlink``, ``unexpected_backlink``,
            ``missing_skiplink``, ``unexpected_skiplink``, ``skiplink_equals_backlink``.
    """
    if not 0 <= log_id <= INT64_MAX:
        raise EntryError(f"log_id {log_id} is not within 0..2**63-1", code="out_of_range")
    if seq_num == 0:
        raise EntryError("seq_num is 0; logs start at 1", code="seq_num_zero")
    if not 1 <= seq_num <= INT64_MAX:
        raise EntryError(f"seq_num {seq_num} is not within 1..2**63-1", code="out_of_range")
    _check_link("backlink", backlink)
    _check_link("skiplink", skiplink)
    if seq_num == 1:
        if backlink is not None or skiplink is not None:
            raise EntryError("seq_num 1 takes no backlink or skiplink", code="unexpected_backlink")
    elif backlink is None:
        raise EntryError(
            f"seq_num {seq_num} requires a backlink (to seq {seq_num - 1})", code="missing_backlink"
        )
    elif skiplink_required(seq_num):
        if skiplink is None:
            raise EntryError(
                f"seq_num {seq_num} requires a skiplink (to seq {lipmaa(seq_num)})", code="missing_skiplink"
            )
        if skiplink == backlink:
            raise EntryError("skiplink equals backlink", code="skiplink_equals_backlink")
    elif skiplink is not None:
        raise EntryError(
            f"seq_num {seq_num} takes no skiplink (lipmaa({seq_num}) = {seq_num - 1})",
            code="unexpected_skiplink",
        )
    unsigned = _encode_unsigned(
        end_of_feed,
        bytes(signing_key.verify_key),
        log_id,
        seq_num,
        skiplink,
        backlink,
        len(payload),
        yasmf_hash(payload),
    )
    return unsigned + signing_key.sign(unsigned).signature
