"""Sizes, depths and odd text: refused at the kernel with the limit named, nothing stored.

The attacks this closes: metadata nested 200–300 levels was stored and then broke list,
get, archive and export for everyone (or answered 500); a 20 MB body was stored; a lone
surrogate, a NUL, a naive or numeric time, a negative or infinite weight crashed a request.
"""

from __future__ import annotations

import io
import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.errors import InvalidInput
from cairn.limits import (
    MAX_BODY_CHARS,
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    MAX_METADATA_KEYS,
    MAX_TITLE_CHARS,
    LimitExceeded,
    load_json,
)
from cairn.memory import Memory
from cairn.model import Content, ContentPatch, Principal, RecordQuery
from cairn.store.base import Store
from cairn.store.transfer import export_store
from tests.conftest import content


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def _refused(memory: Memory, curator: Principal, build: Any, match: str) -> None:
    before = memory.status(principal=curator)
    with pytest.raises((InvalidInput, ValueError), match=match):
        memory.remember(build(), principal=curator)
    assert memory.status(principal=curator) == before, "a refused request stored something"


def test_metadata_depth_is_limited_and_what_is_stored_stays_readable(
    memory: Memory, curator: Principal, store: Store
) -> None:
    for depth in (MAX_METADATA_DEPTH + 1, 250, 300, 5000):
        _refused(
            memory,
            curator,
            lambda depth=depth: content(f"deep {depth}", metadata=_nested(depth)),
            f"nested more than {MAX_METADATA_DEPTH} levels",
        )
    outcome = memory.remember(
        content("as deep as allowed", metadata=_nested(MAX_METADATA_DEPTH)), principal=curator
    )
    assert outcome.record is not None
    record_id = outcome.record.id
    # every read and write that used to fail on deep metadata works
    assert memory.get(record_id, principal=curator).version.content.metadata
    assert memory.list_records(RecordQuery(), principal=curator)
    memory.archive(record_id, principal=curator)
    out = io.StringIO()
    export_store(store, out)
    assert record_id in out.getvalue()


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("body", "x" * (MAX_BODY_CHARS + 1), f"the limit is {MAX_BODY_CHARS:,}"),
        ("title", "t" * (MAX_TITLE_CHARS + 1), f"the limit is {MAX_TITLE_CHARS:,}"),
        ("title", "nul \x00 inside", "NUL"),
        ("body", "lone \ud800 surrogate", "lone surrogate"),
        ("scope", "acme/\x00", "NUL"),
        ("tags", ("ok", "t\udfff"), "lone surrogate"),
        (
            "metadata",
            {f"k{n}": n for n in range(MAX_METADATA_KEYS + 1)},
            f"more than {MAX_METADATA_KEYS:,} keys",
        ),
        (
            "metadata",
            {"big": "x" * 9_000, "more": "y" * 9_000} | {"z": ["w" * 9_000] * 6},
            f"the limit is {MAX_METADATA_BYTES:,}",
        ),
        ("metadata", {"k": "nul\x00"}, "NUL"),
        ("metadata", {"k": math.inf}, "finite"),
        ("valid_from", "2026-01-01T00:00:00", "time zone"),
        ("valid_from", 1_700_000_000, "not a number"),
        ("valid_to", "2026-01-01", "time zone"),
    ],
)
def test_odd_content_is_refused_naming_the_limit(
    memory: Memory, curator: Principal, field: str, value: Any, match: str
) -> None:
    fields = {"kind": "fact", "scope": "acme/app", "title": "odd", field: value}
    _refused(memory, curator, lambda: Content.model_validate(fields), match)


def test_an_update_is_held_to_the_same_limits(memory: Memory, curator: Principal) -> None:
    record = memory.remember(content("editable"), principal=curator).record
    assert record is not None
    for patch in (
        {"body": "x" * (MAX_BODY_CHARS + 1)},
        {"metadata": _nested(MAX_METADATA_DEPTH + 1)},
        {"valid_to": "2030-01-01T00:00:00"},
        {"title": "\ud83d"},
    ):
        with pytest.raises(ValueError):
            memory.update(record.id, ContentPatch.model_validate(patch), principal=curator)
    assert memory.get(record.id, principal=curator).record.current_version == 1


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ({"keyword": -1.0, "vector": 0.5}, "at least 0"),
        ({"keyword": math.inf, "vector": 0.5}, "finite"),
        ({"keyword": math.nan, "vector": 0.5}, "finite"),
        ({"keyword": 0.0, "vector": 0.0}, "every weight"),
        ({"bm25": 1.0}, "unknown weight"),
    ],
)
def test_bad_weights_are_refused(
    memory: Memory, curator: Principal, weights: dict[str, float], match: str
) -> None:
    memory.remember(content("weighted"), principal=curator)
    with pytest.raises(InvalidInput, match=match):
        memory.search("weighted", principal=curator, mode="keyword", weights=weights)


@pytest.mark.parametrize(
    "query", ["nul\x00", "\ud800 alone", "q" * 10_001], ids=["nul", "surrogate", "long"]
)
def test_a_query_no_store_can_take_is_bad_input(
    memory: Memory, curator: Principal, query: str
) -> None:
    with pytest.raises(InvalidInput, match="query"):
        memory.search(query, principal=curator, mode="keyword")


@pytest.mark.parametrize("odd_id", ["rec_\x00", "rec_\ud800", "x" * 500, "rec x"])
def test_an_id_that_cannot_exist_reads_as_not_found(
    memory: Memory, curator: Principal, odd_id: str
) -> None:
    from cairn.errors import NotFound

    with pytest.raises(NotFound):
        memory.get(odd_id, principal=curator)
    with pytest.raises(NotFound):
        memory.proposal(odd_id, principal=curator)
    report = memory.validate([odd_id], principal=curator)
    assert report.records[0].problems == ("not_found",)


def test_stored_data_is_not_held_to_later_limits(memory: Memory, curator: Principal) -> None:
    """Limits apply to what comes in; a record stored before a limit was lowered stays
    readable (reads validate with the STORED context)."""
    from cairn.limits import STORED

    raw = json.dumps({"kind": "fact", "scope": "acme/app", "title": "t" * (MAX_TITLE_CHARS + 5)})
    with pytest.raises(ValueError):
        Content.model_validate_json(raw)
    assert len(Content.model_validate_json(raw, context=STORED).title) == MAX_TITLE_CHARS + 5


# ---- JSON text is measured before it is parsed -------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:\n\u2028'),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(alphabet='[]{}"\\k', max_size=4), inner, max_size=3)
    ),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    """Levels of arrays and objects in ``value``, counted on the parsed value."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


@given(value=json_values, indent=st.sampled_from([None, 1]))
def test_the_nesting_of_json_text_is_measured_exactly(value: Any, indent: int | None) -> None:
    """Brackets inside strings (escaped quotes and backslashes too) do not count; the ones
    that structure the text do: text exactly at a limit loads, one level more is refused."""
    text = json.dumps(value, indent=indent)
    depth = _depth(value)
    assert load_json(text, "the text", max_depth=depth) == value
    if depth:
        with pytest.raises(LimitExceeded, match=f"the text is nested more than {depth - 1} levels"):
            load_json(text, "the text", max_depth=depth - 1)


@pytest.mark.parametrize(
    "text", ["[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000]
)
def test_json_nested_past_any_parser_is_refused_before_parsing(text: str) -> None:
    for raw in (text, text.encode()):
        with pytest.raises(LimitExceeded, match=f"nested more than {MAX_METADATA_DEPTH} levels"):
            load_json(raw, "metadata", max_depth=MAX_METADATA_DEPTH)


def test_escapes_are_read_as_json_reads_them() -> None:
    # an escaped quote does not end a string: its brackets stay text
    text = '["\\"' + "[" * 50 + '"]'
    assert load_json(text, "the text", max_depth=1) == ['"' + "[" * 50]
    # an escaped backslash does not escape the quote after it: the brackets are structure
    with pytest.raises(LimitExceeded, match="nested more than 40 levels"):
        load_json('["\\\\", ' + "[" * 50 + "]" * 50 + "]", "the text", max_depth=40)
    # a string that never ends holds the rest of the text: not JSON, but not deep either
    with pytest.raises(ValueError) as refused:
        load_json('["' + "{" * 50, "the text", max_depth=40)
    assert not isinstance(refused.value, LimitExceeded)


@pytest.mark.parametrize("number", ["1e999", "-1e999", "NaN", "Infinity", "-Infinity"])
def test_numbers_json_cannot_hold_are_refused_by_name(number: str) -> None:
    text = f'{{"ratio": {number}}}'
    with pytest.raises(LimitExceeded, match=f"metadata holds {number}, which is not a finite"):
        load_json(text, "metadata")
    assert load_json('{"ratio": 1e308}', "metadata") == {"ratio": 1e308}
