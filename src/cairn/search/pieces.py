"""Token ids of many texts through a WordPiece tokenizer, kept per whitespace-separated piece.

The static embedder's whole cost is tokenising: ``tokenizers`` spends about 2 µs a token
normalising, pre-tokenising and building an ``Encoding`` per text (~0.5 ms for a 1,000-character
chat turn), while summing the tokens' rows takes a tenth of that. Text repeats its words, so
the ids are kept per piece (a run of characters between ASCII spaces, tabs and line breaks)
and a text's ids are its pieces' ids in order; only the pieces never seen are handed to the
tokenizer, all at once per call.

The result is the tokenizer's own, not an imitation of it: a BERT tokenizer's normaliser
works character by character (it drops control characters, lowercases, strips accents, puts
spaces around CJK characters) and its pre-tokeniser splits at every whitespace character, so
no token ever spans one of those four characters, and encoding the pieces one by one gives
the ids of the whole text. ``tests/search/test_pieces.py`` checks that against the tokenizer
on chat turns and on random text of every kind of character.

Written by hand because ``tokenizers`` has no cache of its own: it tokenises every text from
scratch.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["MAX_KEPT_CHARS", "MAX_PIECES", "PieceTokenizer"]

#: How many pieces are kept: a chat corpus's common pieces fit many times over (~150 bytes
#: each, 27 MB measured for 182,000); past it the cache starts again, and the common pieces
#: come back at the next call.
MAX_PIECES = 200_000
#: Longer pieces (a URL, base64, minified JSON) are tokenised every time, never kept: they
#: seldom come again, and kept they would make the cache's size depend on what is written
#: (a 40 kB piece holds ~17 kB of ids). So the cache stays near 100 MB at the very most,
#: whatever the text (measured: 518 bytes a piece of 32 CJK characters, each its own token).
MAX_KEPT_CHARS = 32
_ID = np.dtype(np.int32)

# Only these four: Unicode's other spaces are whitespace to BERT too, but some characters
# Python calls whitespace are control characters BERT deletes ("a\x1cb" is one word), so
# splitting anywhere else could cut a token in two.
_BETWEEN_PIECES = re.compile(r"[ \t\n\r]+")
# The ASCII characters besides those four that ``str.split()`` splits at: an ASCII text
# without them splits the same way with it, in a third of the regular expression's time.
_OTHER_ASCII_SPACES = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f")


def _pieces(text: str) -> list[str]:
    if text.isascii() and not any(space in text for space in _OTHER_ASCII_SPACES):
        return text.split()
    return [piece for piece in _BETWEEN_PIECES.split(text) if piece]


class PieceTokenizer:
    """``ids(texts)``: what ``tokenizer.encode_batch(texts, add_special_tokens=False)``
    gives, each truncated to ``max_tokens``, from a cache of pieces.

    ``tokenizer`` is a ``tokenizers.Tokenizer`` whose normaliser and pre-tokeniser are
    BERT's (or any that never join characters across whitespace), keeping at least the first
    ``max_tokens`` tokens of a text, or all: each piece is encoded on its own, and a piece cut
    shorter than the whole text would be gives other ids.

    Thread-safe: calls share the cache, whose every read and write is one dict operation;
    the lock keeps a clearing and the refill after it together, and each call answers from
    its own mapping of the pieces it needs.
    """

    def __init__(self, tokenizer: Any, max_tokens: int, *, max_pieces: int = MAX_PIECES) -> None:
        truncation = tokenizer.truncation
        if truncation is not None and (
            truncation["max_length"] < max_tokens or truncation["direction"] != "right"
        ):
            raise ValueError(
                f"the tokenizer keeps {truncation['max_length']} tokens from the "
                f"{truncation['direction']}: a piece must keep at least its first {max_tokens}"
            )
        self._tokenizer = tokenizer
        self._max_bytes = max_tokens * _ID.itemsize
        self._max_pieces = max_pieces
        # piece -> its ids as int32 bytes: a text's ids are then one bytes.join, done in C
        self._known: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._known)

    @property
    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` the pieces go through."""
        return self._tokenizer

    def ids(self, texts: Sequence[str]) -> list[npt.NDArray[np.int32]]:
        split = [_pieces(text) for text in texts]
        known = self._known
        found: dict[str, bytes] = {}
        missing: list[str] = []
        for pieces in split:
            for piece in pieces:
                if piece not in found:
                    hit = known.get(piece)
                    if hit is None:
                        missing.append(piece)
                        hit = b""
                    found[piece] = hit
        if missing:
            encode = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)
            encoded = encode(missing, add_special_tokens=False)
            new = {
                piece: np.asarray(enc.ids, dtype=_ID).tobytes()
                for piece, enc in zip(missing, encoded, strict=True)
            }
            found.update(new)
            kept = [(piece, ids) for piece, ids in new.items() if len(piece) <= MAX_KEPT_CHARS]
            with self._lock:
                if len(known) + len(kept) > self._max_pieces:
                    known.clear()
                known.update(kept[: self._max_pieces])
        limit = self._max_bytes
        return [
            np.frombuffer(b"".join(map(found.__getitem__, pieces))[:limit], dtype=_ID)
            for pieces in split
        ]
