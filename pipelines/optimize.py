"""``make optimize`` (``lakehouse optimize``): compact the lake's tables, the same rows in fewer
files and without deletion vectors (:mod:`lakehouse.spark.compaction` has the rules). README,
Operating; ``docs/engines.md``, "How the tables are laid out".

A run compacts the tables it writes when they pass their limits (:func:`lakehouse.spark.delta.mergeable`,
:data:`lakehouse.spark.delta.APPEND_FILES_LIMIT`); this compacts every table, or those named, at
once: after a run of many small runs, before outside readers open the lake, or before a bench.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from lakehouse.errors import OptimizeError
from lakehouse.progress import progress
from lakehouse.spark import compaction
from lakehouse.spark.tables import lake_tables

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakehouse.config import Settings


@dataclass
class OptimizeSummary:
    """What ``optimize`` did (or, with ``check``, would do).

    Attributes:
        tables: the tables looked at.
        compacted: the compaction of each table that had something to compact, by name.
        unread: table -> why its Delta log was not read here (left as it is).
        left: table -> why it is left as it is though it has something to compact.
        commits: the Delta commits made (0 with ``check``).
        seconds: wall time.
        check: nothing was written.
    """

    tables: int = 0
    compacted: list[compaction.Compaction] = field(default_factory=list)
    unread: dict[str, str] = field(default_factory=dict)
    left: dict[str, str] = field(default_factory=dict)
    commits: int = 0
    seconds: float = 0.0
    check: bool = False


def run_optimize(spark: SparkSession, settings: Settings, names: Sequence[str] = (), *,
                 check: bool = False) -> OptimizeSummary:
    """Compact the lake's tables (or those ``names``d: ``layer.name``), one after the other, each as
    :func:`lakehouse.spark.compaction.plan` says from its Delta log; with ``check``, plan only.
    Idempotent: a second run finds nothing to compact. A run cut short leaves each table at a
    version with the same rows (each commit replaces files by files holding their rows).

    Raises:
        OptimizeError: a name the lake has no table by (the message lists the lake's tables).
    """
    started = time.monotonic()
    refs = lake_tables(settings.lake_root)
    if names:
        by_name = {ref.qualified: ref for ref in refs}
        unknown = [n for n in names if n not in by_name]
        if unknown:
            raise OptimizeError(f"no table {', '.join(unknown)} in the lake at {settings.lake_root}; its tables: "
                                f"{', '.join(sorted(by_name)) or 'none yet'}")
        refs = [by_name[n] for n in dict.fromkeys(names)]
    summary = OptimizeSummary(tables=len(refs), check=check)
    due = []
    for ref, planned in compaction.plans(refs, summary.unread):
        if planned.left is not None:
            summary.left[ref.qualified] = planned.left
        if planned.how is not None:
            due.append((ref, planned))
            summary.compacted.append(planned)
    if not check and due:
        with progress("compacting", sum(p.commits for _, p in due), "commits") as bar:
            for ref, planned in due:
                summary.commits += compaction.compact(spark, ref, planned, lambda: bar.advance(1))
    summary.seconds = time.monotonic() - started
    return summary
