"""Loaders for the LoCoMo and LongMemEval benchmark files (read-only; nothing is copied).

LoCoMo (``locomo_dev.json``): conversations of dated sessions of turns, with questions whose
``evidence`` names the turns (``dia_id``) that hold the answer. LongMemEval
(``longmemeval_s_dev.json.xz`` or the oracle ``.json``): one haystack of sessions per question,
``answer_session_ids`` for session-level gold and ``has_answer`` flags for turn-level gold.
"""

from __future__ import annotations

import json
import lzma
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "SHARED_DATA",
    "LmeQuestion",
    "LmeSession",
    "LmeTurn",
    "LocomoConversation",
    "LocomoQuestion",
    "LocomoTurn",
    "load_locomo",
    "load_longmemeval",
    "normalise_evidence",
    "parse_any_date",
    "parse_lme_date",
    "parse_locomo_date",
]

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""``<repo>/../shared/data``: where the benchmark files live on the team machine."""

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


# --------------------------------------------------------------------------- LoCoMo


@dataclass(frozen=True, slots=True)
class LocomoTurn:
    dia_id: str  # "D<session>:<turn>"
    speaker: str
    text: str
    session: int
    session_date: str  # as written, e.g. "1:56 pm on 8 May, 2023"
    when: datetime | None  # parsed session date
    caption: str | None = None  # BLIP caption of a shared image
    image_query: str | None = None  # the search query the image was found with


@dataclass(frozen=True, slots=True)
class LocomoQuestion:
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]  # normalised dia_ids that exist in the conversation

    @property
    def evidence_sessions(self) -> frozenset[int]:
        return frozenset(session_of(dia_id) for dia_id in self.evidence)


@dataclass(slots=True)
class LocomoConversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    turns: list[LocomoTurn] = field(default_factory=list)
    questions: list[LocomoQuestion] = field(default_factory=list)

    def sessions(self) -> dict[int, list[LocomoTurn]]:
        out: dict[int, list[LocomoTurn]] = {}
        for turn in self.turns:
            out.setdefault(turn.session, []).append(turn)
        return out


_DIA = re.compile(r"D(\d+):(\d+)")


def session_of(dia_id: str) -> int:
    match = _DIA.fullmatch(dia_id)
    if match is None:
        raise ValueError(f"not a dia_id: {dia_id!r}")
    return int(match.group(1))


def normalise_evidence(raw: list[Any], known: set[str] | frozenset[str]) -> tuple[str, ...]:
    """Split joined ids ("D8:6; D9:17"), repair "D:11:26" -> "D11:26", drop unknown ids."""
    out: list[str] = []
    for item in raw:
        text = str(item).replace("D:", "D")
        for match in _DIA.finditer(text):
            dia_id = f"D{int(match.group(1))}:{int(match.group(2))}"
            if dia_id in known and dia_id not in out:
                out.append(dia_id)
    return tuple(out)


def parse_locomo_date(text: str) -> datetime | None:
    """``"1:56 pm on 8 May, 2023"`` -> datetime; ``None`` when it does not parse. The data
    names no time zone: it is read as UTC (cairn takes aware times only)."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return None


def load_locomo(
    path: Path | str, *, categories: frozenset[int] | None = frozenset({1, 2, 3, 4})
) -> list[LocomoConversation]:
    """Conversations with their turns (in order) and questions of ``categories`` (None: all).

    Questions whose evidence is empty after normalisation are dropped: they cannot be scored.
    """
    samples: list[dict[str, Any]] = json.loads(Path(path).read_text(encoding="utf-8"))
    conversations: list[LocomoConversation] = []
    for sample in samples:
        conv = sample["conversation"]
        item = LocomoConversation(str(sample["sample_id"]), conv["speaker_a"], conv["speaker_b"])
        numbers = sorted(
            int(key.split("_")[1])
            for key, value in conv.items()
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list)
        )
        for number in numbers:
            date_text = str(conv.get(f"session_{number}_date_time", ""))
            when = parse_locomo_date(date_text)
            for turn in conv[f"session_{number}"]:
                item.turns.append(
                    LocomoTurn(
                        dia_id=str(turn["dia_id"]),
                        speaker=str(turn["speaker"]),
                        text=str(turn.get("text", "")),
                        session=number,
                        session_date=date_text,
                        when=when,
                        caption=turn.get("blip_caption"),
                        image_query=turn.get("query"),
                    )
                )
        known = {turn.dia_id for turn in item.turns}
        for qa in sample.get("qa", []):
            category = int(qa["category"])
            if categories is not None and category not in categories:
                continue
            evidence = normalise_evidence(list(qa.get("evidence", [])), known)
            if not evidence:
                continue
            answer = qa.get("answer", qa.get("adversarial_answer", ""))
            item.questions.append(
                LocomoQuestion(str(qa["question"]), str(answer), category, evidence)
            )
        conversations.append(item)
    return conversations


# --------------------------------------------------------------------------- LongMemEval


@dataclass(frozen=True, slots=True)
class LmeTurn:
    role: str  # "user" | "assistant"
    content: str
    has_answer: bool


@dataclass(frozen=True, slots=True)
class LmeSession:
    session_id: str
    date: str  # as written, e.g. "2023/05/20 (Sat) 07:47"
    when: datetime | None
    turns: tuple[LmeTurn, ...]


@dataclass(frozen=True, slots=True)
class LmeQuestion:
    question_id: str
    question_type: str
    question: str
    answer: str
    question_date: str
    sessions: tuple[LmeSession, ...]
    answer_session_ids: frozenset[str]

    @property
    def abstention(self) -> bool:
        return self.question_id.endswith("_abs")

    def gold_turns(self) -> frozenset[str]:
        """Turn keys ``"<session_id>:<index>"`` of the ``has_answer`` turns."""
        return frozenset(
            turn_key(session.session_id, index)
            for session in self.sessions
            for index, turn in enumerate(session.turns)
            if turn.has_answer
        )


def turn_key(session_id: str, index: int) -> str:
    return f"{session_id}:{index}"


def parse_lme_date(text: str) -> datetime | None:
    """``"2023/05/20 (Sat) 07:47"`` -> datetime (UTC, as above); ``None`` when it does not
    parse."""
    try:
        plain = re.sub(r"\s*\(\w+\)\s*", " ", text.strip())
        return datetime.strptime(plain, "%Y/%m/%d %H:%M").replace(tzinfo=UTC)
    except ValueError:
        return None


def parse_any_date(text: str) -> datetime | None:
    """A LoCoMo or LongMemEval session date, or ``None``."""
    return parse_locomo_date(text) or parse_lme_date(text) if text else None


def load_longmemeval(path: Path | str) -> list[LmeQuestion]:
    """Questions with their haystacks; ``.xz`` files are decompressed on the fly.

    A session that occurs twice in one haystack (same id, see the README's quirks) is kept
    once, with its first date.
    """
    source = Path(path)
    if source.suffix == ".xz":
        with lzma.open(source, "rt", encoding="utf-8") as handle:
            items: list[dict[str, Any]] = json.load(handle)
    else:
        items = json.loads(source.read_text(encoding="utf-8"))
    questions: list[LmeQuestion] = []
    for item in items:
        sessions: list[LmeSession] = []
        seen: set[str] = set()
        for session_id, date, turns in zip(
            item["haystack_session_ids"],
            item["haystack_dates"],
            item["haystack_sessions"],
            strict=True,
        ):
            if session_id in seen:
                continue
            seen.add(session_id)
            sessions.append(
                LmeSession(
                    str(session_id),
                    str(date),
                    parse_lme_date(str(date)),
                    tuple(
                        LmeTurn(
                            str(turn["role"]),
                            str(turn["content"]),
                            bool(turn.get("has_answer", False)),
                        )
                        for turn in turns
                    ),
                )
            )
        questions.append(
            LmeQuestion(
                question_id=str(item["question_id"]),
                question_type=str(item["question_type"]),
                question=str(item["question"]),
                answer=str(item["answer"]),
                question_date=str(item["question_date"]),
                sessions=tuple(sessions),
                answer_session_ids=frozenset(str(s) for s in item["answer_session_ids"]),
            )
        )
    return questions
