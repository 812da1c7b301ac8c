"""The static embedder's piece cache gives the tokenizer's own ids, whatever the text."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.search.onnx_minilm import TOKENIZER_SHA256, default_tokenizer_path, load_tokenizer
from cairn.search.pieces import MAX_KEPT_CHARS, PieceTokenizer

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


# Words around WordPiece's 100-character limit (longer ones become [UNK]), with characters
# BERT deletes or splits at inside and between them.
WORDS = st.text(alphabet=st.sampled_from("ab,é\x00\x1c\x85\u0301東"), min_size=1, max_size=120)
SPACES = st.text(alphabet=st.sampled_from(" \t\n\r\x0b\u3000"), min_size=1, max_size=3)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(WORDS, SPACES), max_size=12))
def test_long_words_and_deleted_characters_get_the_tokenizers_ids(
    tokenizer: Any, parts: list[tuple[str, str]]
) -> None:
    text = "".join(word + space for word, space in parts)
    pieces = PieceTokenizer(tokenizer, MAX_TOKENS)
    assert as_lists(pieces.ids([text, text])) == reference(tokenizer, [text, text])


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
    # one call bringing more new pieces than the bound
    crowd = [" ".join(f"w{n}" for n in range(500))]
    assert as_lists(pieces.ids(crowd)) == reference(tokenizer, crowd)
    assert len(pieces) <= 50


def test_long_pieces_are_tokenised_but_not_kept(tokenizer: Any) -> None:
    pieces = PieceTokenizer(tokenizer, MAX_TOKENS)
    long = "x" * (MAX_KEPT_CHARS + 1)
    texts = [f"short {long} https://example.org/{'a' * 40}"]
    assert as_lists(pieces.ids(texts)) == reference(tokenizer, texts)
    assert len(pieces) == 1  # "short"


def test_a_tokenizer_that_cuts_pieces_short_is_refused() -> None:
    # each piece is encoded on its own, so one truncated before the text's limit would lose
    # ids the whole text keeps
    short = load_tokenizer(default_tokenizer_path(), TOKENIZER_SHA256, 8)
    with pytest.raises(ValueError, match="8 tokens"):
        PieceTokenizer(short, 16)
    PieceTokenizer(short, 8)


def test_threads_sharing_a_small_cache_all_get_exact_ids(tokenizer: Any) -> None:
    pieces = PieceTokenizer(tokenizer, MAX_TOKENS, max_pieces=40)
    batches = [[f"t{t} item {n} of {n * t} " * 3 for n in range(30)] for t in range(6)]
    wrong: list[int] = []
    start = threading.Barrier(len(batches))

    def work(t: int) -> None:
        start.wait()
        for _ in range(20):
            if as_lists(pieces.ids(batches[t])) != reference(tokenizer, batches[t]):
                wrong.append(t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(batches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
    assert len(pieces) <= 40
