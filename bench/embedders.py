"""Benchmark the embedders: ingest speed, query latency and a retrieval quality proxy.

    .venv/bin/python bench/embedders.py [--data ../shared/data/locomo/locomo_dev.json] [--quick]
        [--lme ../shared/data/longmemeval/longmemeval_s_dev.json.xz --lme-questions 30]
        [--openai http://127.0.0.1:8080/v1#model] [--wordllama]

``e5`` is measured too when ``cairn[e5]`` is installed.

Quality proxy (LoCoMo): for every question with evidence, rank all turns of its conversation by
cosine to the question; recall@10 is the share of gold evidence turns in the top 10, averaged
over questions. Second proxy (LongMemEval S, optional): for each non-abstention question, rank
its ~48 haystack sessions (user turns joined) by cosine; session recall@5. Dense embeddings only:
no keyword search, no fusion.
"""

from __future__ import annotations

import argparse
import json
import lzma
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from cairn.search.embedder import Embedder, Vectors, l2_normalise, make_embedder
from cairn.search.nano_e5 import available as e5_available

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared/data"
DEFAULT_DATA = SHARED_DATA / "locomo/locomo_dev.json"
DEFAULT_LME = SHARED_DATA / "longmemeval/longmemeval_s_dev.json.xz"
FALLBACK_SENTENCES = [
    "How do I run the tests?",
    "Running the test suite takes about a minute on two cores.",
    "The cat sat on the mat.",
    "We decided to store vectors next to the records in SQLite.",
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie painted a sunrise over the lake last year.",
]


@dataclass
class Conversation:
    turn_ids: list[str]
    turns: list[str]
    questions: list[str]
    evidence: list[set[str]]


@dataclass
class Row:
    name: str
    dim: int
    load_s: float
    sentences_per_s: float
    ms_per_query: float
    recall_at_10: float | None
    lme_recall_at_5: float | None = None


@dataclass
class Haystack:
    question: str
    sessions: list[str]
    session_ids: list[str]
    gold: set[str]


def load_longmemeval(path: Path, limit: int) -> list[Haystack]:
    with lzma.open(path) as fh:
        items: list[dict[str, Any]] = json.loads(fh.read())
    kept = [item for item in items if not item["question_id"].endswith("_abs")][:limit]
    return [
        Haystack(
            question=item["question"],
            sessions=[
                " ".join(turn["content"] for turn in session if turn["role"] == "user")
                for session in item["haystack_sessions"]
            ],
            session_ids=item["haystack_session_ids"],
            gold=set(item["answer_session_ids"]),
        )
        for item in kept
    ]


def session_recall_at_5(embedder: Embedder, haystacks: Sequence[Haystack]) -> float:
    scores = []
    for hay in haystacks:
        sims = embedder.embed(hay.sessions) @ embedder.embed_query(hay.question)
        top = {hay.session_ids[i] for i in np.argsort(-sims)[:5]}
        scores.append(len(hay.gold & top) / len(hay.gold))
    return float(np.mean(scores))


def load_locomo(path: Path, limit: int | None) -> list[Conversation]:
    samples: list[dict[str, Any]] = json.loads(path.read_text())
    out = []
    for sample in samples[:limit]:
        conv = sample["conversation"]
        turns = [
            turn
            for key, value in conv.items()
            if key.startswith("session_") and isinstance(value, list)
            for turn in value
        ]
        qa = [q for q in sample["qa"] if q.get("evidence")]
        out.append(
            Conversation(
                turn_ids=[t["dia_id"] for t in turns],
                turns=[t["text"] for t in turns],
                questions=[q["question"] for q in qa],
                evidence=[set(q["evidence"]) for q in qa],
            )
        )
    return out


def recall_at_10(embedder: Embedder, conversations: Sequence[Conversation]) -> float:
    scores = []
    for conv in conversations:
        turns = embedder.embed(conv.turns)
        # embed_query: a model with query and passage prefixes (e5) embeds questions apart.
        questions = np.stack([embedder.embed_query(q) for q in conv.questions])
        for gold, sims in zip(conv.evidence, questions @ turns.T, strict=True):
            top = {conv.turn_ids[i] for i in np.argsort(-sims)[:10]}
            scores.append(len(gold & top) / len(gold))
    return float(np.mean(scores))


def throughput(embedder: Embedder, texts: Sequence[str]) -> float:
    start = time.perf_counter()
    embedder.embed(texts)
    return len(texts) / (time.perf_counter() - start)


def query_latency_ms(embedder: Embedder, texts: Sequence[str]) -> float:
    timings = []
    for text in texts:
        start = time.perf_counter()
        embedder.embed_query(text)
        timings.append((time.perf_counter() - start) * 1000)
    return statistics.median(timings)


def measure(
    label: str,
    build: Callable[[], Embedder],
    corpus: Sequence[str],
    queries: Sequence[str],
    conversations: Sequence[Conversation] | None,
    haystacks: Sequence[Haystack] | None = None,
) -> Row:
    start = time.perf_counter()
    embedder = build()
    embedder.embed(["warm up: loads and verifies the model"])
    load_s = time.perf_counter() - start
    return Row(
        name=label,
        dim=embedder.dim,
        load_s=load_s,
        sentences_per_s=throughput(embedder, corpus),
        ms_per_query=query_latency_ms(embedder, queries),
        recall_at_10=recall_at_10(embedder, conversations) if conversations else None,
        lme_recall_at_5=session_recall_at_5(embedder, haystacks) if haystacks else None,
    )


class WordLlamaEmbedder:
    """Adapter for the optional ``wordllama`` package (its own 256-d weights, offline)."""

    def __init__(self) -> None:
        import wordllama

        package_dir = Path(wordllama.__file__).parent
        self._model: Any = wordllama.WordLlama.load(cache_dir=package_dir, disable_download=True)
        self.name = "wordllama-l2-supercat-256"
        self.dim = 256

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return l2_normalise(np.asarray(self._model.embed(list(texts), norm=True)))

    def embed_query(self, text: str) -> Vectors:
        return self.embed([text])[0]


def static_builder(console: Console) -> Callable[[], Embedder]:
    def build() -> Embedder:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("distilling static table (first run only)", total=None)
            embedder = make_embedder(
                "static",
                cached=False,
                progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
            embedder.embed(["load"])
        return embedder

    return build


def render(rows: Sequence[Row], console: Console, corpus_size: int) -> None:
    table = Table(title=f"Embedders ({corpus_size} sentences, no vector cache)")
    headers = ("embedder", "dim", "load s", "sentences/s", "ms/query", "LoCoMo R@10", "LME-S R@5")
    for header in headers:
        table.add_column(header, justify="left" if header == "embedder" else "right")
    for row in rows:
        quality = "—" if row.recall_at_10 is None else f"{row.recall_at_10:.3f}"
        lme = "—" if row.lme_recall_at_5 is None else f"{row.lme_recall_at_5:.3f}"
        table.add_row(
            row.name,
            str(row.dim),
            f"{row.load_s:.2f}",
            f"{row.sentences_per_s:,.0f}",
            f"{row.ms_per_query:.2f}",
            quality,
            lme,
        )
    console.print(table)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="locomo_dev.json")
    parser.add_argument("--quick", action="store_true", help="one conversation, fewer queries")
    parser.add_argument("--lme", type=Path, default=DEFAULT_LME, help="longmemeval_s_dev.json.xz")
    parser.add_argument("--lme-questions", type=int, default=30, help="LongMemEval questions")
    parser.add_argument("--openai", metavar="SPEC", help="also bench openai:<base_url>#<model>")
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--wordllama", action="store_true", help="also bench wordllama")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    console = Console(width=120)

    conversations = None
    if args.data.is_file():
        conversations = load_locomo(args.data, 1 if args.quick else None)
        corpus = [turn for conv in conversations for turn in conv.turns]
    else:
        console.print(f"[yellow]no data at {args.data}: skipping quality, synthetic corpus")
        corpus = FALLBACK_SENTENCES * 50
    if args.quick:
        corpus = corpus[:300]
    queries = corpus[: 20 if args.quick else 100]
    haystacks = None
    if args.lme.is_file():
        haystacks = load_longmemeval(args.lme, 5 if args.quick else args.lme_questions)
    else:
        console.print(f"[yellow]no data at {args.lme}: skipping the LongMemEval proxy")

    builders: list[tuple[str, Callable[[], Embedder]]] = [
        ("minilm (ONNX int8)", lambda: make_embedder("minilm", cached=False, threads=args.threads)),
        ("static (distilled)", static_builder(console)),
    ]
    if e5_available():
        builders.append(("e5 (4-bit)", lambda: make_embedder("e5", cached=False)))
    if args.wordllama:
        builders.append(("wordllama", WordLlamaEmbedder))
    if args.openai:
        spec = args.openai if args.openai.startswith("openai:") else f"openai:{args.openai}"
        builders.append((spec, lambda: make_embedder(spec, cached=False, api_key=args.api_key)))

    rows = []
    for label, build in builders:
        console.print(f"measuring {label} …")
        rows.append(measure(label, build, corpus, queries, conversations, haystacks))
    render(rows, console, len(corpus))
    return 0


if __name__ == "__main__":
    sys.exit(main())
