"""Landing lines (FORMAT.md section 2): the fast check decides every line as the diagnosis does."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakehouse.core.landing import check_line, diagnose_line
from tests.conftest import project_path

RECORDS = [json.loads(line) for line in project_path("fixtures", "p2panda", "corpus.jsonl").read_text().splitlines()]


def _record(i: int) -> dict[str, Any]:
    return {"entry": RECORDS[i]["entry"], "payload": RECORDS[i]["payload"]}


# JSON texts that the standard library and orjson read differently, or that only one of them reads
ODD_VALUES = ["NaN", "Infinity", "-Infinity", "1e400", "123456789012345678901234567890", '"\\ud800"',
              '"\\udc00x"', "[]", "{}", "null", '"\\u0000"']


def _mutate(data: st.DataObject, record: dict[str, Any]) -> str:
    kind = data.draw(st.sampled_from([
        "as_is", "operation_key", "odd_extra", "odd_entry", "duplicate_key", "flip_hex", "upper_hex",
        "spaced_hex", "truncate", "wrap", "whitespace", "drop_key",
    ]))
    if kind == "as_is":
        return json.dumps(record)
    if kind == "operation_key":
        both = data.draw(st.booleans())
        changed = {"entry": record["entry"], "operation": record["payload"]}
        if both:
            changed["payload"] = data.draw(st.sampled_from([5, None, "00", record["payload"]]))
        return json.dumps(changed)
    if kind == "odd_extra":
        text = json.dumps(record)
        return text[:-1] + f', "x": {data.draw(st.sampled_from(ODD_VALUES))}}}'
    if kind == "odd_entry":
        key = data.draw(st.sampled_from(["entry", "payload"]))
        other = "payload" if key == "entry" else "entry"
        return f'{{"{other}": "{record[other]}", "{key}": {data.draw(st.sampled_from(ODD_VALUES))}}}'
    if kind == "duplicate_key":
        key = data.draw(st.sampled_from(["entry", "payload"]))
        first = data.draw(st.booleans())
        pair = f'"{key}": "00"'
        text = json.dumps(record)
        return "{" + pair + ", " + text[1:] if first else text[:-1] + ", " + pair + "}"
    if kind in ("flip_hex", "upper_hex", "spaced_hex", "truncate"):
        key = data.draw(st.sampled_from(["entry", "payload"]))
        value = record[key]
        at = data.draw(st.integers(0, max(len(value) - 1, 0)))
        if kind == "flip_hex":
            value = value[:at] + data.draw(st.sampled_from("0f8g ")) + value[at + 1:]
        elif kind == "upper_hex":
            value = value.upper()
        elif kind == "spaced_hex":
            value = value[: at - at % 2] + " " + value[at - at % 2:]
        else:
            value = value[:at]
        return json.dumps({**record, key: value})
    if kind == "wrap":
        return data.draw(st.sampled_from(["[{}]", '"{}"', "{} x", " {} "])).replace("{}", json.dumps(record))
    if kind == "whitespace":
        return json.dumps(record, indent=data.draw(st.sampled_from([None, 0, 2]))).replace("\n", " ")
    key = data.draw(st.sampled_from(["entry", "payload"]))
    return json.dumps({k: v for k, v in record.items() if k != key})


@settings(max_examples=400, deadline=None)
@given(st.data(), st.integers(0, len(RECORDS) - 1), st.sampled_from([1 << 20, 16]))
@example(data=None, i=0, max_payload=1 << 20)
def test_the_fast_check_decides_every_line_as_the_diagnosis(data: st.DataObject | None, i: int,
                                                            max_payload: int) -> None:
    raw = json.dumps(_record(i)) if data is None else _mutate(data, _record(i))
    fast, slow = check_line(raw, max_payload=max_payload), diagnose_line(raw, max_payload=max_payload)
    assert fast == slow
    if data is None:
        assert fast.accepted and fast.entry is not None and fast.entry.to_bytes().hex() == RECORDS[i]["entry"]


def test_lines_only_the_standard_library_reads_are_still_accepted() -> None:
    record = _record(0)
    text = json.dumps(record)[:-1] + ', "x": NaN, "y": "\\ud800"}'
    assert check_line(text) == diagnose_line(text)
    assert check_line(text).accepted


@pytest.mark.parametrize("raw", ["[" * 100_000, '{"entry": "00", "payload": "00", "x": ' + "[" * 100_000 + "}"])
def test_a_line_nested_thousands_deep_is_rejected_not_raised(raw: str) -> None:
    """Found by fuzzing: ``json.loads`` raised RecursionError for arrays nested 100,000 deep,
    which stopped the whole ingest instead of rejecting one line."""
    for outcome in (check_line(raw), diagnose_line(raw)):
        assert outcome.code == "not_json" and "nested too deeply" in outcome.reason
