"""How big and how deep anything a caller sends may be, and what text cairn accepts.

Every door reaches the kernel with the same limits, so a refusal reads the same wherever it
came from and always names the limit and its value. The checks here are pure; the models in
``cairn.model`` attach them to their fields with ``TextLimit`` and ``JsonLimit`` (which also
declares them in the OpenAPI document), and ``Memory`` applies them to the plain strings its
verbs take.

Data read back from a store was checked when it was written. Reads validate it with the
``STORED`` context, which skips these limits, so that lowering a limit later never makes
existing memory unreadable.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidationInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from cairn.errors import InvalidInput

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_BULK_DECISIONS",
    "MAX_CONTEXT_CHARS",
    "MAX_CONTEXT_ITEMS",
    "MAX_COUNTER",
    "MAX_EVENT_BATCH",
    "MAX_ID_CHARS",
    "MAX_KIND_CHARS",
    "MAX_LIST_ITEMS",
    "MAX_METADATA_BYTES",
    "MAX_METADATA_DEPTH",
    "MAX_METADATA_KEYS",
    "MAX_METADATA_STRING_CHARS",
    "MAX_NAME_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_REASON_CHARS",
    "MAX_RECORD_BATCH",
    "MAX_REQUEST_BYTES",
    "MAX_REQUEST_DEPTH",
    "MAX_SCOPE_CHARS",
    "MAX_TIMELINE_HITS",
    "MAX_TITLE_CHARS",
    "STORED",
    "WHITE_SPACE",
    "JsonLimit",
    "LimitExceeded",
    "TextLimit",
    "check_depth",
    "check_id",
    "check_input",
    "check_json",
    "check_text",
    "check_timeline_k",
    "is_id",
    "is_stored",
    "load_json",
    "shown_id",
]

# ---- the limits -------------------------------------------------------------------------

# A record's body: about a megabyte of text. Longer documents are better split (ingest cuts
# markdown at its headings anyway); a bigger body mostly costs index and embedding time.
MAX_BODY_CHARS = 1_000_000
MAX_TITLE_CHARS = 1_000
MAX_SCOPE_CHARS = 256
MAX_KIND_CHARS = 64
# Short names: tags, roles, labels, provenance fields, rule and principal names.
MAX_NAME_CHARS = 256
MAX_LIST_ITEMS = 64
MAX_CONTEXT_ITEMS = 64
MAX_CONTEXT_CHARS = 100_000
MAX_REASON_CHARS = 10_000
MAX_QUERY_CHARS = 10_000
MAX_ID_CHARS = 128
# Version numbers and audit sequence numbers: far beyond any store, inside a signed 64-bit
# column and exact in a JSON double, so a huge number is refused rather than overflowing.
MAX_COUNTER = 2**53
# Metadata is for filtering and policy matching, not for storing documents: 32 levels is
# far more than any real use, and far below where JSON libraries run out of recursion.
MAX_METADATA_DEPTH = 32
MAX_METADATA_KEYS = 1_000
MAX_METADATA_STRING_CHARS = 10_000
MAX_METADATA_BYTES = 65_536
# Events per append: a producer's buffer, flushed; bounded like a request.
MAX_EVENT_BATCH = 10_000
# Records per batch write: one transaction, and one audit entry naming each of them.
MAX_RECORD_BATCH = 10_000
# Proposals one bulk approval decides: one transaction, one audit entry per proposal.
MAX_BULK_DECISIONS = 1_000
# Hits one timeline search or scan returns: a read stays a light one.
MAX_TIMELINE_HITS = 100
# One HTTP request body (every door of `cairn serve`): room for a batch of records.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
# How deep a whole request (or a line of a file of records) may nest: metadata at its limit
# and the envelope around it, with room to spare.
MAX_REQUEST_DEPTH = MAX_METADATA_DEPTH + 8

# The validation context that marks data read back from a store (see the module docstring).
STORED: dict[str, bool] = {"cairn_stored": True}


class LimitExceeded(ValueError):
    """A value broke a limit; the message names the limit and its value."""


def is_stored(info: ValidationInfo | None) -> bool:
    context = info.context if info is not None else None
    return isinstance(context, dict) and bool(context.get("cairn_stored"))


# ---- text -------------------------------------------------------------------------------


def check_text(value: str, what: str, max_chars: int) -> str:
    """Refuse text that is too long, holds a NUL character or is not valid Unicode (a lone
    surrogate, which JSON's ``\\ud800`` escapes can produce and no store can encode)."""
    if len(value) > max_chars:
        raise LimitExceeded(f"{what} has {len(value):,} characters; the limit is {max_chars:,}")
    if "\x00" in value:
        raise LimitExceeded(f"{what} contains a NUL character, which cairn does not store")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LimitExceeded(
            f"{what} is not valid Unicode (a lone surrogate at position {exc.start})"
        ) from None
    return value


def check_input(value: str, what: str, max_chars: int) -> str:
    """``check_text`` for a plain string a kernel verb takes: a refusal is ``InvalidInput``
    naming the argument (what every door answers), not a ``LimitExceeded``."""
    try:
        return check_text(value, what, max_chars)
    except LimitExceeded as exc:
        raise InvalidInput(str(exc), field=what) from None


def check_timeline_k(k: int) -> None:
    """A timeline search or scan returns 1 to ``MAX_TIMELINE_HITS`` hits, at every door."""
    if not 1 <= k <= MAX_TIMELINE_HITS:
        raise InvalidInput(f"k must be between 1 and {MAX_TIMELINE_HITS}", field="k")


def check_id(value: str, what: str = "id") -> str:
    """An id a caller names: short, printable text. Ids that cannot exist are still answered
    as "not found" by the lookups; this only keeps odd bytes away from the stores."""
    check_text(value, what, MAX_ID_CHARS)
    if not value or any(ch.isspace() or not ch.isprintable() for ch in value):
        raise LimitExceeded(f"{what} must be non-empty printable text without spaces")
    return value


# White space, spelled out: the union of what JSON Schema's (ECMAScript's) ``\s`` and
# Python's mean, so that one pattern string says the same thing to a client validating
# against the OpenAPI document and to cairn (the two ``\s`` differ on a few characters).
WHITE_SPACE = (
    r"\t\n\x0b\x0c\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)
# The JSON schema patterns of TextLimit: no NUL, and, for text that must say something, one
# character that is neither a NUL nor white space.
_NO_NUL = r"^[^\x00]*$"
_SAYS_SOMETHING = rf"^[^\x00]*[^\x00{WHITE_SPACE}][^\x00]*$"
_SOMETHING = re.compile(rf"[^\x00{WHITE_SPACE}]")


class _AfterCheck:
    """A field annotation whose ``_check`` runs after the field's own validation."""

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.with_info_after_validator_function(self._check, handler(source))

    def _check(self, value: Any, info: ValidationInfo) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class TextLimit(_AfterCheck):
    """``Annotated[str, TextLimit(n)]``: ``check_text`` on the field, declared in its JSON
    schema as well (``maxLength``, ``minLength`` and a ``pattern`` refusing NUL, so that a
    schema-valid request is one cairn accepts). ``not_blank`` also refuses text that is
    only white space. A validator rather than ``Field(max_length=…)`` so that the ``STORED``
    context can skip it (see the module docstring)."""

    max_chars: int
    min_chars: int = 0
    not_blank: bool = False
    # A rule of the text's own, stated in the schema and checked (``re.fullmatch``).
    pattern: str | None = None

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        declared = handler(schema)
        declared["maxLength"] = self.max_chars
        minimum = max(self.min_chars, 1 if self.not_blank else 0)
        if minimum:
            declared["minLength"] = minimum
        declared["pattern"] = self.pattern or (_SAYS_SOMETHING if self.not_blank else _NO_NUL)
        return declared

    def _check(self, value: str, info: ValidationInfo) -> str:
        if is_stored(info):
            return value
        name = info.field_name or "text"
        if len(value) < self.min_chars:
            raise LimitExceeded(f"{name} must have at least {self.min_chars} character(s)")
        check_text(value, name, self.max_chars)
        if self.not_blank and not _SOMETHING.search(value):
            raise LimitExceeded(f"{name} must not be blank")
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            raise LimitExceeded(f"{name} must match {self.pattern}")
        return value


def shown_id(value: str) -> str:
    """``value`` quoted for an answer that names it (\"no record 'rec_…'\"): whole when it could
    be an id, else its start only, so an answer never echoes a caller's megabyte back."""
    return repr(value) if is_id(value) else repr(value[:MAX_ID_CHARS]) + " (not an id)"


def is_id(value: str) -> bool:
    """Whether ``value`` could be an id at all; text that cannot (a NUL, a lone surrogate)
    is answered as "not found" like any other unknown id, without reaching a store."""
    try:
        check_id(value)
    except LimitExceeded:
        return False
    return True


# ---- JSON -------------------------------------------------------------------------------


def check_depth(value: Any, what: str, limit: int) -> Any:
    """Refuse JSON nested more than ``limit`` levels (an explicit stack, never recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list | tuple):
            if depth > limit:
                raise LimitExceeded(f"{what} is nested more than {limit} levels deep")
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return value


def check_json(value: Any, what: str = "metadata") -> Any:
    """Plain JSON within the metadata limits: depth, keys, string length and total size.

    Walks with an explicit stack, never by recursion, so that a hostile nesting depth is
    refused instead of exhausting the interpreter's stack."""
    keys = 0
    stack: list[tuple[Any, int, str]] = [(value, 1, what)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict | list | tuple) and depth > MAX_METADATA_DEPTH:
            raise LimitExceeded(
                f"{path} is nested more than {MAX_METADATA_DEPTH} levels deep "
                f"(the limit for {what})"
            )
        if isinstance(item, dict):
            keys += len(item)
            if keys > MAX_METADATA_KEYS:
                raise LimitExceeded(f"{what} has more than {MAX_METADATA_KEYS:,} keys in all")
            for key, child in item.items():
                if not isinstance(key, str):
                    raise LimitExceeded(f"{path} has a key that is not a string")
                check_text(key, f"a key of {path}", MAX_NAME_CHARS)
                stack.append((child, depth + 1, f"{path}.{key}"))
        elif isinstance(item, list | tuple):
            stack.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(item))
        elif isinstance(item, str):
            check_text(item, path, MAX_METADATA_STRING_CHARS)
        elif isinstance(item, float) and not math.isfinite(item):
            raise LimitExceeded(f"{path} is not a finite number (JSON has no NaN or Infinity)")
        elif item is not None and not isinstance(item, bool | int | float):
            raise LimitExceeded(f"{path} is not plain JSON ({type(item).__name__})")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > MAX_METADATA_BYTES:
        raise LimitExceeded(
            f"{what} takes {size:,} bytes as JSON; the limit is {MAX_METADATA_BYTES:,}"
        )
    return value


# ---- JSON text --------------------------------------------------------------------------

# Python's json module has no depth limit: it recurses once per level of nesting and gives
# up with a RecursionError about a thousand levels down (a thread with a small stack may
# crash before that). So JSON text a caller sends is measured before it is parsed. This is
# the one piece of JSON reading cairn does by hand, and it reads only what it needs for the
# depth: strings are skipped (escapes included), the brackets left over are counted.
#
# A string runs to its closing quote; one that never closes runs to the end of the text
# (the text is not JSON then, which the parser says), so each character is read once
# whatever the input. The quantifiers are possessive: no backtracking.
_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _check_nesting(text: str, what: str, max_depth: int) -> None:
    if text.count("[") + text.count("{") <= max_depth:
        return  # too few brackets to nest deeper, in strings or not
    brackets = _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", text))
    if max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0) > max_depth:
        raise LimitExceeded(f"{what} is nested more than {max_depth} levels deep")


_NOT_FINITE = "which is not a finite number (send a finite number or a string)"


def load_json(
    text: str | bytes, what: str, *, max_depth: int = MAX_REQUEST_DEPTH, finite: bool = True
) -> Any:
    """``json.loads`` for text a caller sent: refused with ``LimitExceeded`` (naming ``what``
    and the limit) when it nests more than ``max_depth`` levels, before the parser sees it.

    With ``finite`` (the default) a number JSON cannot hold is refused too: the ``NaN`` and
    ``Infinity`` literals, and a number too large for a double, such as ``1e999``, which
    Python would read as infinity. Text that is not JSON raises ``ValueError`` as
    ``json.loads`` does."""
    if isinstance(text, bytes | bytearray):
        # as json.loads reads bytes: UTF-8, -16 or -32, found from the first bytes
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    _check_nesting(text, what, max_depth)
    if not finite:
        return json.loads(text)

    def number(literal: str) -> float:
        value = float(literal)
        if not math.isfinite(value):
            raise LimitExceeded(f"{what} holds {literal}, {_NOT_FINITE}")
        return value

    def constant(name: str) -> Any:
        # NaN, Infinity and -Infinity: Python's parser accepts them, JSON has no such numbers
        raise LimitExceeded(f"{what} holds {name}, {_NOT_FINITE}")

    return json.loads(text, parse_float=number, parse_constant=constant)


@dataclass(frozen=True)
class JsonLimit(_AfterCheck):
    """``Annotated[dict[str, Any], JsonLimit()]``: ``check_json`` unless the data comes from
    a store."""

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        declared = handler(schema)
        declared.update(_json_object_schema(levels=3))
        declared["maxProperties"] = MAX_METADATA_KEYS
        return declared

    def _check(self, value: Any, info: ValidationInfo) -> Any:
        return value if is_stored(info) else check_json(value, info.field_name or "metadata")


def _json_object_schema(levels: int) -> dict[str, Any]:
    """A JSON object whose keys and strings hold no NUL, stated ``levels`` deep (a schema
    cannot say "at most 32 levels" or "65,536 bytes in all"; those are checked)."""
    string = {"type": "string", "maxLength": MAX_METADATA_STRING_CHARS, "pattern": _NO_NUL}
    scalars: list[dict[str, Any]] = [string, {"type": "number"}, {"type": "boolean"},
                                     {"type": "null"}]  # fmt: skip
    value: dict[str, Any] = {"anyOf": [*scalars, {"type": "array"}, {"type": "object"}]}
    for _ in range(levels - 1):
        nested = {
            "type": "object",
            "propertyNames": {"maxLength": MAX_NAME_CHARS, "pattern": _NO_NUL},
            "additionalProperties": value,
        }
        value = {"anyOf": [*scalars, {"type": "array", "items": value}, nested]}
    return {
        "type": "object",
        "propertyNames": {"maxLength": MAX_NAME_CHARS, "pattern": _NO_NUL},
        "additionalProperties": value,
    }
