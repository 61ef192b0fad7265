"""lakehouse.spark.workers: batches through the worker processes come back whole and in order."""

from __future__ import annotations

import gc
import os
from functools import partial

import pyarrow as pa
import pytest

from lakehouse.config import load_settings
from lakehouse.errors import LakehouseError
from lakehouse.spark import workers


def doubled(column: str, batch: pa.RecordBatch) -> pa.RecordBatch:
    values = batch.column(column).to_pylist()
    return pa.RecordBatch.from_pydict({"x": [2 * v for v in values], "pid": [os.getpid()] * len(values)})


def failing(batch: pa.RecordBatch) -> pa.RecordBatch:
    if 4999 in batch.column("x").to_pylist():
        raise LakehouseError("row 4999 is bad", code="bad_row")
    return batch


def collector_state(batch: pa.RecordBatch) -> pa.RecordBatch:
    if 4999 in batch.column("x").to_pylist():
        raise LakehouseError("row 4999 is bad", code="bad_row")
    return pa.RecordBatch.from_pydict({"collecting": [gc.isenabled()] * batch.num_rows})


def batches(sizes: list[int]) -> list[pa.RecordBatch]:
    out, start = [], 0
    for size in sizes:
        out.append(pa.RecordBatch.from_pydict({"x": list(range(start, start + size))}))
        start += size
    return out


@pytest.mark.parametrize("inline", [True, False])
def test_every_row_comes_back_in_order(inline: bool) -> None:
    sizes = [0, 1, workers.SLICE_ROWS, 3 * workers.SLICE_ROWS + 7, 5]  # empty, sliced and small batches
    home = -1 if inline else os.getpid()  # away from home (another engine's workers) it runs inline
    out = list(workers.map_batches(partial(doubled, "x"), batches(sizes), "test", home))
    assert [v for b in out for v in b.column("x").to_pylist()] == [2 * v for v in range(sum(sizes))]
    pids = {p for b in out for p in b.column("pid").to_pylist()}
    assert (pids == {os.getpid()}) == inline  # inline, or never in this process


def test_a_slice_travels_as_its_rows_only() -> None:
    big = batches([100_000])[0]
    assert len(workers.to_ipc(big.slice(0, 10))) < len(workers.to_ipc(big)) / 100
    assert workers.from_ipc(workers.to_ipc(big.slice(5, 3))).column("x").to_pylist() == [5, 6, 7]


def test_an_error_in_a_worker_reaches_the_caller() -> None:
    with pytest.raises(LakehouseError, match="row 4999 is bad"):
        list(workers.map_batches(failing, batches([10_000]), "test", os.getpid()))


def test_a_function_run_away_from_the_process_that_planned_it_runs_inline() -> None:
    """On Apache Spark the function runs in the engine's Python workers: no pool of its own there."""
    out = list(workers.map_batches(partial(doubled, "x"), batches([5000]), "test", home=-1))
    assert {p for b in out for p in b.column("pid").to_pylist()} == {os.getpid()}


@pytest.mark.parametrize("inline", [True, False])
def test_a_batch_is_turned_with_the_collector_paused_and_it_runs_again_after(inline: bool) -> None:
    """The cyclic garbage collector is paused while a function turns a batch, in a worker or
    inline, and runs again afterwards, also after an error."""
    home = -1 if inline else os.getpid()
    out = list(workers.map_batches(collector_state, batches([10, 20]), "test", home))
    assert {v for b in out for v in b.column("collecting").to_pylist()} == {False}
    assert gc.isenabled()
    with pytest.raises(LakehouseError, match="row 4999 is bad"):
        list(workers.map_batches(collector_state, batches([10_000]), "test", home))
    assert gc.isenabled()
    if not inline:  # the workers collect again between tasks
        assert all(f.result() for f in [workers.pool().submit(gc.isenabled) for _ in range(8)])


def test_only_the_embedded_engine_uses_worker_processes() -> None:
    settings = load_settings(environ={})
    assert workers.processes_for(settings.with_overrides(engine="sail")) == (os.cpu_count() or 1)
    assert workers.processes_for(settings.with_overrides(engine="spark")) == 0
    assert workers.processes_for(settings.with_overrides(engine="spark-connect")) == 0
    assert workers.processes_for(settings.with_overrides(engine="sail", spark_remote="sc://elsewhere:15002")) == 0


def test_stop_waits_for_a_start_under_way_and_ends_the_workers() -> None:
    """Issue: ``lakehouse ingest`` with nothing to do sometimes never exited: the interpreter ended
    while the pool the command had started in the background was still starting."""
    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    workers.start(2)
    pool = workers.pool(2)  # the one the background start makes (or made)
    pids = [pool.submit(os.getpid).result() for _ in range(4)]
    workers.start(2)  # a start under way when stop comes
    workers.stop()
    assert workers._STARTING is None and workers._POOL is None
    assert not [pid for pid in set(pids) if alive(pid)], "the workers ended (and were reaped)"
    assert workers.pool(2).submit(os.getpid).result() not in pids, "a later use starts a new pool"
    workers.stop()
