"""Retrying a pipeline step after an engine failure known to be transient.

Every step of the pipelines (ingest, the silver part and the gold part of materialize) is
idempotent: a step stopped anywhere and run again ends as one clean run would (SEMANTICS.md
section 7, ``tests/spark/test_crashes.py``). So a step that fails with an error known to be
transient is simply run again, a bounded number of times, and the step's summary says so. Any other
error stops the run at once.

Known transient errors (:data:`TRANSIENT`), each with what is known of it:

- ``garbled_udf_python_version``: the embedded engine (pysail 0.7.2) sometimes reads the Python
  version of the process that runs a Python function as a string whose first character is NUL,
  and fails the job with "Python version used to compile the UDF (3.11) does not match the Python
  version at runtime (\\x00.11.7 ...)", while several jobs with Python functions run at once
  (``docs/engines.md``, "A transient failure of the embedded engine"). A real version mismatch
  has no NUL in it and is not retried.
- ``garbled_response``: the Spark Connect client could not read a response of the embedded engine
  (gRPC status INTERNAL, "Exception deserializing response!": the bytes are not the message they
  should be). Seen once, on the schema analysis of a one-row ``createDataFrame``, in the third of
  three runs of the 37-point crash sweep (``tests/spark/test_crashes.py``), while jobs ran at once.
- ``lost_task_context``: the embedded engine failed a job with gRPC status INTERNAL, "internal
  error: task context not found for operation". Seen once, writing the instance pass's staged
  parquet (a job with Python functions in worker processes) in the incremental run of the crash
  sweep, in a clean-clone ``make test`` with two test workers; not again in that test alone or
  beside the reference tests.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, ParamSpec, Protocol, TypeVar

T = TypeVar("T")
P = ParamSpec("P")


class _Summary(Protocol):
    retried: list[str]


S = TypeVar("S", bound=_Summary)

TRANSIENT: Final[dict[str, re.Pattern[str]]] = {
    "garbled_udf_python_version": re.compile(
        r"Python version used to compile the UDF \([^)]*\) does not match the Python version at runtime "
        r"\((?:\x00|\\x00|\\u0000)"),
    "garbled_response": re.compile(r"StatusCode\.INTERNAL\s+details = \"Exception deserializing response!\""),
    "lost_task_context": re.compile(r"StatusCode\.INTERNAL\s+details = \"internal error: task context not found for "
                                    r"operation\""),
}
"""Known transient engine failures: name -> a pattern of the error's text."""

ATTEMPTS: Final = 3
"""Runs of a step at most: the first, and two more after transient failures."""


def transient(error: BaseException) -> str | None:
    """The name of the known transient failure ``error`` is (:data:`TRANSIENT`), or None."""
    text = str(error)
    return next((name for name, pattern in TRANSIENT.items() if pattern.search(text)), None)


@dataclass
class Retries:
    """The transient failures a run survived: one line per retry, ``<step>: <name>``."""

    seen: list[str] = field(default_factory=list)

    def run(self, step: str, work: Callable[[], T], *, attempts: int = ATTEMPTS,
            log: Callable[[str], None] | None = None) -> T:
        """Run ``work`` (an idempotent step), again after a known transient failure.

        Args:
            step: the step's name, for the log and :attr:`seen` (``silver``, ``gold``, ...).
            work: the step.
            attempts: runs at most (>= 1).
            log: told of each retry: what failed and why.

        Returns:
            What ``work`` returns.

        Raises:
            Exception: the step's error, at once when it is not a known transient failure, or
                after the last attempt.
        """
        for attempt in range(1, attempts + 1):
            try:
                return work()
            except Exception as exc:
                name = transient(exc)
                if name is None or attempt == attempts:
                    raise
                self.seen.append(f"{step}: {name}")
                if log is not None:
                    first_line = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
                    log(f"{step} failed with a known transient engine error ({name}: {first_line!r}); "
                        f"running it again ({attempt + 1} of {attempts})")
        raise AssertionError("unreachable")  # pragma: no cover


def retried(step: str) -> Callable[[Callable[P, S]], Callable[P, S]]:
    """Decorate a step that returns a summary with a ``retried`` list: the step runs again after a
    known transient failure (:meth:`Retries.run`, each retry said on stderr), and its summary
    lists the retries."""

    def wrap(work: Callable[P, S]) -> Callable[P, S]:
        @functools.wraps(work)
        def run(*args: P.args, **kwargs: P.kwargs) -> S:
            from lakehouse.progress import console

            retries = Retries()
            summary = retries.run(step, lambda: work(*args, **kwargs), log=lambda line: console.print(line))
            summary.retried = retries.seen
            return summary

        return run

    return wrap
