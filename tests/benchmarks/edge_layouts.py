"""``python -m tests.benchmarks.edge_layouts``: two layouts a region walk's reverse edges could be
kept in between runs, against the staging a walk does today, on a materialized lake.

``python -m tests.benchmarks.edge_layouts --lake DIR [--buckets 1024] [--regions 3] [--changed 100]
[--json FILE]``. ``DIR`` is a lake root gold has run on (a trickle bench's ``DIR/base``). Sail only:
the layouts are read in the client, and the engine only stages the edges once, as
:class:`lakehouse.spark.cascades.RegionEdges` does (timed: today's cost before a walk's first level).
Then, with the staged edges as an Arrow table:

- **buckets**: the edges written as parquet, a folder per bucket of the target (``--buckets``),
  then per region a walk that reads the buckets of each level's ids once, and a patch that takes
  ``--changed`` random sources' edges out of their buckets and puts them back, rewriting each
  bucket it touches;
- **sorted**: the edges as one Arrow IPC file sorted by target, ids as 34 raw bytes, opened as a
  memory map and walked by binary search.

A region starts at ``--changed`` random targets (as a trickle's changed instances) and grows a level
at a time through what points at it, not past a deleted source, as
:func:`lakehouse.spark.cascades.update_in_region` walks; every layout's region must equal the walk over
the whole table in memory (checked). Seconds per action; the files a walk read.
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from tests.benchmarks.suite import print_figures

IDS = 34
"""Bytes of an instance id (FORMAT.md section 1: a YASMF hash, two bytes of prefix and 32 of BLAKE3)."""


def staged_edges(lake: str, folder: str) -> tuple[Any, float]:
    """The lake's reverse edges staged and read here as a walk stages them
    (:meth:`lakehouse.spark.cascades.RegionEdges.stage`): the Arrow table and the seconds it took."""
    from lakehouse.config import load_settings
    from lakehouse.spark import cascades, delta
    from lakehouse.spark.groups import arrow_schema
    from lakehouse.spark.session import open_engine
    from lakehouse.spark.tables import table

    settings = load_settings(environ={}).with_overrides(lake_root=lake, engine="sail")
    with open_engine(settings) as running:
        states = running.spark.read.format("delta").load(table(lake, "silver", "instance_states").location)
        states.select("instance_id").limit(1).collect()  # the table's log read before the clock starts
        started = time.monotonic()
        cascades.RegionEdges(running.spark, states).stage(f"{folder}/staged", client_edges=1 << 62)
        staged = time.monotonic() - started
    return delta.read_staged(f"{folder}/staged", arrow_schema(cascades.REGION_EDGES_DDL)), staged


def _raw(hex_ids: Any) -> Any:
    """Hex ids (an Arrow string array of ``2 * IDS`` characters each) as a numpy array of raw ids
    (void, ``IDS`` bytes: compared and read out byte for byte), decoded with a lookup table."""
    import numpy as np

    chars = np.frombuffer(hex_ids.buffers()[2], dtype=np.uint8)[hex_ids.offset * 2 * IDS:]
    chars = chars[:len(hex_ids) * 2 * IDS].reshape(len(hex_ids), 2 * IDS)
    table = np.zeros(256, dtype=np.uint8)
    table[np.frombuffer(b"0123456789", np.uint8)] = np.arange(10)
    table[np.frombuffer(b"abcdef", np.uint8)] = np.arange(10, 16)
    raw = (table[chars[:, 0::2]] << 4) | table[chars[:, 1::2]]
    return np.ascontiguousarray(raw).view(f"V{IDS}").ravel()


def whole_walk(edges: Any, changed: set[str]) -> set[str]:
    """The region of ``changed`` (hex) walked over every edge in memory (the check)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    region: set[str] = set()
    frontier = set(changed)
    while frontier:
        region |= frontier
        hit = edges.filter(pc.is_in(edges.column("target"), value_set=pa.array(sorted(frontier), pa.string())))
        found = set(zip(hit.column("source").to_pylist(), hit.column("deleted").to_pylist(), strict=True))
        frontier = {s for s, d in found if not d} - region
        region |= {s for s, _ in found}
    return region


def bucket_layout(edges: Any, folder: str, buckets: int, regions: list[set[str]], moved: list[set[str]]
                  ) -> dict[str, Any]:
    """The **buckets** layout of the module docstring: written, walked per region, patched."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    def bucket_of(i: str) -> int:
        return int(i[4:8], 16) % buckets

    started = time.monotonic()
    of = np.array([bucket_of(i) for i in edges.column("target").to_pylist()], dtype=np.int32)
    laid = edges.append_column("b", pa.array(of))
    ds.write_dataset(laid, folder, format="parquet", partitioning=ds.partitioning(pa.schema([("b", pa.int32())])),
                     existing_data_behavior="overwrite_or_ignore")
    figures: dict[str, Any] = {"written_s": round(time.monotonic() - started, 3), "walks": []}
    for changed, sources in zip(regions, moved, strict=True):
        started = time.monotonic()
        read: dict[int, Any] = {}
        region: set[str] = set()
        frontier, levels = set(changed), 0
        while frontier:
            region |= frontier
            levels += 1
            found: set[tuple[str, bool]] = set()
            for b in {bucket_of(i) for i in frontier}:
                if b not in read:
                    read[b] = pq.read_table(f"{folder}/{b}", columns=["source", "deleted", "target"])
                hit = read[b].filter(pc.is_in(read[b].column("target"), value_set=pa.array(sorted(frontier), pa.string())))
                found |= set(zip(hit.column("source").to_pylist(), hit.column("deleted").to_pylist(), strict=True))
            frontier = {s for s, d in found if not d} - region
            region |= {s for s, _ in found}
        walked = time.monotonic() - started
        started = time.monotonic()
        rows = laid.filter(pc.is_in(laid.column("source"), value_set=pa.array(sorted(sources), pa.string())))
        touched = set(rows.column("b").to_pylist())
        for b in touched:
            old = pq.read_table(f"{folder}/{b}", columns=["source", "deleted", "target"])
            kept = old.filter(pc.invert(pc.is_in(old.column("source"), value_set=pa.array(sorted(sources), pa.string()))))
            new = rows.filter(pc.equal(rows.column("b"), b)).select(kept.column_names)
            shutil.rmtree(f"{folder}/{b}")
            Path(f"{folder}/{b}").mkdir()
            pq.write_table(pa.concat_tables([kept, new]), f"{folder}/{b}/part-0.parquet")
        figures["walks"].append({"region": region, "levels": levels, "files_read": len(read),
                                 "walk_s": round(walked, 4), "patched_buckets": len(touched),
                                 "patch_s": round(time.monotonic() - started, 3)})
    return figures


def sorted_layout(edges: Any, path: str, regions: list[set[str]]) -> dict[str, Any]:
    """The **sorted** layout of the module docstring: written, then per region opened and walked."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.ipc as ipc

    started = time.monotonic()
    targets, sources = _raw(edges.column("target").combine_chunks()), _raw(edges.column("source").combine_chunks())
    order = np.argsort(targets.view(f"S{IDS}"), kind="stable")  # byte order (S: for the sort only)
    columns = {"target": targets[order], "source": sources[order]}
    out = pa.table({name: pa.FixedSizeBinaryArray.from_buffers(pa.binary(IDS), len(ids), [None, pa.py_buffer(ids.tobytes())])
                    for name, ids in columns.items()} | {"deleted": edges.column("deleted").take(pa.array(order))})
    with pa.OSFile(path, "wb") as sink, ipc.new_file(sink, out.schema) as writer:
        writer.write_table(out)
    figures: dict[str, Any] = {"written_s": round(time.monotonic() - started, 3), "walks": []}
    for changed in regions:
        started = time.monotonic()
        mapped = ipc.open_file(pa.memory_map(path)).read_all()
        keys = np.frombuffer(mapped.column("target").chunk(0).buffers()[1], dtype=f"V{IDS}")
        froms = np.frombuffer(mapped.column("source").chunk(0).buffers()[1], dtype=f"V{IDS}")
        deleted = mapped.column("deleted").chunk(0).to_numpy(zero_copy_only=False)
        opened = time.monotonic() - started
        started = time.monotonic()
        region: set[bytes] = set()
        frontier, levels = {bytes.fromhex(i) for i in changed}, 0
        while frontier:
            region |= frontier
            levels += 1
            asked = np.array(sorted(frontier), dtype=f"S{IDS}").view(f"V{IDS}")
            low = np.searchsorted(keys.view(f"S{IDS}"), asked.view(f"S{IDS}"), "left")
            high = np.searchsorted(keys.view(f"S{IDS}"), asked.view(f"S{IDS}"), "right")
            found = {(froms[i].tobytes(), bool(deleted[i])) for a, b in zip(low, high, strict=True) for i in range(a, b)}
            frontier = {s for s, d in found if not d} - region
            region |= {s for s, _ in found}
        figures["walks"].append({"region": {i.hex() for i in region}, "levels": levels, "open_s": round(opened, 4),
                                 "walk_s": round(time.monotonic() - started, 4)})
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", required=True, help="a lake root gold has run on")
    parser.add_argument("--buckets", type=int, default=1024)
    parser.add_argument("--regions", type=int, default=3)
    parser.add_argument("--changed", type=int, default=100, help="random targets a region starts at")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lakehouse-edges-") as folder:
        edges, staged = staged_edges(args.lake, folder)
        rng = random.Random(7)
        targets, sources = edges.column("target").to_pylist(), edges.column("source").to_pylist()
        regions = [set(rng.sample(targets, args.changed)) for _ in range(args.regions)]
        moved = [set(rng.sample(sources, args.changed)) for _ in range(args.regions)]
        expected = [whole_walk(edges, changed) for changed in regions]
        started = time.monotonic()
        for changed in regions:
            whole_walk(edges, changed)
        in_memory = (time.monotonic() - started) / len(regions)
        buckets = bucket_layout(edges, f"{folder}/buckets", args.buckets, regions, moved)
        ordered = sorted_layout(edges, f"{folder}/edges.arrow", regions)
    for layout in (buckets, ordered):
        for walk, region in zip(layout["walks"], expected, strict=True):
            assert walk.pop("region") == region, "a layout's walk found another region"
    figures = {"edges": edges.num_rows, "staged_s": round(staged, 3), "in_memory_walk_s": round(in_memory, 4),
               "regions": [len(r) for r in expected], "buckets": buckets, "sorted": ordered}
    table = Table("action", *(f"region {n} ({size} ids)" for n, size in enumerate(figures["regions"])),
                  title=f"{edges.num_rows:,} edges, staged and read in {staged:.2f} s")
    table.add_row("walk over every edge in memory, s", *([f"{in_memory:.3f}"] * len(regions)))
    table.add_row(f"buckets ({args.buckets}): walk, s", *(f"{w['walk_s']:.3f}" for w in buckets["walks"]))
    table.add_row("buckets: files read", *(str(w["files_read"]) for w in buckets["walks"]))
    table.add_row(f"buckets: patch of {args.changed} sources, s (buckets)",
                  *(f"{w['patch_s']:.3f} ({w['patched_buckets']})" for w in buckets["walks"]))
    table.add_row("sorted file: open, s", *(f"{w['open_s']:.4f}" for w in ordered["walks"]))
    table.add_row("sorted file: walk, s", *(f"{w['walk_s']:.4f}" for w in ordered["walks"]))
    table.caption = f"written: buckets {buckets['written_s']:.2f} s, sorted file {ordered['written_s']:.2f} s"
    print_figures(table, figures, args.json)


if __name__ == "__main__":
    main()
