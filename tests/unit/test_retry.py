"""Retrying a step after a known transient engine failure (lakehouse.spark.retry), without an engine."""

from __future__ import annotations

import pytest

from lakehouse.spark.retry import ATTEMPTS, Retries, transient

GARBLED = ("IllegalArgumentException: invalid argument: Python version used to compile the UDF (3.11) does not "
           "match the Python version at runtime (\x00.11.7 (main, Dec  8 2023, 18:56:58) [GCC 11.4.0])")


def test_the_garbled_udf_python_version_is_transient_and_a_real_mismatch_is_not() -> None:
    assert transient(RuntimeError(GARBLED)) == "garbled_udf_python_version"
    assert transient(RuntimeError(GARBLED.replace("\x00", "\\x00"))) == "garbled_udf_python_version"
    real = GARBLED.replace("\x00.11.7", "3.12.1")
    assert transient(RuntimeError(real)) is None
    assert transient(ValueError("boom")) is None


def test_a_transient_failure_is_retried_and_said() -> None:
    calls: list[int] = []
    said: list[str] = []

    def work() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(GARBLED)
        return "done"

    retries = Retries()
    assert retries.run("gold", work, log=said.append) == "done"
    assert len(calls) == 2
    assert retries.seen == ["gold: garbled_udf_python_version"]
    assert len(said) == 1 and "gold failed with a known transient engine error" in said[0] and "2 of 3" in said[0]


def test_any_other_error_stops_at_once_and_retries_are_bounded() -> None:
    calls: list[int] = []

    def broken() -> None:
        calls.append(1)
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        Retries().run("silver", broken)
    assert len(calls) == 1

    def always() -> None:
        calls.append(1)
        raise RuntimeError(GARBLED)

    calls.clear()
    retries = Retries()
    with pytest.raises(RuntimeError):
        retries.run("silver", always)
    assert len(calls) == ATTEMPTS and len(retries.seen) == ATTEMPTS - 1


def test_a_response_the_client_cannot_read_is_transient() -> None:
    """Seen in the crash sweep: the client could not parse a response of the embedded engine."""
    seen = ("<_InactiveRpcError of RPC that terminated with:\n\tstatus = StatusCode.INTERNAL\n"
            '\tdetails = "Exception deserializing response!"\n\tdebug_error_string = "None"\n>')
    assert transient(RuntimeError(seen)) == "garbled_response"
    assert transient(RuntimeError("StatusCode.INTERNAL details = \"Exception deserializing request!\"")) is None
    assert transient(RuntimeError("details = \"Exception deserializing response!\"")) is None


def test_a_lost_task_context_of_the_embedded_engine_is_transient() -> None:
    """Seen once in the crash sweep, writing the instance pass's staged parquet."""
    seen = ("<_MultiThreadedRendezvous of RPC that terminated with:\n\tstatus = StatusCode.INTERNAL\n"
            '\tdetails = "internal error: task context not found for operation"\n'
            '\tdebug_error_string = "INTERNAL:internal error: task context not found for operation"\n>')
    assert transient(RuntimeError(seen)) == "lost_task_context"
    assert transient(RuntimeError('StatusCode.INTERNAL details = "internal error: table not found"')) is None
