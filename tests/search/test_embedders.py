"""Embedders: the real offline ONNX model, the distilled static table, the HTTP client, caching."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

import cairn.search.embedder as embedder_module
from cairn.search.embedder import (
    CachedEmbedder,
    Embedder,
    EmbeddingEndpointError,
    InvalidEmbedderSpec,
    LRUBytesCache,
    ModelIntegrityError,
    Vectors,
    l2_normalise,
    make_embedder,
)
from cairn.search.onnx_minilm import (
    TOKENIZER_SHA256,
    OnnxMiniLMEmbedder,
    default_model_path,
    default_tokenizer_path,
    load_tokenizer,
)
from cairn.search.openai_embed import OpenAIEmbedder
from cairn.search.static_embed import MAX_TOKENS as STATIC_MAX_TOKENS
from cairn.search.static_embed import Recipe, StaticEmbedder
from tests.factories import CountingEmbedder, tampered_copy
from tests.loopback import serving

CLOSE_A = "How do I run the tests?"
CLOSE_B = "Running the test suite"
UNRELATED = "The cat sat on the mat"
# Enough of the vocabulary for the sentences above (largest id: "mat", 13523) in a few seconds.
TEST_RECIPE = Recipe(vocab_limit=15_000)


def cosines(vectors: Vectors) -> tuple[float, float]:
    """(close pair, close-vs-unrelated) similarities for rows CLOSE_A, CLOSE_B, UNRELATED."""
    return float(vectors[0] @ vectors[1]), float(vectors[0] @ vectors[2])


def assert_unit_rows(vectors: Vectors, dim: int) -> None:
    assert vectors.dtype == np.float32
    assert vectors.shape[1] == dim
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.fixture(scope="module")
def minilm() -> OnnxMiniLMEmbedder:
    model = OnnxMiniLMEmbedder()
    model.load()
    return model


@pytest.fixture(scope="module")
def static_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("static-cache")


@pytest.fixture(scope="module")
def static(minilm: OnnxMiniLMEmbedder, static_dir: Path) -> StaticEmbedder:
    model = StaticEmbedder(cache_dir=static_dir, recipe=TEST_RECIPE, minilm_factory=lambda: minilm)
    model.load()
    return model


# -- the ONNX MiniLM ------------------------------------------------------------------------


def test_minilm_gives_384d_unit_vectors_offline(minilm: OnnxMiniLMEmbedder) -> None:
    vectors = minilm.embed([CLOSE_A, CLOSE_B, UNRELATED, ""])
    assert_unit_rows(vectors, 384)
    assert isinstance(minilm, Embedder)


def test_minilm_ranks_close_sentences_above_unrelated(minilm: OnnxMiniLMEmbedder) -> None:
    close, unrelated = cosines(minilm.embed([CLOSE_A, CLOSE_B, UNRELATED]))
    assert close > 0.5
    assert close > unrelated + 0.3


def test_minilm_batching_does_not_change_vectors(minilm: OnnxMiniLMEmbedder) -> None:
    texts = [UNRELATED, "short", CLOSE_A + " " + CLOSE_B * 20, CLOSE_B]
    batched = minilm.embed(texts)
    one_by_one = np.stack([minilm.embed_query(text) for text in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-4)


def test_minilm_truncates_long_text(minilm: OnnxMiniLMEmbedder) -> None:
    long_text = "memory " * 2000
    assert len(minilm.tokenizer.encode(long_text).ids) == 256
    assert_unit_rows(minilm.embed([long_text]), 384)


def test_minilm_refuses_tampered_model(tmp_path: Path) -> None:
    tampered = tampered_copy(default_model_path(), tmp_path / "model.onnx")
    model = OnnxMiniLMEmbedder(model_path=tampered)
    with pytest.raises(ModelIntegrityError, match="sha256"):
        model.embed([CLOSE_A])


def test_minilm_refuses_tampered_tokenizer(tmp_path: Path, minilm: OnnxMiniLMEmbedder) -> None:
    tampered = tmp_path / "tokenizer.json"
    tampered.write_text(minilm.tokenizer_path.read_text().replace('"the"', '"teh"', 1))
    with pytest.raises(ModelIntegrityError, match="tokenizer"):
        OnnxMiniLMEmbedder(tokenizer_path=tampered).load()


def test_minilm_reports_missing_model(tmp_path: Path) -> None:
    with pytest.raises(ModelIntegrityError, match="not found"):
        OnnxMiniLMEmbedder(model_path=tmp_path / "absent.onnx").load()


def test_loading_and_embedding_print_nothing(
    capfd: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # An MCP stdio server speaks JSON-RPC on stdout: one stray line breaks the protocol.
    model = OnnxMiniLMEmbedder()
    model.embed([CLOSE_A])
    StaticEmbedder(cache_dir=tmp_path, recipe=Recipe(vocab_limit=3_000)).embed([CLOSE_A])
    assert capfd.readouterr().out == ""


def test_importing_the_embedders_does_not_load_onnxruntime() -> None:
    src = Path(embedder_module.__file__).parents[2]
    code = (
        "import sys, cairn.search.embedder, cairn.search.onnx_minilm, cairn.search.static_embed;"
        "print(sorted(m for m in ('onnxruntime', 'tokenizers') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(src)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]"


# -- the static embedder --------------------------------------------------------------------


def test_static_gives_unit_vectors_of_documented_dim(static: StaticEmbedder) -> None:
    vectors = static.embed([CLOSE_A, CLOSE_B, UNRELATED])
    assert static.dim == TEST_RECIPE.pca_dims == 256
    assert_unit_rows(vectors, static.dim)
    assert static.embed_query(CLOSE_A).shape == (256,)


def test_static_ranks_close_sentences_above_unrelated(static: StaticEmbedder) -> None:
    close, unrelated = cosines(static.embed([CLOSE_A, CLOSE_B, UNRELATED]))
    assert close > unrelated + 0.2


def test_static_vectors_are_the_mean_of_the_tokenizers_own_tokens(static: StaticEmbedder) -> None:
    # The embedder keeps token ids per piece of text (cairn.search.pieces); its vectors must
    # be exactly those of tokenising each whole text, twice over (the second time from the
    # cache of pieces).
    texts = [CLOSE_A, "Café naïve, “quoted” half\x1cway\ttab\r\nline 東京 " * 3, UNRELATED]
    static.load()
    table = static._table  # white-box: the distilled rows, summed as the embedder should
    assert table is not None
    tokenizer = load_tokenizer(default_tokenizer_path(), TOKENIZER_SHA256, STATIC_MAX_TOKENS)
    sums = np.zeros((len(texts), static.dim), dtype=np.float32)
    for i, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
        table[encoding.ids].sum(axis=0, out=sums[i])
    expected = l2_normalise(sums)
    np.testing.assert_array_equal(static.embed(texts), expected)
    np.testing.assert_array_equal(static.embed(texts), expected)


def test_a_static_query_neither_reads_nor_fills_the_cache_of_documents_pieces(
    static: StaticEmbedder,
) -> None:
    # The piece cache fills with every principal's documents; a query answered from it
    # would be faster for words some unreadable document holds (a timing leak). So a query
    # is tokenised on its own: a poisoned entry for one of its pieces changes nothing, and
    # its new pieces are not kept.
    static.embed([CLOSE_B])  # the documents' side learns "running", "the", ...
    pieces = static._tokenizer  # white-box: the embedder's cache of pieces
    assert pieces is not None
    query = "How do I run the tests? zebrafish"
    honest = static.embed([query])[0]
    held = len(pieces)
    pieces._known["run"] = np.asarray([1037], dtype=np.int32).tobytes()  # "a", not "run"
    try:
        np.testing.assert_array_equal(static.embed_query(query), honest)
        assert len(pieces) == held
        assert not np.array_equal(static.embed([query])[0], honest)  # documents do read it
    finally:
        pieces._known.clear()


def test_static_text_without_tokens_is_a_zero_row(static: StaticEmbedder) -> None:
    vectors = static.embed(["", CLOSE_A])
    assert not vectors[0].any()
    assert_unit_rows(vectors[1:], static.dim)


def test_static_reuses_a_valid_cached_table(
    static: StaticEmbedder, static_dir: Path, minilm: OnnxMiniLMEmbedder
) -> None:
    calls: list[tuple[int, int]] = []
    again = StaticEmbedder(
        cache_dir=static_dir,
        recipe=TEST_RECIPE,
        minilm_factory=lambda: minilm,
        progress=lambda done, total: calls.append((done, total)),
    )
    np.testing.assert_array_equal(again.embed([CLOSE_A]), static.embed([CLOSE_A]))
    assert calls == []


@pytest.mark.parametrize("tamper", ["table", "source model"])
def test_static_rebuilds_a_tampered_table_and_reports_progress(
    static: StaticEmbedder, minilm: OnnxMiniLMEmbedder, tmp_path: Path, tamper: str
) -> None:
    recipe = Recipe(vocab_limit=4_000)
    first = StaticEmbedder(cache_dir=tmp_path, recipe=recipe, minilm_factory=lambda: minilm)
    reference = first.embed([CLOSE_A])
    if tamper == "table":
        table = np.load(first.table_path)
        table[2000:] = 0.0
        np.save(first.table_path, table)
    else:
        sidecar = first.table_path.with_suffix(".json")
        meta = json.loads(sidecar.read_text())
        meta["model_sha256"] = "0" * 64
        sidecar.write_text(json.dumps(meta))

    calls: list[tuple[int, int]] = []
    rebuilt = StaticEmbedder(
        cache_dir=tmp_path,
        recipe=recipe,
        minilm_factory=lambda: minilm,
        progress=lambda done, total: calls.append((done, total)),
    )
    np.testing.assert_allclose(rebuilt.embed([CLOSE_A]), reference, atol=1e-6)
    assert calls, "a tampered table must be distilled again, not trusted"
    assert calls[-1][0] == calls[-1][1]
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_static_refuses_a_tampered_or_missing_tokenizer_even_with_its_table_cached(
    static: StaticEmbedder, static_dir: Path, minilm: OnnxMiniLMEmbedder, tmp_path: Path
) -> None:
    # With the table cached, the static path never loads MiniLM's own tokenizer: its own
    # load is where the tokenizer file must be checked.
    tampered = tmp_path / "tokenizer.json"
    tampered.write_text(minilm.tokenizer_path.read_text().replace('"the"', '"teh"', 1))
    for path, message in ((tampered, "sha256"), (tmp_path / "absent.json", "not found")):
        again = StaticEmbedder(
            cache_dir=static_dir,
            recipe=TEST_RECIPE,
            minilm_factory=lambda path=path: OnnxMiniLMEmbedder(tokenizer_path=path),
        )
        with pytest.raises(ModelIntegrityError, match=message):
            again.embed([CLOSE_A])


@pytest.mark.parametrize("damage", ["fortran order", "cut short", "not npy"])
def test_a_table_whose_hash_matches_but_cannot_be_read_is_refused(
    static: StaticEmbedder, minilm: OnnxMiniLMEmbedder, tmp_path: Path, damage: str
) -> None:
    """A sidecar that vouches for a table cairn cannot use (written by hand, say): refused
    by name rather than read wrongly or failing with numpy's own error."""
    # A copy of the module's table and sidecar, damaged (distilling one takes seconds).
    table_path = tmp_path / static.table_path.name
    sidecar = table_path.with_suffix(".json")
    sidecar.write_bytes(static.table_path.with_suffix(".json").read_bytes())
    if damage == "fortran order":
        np.save(table_path, np.asfortranarray(np.load(static.table_path)))
    elif damage == "cut short":
        table_path.write_bytes(static.table_path.read_bytes()[:-4])
    else:
        table_path.write_bytes(b"not an npy file at all" * 4)
    meta = json.loads(sidecar.read_text())
    meta["table_sha256"] = hashlib.sha256(table_path.read_bytes()).hexdigest()
    sidecar.write_text(json.dumps(meta))
    again = StaticEmbedder(cache_dir=tmp_path, recipe=TEST_RECIPE, minilm_factory=lambda: minilm)
    with pytest.raises(ModelIntegrityError, match="static table"):
        again.embed([CLOSE_A])


# -- the cache ------------------------------------------------------------------------------


def test_cache_never_embeds_the_same_content_twice() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner)
    first = cached.embed(["alpha", "beta", "alpha"])
    second = cached.embed(["beta", "gamma", "alpha"])
    assert inner.seen == ["alpha", "beta", "gamma"]
    np.testing.assert_array_equal(first[0], first[2])
    np.testing.assert_array_equal(first[1], second[0])
    np.testing.assert_array_equal(second, inner.embed(["beta", "gamma", "alpha"]))


def test_cache_keys_on_model_name_and_uses_the_given_mapping() -> None:
    store: dict[str, bytes] = {}
    one, other = CountingEmbedder(), CountingEmbedder()
    other.name = "another-model"
    CachedEmbedder(one, store).embed(["alpha"])
    CachedEmbedder(other, store).embed(["alpha"])
    assert other.seen == ["alpha"]
    assert len(store) == 2


def test_cache_queries_and_empty_batches() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner)
    assert cached.embed([]).shape == (0, 4)
    np.testing.assert_array_equal(cached.embed_query("alpha"), cached.embed_query("alpha"))
    assert inner.seen == ["alpha"]


def test_lru_cache_forgets_least_recently_used() -> None:
    lru = LRUBytesCache(max_items=2)
    lru["a"], lru["b"] = b"1", b"2"
    assert lru["a"] == b"1"
    lru["c"] = b"3"
    assert sorted(lru) == ["a", "c"]


# -- the factory ----------------------------------------------------------------------------


def test_factory_builds_each_backend_lazily() -> None:
    default = make_embedder()
    assert isinstance(default, CachedEmbedder)
    assert isinstance(default.inner, OnnxMiniLMEmbedder)
    assert not default.inner._session.made
    assert isinstance(make_embedder("static", cached=False), StaticEmbedder)
    remote = make_embedder("openai:http://127.0.0.1:9/v1#nomic-embed-text", cached=False)
    assert isinstance(remote, OpenAIEmbedder)
    assert remote.model == "nomic-embed-text"
    assert remote.base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("spec", ["bert", "", "openai:", "openai:ftp://host/v1", "MINILM "])
def test_factory_rejects_unknown_spec_by_name(spec: str) -> None:
    with pytest.raises(InvalidEmbedderSpec) as info:
        make_embedder(spec)
    assert isinstance(info.value, ValueError)
    assert repr(spec.strip()) in str(info.value)


# -- the OpenAI-compatible client -----------------------------------------------------------


class FakeEmbeddingsHandler(BaseHTTPRequestHandler):
    """Answers like /v1/embeddings; the model name picks a failure mode."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        if body["model"] == "broken":
            self._reply(500, {"error": {"message": "model crashed", "type": "server_error"}})
        elif body["model"] == "forbidden":
            self._reply(401, {"error": {"message": "invalid api key"}})
        else:
            data = [
                {"object": "embedding", "index": i, "embedding": [len(text), 1.0, 0.0]}
                for i, text in enumerate(body["input"])
            ]
            # Out of order on purpose: the client must sort by index.
            self._reply(200, {"object": "list", "data": data[::-1], "model": body["model"]})

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean


@pytest.fixture
def endpoint() -> Iterator[str]:
    FakeEmbeddingsHandler.requests.clear()
    with serving(FakeEmbeddingsHandler) as url:
        yield f"{url}/v1"


def test_openai_client_embeds_in_batches(endpoint: str) -> None:
    client = OpenAIEmbedder(base_url=endpoint, model="tiny", api_key="sk-test", batch_size=2)
    vectors = client.embed(["a", "bbb", "cc"])
    assert client.dim == 3
    assert_unit_rows(vectors, 3)
    expected = np.array([[1, 1, 0], [3, 1, 0], [2, 1, 0]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    sent = FakeEmbeddingsHandler.requests
    assert [r["body"]["input"] for r in sent] == [["a", "bbb"], ["cc"]]
    assert {r["path"] for r in sent} == {"/v1/embeddings"}
    assert {r["auth"] for r in sent} == {"Bearer sk-test"}
    client.close()


@pytest.mark.parametrize(
    ("model", "status", "message"),
    [
        ("broken", 500, "model crashed"),
        ("forbidden", 401, "invalid api key"),
    ],
)
def test_openai_client_reports_http_errors(
    endpoint: str, model: str, status: int, message: str
) -> None:
    client = OpenAIEmbedder(base_url=endpoint, model=model)
    with pytest.raises(EmbeddingEndpointError, match=f"HTTP {status}: {message}") as info:
        client.embed(["a"])
    assert info.value.details["status"] == status


def test_openai_client_reports_unreachable_endpoint() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeEmbeddingsHandler)
    port = server.server_address[1]
    server.server_close()  # nothing listens on this port any more
    client = OpenAIEmbedder(base_url=f"http://127.0.0.1:{port}/v1", timeout=5)
    with pytest.raises(EmbeddingEndpointError, match="unreachable"):
        client.embed(["a"])


def test_cached_openai_client_sends_each_text_once(endpoint: str) -> None:
    cached = make_embedder(f"openai:{endpoint}#tiny")
    cached.embed(["a", "b"])
    cached.embed(["b", "a", "c"])
    assert [r["body"]["input"] for r in FakeEmbeddingsHandler.requests] == [["a", "b"], ["c"]]


def test_the_minilm_tokenizer_ships_inside_cairn() -> None:
    """No unrelated package is installed for one data file: the tokenizer is cairn's own
    package data, with its licence notice, checked against its pinned hash."""
    import cairn
    from cairn.search import onnx_minilm
    from cairn.search.embedder import sha256_file

    path = onnx_minilm.default_tokenizer_path()
    assert path.is_relative_to(Path(cairn.__file__).parent)
    assert sha256_file(path) == onnx_minilm.TOKENIZER_SHA256
    assert "Apache License" in (path.parent / "NOTICE").read_text()
