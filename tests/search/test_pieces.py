"""The static embedder's piece cache gives the tokenizer's own ids, whatever the text."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.search.onnx_minilm import TOKENIZER_SHA256, default_tokenizer_path, load_tokenizer
from cairn.search.pieces import PieceTokenizer

MAX_TOKENS = 4096


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    return load_tokenizer(default_tokenizer_path(), TOKENIZER_SHA256, MAX_TOKENS)


def reference(tokenizer: Any, texts: list[str], limit: int = MAX_TOKENS) -> list[list[int]]:
    return [enc.ids[:limit] for enc in tokenizer.encode_batch(texts, add_special_tokens=False)]


def as_lists(rows: list[np.ndarray[Any, Any]]) -> list[list[int]]:
    return [row.tolist() for row in rows]


# Characters the normaliser and pre-tokeniser treat differently: the four whitespace
# characters pieces are split at, whitespace Python splits at but BERT deletes (\x0b, \x0c,
# \x1c-\x1f, \x85), Unicode spaces, punctuation, accents (composed and combining), CJK,
# fullwidth forms, letters that lowercase to two characters, emoji, NUL and U+FFFD.
AWKWARD = (
    " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u2000\u2028\u2029\u3000\u200b"
    ".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`"
    "éÉñüßİǅﬁ\u0301\u0308東京語ＡＢｆ😀\x00\ufffd\x01\x7f"
)
CHAT_TURNS = [
    "user: I just signed a contract with my first client today, and I want to make sure "
    "I'm covering all my bases for future projects.",
    "assistant: Congratulations! Here are a few tips:\n\n1. **Scope of work** — define it.\n"
    "2. Payment terms (net-30, 50% upfront…)\n\t3. Café naïve résumé “quoted” ’tis",
    "Caroline: I went to the LGBTQ support group yesterday and it was so powerful.",
    "x" * 99 + " " + "y" * 100 + " " + "z" * 101,  # WordPiece sends words over 100 to [UNK]
    "",
    "   \n\t ",
]


def test_chat_turns_get_the_tokenizers_ids(tokenizer: Any) -> None:
    pieces = PieceTokenizer(tokenizer, MAX_TOKENS)
    assert as_lists(pieces.ids(CHAT_TURNS)) == reference(tokenizer, CHAT_TURNS)
    # and again from the cache, which now holds every piece
    held = len(pieces)
    assert held > 0
    assert as_lists(pieces.ids(CHAT_TURNS)) == reference(tokenizer, CHAT_TURNS)
    assert len(pieces) == held


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text(
            # lone surrogates (Cs) are not text the tokenizer takes at all, nor can a store
            # hold them
            alphabet=st.one_of(
                st.sampled_from(AWKWARD),
                st.characters(blacklist_categories=("Cs",)),
                st.sampled_from("ab "),
            ),
            max_size=80,
        ),
        max_size=6,
    )
)
def test_any_text_gets_the_tokenizers_ids(tokenizer: Any, texts: list[str]) -> None:
    pieces = PieceTokenizer(tokenizer, MAX_TOKENS)
    assert as_lists(pieces.ids(texts)) == reference(tokenizer, texts)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=80), max_size=6))
def test_any_ascii_text_gets_the_tokenizers_ids(tokenizer: Any, texts: list[str]) -> None:
    # ASCII text takes a shorter way to its pieces (str.split), where \x0b, \x0c and
    # \x1c-\x1f, which Python splits at and BERT deletes, must send it the longer way
    pieces = PieceTokenizer(tokenizer, MAX_TOKENS)
    assert as_lists(pieces.ids(texts)) == reference(tokenizer, texts)


def test_long_texts_are_cut_at_the_token_limit(tokenizer: Any) -> None:
    texts = ["alpha beta, gamma " * 40, "one two three"]
    pieces = PieceTokenizer(tokenizer, 16)
    got = as_lists(pieces.ids(texts))
    assert got == reference(tokenizer, texts, limit=16)
    assert [len(row) for row in got] == [16, 3]


def test_the_cache_stays_within_its_bound_and_stays_exact(tokenizer: Any) -> None:
    pieces = PieceTokenizer(tokenizer, MAX_TOKENS, max_pieces=50)
    texts = [f"word{n} shared text number {n * 7}" for n in range(200)]
    for start in range(0, 200, 20):
        batch = texts[start : start + 20]
        assert as_lists(pieces.ids(batch)) == reference(tokenizer, batch)
        assert len(pieces) <= 50
