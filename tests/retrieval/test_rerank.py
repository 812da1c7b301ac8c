"""The reranking signals on their own: names and numbers, title words, boosts not cuts."""

from __future__ import annotations

import pytest

from cairn.retrieval.rerank import overlaps, query_entities, query_words, rerank_scores


def test_entities_are_names_and_numbers_not_the_first_word() -> None:
    assert query_entities("What did Caroline paint in 2022?") == {"caroline", "2022"}
    assert query_entities("When did Melanie go camping? Where did John go?") == {
        "melanie",
        "john",
    }
    assert query_entities("what did she say") == frozenset()


def test_query_words_drop_stopwords() -> None:
    assert query_words("What is the name of Jon's dog?") >= {"name", "jon's", "dog"}
    assert "the" not in query_words("What is the name of Jon's dog?")


def test_overlaps_count_shares_of_entities_and_title_words() -> None:
    shares = overlaps(
        ["Caroline · 8 May 2023", "Melanie · 8 May 2023"],
        ["I went to Tampa", "Caroline went to Tampa"],
        "Where did Caroline go in Tampa?",
    )
    assert shares[0][0] == pytest.approx(1.0)  # caroline (title) and tampa (text)
    assert shares[1][0] == pytest.approx(1.0)
    assert shares[0][1] > shares[1][1]  # only the first was said by Caroline


def test_boosts_reorder_but_never_drop() -> None:
    scores = [1.0, 0.9]
    out = rerank_scores(
        scores,
        ["Bob", "Alice"],
        ["something else", "Alice adopted a beagle"],
        "What breed did Alice adopt?",
        entity_weight=0.5,
        title_weight=0.5,
    )
    assert len(out) == 2 and out[1] > out[0]
    assert rerank_scores(scores, ["a", "b"], ["", ""], "q", entity_weight=0, title_weight=0) == [
        1.0,
        0.9,
    ]
