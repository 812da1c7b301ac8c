"""Paging and query helpers the doors share: the event cursor (the kernel's), the record
list's query parameters as the kernel's ``RecordQuery``, and a publish body as
``PublishChoice``."""

from __future__ import annotations

from datetime import UTC, datetime

from cairn.doors.http_records import RecordFilters
from cairn.doors.http_review import PublishBody
from cairn.model import RecordQuery, Status, event_cursor

TS = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def test_event_cursor_needs_the_ts_and_the_id() -> None:
    assert event_cursor(None, None, None) is None
    assert event_cursor(TS, None, "acme/app") is None
    assert event_cursor(None, "evt_1", None) is None


def test_event_cursor_names_the_scope_only_when_given() -> None:
    assert event_cursor(TS, "evt_1", None) == (TS, "evt_1")
    assert event_cursor(TS, "evt_1", "acme/app") == (TS, "evt_1", "acme/app")


def test_record_filters_are_the_kernels_query() -> None:
    assert RecordFilters().query() == RecordQuery()
    filters = RecordFilters(
        kind=["decision", "fact"],
        status=[Status.ACTIVE],
        scope="acme/*",
        created_after=TS,
        limit=5,
        offset=10,
        after="rec_1",
    )
    assert filters.query() == RecordQuery(
        kinds=("decision", "fact"),
        statuses=(Status.ACTIVE,),
        scope="acme/*",
        created_after=TS,
        limit=5,
        offset=10,
        after="rec_1",
    )


def test_publish_body_choice_is_every_field_but_the_scope() -> None:
    body = PublishBody(scope="acme/app", record_ids=["rec_1"], name="v1", reason="release")
    assert body.choice() == {
        "record_ids": ["rec_1"],
        "pins": None,
        "name": "v1",
        "replace": False,
        "reason": "release",
    }
