"""What the benchmark keeps of a generated history once its lines are on disk
(:mod:`tests.benchmarks.suite`): enough to sign the revert it writes later, and the lines read back
as the reference model read them."""

from __future__ import annotations

import json
from pathlib import Path

from lakehouse.core.messages import SchemaRevert
from lakehouse.core.reference import reference
from tests.benchmarks.suite import generate_landing, landing_lines, schema_history
from tests.simulate import Knobs, schema_line, simulate, write_landing


def test_the_schema_history_signs_the_same_next_schema_entry_as_the_whole_history() -> None:
    history = simulate(Knobs.realistic(3000), seed=3)  # 15 authors, 3 of them writing schemas
    kept = schema_history(history)
    assert len(kept.lines) < len(history.lines) and kept.names == history.names
    for sid in history.names:
        assert schema_line(kept, sid, SchemaRevert(1)) == schema_line(history, sid, SchemaRevert(1))


def test_landing_lines_read_back_give_the_reference_the_same_tables(tmp_path: Path) -> None:
    history = simulate(Knobs(messages=120, malformed=0.2), seed=4)
    assert any(isinstance(line, str) for line in history.lines), "malformed lines, written as text"
    write_landing(history.lines, tmp_path, lines_per_file=70)
    (tmp_path / "tail").mkdir()
    (tmp_path / "tail" / "landing-00000.jsonl").write_text("{}\n")  # below the top: not read back
    read = landing_lines(tmp_path)
    assert read == [line if isinstance(line, str) else json.dumps(line) for line in history.lines]
    names = dict(history.names)
    assert reference(read).gold(names) == reference(history.lines).gold(names)


def test_the_generated_landing_files_hold_the_history_and_the_schema_logs_sign_as_it_does(tmp_path: Path) -> None:
    generated = generate_landing(3000, 2, str(tmp_path))
    history = simulate(Knobs.realistic(3000), seed=2)
    expected = [line if isinstance(line, str) else json.dumps(line) for line in history.lines]
    parts = [landing_lines(tmp_path / "landing"), landing_lines(tmp_path / "held" / "tail"),
             landing_lines(tmp_path / "held" / "trickle")]
    assert [len(p) for p in parts] == [generated["base_lines"], generated["tail_lines"], generated["trickle_lines"]]
    assert sum(parts, []) == expected and generated["lines"] == len(expected) and all(parts)
    kept = generated["history"].history()
    for sid in history.names:
        assert schema_line(kept, sid, SchemaRevert(1)) == schema_line(history, sid, SchemaRevert(1))


def test_a_chained_trickle_lands_successive_slices_of_its_lines_across_files(tmp_path: Path) -> None:
    """``trickle run --chain``: rep ``r`` lands the ``lines`` lines after the first ``r * lines``, in
    file order, whatever files they fall in; together the reps land every line once, in order."""
    from tests.benchmarks.trickle import _land

    held = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    held[0].write_text("".join(f"a{n}\n" for n in range(5)))
    held[1].write_text("".join(f"b{n}\n" for n in range(4)))
    landed = []
    for rep in range(3):
        to = [tmp_path / f"{rep}-{p.name}" for p in held]
        _land(held, to, 3, rep * 3)
        landed.append([line for p in to for line in p.read_text().splitlines()])
    assert landed == [["a0", "a1", "a2"], ["a3", "a4", "b0"], ["b1", "b2", "b3"]]
    every = [tmp_path / f"all-{p.name}" for p in held]
    _land(held, every, None)
    assert [p.read_text() for p in every] == [p.read_text() for p in held]
