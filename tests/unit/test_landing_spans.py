"""How a landing file is cut into spans and read back by the checking workers (FORMAT.md section 2).

Lines end at ``\\n`` (JSON Lines), the way the ingest counts them; a ``\\r`` before it is dropped,
a ``\\r`` elsewhere stays in the line, bad UTF-8 is kept escaped. A gzip'd file reads the same.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.core.landing import check_line
from lakehouse.spark import bronze
from tests.conftest import project_path

LINE = st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"\r"))  # no line end inside; \r and bad UTF-8 allowed


def _expected(lines: list[bytes]) -> list[str]:
    return [line.decode("utf-8", "surrogateescape").rstrip("\r") for line in lines]


def _read(path: Path, first: int, last: int) -> tuple[list[tuple[int, int]], list[str]]:
    """Each span's (first line, lines), and every line as a worker reads it."""
    spans = list(bronze._spans(str(path), first, last))
    texts = [t.rstrip("\r") for s in spans for t in bronze._span_lines(s[0], s[1], s[2], s[4])]
    return [(s[3], s[4]) for s in spans], texts


@settings(max_examples=150, deadline=None)
@given(lines=st.lists(LINE, min_size=1, max_size=12), newline_at_end=st.booleans(), chunk=st.integers(1, 4),
       data=st.data())
def test_spans_read_back_every_line_of_the_range_plain_or_gzipped(tmp_path_factory: pytest.TempPathFactory,
                                                                 lines: list[bytes], newline_at_end: bool,
                                                                 chunk: int, data: st.DataObject) -> None:
    content = b"\n".join(lines) + (b"\n" if newline_at_end else b"")
    if not newline_at_end and lines[-1] == b"":
        lines = lines[:-1] or [b""]  # a file that is empty or ends with its line end
        content = b"\n".join(lines) + b"\n"
    first = data.draw(st.integers(1, len(lines)))
    last = data.draw(st.integers(first, len(lines)))
    folder = tmp_path_factory.mktemp("landing")
    plain, packed = folder / "a.jsonl", folder / "a.jsonl.gz"
    plain.write_bytes(content)
    packed.write_bytes(gzip.compress(content))
    for path in (plain, packed):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(bronze, "_CHUNK_LINES", chunk)
            spans, texts = _read(path, first, last)
        assert texts == _expected(lines[first - 1:last])
        assert spans == [(n, min(chunk, last - n + 1)) for n in range(first, last + 1, chunk)]


def test_a_span_checks_its_lines_with_their_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = project_path("fixtures", "p2panda", "corpus.jsonl").read_bytes().splitlines()[:5]
    lines = [corpus[0] + b"\r", b"not json\r\rstill", b"\xff\xfe", b"", corpus[1], *corpus[2:]]
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"\n".join(lines))  # no line end after the last line
    monkeypatch.setattr(bronze, "_CHUNK_LINES", 3)

    batches = [bronze._check_span(*span, "a.jsonl", "sha", 1 << 20) for span in bronze._spans(str(path), 1, len(lines))]
    rows = [row for batch in batches for row in batch.to_pylist()]

    assert [r["source_line"] for r in rows] == list(range(1, len(lines) + 1))
    for row, text, line in zip(rows, _expected(lines), lines, strict=True):
        assert (row["source_file"], row["source_sha"]) == ("a.jsonl", "sha")
        if line == b"\xff\xfe":  # not UTF-8: kept as it came, shown with U+FFFD, not read as JSON
            assert (row["reason_code"], row["raw"], row["raw_bytes"]) == ("not_utf8", "\ufffd\ufffd", line)
            continue
        outcome = check_line(text)
        assert row["accepted"] is outcome.accepted
        assert row["reason_code"] == outcome.code
        assert row["raw"] == (None if outcome.accepted else text) and row["raw_bytes"] is None
    assert [r["accepted"] for r in rows] == [True, False, False, False, True, True, True, True]


def test_a_file_that_changed_during_the_ingest_is_an_error_not_lost_lines(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    [span] = bronze._spans(str(path), 1, 3)
    path.write_bytes(b"one\ntwo\n")

    with pytest.raises(ValueError, match=r"a\.jsonl at byte 0: expected 3 lines .* changed during the ingest"):
        bronze._check_span(*span, "a.jsonl", "sha", 1 << 20)


def test_a_range_past_the_end_of_the_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    assert [(s[3], s[4]) for s in bronze._spans(str(path), 2, 9)] == [(2, 2)]  # what the file has
    task = pa.RecordBatch.from_pylist([{"source_file": "a.jsonl", "source_sha": "sha", "path": str(path),
                                        "first_line": 2, "last_line": 9}])

    with pytest.raises(ValueError, match=r"a landing file changed during the ingest: a\.jsonl had lines 2\.\.9, and 2 of them were found"):
        list(bronze.check_landing_ranges(1 << 20)(iter([task])))
