"""The lake's tables in every client session of ``lakehouse serve`` on Sail (README, Analysts).

Sail keeps the catalog per Spark Connect session. Each client of ``serve`` gets a session of its
own (its current database and temporary views are its own), so the server names the lake's tables
in each session the gateway (:class:`lakehouse.gateway.ReadOnlyGateway`) sees: before the session's
first request goes on, again when the lake changes (:meth:`SessionCatalogs.refresh`), and again
after the session was idle long enough for Sail to have dropped it (``spark.session_timeout_secs``,
900 s by default; a new request then finds a new, empty session).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

IDLE_LIMIT = 600.0
"""Seconds a session may go without a request before its tables are named again on its next one:
below Sail's idle timeout (900 s), so a session still named is never one Sail dropped."""


@dataclass
class _Named:
    spark: Any
    last_seen: float
    lock: threading.Lock


class SessionCatalogs:
    """Names the lake's tables in each client session of a served engine.

    Args:
        open_session: opens a Spark Connect session on the engine for ``(user_id, session_id)``
            (the client's own session, joined).
        register: names the lake's tables in a session; returns how many.
        idle_limit: see :data:`IDLE_LIMIT`.
        clock: seconds, monotonic (tests pass their own).

    Failures to name the tables are printed to standard error and leave the session as it is: its
    queries then fail with the engine's "table not found", and the next request tries again.
    """

    def __init__(self, open_session: Callable[[str, str], SparkSession], register: Callable[[SparkSession], int],
                 *, idle_limit: float = IDLE_LIMIT, clock: Callable[[], float] = time.monotonic) -> None:
        self._open, self._register, self._idle_limit, self._clock = open_session, register, idle_limit, clock
        self._sessions: dict[tuple[str, str], _Named] = {}
        self._lock = threading.Lock()

    def prepare(self, user_id: str, session_id: str) -> None:
        """Before a request of ``(user_id, session_id)``: name the lake's tables in the session
        unless they were named and the session has not been idle past the limit. Concurrent
        requests of one session wait for one naming."""
        key = (user_id, session_id)
        now = self._clock()
        with self._lock:
            named = self._sessions.setdefault(key, _Named(None, now, threading.Lock()))
        with named.lock:
            if named.spark is None or now - named.last_seen >= self._idle_limit:
                try:
                    spark = self._open(user_id, session_id)
                    self._register(spark)
                except Exception as exc:  # noqa: BLE001 - the server keeps serving; see the class docstring
                    print(f"could not name the lake's tables in session {session_id}: {exc}", file=sys.stderr)
                    named.spark = None
                    return
                named.spark = spark
            named.last_seen = now

    def release(self, user_id: str, session_id: str) -> None:
        """The client released its session: forget it."""
        with self._lock:
            self._sessions.pop((user_id, session_id), None)

    def refresh(self) -> int:
        """Name the lake's tables again in every session named (the lake changed). A session idle
        past the limit is forgotten instead, and so is one that fails: either is named again on its
        next request.

        Returns:
            The number of sessions named.
        """
        now = self._clock()
        with self._lock:
            for key in [k for k, named in self._sessions.items() if now - named.last_seen >= self._idle_limit]:
                del self._sessions[key]
            sessions = list(self._sessions.values())
        done = 0
        for named in sessions:
            with named.lock:
                if named.spark is None:
                    continue
                try:
                    self._register(named.spark)
                    done += 1
                except Exception:  # noqa: BLE001 - dropped by Sail, or the client went away
                    named.spark = None
        return done

    def __len__(self) -> int:
        with self._lock:
            return sum(1 for named in self._sessions.values() if named.spark is not None)
