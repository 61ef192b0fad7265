"""Bamboo entries (FORMAT.md section 1): varu64, YASMF hashes, lipmaa, strict decoding, signing."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nacl.signing import SigningKey

from lakehouse.core.entries import (
    DEFAULT_MAX_PAYLOAD,
    INT64_MAX,
    MAX_ENTRY_SIZE,
    UINT64_MAX,
    Entry,
    decode_entry,
    decode_varu64,
    encode_varu64,
    is_yasmf_hash,
    lipmaa,
    sign_entry,
    skiplink_required,
    verify_entry,
    verify_payload,
    verify_signature,
    yasmf_hash,
)
from lakehouse.errors import EntryError, LakehouseError

KEY = SigningKey(bytes(range(32)))
AUTHOR = bytes(KEY.verify_key)
H1 = yasmf_hash(b"one")
H2 = yasmf_hash(b"two")
PAYLOAD = b"hello"
PAYLOAD_HASH = yasmf_hash(PAYLOAD)
SIG = bytes(64)

# ------------------------------------------------------------------------------------------------
# varu64
# ------------------------------------------------------------------------------------------------

VARU64_EXAMPLES = [
    (0, "00"),
    (1, "01"),
    (247, "f7"),
    (248, "f8f8"),
    (250, "f8fa"),
    (255, "f8ff"),
    (256, "f90100"),
    (260, "f90104"),
    (65535, "f9ffff"),
    (65536, "fa010000"),
    (2**32, "fc0100000000"),
    (2**56 - 1, "feffffffffffffff"),
    (2**56, "ff0100000000000000"),
    (INT64_MAX, "ff7fffffffffffffff"),
    (2**64 - 1, "ffffffffffffffffff"),
]


@pytest.mark.parametrize(("value", "encoded"), VARU64_EXAMPLES, ids=[str(v) for v, _ in VARU64_EXAMPLES])
def test_varu64_examples(value: int, encoded: str) -> None:
    assert encode_varu64(value).hex() == encoded
    assert decode_varu64(bytes.fromhex(encoded)) == (value, len(encoded) // 2)


def test_varu64_decodes_at_offset_and_leaves_the_rest() -> None:
    data = bytes.fromhex("aaf9010407")
    assert decode_varu64(data, 1) == (260, 4)
    assert decode_varu64(data, 4) == (7, 5)
    assert decode_varu64(bytearray(data), 1) == (260, 4)
    assert decode_varu64(memoryview(data), 1) == (260, 4)


@pytest.mark.parametrize(
    "encoded",
    [
        "f800",
        "f801",
        "f8f7",
        "f900f8",
        "f900ff",
        "f90000",
        "fa00ffff",
        "ff00ffffffffffffff",
        "ff0000000000000000",
    ],
)
def test_varu64_rejects_non_canonical_forms(encoded: str) -> None:
    with pytest.raises(EntryError) as info:
        decode_varu64(bytes.fromhex(encoded))
    assert info.value.code == "non_canonical_varu64"


@pytest.mark.parametrize("encoded", ["", "f8", "f901", "fa0000", "ff00000000000000"])
def test_varu64_rejects_truncated_input(encoded: str) -> None:
    with pytest.raises(EntryError) as info:
        decode_varu64(bytes.fromhex(encoded))
    assert info.value.code == "truncated"


@pytest.mark.parametrize("value", [-1, 2**64, 2**70])
def test_varu64_refuses_values_outside_u64(value: int) -> None:
    with pytest.raises(ValueError):
        encode_varu64(value)


@given(st.integers(0, UINT64_MAX), st.binary(max_size=4))
def test_varu64_round_trip(value: int, rest: bytes) -> None:
    encoded = encode_varu64(value)
    assert decode_varu64(encoded + rest) == (value, len(encoded))
    # Shortest form: one byte fewer cannot hold the value.
    assert len(encoded) == 1 or value >= (248 if len(encoded) == 2 else 1 << (8 * (len(encoded) - 2)))


# ------------------------------------------------------------------------------------------------
# YASMF hashes and lipmaa
# ------------------------------------------------------------------------------------------------


def test_yasmf_hash_is_prefixed_blake3() -> None:
    # BLAKE3 of the empty input, from the BLAKE3 test vectors.
    assert yasmf_hash(b"").hex() == "0020af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
    assert len(yasmf_hash(b"x" * 5000)) == 34


def test_is_yasmf_hash() -> None:
    assert is_yasmf_hash(H1)
    assert not is_yasmf_hash(H1[:-1])
    assert not is_yasmf_hash(H1 + b"\x00")
    assert not is_yasmf_hash(b"\x01" + H1[1:])
    assert not is_yasmf_hash(b"\x00\x1f" + H1[2:])


LIPMAA_CHECKS = [(4, 1), (8, 4), (13, 4), (21, 17), (40, 13), (121, 40), (250, 246)]


@pytest.mark.parametrize(("n", "expected"), LIPMAA_CHECKS, ids=[f"{n}->{e}" for n, e in LIPMAA_CHECKS])
def test_lipmaa_checks_from_the_spec(n: int, expected: int) -> None:
    assert lipmaa(n) == expected


def test_lipmaa_small_values_and_skiplink_requirement() -> None:
    assert lipmaa(1) == 0
    assert [n for n in range(1, 30) if skiplink_required(n)] == [4, 8, 12, 13, 17, 21, 25, 26]
    assert not skiplink_required(1)
    assert not skiplink_required(2)
    with pytest.raises(ValueError):
        lipmaa(0)


@given(st.integers(2, 38))
def test_lipmaa_jumps_a_whole_level_at_the_level_boundaries(k: int) -> None:
    # (3**k - 1) / 2 links back to (3**(k-1) - 1) / 2: the top of the previous level.
    assert lipmaa((3**k - 1) // 2) == (3 ** (k - 1) - 1) // 2


@given(st.integers(2, INT64_MAX))
def test_lipmaa_points_strictly_backwards(n: int) -> None:
    assert 1 <= lipmaa(n) < n


# ------------------------------------------------------------------------------------------------
# Strict decoding: each defect has its code
# ------------------------------------------------------------------------------------------------


def build(
    *,
    tag: bytes = b"\x00",
    author: bytes = AUTHOR,
    log_id: bytes = b"\x00",
    seq_num: bytes = b"\x01",
    links: tuple[bytes, ...] = (),
    payload_size: bytes = b"\x05",
    payload_hash: bytes = PAYLOAD_HASH,
    signature: bytes = SIG,
) -> bytes:
    """Entry bytes assembled field by field (varu64 fields given raw); the signature is not real."""
    return tag + author + log_id + seq_num + b"".join(links) + payload_size + payload_hash + signature


def test_hand_built_entries_decode() -> None:
    e1 = decode_entry(build())
    assert (e1.seq_num, e1.backlink, e1.skiplink, e1.payload_size) == (1, None, None, 5)
    e4 = decode_entry(build(seq_num=b"\x04", links=(H1, H2)))
    assert (e4.skiplink, e4.backlink) == (H1, H2)
    assert (e4.skiplink_seq, e4.backlink_seq) == (1, 3)
    e3 = decode_entry(build(seq_num=b"\x03", links=(H1,)))
    assert (e3.skiplink, e3.backlink, e3.skiplink_seq, e3.backlink_seq) == (None, H1, None, 2)


SIGNED_1 = sign_entry(KEY, log_id=0, seq_num=1, payload=PAYLOAD, backlink=None, skiplink=None)
SIGNED_2 = sign_entry(KEY, log_id=260, seq_num=2, payload=PAYLOAD, backlink=H1, skiplink=None)
SIGNED_4 = sign_entry(KEY, log_id=1, seq_num=4, payload=PAYLOAD, backlink=H1, skiplink=H2)
SIGNED_250 = sign_entry(KEY, log_id=2**40, seq_num=250, payload=b"p" * 300, backlink=H1, skiplink=H2)
SIGNED = {"seq1": SIGNED_1, "seq2": SIGNED_2, "seq4": SIGNED_4, "seq250": SIGNED_250}

# A 9-byte seq_num that requires a skiplink, for the largest possible entry.
BIG_SEQ = 72057594037927938
assert skiplink_required(BIG_SEQ) and len(encode_varu64(BIG_SEQ)) == 9

DEFECTS: list[tuple[str, str, bytes]] = [
    ("truncated", "empty", b""),
    ("truncated", "tag_only", b"\x00"),
    ("truncated", "short_author", build()[:20]),
    ("truncated", "in_log_id_varu64", (b"\x00" + AUTHOR + b"\xf9\x01")),
    ("truncated", "signature_byte_missing", SIGNED_4[:-1]),
    ("truncated", "payload_hash_cut", build()[: -64 - 10]),
    ("trailing_bytes", "one_zero_byte", SIGNED_1 + b"\x00"),
    ("trailing_bytes", "many_bytes", SIGNED_2 + b"\xff" * 20),
    ("non_canonical_varu64", "log_id_f805", build(log_id=b"\xf8\x05")),
    ("non_canonical_varu64", "seq_num_f801", build(seq_num=b"\xf8\x01")),
    ("non_canonical_varu64", "seq_num_f90004", build(seq_num=b"\xf9\x00\x04", links=(H1, H2))),
    ("non_canonical_varu64", "payload_size_f805", build(payload_size=b"\xf8\x05")),
    ("bad_hash", "backlink_id_1", build(seq_num=b"\x02", links=(b"\x01" + H1[1:],))),
    ("bad_hash", "backlink_length_31", build(seq_num=b"\x02", links=(b"\x00\x1f" + H1[2:],))),
    ("bad_hash", "skiplink_length_33", build(seq_num=b"\x04", links=(b"\x00\x21" + H1[2:], H2))),
    ("bad_hash", "payload_hash_id_1", build(payload_hash=b"\x01" + PAYLOAD_HASH[1:])),
    ("seq_num_zero", "seq_0", build(seq_num=b"\x00")),
    ("seq_num_zero", "seq_0_with_link", build(seq_num=b"\x00", links=(H1,))),
    ("unexpected_skiplink", "seq_2", build(seq_num=b"\x02", links=(H1, H2))),
    ("unexpected_skiplink", "seq_3", build(seq_num=b"\x03", links=(H1, H2))),
    ("unexpected_skiplink", "seq_260", build(seq_num=encode_varu64(260), links=(H1, H2))),
    ("missing_skiplink", "seq_4", build(seq_num=b"\x04", links=(H1,))),
    ("missing_skiplink", "seq_13", build(seq_num=b"\x0d", links=(H2,))),
    ("unexpected_backlink", "seq_1_one_link", build(links=(H1,))),
    ("unexpected_backlink", "seq_1_two_links", build(links=(H1, H2))),
    ("missing_backlink", "seq_2_no_link", build(seq_num=b"\x02")),
    ("skiplink_equals_backlink", "seq_4", build(seq_num=b"\x04", links=(H1, H1))),
    ("bad_tag", "tag_2", build(tag=b"\x02")),
    ("bad_tag", "tag_ff", build(tag=b"\xff")),
    (
        "too_large",
        "227_bytes",
        build(
            seq_num=encode_varu64(BIG_SEQ),
            log_id=encode_varu64(INT64_MAX),
            links=(H1, H2),
            payload_size=encode_varu64(INT64_MAX),
        )
        + b"\x00",
    ),
    ("too_large", "junk", bytes(1000)),
    ("out_of_range", "log_id_2**63", build(log_id=encode_varu64(2**63))),
    ("out_of_range", "log_id_2**64-1", build(log_id=encode_varu64(2**64 - 1))),
    ("out_of_range", "seq_num_2**63", build(seq_num=encode_varu64(2**63), links=(H1,))),
    ("out_of_range", "payload_size_2**63", build(payload_size=encode_varu64(2**63))),
]


@pytest.mark.parametrize(
    ("code", "data"), [(c, d) for c, _, d in DEFECTS], ids=[f"{c}-{n}" for c, n, _ in DEFECTS]
)
def test_strict_decoding_reports_each_defect(code: str, data: bytes) -> None:
    with pytest.raises(EntryError) as info:
        decode_entry(data)
    assert info.value.code == code, str(info.value)
    assert info.value.entry_hash == yasmf_hash(data).hex()
    assert isinstance(info.value, LakehouseError)
    # verify_entry reports the same defect, with the hash of the bytes.
    with pytest.raises(EntryError) as again:
        verify_entry(data, PAYLOAD)
    assert (again.value.code, again.value.entry_hash) == (code, yasmf_hash(data).hex())


def test_largest_entry_is_exactly_the_maximum() -> None:
    data = build(
        seq_num=encode_varu64(BIG_SEQ),
        log_id=encode_varu64(INT64_MAX),
        links=(H1, H2),
        payload_size=encode_varu64(INT64_MAX),
    )
    assert len(data) == MAX_ENTRY_SIZE
    entry = decode_entry(data)
    assert (entry.log_id, entry.seq_num, entry.payload_size) == (INT64_MAX, BIG_SEQ, INT64_MAX)


@pytest.mark.parametrize("name", list(SIGNED))
def test_every_strict_prefix_is_truncated(name: str) -> None:
    data = SIGNED[name]
    for cut in range(len(data)):
        with pytest.raises(EntryError) as info:
            decode_entry(data[:cut])
        assert info.value.code == "truncated", f"cut at {cut}: {info.value}"


def test_decode_accepts_bytes_like_input() -> None:
    assert decode_entry(bytearray(SIGNED_4)) == decode_entry(memoryview(SIGNED_4)) == decode_entry(SIGNED_4)


# ------------------------------------------------------------------------------------------------
# Signing and verification
# ------------------------------------------------------------------------------------------------


def test_signed_entry_has_expected_layout() -> None:
    entry = verify_entry(SIGNED_250, b"p" * 300)
    assert (entry.log_id, entry.seq_num, entry.payload_size) == (2**40, 250, 300)
    assert (entry.backlink, entry.skiplink, entry.skiplink_seq) == (H1, H2, 246)
    assert SIGNED_250[33:40] == bytes.fromhex("fd010000000000")  # log_id 2**40
    assert SIGNED_250[40:42] == bytes.fromhex("f8fa")  # seq_num 250
    assert SIGNED_250[42:76] == H2 and SIGNED_250[76:110] == H1  # skiplink, then backlink
    assert SIGNED_250[110:113] == bytes.fromhex("f9012c")  # payload_size 300
    assert entry.hash == yasmf_hash(SIGNED_250)
    assert entry.hash_hex == yasmf_hash(SIGNED_250).hex()
    assert entry.to_bytes() == SIGNED_250
    assert entry.unsigned_bytes() == SIGNED_250[:-64]
    assert not entry.end_of_feed


def test_end_of_feed_tag_round_trips() -> None:
    data = sign_entry(KEY, log_id=3, seq_num=2, payload=b"", backlink=H1, skiplink=None, end_of_feed=True)
    assert data[0] == 1
    entry = verify_entry(data, b"")
    assert entry.end_of_feed and entry.payload_size == 0


def test_entry_built_by_hand_encodes_like_the_decoded_one() -> None:
    decoded = decode_entry(SIGNED_4)
    by_hand = Entry(
        end_of_feed=False,
        author=AUTHOR,
        log_id=1,
        seq_num=4,
        skiplink=H2,
        backlink=H1,
        payload_size=len(PAYLOAD),
        payload_hash=PAYLOAD_HASH,
        signature=SIGNED_4[-64:],
    )
    assert by_hand == decoded
    assert by_hand.to_bytes() == SIGNED_4
    assert by_hand.hash == decoded.hash
    verify_signature(by_hand)


def test_replace_re_encodes_instead_of_reusing_cached_bytes() -> None:
    entry = verify_entry(SIGNED_2, PAYLOAD)
    moved = dataclasses.replace(entry, log_id=261)
    assert moved.to_bytes() != SIGNED_2
    assert moved.hash != entry.hash
    assert decode_entry(moved.to_bytes()) == moved
    with pytest.raises(EntryError) as info:
        verify_signature(moved)
    assert info.value.code == "bad_signature"
    assert info.value.entry_hash == moved.hash.hex()


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"seq_num": 2, "backlink": None, "skiplink": None}, "missing_backlink"),
        ({"seq_num": 1, "backlink": H1, "skiplink": None}, "unexpected_backlink"),
        ({"seq_num": 1, "backlink": None, "skiplink": H1}, "unexpected_backlink"),
        ({"seq_num": 4, "backlink": H1, "skiplink": None}, "missing_skiplink"),
        ({"seq_num": 2, "backlink": H1, "skiplink": H2}, "unexpected_skiplink"),
        ({"seq_num": 4, "backlink": H1, "skiplink": H1}, "skiplink_equals_backlink"),
        ({"seq_num": 2, "backlink": H1[:-1], "skiplink": None}, "bad_hash"),
        ({"seq_num": 4, "backlink": H1, "skiplink": b"\x01" + H2[1:]}, "bad_hash"),
        ({"seq_num": 0, "backlink": None, "skiplink": None}, "seq_num_zero"),
        ({"seq_num": 2**63, "backlink": H1, "skiplink": None}, "out_of_range"),
        ({"seq_num": 1, "log_id": -1, "backlink": None, "skiplink": None}, "out_of_range"),
        ({"seq_num": 1, "log_id": 2**63, "backlink": None, "skiplink": None}, "out_of_range"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_sign_entry_refuses_inconsistent_arguments(kwargs: dict[str, object], code: str) -> None:
    args: dict[str, object] = {"log_id": 0, "payload": PAYLOAD, **kwargs}
    with pytest.raises(EntryError) as info:
        sign_entry(KEY, **args)  # type: ignore[arg-type]
    assert info.value.code == code


def test_verify_signature_rejects_another_author() -> None:
    entry = decode_entry(SIGNED_1)
    other = dataclasses.replace(entry, author=bytes(SigningKey(bytes(32)).verify_key))
    with pytest.raises(EntryError) as info:
        verify_signature(other)
    assert info.value.code == "bad_signature"


@pytest.mark.parametrize(
    ("author", "codes"),
    [
        (bytes(32), {"bad_signature", "bad_author"}),  # the identity point: not a usable key
        (b"\xff" * 32, {"bad_signature", "bad_author"}),  # not a canonical point encoding
        (AUTHOR[:31], {"bad_author"}),
        (AUTHOR + b"\x00", {"bad_author"}),
    ],
    ids=["identity", "non_canonical", "31_bytes", "33_bytes"],
)
def test_verify_signature_rejects_malformed_author_keys(author: bytes, codes: set[str]) -> None:
    entry = dataclasses.replace(decode_entry(SIGNED_1), author=author)
    with pytest.raises(EntryError) as info:
        verify_signature(entry)
    assert info.value.code in codes


def test_verify_signature_rejects_a_short_signature() -> None:
    entry = dataclasses.replace(decode_entry(SIGNED_1), signature=SIGNED_1[-63:])
    with pytest.raises(EntryError) as info:
        verify_signature(entry)
    assert info.value.code == "bad_signature"


def test_verify_payload_says_what_differs() -> None:
    entry = decode_entry(SIGNED_1)
    verify_payload(entry, PAYLOAD)
    with pytest.raises(EntryError) as size:
        verify_payload(entry, PAYLOAD + b"!")
    assert size.value.code == "wrong_payload" and "size" in str(size.value)
    assert size.value.entry_hash == entry.hash.hex()
    with pytest.raises(EntryError) as digest:
        verify_payload(entry, b"jello")
    assert digest.value.code == "wrong_payload" and "hash" in str(digest.value)


def test_verify_payload_enforces_the_limit() -> None:
    entry = decode_entry(SIGNED_250)
    verify_payload(entry, b"p" * 300, max_payload=300)
    with pytest.raises(EntryError) as info:
        verify_payload(entry, b"p" * 300, max_payload=299)
    assert info.value.code == "payload_too_large"
    # The entry's own claim counts too, whatever payload came with it.
    with pytest.raises(EntryError) as claim:
        verify_payload(entry, b"", max_payload=299)
    assert claim.value.code == "payload_too_large"
    assert DEFAULT_MAX_PAYLOAD == 1 << 20


def test_verify_entry_errors_carry_the_entry_hash() -> None:
    flipped = SIGNED_4[:-1] + bytes([SIGNED_4[-1] ^ 1])
    with pytest.raises(EntryError) as sig:
        verify_entry(flipped, PAYLOAD)
    assert (sig.value.code, sig.value.entry_hash) == ("bad_signature", yasmf_hash(flipped).hex())
    with pytest.raises(EntryError) as pay:
        verify_entry(SIGNED_4, b"jello")
    assert (pay.value.code, pay.value.entry_hash) == ("wrong_payload", yasmf_hash(SIGNED_4).hex())
    with pytest.raises(EntryError) as big:
        verify_entry(SIGNED_4, PAYLOAD, max_payload=4)
    assert (big.value.code, big.value.entry_hash) == ("payload_too_large", yasmf_hash(SIGNED_4).hex())


# ------------------------------------------------------------------------------------------------
# Properties: what this codec signs decodes back bit for bit; any flipped bit is caught
# ------------------------------------------------------------------------------------------------

numbers = st.one_of(
    st.integers(0, 300), st.integers(0, INT64_MAX), st.sampled_from([247, 248, 255, 256, INT64_MAX])
)


@st.composite
def signed_entries(draw: st.DrawFn) -> tuple[bytes, bytes, dict[str, object]]:
    key = SigningKey(draw(st.binary(min_size=32, max_size=32)))
    log_id = draw(numbers)
    seq_num = max(1, draw(numbers))
    payload = draw(st.binary(max_size=600))
    end_of_feed = draw(st.booleans())
    seed = draw(st.binary(max_size=8))
    backlink = yasmf_hash(b"back" + seed) if seq_num > 1 else None
    skiplink = yasmf_hash(b"skip" + seed) if skiplink_required(seq_num) else None
    fields: dict[str, object] = {
        "end_of_feed": end_of_feed,
        "author": bytes(key.verify_key),
        "log_id": log_id,
        "seq_num": seq_num,
        "skiplink": skiplink,
        "backlink": backlink,
        "payload_size": len(payload),
        "payload_hash": yasmf_hash(payload),
    }
    data = sign_entry(
        key,
        log_id=log_id,
        seq_num=seq_num,
        payload=payload,
        backlink=backlink,
        skiplink=skiplink,
        end_of_feed=end_of_feed,
    )
    return data, payload, fields


@settings(max_examples=300, deadline=None)
@given(signed_entries())
def test_signed_entries_decode_back_bit_for_bit_and_verify(
    case: tuple[bytes, bytes, dict[str, object]],
) -> None:
    data, payload, fields = case
    assert len(data) <= MAX_ENTRY_SIZE
    entry = verify_entry(data, payload)
    assert {name: getattr(entry, name) for name in fields} == fields
    assert entry.to_bytes() == data
    assert entry.hash == yasmf_hash(data)
    decoded = decode_entry(data)
    assert decoded == entry
    rebuilt = Entry(**fields, signature=data[-64:])  # type: ignore[arg-type]
    assert rebuilt.to_bytes() == data
    verify_signature(rebuilt)
    verify_payload(rebuilt, payload)


@settings(max_examples=400, deadline=None)
@given(signed_entries(), st.data())
def test_a_flipped_bit_anywhere_is_caught(
    case: tuple[bytes, bytes, dict[str, object]], data: st.DataObject
) -> None:
    entry_bytes, payload, _ = case
    bit = data.draw(st.integers(0, len(entry_bytes) * 8 - 1), label="bit")
    flipped = bytearray(entry_bytes)
    flipped[bit // 8] ^= 1 << (bit % 8)
    with pytest.raises(EntryError) as info:
        verify_entry(bytes(flipped), payload)
    assert info.value.entry_hash == yasmf_hash(bytes(flipped)).hex()
