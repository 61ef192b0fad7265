"""``make ingest`` on real p2panda entries: bronze contents, re-runs, crashes and a second writer.

LAKEHOUSE.md (bronze), FORMAT.md section 2, SEMANTICS.md section 7.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from lakehouse.lock import lake_lock
from lakehouse.spark import bronze, catalog
from lakehouse.spark.groups import spark_schema
from pipelines.ingest import run_ingest
from tests.conftest import project_path
from tests.lakes import rows, run_cli, write_landing

pytestmark = pytest.mark.parity

FIXTURES = ("fixtures", "p2panda")


def fixture_lines(name: str) -> list[dict[str, Any]]:
    """The fixture file's records as landing lines (only ``entry`` and ``payload``)."""
    out = []
    for line in project_path(*FIXTURES, name).read_text().splitlines():
        record = json.loads(line)
        out.append({"entry": record["entry"], "payload": record["payload"]})
    return out


MALFORMED = ["not json", "[1, 2]", '{"payload": "00"}', '{"entry": "zz", "payload": "00"}', ""]


@pytest.fixture
def landed(lake: Any) -> Any:
    """A landing folder with the corpus, its broken records and a few malformed lines."""
    write_landing(lake, "a_corpus.jsonl", fixture_lines("corpus.jsonl"))
    write_landing(lake, "b_broken.jsonl", fixture_lines("corpus_broken.jsonl") + MALFORMED)
    return lake


@pytest.mark.slow_on_spark(why="the crash tests ingest the same corpus on both engines and compare every table")
def test_every_landing_line_lands_in_exactly_one_place(spark: Any, landed: Any) -> None:
    summary = run_ingest(spark, landed)
    entries = rows(spark, landed, "bronze", "entries")
    rejected = rows(spark, landed, "bronze", "rejected")
    broken = [json.loads(x) for x in project_path(*FIXTURES, "corpus_broken.jsonl").read_text().splitlines()]
    on_their_own = {"bad_signature", "wrong_payload", "trailing_bytes", "truncated"}

    lines = 360 + len(broken) + len(MALFORMED)
    places = [(r["source_file"], r["source_line"]) for r in entries + rejected]
    assert len(places) == len(set(places)) == lines == summary.lines
    assert len(entries) == 360 + sum(b["broken"] not in on_their_own for b in broken) == summary.new
    assert all(len(r["entry_hash"]) == 68 for r in entries)
    expected = {b["entry"]: b["broken"] for b in broken if b["broken"] in on_their_own}
    got = {r["entry"].hex(): r["reason_code"] for r in rejected if r["entry"] is not None}
    assert got == expected
    by_line = {r["source_line"]: r["reason_code"] for r in rejected if r["entry"] is None}
    first = len(broken) + 1
    assert by_line == {first: "not_json", first + 1: "not_an_object", first + 2: "missing_entry",
                       first + 3: "bad_hex", first + 4: "blank_line"}
    # each table has the columns its declaration gives, in its order
    for name, ddl in (("entries", catalog.ENTRIES_DDL), ("rejected", catalog.REJECTED_DDL), ("files", catalog.FILES_DDL)):
        stored = spark.read.format("delta").load(f"{landed.lake_root}/bronze/{name}").schema
        assert [(f.name, f.dataType) for f in stored] == [(f.name, f.dataType) for f in spark_schema(ddl)], name


@pytest.mark.slow_on_spark(why="landing files are read by the same Python on both engines")
def test_a_gzipped_landing_file_with_crlf_line_ends_lands_as_a_plain_one(spark: Any, lake: Any, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [json.dumps(line) for line in fixture_lines("corpus.jsonl")[:300]] + MALFORMED + ["not\rjson", "\u00e9t\u00e9"]
    plain = write_landing(lake, "a.jsonl", lines)
    folder = Path(lake.landing)
    with gzip.open(folder / "b.jsonl.gz", "wb") as packed:
        packed.write(b"".join(line.encode() + b"\r\n" for line in lines))
    monkeypatch.setattr(bronze, "_CHUNK_LINES", 7)  # many spans, some cut inside a range

    summary = run_ingest(spark, lake)
    assert plain.read_bytes().count(b"\n") == len(lines)
    assert (summary.files_new, summary.lines, summary.new, summary.duplicate) == (2, 2 * len(lines), 300, 300)
    rejected = rows(spark, lake, "bronze", "rejected")
    by_file = {name: sorted((r["source_line"], r["raw"], r["reason_code"]) for r in rejected if r["source_file"] == name)
               for name in ("a.jsonl", "b.jsonl.gz")}
    assert by_file["a.jsonl"] == by_file["b.jsonl.gz"]
    assert [(line, raw) for line, raw, _ in by_file["a.jsonl"]] == list(enumerate(lines[300:], start=301))
    stored = rows(spark, lake, "bronze", "entries")
    assert {r["source_file"] for r in stored} == {"a.jsonl"}  # the first line of each entry wins
    assert sorted(r["source_line"] for r in stored) == list(range(1, 301))


@pytest.mark.slow_on_spark(why="the crash tests compare bronze.entries on both engines")
def test_entries_keep_their_raw_bytes(spark: Any, lake: Any) -> None:
    corpus = [json.loads(x) for x in project_path(*FIXTURES, "corpus.jsonl").read_text().splitlines()]
    write_landing(lake, "corpus.jsonl", [{"entry": r["entry"], "payload": r["payload"]} for r in corpus])
    run_ingest(spark, lake)
    stored = {r["entry_hash"]: r for r in rows(spark, lake, "bronze", "entries")}
    assert len(stored) == 360
    for record in corpus:
        got = stored[record["entry_hash"]]
        assert (got["entry"].hex(), got["payload"].hex()) == (record["entry"], record["payload"])
        assert (got["author"], got["log_id"], got["seq_num"]) == (record["author"], record["log_id"],
                                                                  record["seq_num"])
        assert (got["backlink"], got["skiplink"]) == (record["backlink"], record["skiplink"])


@pytest.mark.slow_on_spark(why="the crash tests rerun an ingest on both engines")
def test_rerun_and_duplicate_delivery_change_nothing(spark: Any, landed: Any) -> None:
    run_ingest(spark, landed)
    before = {t: rows(spark, landed, "bronze", t, drop=("ingested_at", "rejected_at")) for t in ("entries", "rejected")}

    again = run_ingest(spark, landed)
    assert again.files_new == 0
    # the same entries delivered again in another file: counted as duplicates, nothing stored twice
    write_landing(landed, "c_again.jsonl", fixture_lines("corpus.jsonl")[:50])
    third = run_ingest(spark, landed)
    assert (third.files_new, third.new, third.duplicate) == (1, 0, 50)
    after = {t: rows(spark, landed, "bronze", t, drop=("ingested_at", "rejected_at")) for t in ("entries", "rejected")}
    assert after == before


@pytest.mark.slow_on_spark(why="a window ranking the property tests reach on both engines")
def test_an_entry_on_several_lines_of_one_ingest_is_stored_once_from_its_first_line(spark: Any, lake: Any) -> None:
    corpus = fixture_lines("corpus.jsonl")
    write_landing(lake, "a.jsonl", corpus[:40])
    write_landing(lake, "b.jsonl", corpus[30:60] + corpus[35:36])
    summary = run_ingest(spark, lake)
    assert (summary.lines, summary.new, summary.duplicate) == (71, 60, 11)
    stored = rows(spark, lake, "bronze", "entries")
    assert len(stored) == len({r["entry_hash"] for r in stored}) == 60
    places = {r["entry"].hex(): (r["source_file"], r["source_line"]) for r in stored}
    for i, line in enumerate(corpus[:60]):
        assert places[line["entry"]] == (("a.jsonl", i + 1) if i < 40 else ("b.jsonl", i - 29))


@pytest.mark.parametrize("point", ["entries", "rejected", "files"])
def test_a_crash_between_commits_loses_and_duplicates_nothing(spark: Any, landed: Any, tmp_path: Path,
                                                             point: str) -> None:
    crashed = run_cli(landed, "ingest", LAKEHOUSE_FAULT_AFTER=point)
    assert crashed.returncode == 70, crashed.stderr
    run_ingest(spark, landed)  # the next run completes the work

    clean = landed.with_overrides(lake_root=str(tmp_path / "clean"))
    run_ingest(spark, clean)
    for name, drop in (("entries", ("ingested_at", "batch_id")), ("rejected", ("rejected_at", "batch_id")),
                       ("files", ("ingested_at", "batch_id"))):
        assert rows(spark, landed, "bronze", name, drop=drop) == rows(spark, clean, "bronze", name, drop=drop), name


def test_a_second_run_stops_with_a_clear_message_while_the_lake_is_locked(landed: Any) -> None:
    with lake_lock(str(landed.lake_root), "materialize"):
        second = run_cli(landed, "ingest")
    assert second.returncode != 0
    assert "in use by another run" in second.stderr + second.stdout
    assert "materialize" in second.stderr + second.stdout
    assert not Path(landed.lake_root, "bronze").exists()


def test_a_waiting_run_proceeds_once_the_lock_is_released(landed: Any) -> None:
    import threading

    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with lake_lock(str(landed.lake_root), "test"):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    threading.Timer(1.0, release.set).start()
    waited = run_cli(landed, "ingest", LAKEHOUSE_LOCK_TIMEOUT="60")
    holder.join()
    assert waited.returncode == 0, waited.stderr
    assert "new entries" in waited.stdout


def test_ingest_with_a_missing_landing_folder_names_it(lake: Any, tmp_path: Path) -> None:
    """Issue: a missing landing folder read as 'nothing new'."""
    missing = tmp_path / "no-such-folder"
    done = run_cli(lake.with_overrides(landing=str(missing)), "ingest")
    assert done.returncode == 0, done.stderr
    assert str(missing) in done.stdout + done.stderr and "does not exist" in done.stdout + done.stderr


def test_a_bad_landing_file_is_recorded_and_the_others_go_on(lake: Any) -> None:
    """Issue: a truncated .jsonl.gz printed only 'Aborted!', one that is not gzip a BadGzipFile
    traceback, and an empty file as the only new file an AnalysisException traceback; each
    blocked every later ingest."""
    folder = Path(lake.landing)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a_empty.jsonl").write_bytes(b"")
    only_empty = run_cli(lake, "ingest")
    assert only_empty.returncode == 0 and "Traceback" not in only_empty.stderr, only_empty.stderr

    good = [json.dumps(line) for line in fixture_lines("corpus.jsonl")[:20]]
    packed = gzip.compress("".join(f"{line}\n" for line in good).encode())
    (folder / "b_truncated.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (folder / "c_not_gzip.jsonl.gz").write_bytes(b"plain text, not gzip\n")
    write_landing(lake, "d_good.jsonl", good)
    done = run_cli(lake, "ingest")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    said = done.stdout + done.stderr
    assert "b_truncated.jsonl.gz cannot be read" in said and "c_not_gzip.jsonl.gz cannot be read" in said

    run_cli(lake, "ingest")  # nothing new: the bad files are not read again
    listing = run_cli(lake, "sql", "SELECT source_file, source_line, reason_code FROM bronze.rejected "
                                   "ORDER BY source_file", "--format", "json")
    assert [json.loads(line) for line in listing.stdout.splitlines()] == [
        {"source_file": "b_truncated.jsonl.gz", "source_line": 0, "reason_code": "bad_file"},
        {"source_file": "c_not_gzip.jsonl.gz", "source_line": 0, "reason_code": "bad_file"}]
    counted = run_cli(lake, "sql", "SELECT count(*) AS n FROM bronze.entries", "--format", "json")
    assert [json.loads(line) for line in counted.stdout.splitlines()] == [{"n": 20}]


def test_a_file_repeating_an_ingested_one_is_named_once_in_the_summary(lake: Any) -> None:
    """Issue: an identical re-delivered file was skipped without a line in the summary."""
    lines = fixture_lines("corpus.jsonl")[:10]
    write_landing(lake, "a_first.jsonl", lines)
    assert run_cli(lake, "ingest").returncode == 0
    write_landing(lake, "b_again.jsonl", lines)
    write_landing(lake, "c_new.jsonl", fixture_lines("corpus.jsonl")[10:15])
    done = run_cli(lake, "ingest")
    assert done.returncode == 0, done.stderr
    assert "b_again.jsonl skipped: the same content as a_first.jsonl, ingested before" in done.stdout
    assert "files skipped as repeats" in done.stdout

    write_landing(lake, "d_again.jsonl", lines)  # the only new file is a repeat
    alone = run_cli(lake, "ingest")
    assert "d_again.jsonl skipped: the same content as a_first.jsonl" in alone.stdout, alone.stderr
    again = run_cli(lake, "ingest")  # listed now: not named again
    assert again.returncode == 0 and "skipped" not in again.stdout and "nothing new" in again.stdout
    counted = run_cli(lake, "sql", "SELECT count(*) AS n FROM bronze.entries", "--format", "json")
    assert [json.loads(line) for line in counted.stdout.splitlines()] == [{"n": 15}]


@pytest.mark.slow_on_spark(why="landing files are read by the same Python on both engines")
def test_a_byte_order_mark_at_the_start_of_a_landing_file_is_not_part_of_its_first_line(spark: Any, lake: Any) -> None:
    """Issue: a UTF-8 BOM at the start of a landing file got the file's first line rejected."""
    lines = [json.dumps(line) for line in fixture_lines("corpus.jsonl")[:5]]
    folder = Path(lake.landing)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + "".join(f"{line}\n" for line in lines).encode())
    with gzip.open(folder / "bom.jsonl.gz", "wb") as packed:
        packed.write(b"\xef\xbb\xbf" + "".join(f"{line}\r\n" for line in reversed(lines)).encode())
    summary = run_ingest(spark, lake)
    assert (summary.lines, summary.new, summary.duplicate, sum(summary.rejected.values())) == (10, 5, 5, 0)


def test_lines_appended_to_an_ingested_file_are_the_only_ones_read_again(spark: Any, lake: Any) -> None:
    """Issue: a line appended to an ingested landing file made the whole file read again and its
    rejected lines stored twice."""
    corpus = [json.dumps(line) for line in fixture_lines("corpus.jsonl")]
    path = write_landing(lake, "grows.jsonl", [*corpus[:20], "not json", *corpus[20:25], "[1]"])
    first = run_ingest(spark, lake)
    assert (first.lines, first.new, sum(first.rejected.values())) == (27, 25, 2)
    with path.open("a") as out:
        out.write("".join(f"{line}\n" for line in [*corpus[25:35], "not json either"]))
    second = run_ingest(spark, lake)
    assert (second.files_new, second.lines, second.new, second.duplicate) == (1, 11, 10, 0)
    rejected = rows(spark, lake, "bronze", "rejected")
    assert sorted((r["source_line"], r["raw"]) for r in rejected) == [(21, "not json"), (27, "[1]"),
                                                                     (38, "not json either")]
    places = sorted((r["source_file"], r["source_line"]) for r in rows(spark, lake, "bronze", "entries"))
    assert places == [("grows.jsonl", n) for n in [*range(1, 21), *range(22, 27), *range(28, 38)]]
    # a file changed within the lines already read is read whole: its entries are duplicates
    path.write_text("".join(f"{line}\n" for line in corpus[1:40]))
    third = run_ingest(spark, lake)
    assert (third.lines, third.new, third.duplicate) == (39, 5, 34)


def test_new_entries_are_counted_from_the_log_and_by_the_engine_when_it_does_not_tell(
        spark: Any, lake: Any, monkeypatch: Any) -> None:
    """A run's new entries are counted from the statistics of the files its append added to
    ``bronze.entries``; when the Delta log cannot be read here, the engine counts them, to the
    same figure: each batch's count is its rows in the table."""
    from lakehouse.spark import deltalog

    corpus = fixture_lines("corpus.jsonl")
    write_landing(lake, "a.jsonl", corpus[:30])
    first = run_ingest(spark, lake)
    write_landing(lake, "b.jsonl", corpus[20:50])  # ten entries again, twenty new

    def unreadable(*_: Any, **__: Any) -> Any:
        raise deltalog.DeltaLogError("not read here")

    monkeypatch.setattr(deltalog, "snapshot", unreadable)
    second = run_ingest(spark, lake)
    batches = [r["batch_id"] for r in rows(spark, lake, "bronze", "entries")]
    assert (first.new, second.new, second.duplicate) == (30, 20, 10)
    assert [first.new, second.new] == [batches.count(first.batch_id), batches.count(second.batch_id)]


def test_a_line_that_is_not_utf8_is_kept_with_its_exact_bytes(spark: Any, lake: Any) -> None:
    """Issue: binary junk in ``bronze.rejected.raw`` was stored with ``\\x..`` escapes that cannot be
    told from text. A lake whose ``bronze.rejected`` is older than ``raw_bytes`` gains the column."""
    from lakehouse.spark.tables import table

    old_ddl = catalog.REJECTED_DDL.replace(", raw_bytes BINARY", "")
    old = (Path(lake.landing) / "old.jsonl").as_posix()
    spark.createDataFrame([(old, "0" * 64, 1, "x", None, None, None, "not_json", "not JSON", 1, None)],
                          old_ddl).write.format("delta").save(table(str(lake.lake_root), "bronze", "rejected").location)
    folder = Path(lake.landing)
    folder.mkdir(parents=True, exist_ok=True)
    junk = b'{"entry": "\xff\xfe00", "payload": "00"}'
    (folder / "junk.jsonl").write_bytes(junk + b"\n" + rb'{"entry": "\xff"}' + b"\n")
    summary = run_ingest(spark, lake)
    assert summary.rejected == {"not_utf8": 1, "not_json": 1}  # a backslash-x is no JSON escape
    stored = {r["source_line"]: r for r in rows(spark, lake, "bronze", "rejected") if r["source_file"] == "junk.jsonl"}
    assert bytes(stored[1]["raw_bytes"]) == junk and stored[1]["reason_code"] == "not_utf8"
    assert stored[1]["raw"] == '{"entry": "\ufffd\ufffd00", "payload": "00"}'
    assert "byte 0xff at byte 12" in stored[1]["reason"]
    assert stored[2]["raw"] == r'{"entry": "\xff"}' and stored[2]["raw_bytes"] is None
    before = [r for r in rows(spark, lake, "bronze", "rejected") if r["source_file"] == old]
    assert len(before) == 1 and before[0]["raw_bytes"] is None


def test_a_landing_setting_that_names_a_file_is_an_error_that_says_so(lake: Any, tmp_path: Path) -> None:
    """Issue: a landing setting that named a regular file read as a missing folder ("nothing to
    ingest", exit 0, hiding a typo), and `schema init` then failed with `FileExistsError [unexpected]`."""
    typo = tmp_path / "landing.jsonl"
    typo.write_text("")
    for args in (["ingest"], ["schema", "init", "notes"]):
        done = run_cli(lake, *args, LAKEHOUSE_LANDING=str(typo))
        assert done.returncode == 1 and done.stderr.rstrip().endswith("[not_a_folder]"), done.stderr
        assert str(typo) in done.stderr and "Traceback" not in done.stderr
    assert typo.read_text() == "" and not Path(lake.keys).exists()


def test_a_landing_file_that_goes_away_during_an_ingest_stops_it_cleanly(spark: Any, lake: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue: a landing file deleted during an ingest ended in `PythonException ... [unexpected]`
    with no trace. The ingest stops naming the file, stores nothing of the batch, and the next
    one reads the folder as it is then."""
    import pipelines.ingest as ingest
    from lakehouse.errors import LandingError

    write_landing(lake, "a.jsonl", fixture_lines("corpus.jsonl")[:10])
    gone = write_landing(lake, "b.jsonl", fixture_lines("corpus.jsonl")[10:20])
    scan = ingest.scan_landing

    def scan_then_delete(landing: str) -> Any:
        found = scan(landing)
        gone.unlink()  # after the scan, before the engine reads it
        return found

    monkeypatch.setattr(ingest, "scan_landing", scan_then_delete)
    with pytest.raises(LandingError) as excinfo:
        run_ingest(spark, lake)
    assert excinfo.value.code == "landing_changed" and "b.jsonl" in str(excinfo.value)
    assert rows(spark, lake, "bronze", "entries") == [] and rows(spark, lake, "bronze", "files") == []
    monkeypatch.setattr(ingest, "scan_landing", scan)
    assert run_ingest(spark, lake).new == 10
