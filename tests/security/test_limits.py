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

from cairn.errors import InvalidInput
from cairn.limits import (
    MAX_BODY_CHARS,
    MAX_METADATA_BYTES,
    MAX_METADATA_DEPTH,
    MAX_METADATA_KEYS,
    MAX_TITLE_CHARS,
)
from cairn.memory import Memory
from cairn.model import Content, ContentPatch, Principal, RecordQuery
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
    memory: Memory, curator: Principal
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
    export_store(memory.store, out)
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
