"""Hypothesis strategies for generated histories and their arrival in batches.

A history is :func:`tests.simulate.simulate` run on drawn :class:`Knobs` and a drawn
seed; its arrival is :func:`tests.simulate.split_batches` on a drawn number of batches
and a drawn ``Random``. The Spark property tests ingest the batches one by one and compare the
tables with :func:`lakehouse.core.reference.reference` of the whole history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

from hypothesis import strategies as st

from tests.simulate import History, Knobs, Line, simulate, split_batches

PROBABILITIES = st.sampled_from([0.0, 0.05, 0.2])


def knobs(
    *, max_authors: int = 3, max_schemas: int = 3, max_migrations: int = 6, max_messages: int = 40
) -> st.SearchStrategy[Knobs]:
    """Knobs of small histories: sizes up to the given maxima, each probability 0, 0.05 or 0.2."""
    probabilities = {k.name: PROBABILITIES for k in fields(Knobs) if isinstance(k.default, float)}
    return st.builds(
        Knobs,
        authors=st.integers(1, max_authors),
        schemas=st.integers(1, max_schemas),
        migrations=st.integers(1, max_migrations),
        messages=st.integers(0, max_messages),
        **probabilities,
    )


def histories(knobs_strategy: st.SearchStrategy[Knobs] | None = None) -> st.SearchStrategy[History]:
    """Generated histories: :func:`simulate` on drawn knobs (default :func:`knobs`) and a drawn seed."""
    return st.builds(
        simulate, knobs_strategy if knobs_strategy is not None else knobs(), st.integers(0, 2**32 - 1)
    )


def arrivals(lines: Sequence[Line], *, max_batches: int = 4) -> st.SearchStrategy[list[list[Line]]]:
    """The lines shuffled and dealt into 1 to ``max_batches`` arrival batches (some may be empty)."""
    return st.builds(
        split_batches, st.just(list(lines)), st.integers(1, max_batches), st.randoms(use_true_random=False)
    )


def histories_in_batches(
    knobs_strategy: st.SearchStrategy[Knobs] | None = None, *, max_batches: int = 4
) -> st.SearchStrategy[tuple[History, list[list[Line]]]]:
    """A history with one way its lines may arrive."""
    return histories(knobs_strategy).flatmap(
        lambda history: st.tuples(st.just(history), arrivals(history.lines, max_batches=max_batches))
    )
