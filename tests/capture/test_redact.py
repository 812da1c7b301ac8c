"""Redaction: every built-in credential format goes before anything is kept."""

from __future__ import annotations

import time

import pytest

from cairn.capture.redact import BUILT_IN, Redactor, compile_user_patterns
from tests.capture.secrets import CORPUS, HARMLESS


@pytest.mark.parametrize(("name", "text", "secret"), CORPUS, ids=[c[0] for c in CORPUS])
def test_each_built_in_pattern_removes_its_secret(name: str, text: str, secret: str) -> None:
    redactor = Redactor()
    out = redactor.redact(text)
    assert secret not in out
    assert f"[REDACTED:{name}]" in out or (name == "private_key" and "[REDACTED:" in out)
    assert redactor.counts.get(name, 0) >= 1


def test_the_corpus_covers_every_built_in_pattern() -> None:
    assert {name for name, _, _ in BUILT_IN} <= {name for name, _, _ in CORPUS}


def test_what_is_kept_around_a_secret_still_reads() -> None:
    out = Redactor().redact("DB_PASSWORD=correct-horse-battery-staple\nDEBUG=1")
    assert out == "DB_PASSWORD=[REDACTED:secret_assignment]\nDEBUG=1"
    url = Redactor().redact("postgres://billing:Tr0ub4dor-and-3@db.internal:5432/billing")
    assert url == "postgres://billing:[REDACTED:url_password]@db.internal:5432/billing"


@pytest.mark.parametrize("text", HARMLESS)
def test_ordinary_text_comes_through(text: str) -> None:
    redactor = Redactor()
    assert redactor.redact(text) == text
    assert redactor.counts == {}


def test_private_tags_hide_what_they_hold_even_when_unclosed() -> None:
    redactor = Redactor()
    out = redactor.redact("keep this <private>my diagnosis</private> and <PRIVATE>the rest")
    assert out == "keep this [private] and [private]"
    assert redactor.counts == {"private": 2}


def test_user_patterns_apply_and_keep_their_prefix_when_they_have_a_group() -> None:
    redactor = Redactor(compile_user_patterns([r"ticket-\d{6}", r"employee (\d{5})"]))
    out = redactor.redact("see ticket-123456 about employee 54321")
    assert out == "see [REDACTED:user_1] about employee [REDACTED:user_2]"


def test_a_user_pattern_that_does_not_compile_is_an_error_not_skipped() -> None:
    with pytest.raises(ValueError, match="redact pattern 2 does not compile"):
        compile_user_patterns([r"ok", r"(unclosed"])


def test_json_values_are_redacted_at_every_depth_keys_included() -> None:
    redactor = Redactor()
    value = {
        "command": "curl -H 'Authorization: Bearer 9f8e7d6c5b4a39281706f5e4d3c2b1a0'",
        "env": [
            {"AKIAIOSFODNN7EXAMPLE": ["x", {"deep": "sk-proj-7hFq2Lm9Rt4Wx8Zc1Vb6Nn3Kp0Yd5Gs"}]}
        ],
        "n": 3,
    }
    out = redactor.redact_json(value)
    text = repr(out)
    for secret in ("9f8e7d6c5b4a39281706f5e4d3c2b1a0", "AKIAIOSFODNN7EXAMPLE", "7hFq2Lm9Rt4Wx8Zc"):
        assert secret not in text
    assert out["n"] == 3


def test_redaction_stays_linear_on_long_hostile_text() -> None:
    """Long runs of word characters (base64 blobs, minified code) and repeated secret words
    are where a careless pattern goes quadratic and stalls the hook for minutes; a megabyte
    of each takes well under a few seconds here (the bound is generous: quadratic would take
    hours)."""
    hostile = {
        "letters": "x" * 1_000_000,
        "secret words": "secret" * 160_000,
        "assignments": "password=x\n" * 90_000,
        "words": "_token_" * 140_000,
        "scheme runs": "http://" * 140_000,
    }
    for name, text in hostile.items():
        started = time.perf_counter()
        Redactor().redact(text)
        assert time.perf_counter() - started < 10, name


def test_every_built_in_pattern_has_its_first_look_words() -> None:
    """A pattern runs only on text holding one of its words: one without words would be
    skipped silently, so each must have some, and each corpus secret must contain one."""
    from cairn.capture.redact import TRIGGERS

    assert set(TRIGGERS) == {name for name, _, _ in BUILT_IN}
    for name, text, _ in CORPUS:
        assert any(word in text.lower() for word in TRIGGERS[name]), name
