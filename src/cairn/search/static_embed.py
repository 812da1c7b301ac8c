"""A fast static embedder distilled offline from the ONNX MiniLM (the model2vec recipe).

No PyPI package ships static (model2vec "potion") weights, so we make our own once:

1. run every WordPiece vocabulary token through MiniLM as ``[CLS] token [SEP]`` and mean-pool
   the output, giving one 384-d vector per token (~30 s on 2 cores for the 30k vocabulary);
2. centre and PCA-reduce the table (removes the direction shared by all tokens, which
   otherwise dominates every mean, and shrinks the table);
3. weight each token by SIF, ``a / (a + p(token))``, with ``p`` from a Zipf law over the
   vocabulary's frequency order (BERT's vocabulary lists whole words roughly by frequency),
   so "the" and "of" barely count in a mean.

A text's vector is then the mean of its tokens' rows, L2-normalised: no neural network at
query time. The table is cached as ``.npy`` under ``cache_dir`` with a JSON sidecar recording
the sha256 of the source model and tokenizer, the recipe, and the table's own sha256; a table
whose sidecar does not match is rebuilt, never trusted.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from cairn.search.embedder import (
    ModelIntegrityError,
    ProgressCallback,
    Vectors,
    first_row,
    l2_normalise,
    sha256_file,
)
from cairn.search.onnx_minilm import (
    MODEL_SHA256,
    TOKENIZER_SHA256,
    OnnxMiniLMEmbedder,
    load_tokenizer,
)
from cairn.search.pieces import PieceTokenizer

RECIPE_VERSION = 1
#: First id of a whole word in BERT uncased WordPiece ("the"); before it are [PAD], [unusedN],
#: specials and single characters.
FIRST_WORD_ID = 1996
MAX_TOKENS = 4096


@dataclass(frozen=True)
class Recipe:
    """Everything that changes the distilled table; part of its cache key."""

    pca_dims: int = 256
    sif_coefficient: float = 1e-2
    batch_size: int = 512
    #: Distil only the first ``vocab_limit`` ids (tests); ``None`` = whole vocabulary.
    vocab_limit: int | None = None
    version: int = RECIPE_VERSION


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "cairn"


def cache_key(recipe: Recipe, model_sha256: str, tokenizer_sha256: str) -> str:
    payload = json.dumps(
        {"recipe": asdict(recipe), "model": model_sha256, "tokenizer": tokenizer_sha256},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def zipf_sif_weights(vocab_size: int, coefficient: float) -> npt.NDArray[np.float32]:
    """SIF weight per token id; ids before the first whole word count as very frequent."""
    rank = np.maximum(np.arange(vocab_size) - FIRST_WORD_ID + 1, 1).astype(np.float64)
    harmonic = float(np.sum(1.0 / np.arange(1, vocab_size + 1)))
    proba = 1.0 / (rank * harmonic)
    return (coefficient / (coefficient + proba)).astype(np.float32)


def pca_reduce(table: npt.NDArray[np.float32], dims: int) -> npt.NDArray[np.float32]:
    """Centre, then project on the top principal axes (all of them if ``dims`` >= width)."""
    used = np.any(table != 0, axis=1)
    centred = table - table[used].mean(axis=0)
    _, _, axes = np.linalg.svd(centred[used], full_matrices=False)
    keep = min(dims, axes.shape[0])
    reduced: npt.NDArray[np.float32] = (centred @ axes[:keep].T).astype(np.float32)
    reduced[~used] = 0.0
    return reduced


def distil_table(
    minilm: OnnxMiniLMEmbedder,
    recipe: Recipe,
    progress: ProgressCallback | None = None,
) -> npt.NDArray[np.float32]:
    """The static token table: one row per vocabulary id, zero for ids never produced."""
    tokenizer = minilm.tokenizer
    vocab: dict[str, int] = tokenizer.get_vocab()
    size = len(vocab)
    limit = size if recipe.vocab_limit is None else min(recipe.vocab_limit, size)
    wanted = [idx for tok, idx in vocab.items() if idx < limit and not _is_reserved(tok)]
    wanted.sort()
    cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
    raw = np.zeros((size, minilm.dim), dtype=np.float32)
    done = 0
    for start in range(0, len(wanted), recipe.batch_size):
        chunk = wanted[start : start + recipe.batch_size]
        ids = np.array([[cls_id, idx, sep_id] for idx in chunk], dtype=np.int64)
        raw[chunk] = _token_outputs(minilm, ids)
        done += len(chunk)
        if progress is not None:
            progress(done, len(wanted))
    table = pca_reduce(raw, recipe.pca_dims)
    table *= zipf_sif_weights(size, recipe.sif_coefficient)[:, None]
    return table.astype(np.float32)


def _is_reserved(token: str) -> bool:
    # [PAD], [UNK], [CLS], [SEP], [MASK] and [unusedN] never carry meaning in a text.
    return token.startswith("[") and token.endswith("]")


def _token_outputs(
    minilm: OnnxMiniLMEmbedder, ids: npt.NDArray[np.int64]
) -> npt.NDArray[np.float32]:
    session: Any = minilm.session
    feeds = {
        "input_ids": ids,
        "attention_mask": np.ones_like(ids),
        "token_type_ids": np.zeros_like(ids),
    }
    hidden = session.run(None, feeds)[0]
    return np.asarray(hidden.mean(axis=1), dtype=np.float32)


class StaticEmbedder:
    """Mean of distilled token vectors; ~100x faster than running MiniLM.

    The table is built on first use (or by :meth:`load`) if the cache has no valid copy.
    """

    def __init__(
        self,
        *,
        cache_dir: Path | None = None,
        recipe: Recipe | None = None,
        threads: int = 2,
        progress: ProgressCallback | None = None,
        minilm_factory: Callable[[], OnnxMiniLMEmbedder] | None = None,
    ) -> None:
        self.recipe = recipe or Recipe()
        self.cache_dir = cache_dir or default_cache_dir()
        self.progress = progress
        self._minilm_factory = minilm_factory or (lambda: OnnxMiniLMEmbedder(threads=threads))
        self._table: npt.NDArray[np.float32] | None = None
        self._tokenizer: PieceTokenizer | None = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        return min(self.recipe.pca_dims, 384)

    @property
    def name(self) -> str:
        # Tables distilled from the pinned model; a different recipe is a different space.
        tag = cache_key(self.recipe, MODEL_SHA256, TOKENIZER_SHA256)[:12]
        return f"static-minilm-{self.dim}-{tag}"

    @property
    def table_path(self) -> Path:
        return self.cache_dir / f"{self.name}.npy"

    def load(self) -> None:
        with self._lock:
            if self._table is not None:
                return
            minilm = self._minilm_factory()
            table = self._read_cached(minilm)
            if table is None:
                table = distil_table(minilm, self.recipe, self.progress)
                self._write_cached(table, minilm)
            self._tokenizer = PieceTokenizer(_static_tokenizer(minilm), MAX_TOKENS)
            self._table = table

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        assert self._tokenizer is not None
        return self._vectors(self._tokenizer.ids(texts))

    def embed_query(self, text: str) -> Vectors:
        # A query is tokenised on its own, never through the cache of pieces: that cache
        # fills with the pieces of every principal's documents, and a query answered faster
        # for pieces seen there would tell a reader, whose trace times each stage, that some
        # document it may not read holds them (the vector cache keeps queries apart too).
        self.load()
        assert self._tokenizer is not None
        encoding = self._tokenizer.tokenizer.encode(text, add_special_tokens=False)
        return first_row(self._vectors([encoding.ids]))

    def _vectors(self, rows: Sequence[Sequence[int] | npt.NDArray[np.int32]]) -> Vectors:
        """Each row of token ids as the normalised sum of its tokens' rows of the table."""
        assert self._table is not None
        table = self._table
        sums = np.zeros((len(rows), self.dim), dtype=np.float32)
        # One text at a time: gathering every token's row of a batch at once (then
        # ``reduceat``) made a (tokens x dim) array, ~58 MB for 256 long chat turns, whose
        # allocation and pass cost ~15x the sums themselves; a text's own rows stay in cache.
        for i, ids in enumerate(rows):
            if len(ids):
                table[ids].sum(axis=0, out=sums[i])
        # The mean's scale vanishes under L2 normalisation, so the sum is enough.
        return l2_normalise(sums)

    def _meta(self, minilm: OnnxMiniLMEmbedder) -> dict[str, Any]:
        # The pinned hashes, not the files': distillation only ever runs a model whose file
        # matched them, and a table from any other source model must not be reused.
        return {
            "recipe": asdict(self.recipe),
            "model_sha256": minilm.model_sha256,
            "tokenizer_sha256": minilm.tokenizer_sha256,
        }

    def _read_cached(self, minilm: OnnxMiniLMEmbedder) -> npt.NDArray[np.float32] | None:
        meta_path = self.table_path.with_suffix(".json")
        if not (self.table_path.is_file() and meta_path.is_file()):
            return None
        try:
            stored = json.loads(meta_path.read_text())
        except (OSError, ValueError):
            return None
        table_sha = stored.pop("table_sha256", None)
        if stored != self._meta(minilm):
            return None
        # Read once, and the bytes checked are the bytes used (a second read for the array
        # could see a file changed since). Rebuild rather than trust a table made from
        # other files or edited since.
        data = self.table_path.read_bytes()
        if table_sha != hashlib.sha256(data).hexdigest():
            return None
        table = _npy_view(data, self.table_path)
        if table.dtype != np.float32 or table.ndim != 2 or table.shape[1] != self.dim:
            raise ModelIntegrityError(f"static table {self.table_path} has the wrong shape")
        return table

    def _write_cached(self, table: npt.NDArray[np.float32], minilm: OnnxMiniLMEmbedder) -> None:
        self.cache_dir.mkdir(parents=True, exist_ok=True)
        # Write then rename, so a crash or a concurrent process never leaves half a table.
        tmp = self.table_path.with_name(f".{self.table_path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            np.save(fh, table, allow_pickle=False)
        meta = {**self._meta(minilm), "table_sha256": sha256_file(tmp)}
        tmp_meta = tmp.with_suffix(".json.tmp")
        tmp_meta.write_text(json.dumps(meta, indent=2, sort_keys=True))
        os.replace(tmp, self.table_path)
        os.replace(tmp_meta, self.table_path.with_suffix(".json"))


def _static_tokenizer(minilm: OnnxMiniLMEmbedder) -> Any:
    # A tokenizer of its own: the static path takes longer texts than the 256 tokens MiniLM
    # can see (and MiniLM's own, with its model, is never loaded to embed statically).
    return load_tokenizer(minilm.tokenizer_path, minilm.tokenizer_sha256, MAX_TOKENS)


# The ``.npy`` header readers numpy makes public, by format version (``np.save`` writes 1.0
# for a table of this size).
_NPY_HEADERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


def _npy_view(data: bytes, path: Path) -> npt.NDArray[Any]:
    """The array an ``.npy`` file's bytes hold, read in place (``np.load`` would read the
    file again, or copy the bytes)."""
    stream = io.BytesIO(data)
    try:
        read_header = _NPY_HEADERS.get(np.lib.format.read_magic(stream))
        if read_header is None:
            raise ModelIntegrityError(f"static table {path} is in an .npy format not written here")
        shape, fortran_order, dtype = read_header(stream)
        if fortran_order or dtype.hasobject:
            raise ModelIntegrityError(f"static table {path} is not a plain C-ordered array")
        count = int(np.prod(shape))
        return np.frombuffer(data, dtype=dtype, count=count, offset=stream.tell()).reshape(shape)
    except ValueError:  # a broken header, or fewer bytes than the header says
        raise ModelIntegrityError(f"static table {path} is not a readable .npy file") from None


__all__ = [
    "Recipe",
    "StaticEmbedder",
    "default_cache_dir",
    "distil_table",
    "pca_reduce",
    "zipf_sif_weights",
]
