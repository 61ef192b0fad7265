"""The cost of a revert near the head, against a full rebuild (SEMANTICS.md section 6).

Run: ``.venv/bin/python -m tests.benchmarks.revert_cost --messages 100000``. Generates a realistic
history, ingests and materializes it (every schema registered), then signs a revert of the schema
with the most versions to its previous gold version, and times materializing it (the time travel
plus replay path) against ``materialize --rebuild`` of the same lake. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from lakehouse.config import load_settings
from lakehouse.core.entries import decode_entry, lipmaa, sign_entry, skiplink_required, yasmf_hash
from lakehouse.core.messages import SchemaId, SchemaRevert, encode_message
from lakehouse.core.schemas import SchemaVersions
from lakehouse.publish.simulate import History, Knobs, simulate, write_landing
from lakehouse.spark.session import open_engine
from pipelines.gold import register_schema, run_gold
from pipelines.ingest import run_ingest
from pipelines.silver import load_schemas, run_silver


def revert_line(history: History, schemas: dict[SchemaId, SchemaVersions]) -> tuple[dict[str, str], str, int]:
    """The landing line of a revert of the schema with the most gold versions to its previous one."""
    sid, sv = max(schemas.items(), key=lambda kv: len(kv[1].gold_versions()))
    versions = sv.gold_versions()
    target = versions[-2]
    hashes: dict[int, bytes] = {}
    for line in history.lines:
        if isinstance(line, str):
            continue
        entry = decode_entry(bytes.fromhex(line["entry"]))
        if entry.author == sid.author and entry.log_id == sid.log_id:
            hashes[entry.seq_num] = yasmf_hash(bytes.fromhex(line["entry"]))
    seq = max(hashes) + 1
    payload = encode_message(SchemaRevert(target))
    data = sign_entry(history.keys[sid.author.hex()], log_id=sid.log_id, seq_num=seq, payload=payload,
                      backlink=hashes[seq - 1], skiplink=hashes[lipmaa(seq)] if skiplink_required(seq) else None)
    return {"entry": data.hex(), "payload": payload.hex()}, str(sid), target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=100_000)
    args = parser.parse_args()
    history = simulate(Knobs.realistic(args.messages), seed=5)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(environ={}).with_overrides(lake_root=f"{tmp}/lake", landing=f"{tmp}/landing",
                                                            keys=f"{tmp}/keys")
        write_landing(list(history.lines), Path(tmp, "landing"))
        with open_engine(settings) as engine:
            spark = engine.spark
            started = time.monotonic()
            run_ingest(spark, settings)
            ingest_s = time.monotonic() - started
            run_silver(spark, settings)
            for sid, name in history.names.items():
                register_schema(spark, settings, str(sid), name)
            started = time.monotonic()
            run_gold(spark, settings)
            first_gold_s = time.monotonic() - started
            line, schema, target = revert_line(history, load_schemas(spark, str(settings.lake_root)))
            Path(tmp, "landing", "revert.jsonl").write_text(json.dumps(line) + "\n")
            run_ingest(spark, settings)
            started = time.monotonic()
            run_silver(spark, settings)
            gold = run_gold(spark, settings)
            revert_s = time.monotonic() - started
            started = time.monotonic()
            run_silver(spark, settings, rebuild=True)
            run_gold(spark, settings, rebuild=True)
            rebuild_s = time.monotonic() - started
    print(json.dumps({
        "messages": args.messages, "entries": len(history.lines), "ingest_seconds": round(ingest_s, 1),
        "first_gold_seconds": round(first_gold_s, 1), "reverted": schema, "target": target,
        "revert_mode": gold.modes.get(schema), "revert_materialize_seconds": round(revert_s, 1),
        "rebuild_seconds": round(rebuild_s, 1), "revert_over_rebuild": round(revert_s / rebuild_s, 2),
    }))


if __name__ == "__main__":
    main()
