"""Cascades brought up to date around the instances that changed (lakehouse.core.gold): the removed
set before the change, less the region around the changed instances, plus the region's own
verdicts, is the removed set computed again from every instance."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lakehouse.core.gold import (
    pointing_at,
    removed_by_cascade,
    removed_by_cascade_numbered,
    removed_in_region,
)

Graph = dict[int, tuple[bool, list[int]]]  # id -> (deleted, cascading targets)

instance = st.tuples(st.booleans(), st.lists(st.integers(0, 14), max_size=3))
graphs = st.dictionaries(st.integers(0, 14), instance, max_size=15)


def removed(graph: Graph) -> set[int]:
    return removed_by_cascade([i for i, (deleted, _) in graph.items() if deleted],
                              {i: targets for i, (_, targets) in graph.items()})


def brought_up_to_date(before: Graph, after: Graph) -> set[int]:
    """The removed set after the change, from the one before and the region around the change,
    as the gold pipeline computes it (states looked up only in the region and at its edge)."""
    changed = {i for i in before.keys() | after.keys() if before.get(i) != after.get(i)}
    region_ids = pointing_at({i: targets for i, (_, targets) in after.items()}, changed,
                             {i for i, (deleted, _) in after.items() if deleted})
    region = {i: after.get(i, (False, [])) for i in region_ids}
    edge = {t for _, targets in region.values() for t in targets} - region_ids
    old = removed(before)
    gone_outside = {i for i in edge if i in old or after.get(i, (False, []))[0]}
    return (old - region_ids) | removed_in_region(region, gone_outside)


@settings(max_examples=400, deadline=None)
@given(before=graphs, changes=graphs, gone=st.sets(st.integers(0, 14), max_size=4))
def test_the_removed_set_brought_up_to_date_is_the_one_computed_again(before: Graph, changes: Graph,
                                                                        gone: set[int]) -> None:
    """Instances changed (deletes, new or other targets), appeared and went (a log that lost its
    purpose), across cycles and dangling targets."""
    after = {i: v for i, v in {**before, **changes}.items() if i not in gone}
    assert brought_up_to_date(before, after) == removed(after)


def test_a_delete_removes_what_points_at_it_and_an_instance_that_went_frees_it() -> None:
    before: Graph = {1: (False, []), 2: (False, [1]), 3: (False, [2]), 4: (False, [])}
    deleted = {**before, 1: (True, [])}
    assert brought_up_to_date(before, deleted) == removed(deleted) == {2, 3}
    went = {i: v for i, v in deleted.items() if i != 2}  # 3 pointed at 1 through 2 only
    assert brought_up_to_date(deleted, went) == removed(went) == set()


def test_the_region_is_the_changed_instances_and_what_points_at_them() -> None:
    targets = {2: [1], 3: [2], 4: [3, 9], 5: [6], 6: [5]}
    assert pointing_at(targets, {1}) == {1, 2, 3, 4}
    assert pointing_at(targets, {5}) == {5, 6}
    assert pointing_at(targets, {9}) == {9, 4}
    assert pointing_at(targets, set()) == set()
    assert pointing_at(targets, {1}, deleted={2}) == {1, 2}  # 3 and 4 are removed either way
    assert pointing_at(targets, {2}, deleted={2}) == {1, 2, 3, 4} - {1}  # a changed one is gone on from


def test_gone_ids_inside_the_region_are_not_taken_from_outside() -> None:
    """An instance of the region that was removed before and is gone now (no state) no longer
    removes what points at it: the verdicts outside the region are given, not those inside."""
    region = {1: (False, []), 2: (False, [1])}
    assert removed_in_region(region, gone_outside={1}) == set()
    assert removed_in_region(region, gone_outside={7}) == set()
    assert removed_in_region({2: (False, [7])}, gone_outside={7}) == {2}


@settings(max_examples=400, deadline=None)
@given(graph=st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 40), max_size=4)), max_size=41))
def test_the_removed_set_a_level_at_a_time_is_the_one_of_the_walk(graph: list[tuple[bool, list[int]]]) -> None:
    """The numbered walk (numpy, a level at a time) removes what the walk over sets does, on
    graphs with cycles, repeated edges, deleted instances pointing at others, and targets with
    no state of their own (numbers past the graph's instances)."""
    count = max([len(graph), *(t + 1 for _, targets in graph for t in targets)])
    deleted = [i for i, (d, _) in enumerate(graph) if d]
    sources = [i for i, (_, targets) in enumerate(graph) for _ in targets]
    targets = [t for _, ts in graph for t in ts]
    expected = removed_by_cascade(deleted, {i: ts for i, (_, ts) in enumerate(graph)})
    assert removed_by_cascade_numbered(count, deleted, sources, targets).tolist() == sorted(expected)
