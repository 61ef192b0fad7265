"""The cascade region walk's reverse-edge index (``lakehouse.spark.edge_index``): built from staged
edges, brought up to date run after run, saved and opened again, it answers what points at an id
and what an id points at as the edges of the states now do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.spark import edge_index
from lakehouse.spark.edge_index import EdgeIndex, Stamp, raw_ids

IDS = 12


def hex_id(n: int) -> str:
    return f"0020{n:064x}"


def raw(n: int) -> bytes:
    return bytes.fromhex(hex_id(n))


State = tuple[bool, list[int]]  # deleted, targets
graphs = st.dictionaries(st.integers(0, IDS - 1), st.tuples(st.booleans(), st.lists(st.integers(0, IDS - 1), max_size=3)))


def staged(states: dict[int, State]) -> Any:
    """The staged region edges of ``states`` (``REGION_EDGES_DDL``, hex), as the engine stages them:
    a row per target, duplicates kept, and a row with a null target for a deleted state with none."""
    rows = [(hex_id(n), deleted, hex_id(t) if t is not None else None)
            for n, (deleted, targets) in sorted(states.items()) for t in (targets or ([None] if deleted else []))]
    return pa.table({"source": pa.array([r[0] for r in rows], pa.string()),
                     "deleted": pa.array([r[1] for r in rows], pa.bool_()),
                     "target": pa.array([r[2] for r in rows], pa.string())})


def assert_answers(index: EdgeIndex, states: dict[int, State]) -> None:
    assert index.deleted_count == sum(deleted for deleted, _ in states.values())
    assert index.deleted_among(raw(n) for n in range(IDS)) == {raw(n) for n, (deleted, _) in states.items() if deleted}
    assert index.states_of(raw(n) for n in range(IDS)) == {
        raw(n): (states[n][0], sorted({raw(t) for t in states[n][1]})) if n in states else (False, [])
        for n in range(IDS)}
    for n in range(IDS):
        for ids in ({n}, {n, (n + 5) % IDS}):
            assert index.pointing_at(raw(i) for i in ids) == {
                (raw(s), deleted) for s, (deleted, targets) in states.items() if set(targets) & ids}
            assert index.targets_of(raw(i) for i in ids) == {
                raw(t) for s, (_, targets) in states.items() if s in ids for t in targets}


@settings(max_examples=60, deadline=None)
@given(first=graphs, runs=st.lists(st.tuples(st.sets(st.integers(0, IDS - 1)), graphs), max_size=4),
       compact=st.sampled_from([0, 3, 1_000]))
def test_an_index_patched_run_after_run_answers_as_the_edges_of_the_states_now(
        tmp_path_factory: Any, first: dict[int, State], runs: list[tuple[set[int], dict[int, State]]],
        compact: int) -> None:
    """Each run changes some states (a changed id may lose its state, its edges go with it), patches
    the index it opened, saves it, and the next opens it: every answer is that of the states now,
    whether the patch grew or the base was written again (``COMPACT_ROWS``)."""
    root = str(tmp_path_factory.mktemp("lake"))
    schemas = ("s1", "s2")
    old, edge_index.COMPACT_ROWS = edge_index.COMPACT_ROWS, compact
    try:
        index = EdgeIndex.of_edges(staged(first))
        assert index is not None
        assert_answers(index, first)
        index.save(root, Stamp(1, 10, schemas))
        states = dict(first)
        for run, (changed, news) in enumerate(runs, start=2):
            opened = EdgeIndex.open(root, Stamp(run - 1, 10 + run - 2, schemas))
            assert opened is not None
            for n in changed:
                states.pop(n, None)
                if n in news:
                    states[n] = news[n]
            index = opened.patched({raw(n) for n in changed},
                                   [(raw(n), news[n][0], [raw(t) for t in news[n][1]]) for n in changed if n in news])
            assert_answers(index, states)
            if compact == 0:  # any patch passes the bound: the base is written again
                assert index.rows[1] == 0
            index.save(root, Stamp(run, 10 + run - 1, schemas))
        # what the folder keeps: the last run's patch and the base it names (its edges and its
        # deleted ids), nothing else
        assert len(list(Path(root, edge_index.FOLDER).iterdir())) == 3
    finally:
        edge_index.COMPACT_ROWS = old


def test_an_index_is_trusted_only_as_the_last_finished_run_left_it(tmp_path: Path) -> None:
    """Opened only under the gold run that wrote it, the silver run its states reflect and the same
    schemas: a run that died after saving leaves a patch no finished run names, and a lake whose
    schemas or silver run moved without it builds the index again."""
    states = {0: (False, [1]), 2: (True, [1, 3])}
    index = EdgeIndex.of_edges(staged(states))
    assert index is not None
    index.save(str(tmp_path), Stamp(4, 7, ("s1",)))
    assert EdgeIndex.open(str(tmp_path), Stamp(4, 7, ("s1",))) is not None
    for other in (Stamp(3, 7, ("s1",)), Stamp(5, 7, ("s1",)), Stamp(4, 8, ("s1",)), Stamp(4, 7, ("s1", "s2"))):
        assert EdgeIndex.open(str(tmp_path), other) is None, other
    Path(tmp_path, edge_index.FOLDER, "patch-000000000004.arrow").write_bytes(b"not arrow")
    assert EdgeIndex.open(str(tmp_path), Stamp(4, 7, ("s1",))) is None


@pytest.mark.parametrize("bad", ["0020" + "0" * 63, "0020" + "A" * 64, "0020" + "g" * 64, "0020" + "é" * 32,
                                 "0020" + "ab" * 30 + " " * 4, "0020" + "ab " * 20 + "ab" * 2])
@pytest.mark.parametrize("where", ["source", "target"])
def test_ids_that_are_not_entry_hashes_make_no_index(bad: str, where: str) -> None:
    """Raw ids are 34 bytes from 68 lowercase hex characters: anything else (a relation value is
    checked as such, but the index does not depend on it) leaves the walk on the staged edges."""
    assert raw_ids(pa.array([hex_id(1), bad], pa.string())) is None
    ids = {"source": [hex_id(1), hex_id(2)], "target": [hex_id(3), None]}
    ids[where][0] = bad
    edges = pa.table({"source": pa.array(ids["source"], pa.string()), "deleted": pa.array([True, True]),
                      "target": pa.array(ids["target"], pa.string())})
    assert EdgeIndex.of_edges(edges) is None
    assert raw_ids(pa.array([hex_id(1), None], pa.string())) is None


def test_raw_ids_are_the_bytes_of_the_hex_across_chunks_and_slices() -> None:
    hexes = [hex_id(n * 7919) for n in range(9)]
    chunked = pa.chunked_array([pa.array(hexes[:4], pa.string()), pa.array(hexes[4:], pa.string())])
    assert raw_ids(chunked).to_pylist() == [bytes.fromhex(h) for h in hexes]
    assert raw_ids(pa.array(hexes, pa.string()).slice(3, 4)).to_pylist() == [bytes.fromhex(h) for h in hexes[3:7]]


def test_an_index_on_object_storage_is_saved_opened_and_patched_there(store: Any) -> None:
    """A lake at ``s3://...`` keeps its index on the store: saved by one run, opened and patched by
    the next, the older run's files taken away, and removed with the lake's index."""
    import boto3

    root = "s3://lake/indexed"
    states = {0: (False, [1]), 1: (False, [2]), 3: (True, [])}
    built = EdgeIndex.of_edges(staged(states))
    assert built is not None
    built.save(root, Stamp(1, 5, ("s1",)))
    opened = EdgeIndex.open(root, Stamp(1, 5, ("s1",)))
    assert opened is not None
    assert_answers(opened, states)
    opened.patched({raw(1)}, [(raw(1), True, [raw(3)])]).save(root, Stamp(2, 6, ("s1",)))
    again = EdgeIndex.open(root, Stamp(2, 6, ("s1",)))
    assert again is not None
    assert_answers(again, {**states, 1: (True, [3])})

    def keys() -> list[str]:
        listed = boto3.client("s3").list_objects_v2(Bucket="lake", Prefix=f"indexed/{edge_index.FOLDER}/")
        # pyarrow keeps a folder marker (a key ending in "/") where it deleted a folder's last file
        return sorted(o["Key"].split("/")[-1] for o in listed.get("Contents", []) if not o["Key"].endswith("/"))

    assert keys() == ["base-000000000001.arrow", "gone-000000000001.arrow", "patch-000000000002.arrow"]
    edge_index.remove(root)
    assert keys() == [] and EdgeIndex.open(root, Stamp(2, 6, ("s1",))) is None


def test_a_machine_maps_the_base_of_an_index_on_object_storage_from_its_cache(store: Any, tmp_path: Path,
                                                                              monkeypatch: Any) -> None:
    """A lake on the store with a cache folder: the base's two files are kept on the store and in
    the cache, named there by their digests, which the patch records. A run on this machine maps
    them from the cache (it opens with the store's base gone), another machine fetches them once
    into its own cache (checked against the digests: a base whose bytes differ makes no index),
    and the cache keeps only the current base's files."""
    import boto3

    root, cache, other = "s3://lake/cached", tmp_path / "cache", tmp_path / "other-machine"
    states = {0: (False, [1]), 1: (False, [2]), 3: (True, [])}
    built = EdgeIndex.of_edges(staged(states))
    assert built is not None
    built.save(root, Stamp(1, 5, ("s1",)), cache)
    (copies,) = cache.iterdir()
    cached = sorted(p.name for p in copies.iterdir())
    assert len(cached) == 2 and all(name.endswith(".arrow") and len(name) == 64 + 6 for name in cached)

    fetched = EdgeIndex.open(root, Stamp(1, 5, ("s1",)), other)
    assert fetched is not None
    assert_answers(fetched, states)
    assert sorted(p.name for p in next(other.iterdir()).iterdir()) == cached

    s3 = boto3.client("s3")
    key = f"cached/{edge_index.FOLDER}/base-000000000001.arrow"
    stored = s3.get_object(Bucket="lake", Key=key)["Body"].read()
    s3.delete_object(Bucket="lake", Key=key)
    opened = EdgeIndex.open(root, Stamp(1, 5, ("s1",)), cache)
    assert opened is not None, "the base is mapped from the cache, not read from the store"
    assert_answers(opened, states)
    assert EdgeIndex.open(root, Stamp(1, 5, ("s1",))) is None, "without the cache the base is read from the store"

    # another machine's cache is empty and the store's base is not the one the patch names
    s3.put_object(Bucket="lake", Key=key, Body=stored[:-8] + bytes(8))
    assert EdgeIndex.open(root, Stamp(1, 5, ("s1",)), tmp_path / "third-machine") is None
    assert not [p for p in (tmp_path / "third-machine").rglob("*") if p.is_file()], "no copy of bytes that differ"
    s3.put_object(Bucket="lake", Key=key, Body=stored)

    # the base written again (a patch past COMPACT_ROWS): the cache keeps the new base's files only
    monkeypatch.setattr(edge_index, "COMPACT_ROWS", 0)
    now = {**states, 1: (True, [3])}
    compacted = opened.patched({raw(1)}, [(raw(1), True, [raw(3)])])
    compacted.save(root, Stamp(2, 6, ("s1",)), cache)
    after = sorted(p.name for p in copies.iterdir())
    assert len(after) == 2 and not set(after) & set(cached)
    again = EdgeIndex.open(root, Stamp(2, 6, ("s1",)), tmp_path / "fourth-machine")
    assert again is not None
    assert_answers(again, now)
    assert sorted(p.name for p in next((tmp_path / "fourth-machine").iterdir()).iterdir()) == after
