"""Secrets out before anything is stored, spooled or logged.

Prompts and tool output carry credentials: keys pasted into a prompt, ``cat .env``, a
private key read by a tool, a URL with a password in it. Every text the hook captures goes
through ``Redactor.redact`` first, in the hook process, so the clear value never reaches the
spool, the daemon, the store, its indexes or a log. Only the count of what was removed, by
pattern name, is kept (in the event's metadata).

Built-in patterns cover the common credential formats; users add their own in config
(``[capture] redact = ["regex", …]``). Text inside ``<private>…</private>`` is never stored.

Written by hand: the secret scanners on PyPI (detect-secrets and the like) scan files and
report findings, they do not rewrite text in a few milliseconds inside a hook, and they
pull in dependencies the hook's start-up cannot afford. Standard library ``re`` only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["BUILT_IN", "Redactor", "compile_user_patterns"]

# A name that says its value is a secret (API_KEY, db_password, GITHUB_TOKEN, …).
# Every repetition that can start a match anywhere is bounded: an unbounded one makes the
# engine retry from each position of a long run of letters (a base64 blob in a tool's
# output), which is quadratic, and would stall the hook for minutes.
# ``token`` but not a count or kind of tokens (max_tokens=4096, tokenizer: gpt2, token_type:
# bearer: a model's settings, all over an agent's work); ``pass`` and ``passphrase`` only as
# a whole part of a name (DB_PASS, GPG_PASSPHRASE; never bypass or passthrough).
_SECRET_WORD = (
    r"(?:secret|token(?!s|iz|_?(?:count|limit|type|usage|budget|len))|passw(?:or)?d"
    r"|(?<![A-Za-z])pass(?:phrase)?(?![A-Za-z])"
    r"|api[_\-]?key|access[_\-]?key|private[_\-]?key|credential)"
)
_SECRET_NAME = r"[A-Za-z0-9_.\-]{0,64}" + _SECRET_WORD + r"[A-Za-z0-9_.\-]{0,64}"


def _starts_after(boundary: str) -> str:
    r"""Where a match may start: where ``boundary`` holds, or right after an escape (``\n``,
    ``\t``, ``\r``) of JSON text inside the text (a tool result that is itself JSON), where
    the escape's letter glues the token to a word and the boundary alone never holds."""
    return r"(?:" + boundary + r"|(?<=\\[nrt]))"


# A token's start: a word boundary (or after an escape).
_START = _starts_after(r"\b")
# A name's start: not inside a run of name characters (or after an escape).
_NAME_START = _starts_after(r"(?<![A-Za-z0-9_.\-])")
_KEY_BLOCK = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"

# (name, pattern, group): the match (or only its ``group``, when a name or prefix is kept
# for the reader, e.g. ``PASSWORD=``) is replaced by ``[REDACTED:name]``.
BUILT_IN: tuple[tuple[str, str, int], ...] = (
    # a whole key block; one whose end was cut off hides everything after its start
    ("private_key", _KEY_BLOCK + r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|.*\Z)", 0),
    (
        "aws_access_key",
        _START + r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[A-Z0-9]{16}\b",
        0,
    ),
    (
        "github_token",
        _START + r"(?:gh[pousr]_[A-Za-z0-9]{30,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
        0,
    ),
    ("gitlab_token", _START + r"glpat-[A-Za-z0-9_\-]{20,}", 0),
    ("slack_token", _START + r"xox[abposre]-[A-Za-z0-9-]{10,}", 0),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+", 0),
    ("anthropic_key", _START + r"sk-ant-[A-Za-z0-9_\-]{20,}", 0),
    ("openai_key", _START + r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{20,}", 0),
    ("stripe_key", _START + r"(?:sk|rk|pk|whsec)_(?:live|test)_[A-Za-z0-9]{16,}", 0),
    ("google_api_key", _START + r"AIza[0-9A-Za-z_\-]{35}", 0),
    ("huggingface_token", _START + r"hf_[A-Za-z0-9]{30,}", 0),
    ("npm_token", _START + r"npm_[A-Za-z0-9]{36}\b", 0),
    ("pypi_token", _START + r"pypi-[A-Za-z0-9_\-]{50,}", 0),
    ("sendgrid_key", _START + r"SG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}", 0),
    ("twilio_key", _START + r"SK[0-9a-f]{32}\b", 0),
    ("cairn_key", _START + r"cairn_[A-Za-z0-9_\-]{40,}", 0),
    # starts only where a run of token characters does: ``\b`` also holds after each ``-``
    # of ``eyJ-eyJ-…``, and retrying the scan from each of them is quadratic
    (
        "jwt",
        _starts_after(r"(?<![A-Za-z0-9_\-])")
        + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
        0,
    ),
    # an Azure storage or service bus connection string's key (its name has no secret word)
    ("azure_key", r"(?i)" + _START + r"(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/=]{16,})", 1),
    # credentials in a URL: keep the scheme and user, drop the password
    (
        "url_password",
        # the user may be empty (redis://:password@host) and the scheme in capitals
        r"\b[A-Za-z][A-Za-z0-9+.\-]{0,30}://[^\s:/@\[\]]{0,256}:([^\s/@\[\]]{1,256})@",
        1,
    ),
    # an HTTP authorization header, or a bearer token in a command line; the white space
    # is bounded: three unbounded runs in a row are cubic on a header padded with blanks
    (
        "authorization",
        r"(?i)\b(?:authorization\s{0,8}[:=]\s{0,8}[\"']?\s{0,8}(?:bearer|basic|token)?|bearer)"
        r"[ \t]{1,8}([A-Za-z0-9._~+/=\-]{8,})",  # the same line: "bearer\ntoken_count"
        1,
    ),
    # NAME=value (.env files, shell exports, config, a command line) whose name says it is
    # a secret; the name must be a whole word, so the match starts only where a word does
    (
        "secret_assignment",
        r"(?i)" + _NAME_START + _SECRET_NAME + r"[ \t]{0,8}[=:][ \t]{0,8}"
        r"([^\s\"'`]\S*|\"[^\"\n]+\"|'[^'\n]+')",
        1,
    ),
    # "password": "value" in JSON, YAML or code; the match starts at the secret word (what
    # comes before it in the name changes nothing, and matching it would be slow)
    (
        "secret_field",
        r"(?i)" + _SECRET_WORD + r"[A-Za-z0-9_.\-]{0,64}[\"']?\s{0,8}[:=]\s{0,8}"
        # up to the quote that opened the value: a password may hold the other quote, or
        # its own quote escaped ("p'ss", "ab\"cd"), and none of it may be left behind
        # (AWS's session tokens run to a thousand characters and more)
        r"[\"']((?<=\")(?:[^\"\\\n]|\\.){4,8192}(?=\")|(?<=')(?:[^'\\\n]|\\.){4,8192}(?='))[\"']",
        1,
    ),
    # NAME=value whose name ends in KEY after a separator (APP_KEY, RAILS_MASTER_KEY,
    # kubeconfig's client-key-data): a key's value is a long run of key characters, which
    # spares ``sort_key=name`` and ``primary_key=True`` in code
    (
        "key_assignment",
        r"(?i)" + _NAME_START + r"[A-Za-z0-9_.\-]{0,64}[_.\-]key"
        r"(?:[_.\-]data)?[\"']?[ \t]{0,8}[=:][ \t]{0,8}[\"']?([A-Za-z0-9+/=_\-:.]{16,})",
        1,
    ),
    # a password in a name that says so only by a short word after a separator (DB_PWD,
    # MYSQL_PW); the shell's own PWD and OLDPWD are paths, not secrets
    (
        "password_assignment",
        r"(?i)" + _NAME_START + r"[A-Za-z0-9_.\-]{0,64}[_.\-]pwd?"
        r"[\"']?[ \t]{0,8}[=:][ \t]{0,8}([^\s\"'`]\S*|\"[^\"\n]+\"|'[^'\n]+')",
        1,
    ),
    # a registry login in Docker's config.json: base64 of user:password
    ("docker_auth", r"\"auth\"\s{0,8}:\s{0,8}\"([A-Za-z0-9+/=]{8,})\"", 1),
    # curl -u user:password (keep the user)
    (
        "basic_auth_option",
        r"(?<![A-Za-z0-9_\-])(?:-u|--user)[ \t=]{1,4}['\"]?[^\s:'\"]{1,256}:([^\s'\"]{1,256})",
        1,
    ),
    (
        "discord_webhook",
        r"https://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_\-]+",
        0,
    ),
    ("telegram_bot_token", _START + r"[0-9]{8,10}:AA[A-Za-z0-9_\-]{33}\b", 0),
    # a key or signature in a URL's query (?key=…, an Azure SAS's &sig=…)
    ("url_secret_param", r"(?i)[?&](?:key|sig|signature)=([^&\s#\"']{8,})", 1),
)

# Cheap first looks: a pattern can only match text holding one of its words (lower case),
# so a pattern is compiled and run only then. Compiling all of them costs the hook ~10 ms
# per call; most texts need two or three.
_SECRET_WORDS = (
    "secret",
    "token",
    "passw",
    "apikey",
    "api_key",
    "api-key",
    "accesskey",
    "access_key",
    "access-key",
    "privatekey",
    "private_key",
    "private-key",
    "credential",
    "pass",
)
TRIGGERS: dict[str, tuple[str, ...]] = {
    "private_key": ("-----begin",),
    "aws_access_key": (
        "akia",
        "asia",
        "agpa",
        "aida",
        "aroa",
        "aipa",
        "anpa",
        "anva",
        "abia",
        "acca",
    ),
    "github_token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab_token": ("glpat-",),
    "slack_token": ("xox",),
    "slack_webhook": ("hooks.slack.com",),
    "anthropic_key": ("sk-ant-",),
    "openai_key": ("sk-",),
    "stripe_key": ("_live_", "_test_"),
    "google_api_key": ("aiza",),
    "huggingface_token": ("hf_",),
    "npm_token": ("npm_",),
    "pypi_token": ("pypi-",),
    "sendgrid_key": ("sg.",),
    "twilio_key": ("sk",),
    "cairn_key": ("cairn_",),
    "jwt": ("eyj",),
    "azure_key": ("accountkey", "sharedaccesskey"),
    "url_password": ("://",),
    "authorization": ("authorization", "bearer"),
    "secret_assignment": _SECRET_WORDS,
    "secret_field": _SECRET_WORDS,
    "key_assignment": ("key",),
    "password_assignment": ("_pw", "-pw", ".pw"),
    "docker_auth": ('"auth"',),
    "basic_auth_option": ("curl",),
    "discord_webhook": ("discord",),
    "telegram_bot_token": (":aa",),
    "url_secret_param": ("key=", "sig=", "signature="),
}

# what the user marks as never to be stored; an unclosed tag hides everything after it
_PRIVATE = re.compile(r"(?is)<private>.*?(?:</private>|\Z)")
# A terminal's colour and cursor codes (``grep --color``, a test runner's output), as the
# escape character or as JSON spells it: they end in a letter that would glue the next
# token to a word, and say nothing worth keeping, so they are dropped before matching.
_TERMINAL_CODES = re.compile(r"(?:\x1b|\\u001[bB])\[[0-9;?]{0,32}[A-Za-z]")


class _Pattern(NamedTuple):
    name: str
    source: str
    flags: int
    group: int
    triggers: tuple[str, ...]  # empty: always run


def compile_user_patterns(patterns: Iterable[str]) -> list[tuple[str, str, int]]:
    """User patterns from config: each must compile (a broken one is an error to report,
    not a pattern to skip silently: skipping would store what the user meant to hide)."""
    out: list[tuple[str, str, int]] = []
    for i, pattern in enumerate(patterns):
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"[capture] redact pattern {i + 1} does not compile: {exc}") from None
        out.append((f"user_{i + 1}", pattern, 1 if compiled.groups else 0))
    return out


class Redactor:
    """Redacts text and every string inside JSON values, counting what it removed in
    ``counts`` (pattern name → matches)."""

    def __init__(self, extra: Iterable[tuple[str, str, int]] = ()) -> None:
        self.counts: dict[str, int] = {}
        self._patterns = [
            _Pattern(
                name,
                pattern,
                re.DOTALL if name == "private_key" else 0,
                group,
                TRIGGERS.get(name, ()) if i < len(BUILT_IN) else (),
            )
            for i, (name, pattern, group) in enumerate((*BUILT_IN, *extra))
        ]

    def redact(self, text: str) -> str:
        if not text:
            return text
        text = _TERMINAL_CODES.sub("", text)
        text, hidden = _PRIVATE.subn("[private]", text)
        if hidden:
            self.counts["private"] = self.counts.get("private", 0) + hidden
        lowered = text.lower()
        for pattern in self._patterns:
            if pattern.triggers and not any(t in lowered for t in pattern.triggers):
                continue
            # re.compile keeps compiled patterns in its own cache, so each is built once
            regex = re.compile(pattern.source, pattern.flags)
            text = regex.sub(functools.partial(self._replace, pattern=pattern), text)
        return text

    def _replace(self, match: re.Match[str], pattern: _Pattern) -> str:
        group = pattern.group if match.group(pattern.group) is not None else 0
        if match.group(group).startswith(("[REDACTED:", "[private]")):
            return match.group(0)  # a value an earlier, more specific pattern already took
        self.counts[pattern.name] = self.counts.get(pattern.name, 0) + 1
        marker = f"[REDACTED:{pattern.name}]"
        if group == 0:
            return marker
        start, end = match.span(pattern.group)
        whole_start = match.start()
        text = match.group(0)
        return text[: start - whole_start] + marker + text[end - whole_start :]

    def redact_json(self, value: Any, depth: int = 0) -> Any:
        """Every string in a JSON value (keys too: a secret can be a key), to any depth the
        kernel accepts; deeper values are dropped, not passed through unredacted."""
        if isinstance(value, str):
            return self.redact(value)
        if depth > 64:
            return None
        if isinstance(value, Mapping):
            return {self.redact(str(k)): self.redact_json(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.redact_json(v, depth + 1) for v in value]
        return value
