"""Time in queries: the window each expression names, read at a fixed moment, and the words
that must not be taken for a time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.retrieval.when import TimeWindow, closeness, query_window

# Tuesday 12 April 2022, 22:57 UTC
NOW = datetime(2022, 4, 12, 22, 57, tzinfo=UTC)


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "start", "end"),
    [
        ("who did Maria have dinner with on May 3, 2023?", day(2023, 5, 3), day(2023, 5, 4)),
        ("what did Gina find on 1 February, 2023?", day(2023, 2, 1), day(2023, 2, 2)),
        ("what happened on the 13th of October 2023", day(2023, 10, 13), day(2023, 10, 14)),
        ("the release of 2023-10-13", day(2023, 10, 13), day(2023, 10, 14)),
        ("what did Mel paint in July 2023?", day(2023, 7, 1), day(2023, 8, 1)),
        ("the offsite in Dec 2021", day(2021, 12, 1), day(2022, 1, 1)),
        ("how often did she swim in 2023?", day(2023, 1, 1), day(2024, 1, 1)),
        # a month without a year: the last one that has begun by now
        ("when did Melanie go camping in June?", day(2021, 6, 1), day(2021, 7, 1)),
        ("what did we plan in April?", day(2022, 4, 1), day(2022, 5, 1)),
        ("who called on March 3?", day(2022, 3, 3), day(2022, 3, 4)),
        ("who called on May 3?", day(2021, 5, 3), day(2021, 5, 4)),
        # relative to now
        ("what did I buy yesterday?", day(2022, 4, 11), day(2022, 4, 12)),
        ("what did I buy today?", day(2022, 4, 12), day(2022, 4, 13)),
        ("what did I buy last week?", day(2022, 4, 4), day(2022, 4, 11)),
        ("what did I read last month?", day(2022, 3, 1), day(2022, 4, 1)),
        ("where did we go last year?", day(2021, 1, 1), day(2022, 1, 1)),
        ("what did we do last weekend?", day(2022, 4, 9), day(2022, 4, 11)),
        ("what did I do last Saturday?", day(2022, 4, 9), day(2022, 4, 10)),
        ("what came up this week?", day(2022, 4, 11), NOW),
        ("anything in the past 3 days?", NOW - timedelta(days=3), NOW),
        ("what did I cook 2 days ago?", NOW - timedelta(days=2.5), NOW - timedelta(days=1.5)),
        (
            "I mentioned cooking something a couple of days ago. What was it?",
            NOW - timedelta(days=3),
            NOW - timedelta(days=1),
        ),
        ("what have I ordered recently?", NOW - timedelta(days=30), NOW),
        # before / after / since
        ("what did we decide since March?", day(2022, 3, 1), NOW),
        ("what changed after May 3, 2021?", day(2021, 5, 4), NOW),
    ],
)
def test_each_expression_names_its_window(query: str, start: datetime, end: datetime) -> None:
    window = query_window(query, now=NOW)
    assert window is not None
    assert (window.start, window.end) == (start, end)
    assert window.phrase.lower() in query.lower()


def test_before_names_the_time_up_to_the_expression() -> None:
    window = query_window("which vendors did we use before 2020?", now=NOW)
    assert window is not None and window.end == day(2020, 1, 1) and window.start < window.end
    assert window.phrase == "before 2020"


@pytest.mark.parametrize(
    "query",
    [
        "May I ask what my previous occupation was?",
        "how did the team march on after the outage?",
        "what is the total number of siblings I have?",
        "which of the 2023 items are open?",  # a year that is not a time of the question
        "what happened on February 30, 2023?",  # no such day
        "the first time we talked about Python",
        "",
    ],
)
def test_words_that_are_not_a_time_name_no_window(query: str) -> None:
    assert query_window(query, now=NOW) is None


def test_the_more_precise_of_overlapping_expressions_wins() -> None:
    window = query_window("in July 2023 and later in August", now=NOW)
    assert window is not None and (window.start, window.end) == (day(2023, 7, 1), day(2023, 8, 1))


def test_relative_times_keep_the_askers_time_zone() -> None:
    tokyo = timezone(timedelta(hours=9))
    window = query_window("what did I eat yesterday?", now=datetime(2022, 4, 12, 1, tzinfo=tokyo))
    assert window is not None and window.start == datetime(2022, 4, 11, tzinfo=tokyo)


def test_a_naive_moment_is_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        query_window("yesterday", now=datetime(2022, 4, 12))


def test_closeness_is_one_inside_and_falls_off_with_distance() -> None:
    window = TimeWindow(day(2022, 4, 1), day(2022, 4, 2), "that day")
    assert closeness(day(2022, 4, 1) + timedelta(hours=5), window) == 1.0
    near, far = closeness(day(2022, 4, 3), window), closeness(day(2022, 4, 10), window)
    assert 0.0 < far < near < 1.0
    assert closeness(None, window) == 0.0


@given(st.text(max_size=200))
def test_any_text_gives_no_window_or_an_ordered_aware_one(text: str) -> None:
    window = query_window(text, now=NOW)
    if window is not None:
        assert window.start < window.end
        assert window.start.tzinfo is not None and window.end.tzinfo is not None


def test_a_query_an_agent_writes_to_abuse_the_reader_gets_a_bounded_window() -> None:
    """Counts and years as large as the patterns allow, a query at the size limit full of
    expressions: the reader answers with an ordered window, never an error or an overflow."""
    far = query_window("what happened 999 years ago?", now=NOW)
    assert far is not None and far.start < NOW - timedelta(days=999 * 365) < far.end
    assert query_window("what did I do in the past 999 years", now=NOW) is not None
    early = query_window("anything before 1 January 1900?", now=NOW)
    assert early is not None and early.end == day(1900, 1, 1)
    flood = "on February 30, 2023 and " * 399 + "in May 2021"  # 399 impossible dates first
    assert len(flood) <= 10_000  # the longest query a search takes
    window = query_window(flood, now=NOW)
    assert window is not None and (window.start, window.end) == (day(2021, 5, 1), day(2021, 6, 1))
