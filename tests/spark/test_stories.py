"""The stories of :mod:`tests.stories` through the pipelines, on every engine, against the reference.

Every story (nulls, two-ends lenses, cascades by written version, validation-keeping updates,
conversions to varchar, deletes that never wait, pending per instance, ignored instances) lands in
one lake, each with logs of its own, in the story's two batches: after each batch every bronze,
silver and gold table equals what the reference model computes, and ``make rebuild`` gives the
same. The reference's own answers for each story are pinned in ``tests/unit/test_reference.py``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from pipelines.gold import run_gold
from pipelines.silver import run_silver
from tests.simulate import History
from tests.spark.test_against_reference import check_lake, run_batches
from tests.stories import STORIES, hash_of

pytestmark = pytest.mark.parity


@pytest.mark.slow_on_spark(why="13 schemas and 30 gold tables: about a minute per run on Apache Spark, 4 minutes in "
                               "all; the generated histories check the same pipeline code on both engines")
def test_every_story_through_the_pipelines_equals_the_reference(spark: Any, lake: Any) -> None:
    stories = [build(10 * n) for n, build in enumerate(STORIES.values())]
    names = {sid: name for story in stories for sid, name in story.names.items()}
    history = History(lines=(), names=names, claims=Counter())
    first = [line for story in stories for line in story.batches[0]]
    second = [line for story in stories for line in story.batches[1]]
    arrived = run_batches(spark, lake, history, [first])
    check_lake(spark, lake, arrived, history)
    arrived += run_batches(spark, lake, history, [second], first=1)
    check_lake(spark, lake, arrived, history)
    # what the stories are about, seen in the lake (the reference's answers are pinned elsewhere)
    by_entry = {r["entry_hash"]: r for r in spark.table("silver.messages").collect()}
    codes = {by_entry[hash_of(line)]["reason_code"] for story in stories for line in story.lines.values()}
    assert {"unreachable_version", "ignored_instance", "validation_failed"} <= codes
    assert [r["count"] for r in spark.table("gold.stock20_v4").orderBy("count").collect()] == ["7", "n/a"]
    assert [r["code"] for r in spark.table("gold.stock20_v3").orderBy("code").collect()] == ["42", "7"]
    assert spark.table("gold.comments10_v3").count() == 0  # a migration brings back nothing a cascade removed
    run_silver(spark, lake, rebuild=True)
    run_gold(spark, lake, rebuild=True)
    check_lake(spark, lake, arrived, history)
