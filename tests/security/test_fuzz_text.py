"""Hostile text against create and search, on every door.

Hypothesis draws one hostile field for a new record (title, body, metadata or valid_from)
and a hostile search query: lone surrogates (``\\ud800`` escapes over the JSON doors, Python
strings for the library and the CLI), NUL and the other C0 controls, odd Unicode, search
syntax, lengths on either side of the limits in ``cairn.limits`` (in characters of one, two
and four bytes), metadata nested 30 to 40, 150, 1,000 and 10,000 levels deep, NaN and
infinities, and times without a zone, as integers, as numeric strings. Each goes through
one door: the library, HTTP (``/v1``), MCP (``tools/call`` over streamable HTTP), A2A
(``remember`` and ``recall``) or the CLI.

Checked for every example:

- no door crashes: no 5xx, no internal JSON-RPC error (-32603), no traceback;
- the door stores the record exactly when the kernel's own model accepts what the door
  hands it (after the door's documented defaults, such as MCP's title from the first line),
  unless the whole request is over the 8 MiB limit (413);
- a refusal names the field or the limit at fault (or is the protocol's own parse error);
- a refused request stores nothing, a stored one reads back exactly as sent;
- a search stores nothing and is refused only for a query the kernel refuses.

The crashes the fuzzing found when it was written are pinned by the regression tests at
the end; the property tolerates none.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
import typer.testing
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from starlette.testclient import TestClient
from typer.testing import CliRunner

from cairn.doors.a2a_agent import A2A_MAX_DATA_DEPTH
from cairn.doors.cli import app as cli_app
from cairn.doors.server import build_server_app
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.limits import (
    MAX_BODY_CHARS,
    MAX_METADATA_DEPTH,
    MAX_QUERY_CHARS,
    MAX_REQUEST_BYTES,
    MAX_REQUEST_DEPTH,
    MAX_TITLE_CHARS,
    LimitExceeded,
    check_text,
)
from cairn.memory import Memory
from cairn.model import Content
from cairn.store.factory import open_store
from cairn.workspace import Workspace
from tests.factories import CURATOR
from tests.pg import PgCluster, as_uri
from tests.security.fuzz_doors import (
    DOORS,
    Answer,
    Deep,
    Stack,
    a2a_request,
    create,
    open_mcp_session,
    over_request_limit,
    python,
    raw_json,
    search,
)

SCOPE = "fuzz/text"
# What a refusal of each field may call it: the kernel's field name, or a door's own.
FIELD_NAMES = {
    "title": ("title",),
    "body": ("body", "content"),
    "metadata": ("metadata",),
    "valid_from": ("valid_from", "valid-from"),
    "query": ("query",),
}
_TOKENS = itertools.count()


# ---- the store, served by every door -----------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, pg_cluster: PgCluster
) -> Iterator[Stack]:
    folder = tmp_path_factory.mktemp(f"fuzz-{request.param}") / ".cairn"
    url = pg_cluster.new_database() if request.param == "postgres" else None
    db = as_uri(url) if url else None
    keys = Workspace(folder, db=db).init().keys
    memory = Memory(
        open_store(db, folder), parse_policy(DEFAULT_POLICY_YAML), root=folder.parent,
        folder=folder, embedder=None,
    )  # fmt: skip
    app = build_server_app(Workspace(folder, db=db), embedder="static")
    # typer builds its click command anew on every invoke (about 60 ms); it is the same
    # command every time, so it is built once.
    command = typer.main.get_command(cli_app)
    try:
        with (
            pytest.MonkeyPatch.context() as patch,
            # The MCP endpoint only answers the host it is served on.
            TestClient(
                app, raise_server_exceptions=False, base_url="http://127.0.0.1:8765"
            ) as client,
        ):
            patch.setattr(typer.testing, "_get_command", lambda _app: command)
            session = open_mcp_session(client, keys["curator"])
            yield Stack(
                request.param, folder, db, memory, client, keys["curator"], session, CliRunner()
            )
    finally:
        memory.close()
        if url:
            pg_cluster.drop_database(url)


def _counts(stack: Stack) -> dict[str, int]:
    return stack.memory.status(principal=CURATOR)


# ---- hostile input -----------------------------------------------------------------------

SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)
C0_CONTROLS = st.integers(0x00, 0x1F).map(chr)
ODD = st.sampled_from(
    ["\x7f", "\x85", "\u2028", "\u200b", "\u202e", "\ufeff", "\ufffd", "\U0001f600", "e\u0301",
     '"', "'", "\\", "*", ":", "^", "-", "(", ")", "{", "}", "NEAR", "AND", "OR", "NOT", "%", "_",
     " ", "\t", "\n", "\r\n"]
)  # fmt: skip
WORDS = st.sampled_from(["deploy", "kafka", "zürich", "日本語", "ok"])
hostile = st.lists(
    st.one_of(st.text(max_size=6), SURROGATES, C0_CONTROLS, ODD, WORDS), max_size=10
).map("".join)


def near(limit: int) -> st.SearchStrategy[str]:
    """Text one character under, at or over ``limit``, of one-, two- or four-byte
    characters (a JSON door's request grows with the byte size, the limit counts
    characters)."""
    size = st.sampled_from([limit - 1, limit, limit + 1])
    char = st.sampled_from(["x", "é", "\U0001f600"])
    return st.builds(lambda n, c: c * n, size, char)


metadata = st.one_of(
    st.sampled_from([30, 31, 32, 33, 34, 40, 150, 1_000, 10_000]).map(Deep),
    st.dictionaries(
        hostile,
        hostile | st.sampled_from([math.nan, math.inf, -math.inf, 1.5, 0, 2**53, None, True]),
        max_size=3,
    ),
)
valid_froms = st.sampled_from(
    ["2026-01-31T12:00:00Z", "2026-01-31T14:00:00+02:00", "2026-01-31T12:00:00", "2026-01-31",
     1_700_000_000, 1.5, True, "1700000000", "0.5", "yesterday", "", "2026-13-45T00:00:00Z",
     "\ud800", "2026-01-31T12:00:00Z\x00"]
)  # fmt: skip
cases = st.one_of(
    st.tuples(st.just("title"), hostile | near(MAX_TITLE_CHARS)),
    st.tuples(st.just("body"), hostile),
    st.tuples(st.just("body"), near(MAX_BODY_CHARS)),
    st.tuples(st.just("metadata"), metadata),
    st.tuples(st.just("valid_from"), valid_froms),
)
queries = hostile | near(MAX_QUERY_CHARS)


# ---- what each door should do ------------------------------------------------------------


JSON_DOORS = ("http", "mcp", "a2a")


def over_json(value: Any) -> Any:
    """``value`` as a JSON door's server reads it back: a high and a low surrogate sent one
    after the other are one character there (``\\ud83d\\ude00`` is an emoji)."""
    if isinstance(value, str):
        return json.loads(json.dumps(value))
    if isinstance(value, dict):
        return {over_json(k): over_json(v) for k, v in value.items()}
    return value


def received(door: str, value: Any) -> Any:
    return over_json(value) if door in JSON_DOORS else value


def handed_to_kernel(door: str, fields: dict[str, Any]) -> dict[str, Any] | None:
    """The content fields a door hands the kernel, its documented defaults applied, or None
    when the door itself refuses them first. Restated here from each door's contract."""
    handed: dict[str, Any] = received(door, fields)
    body = handed["body"]
    if door == "mcp" and not handed["title"].strip():
        # remember: a blank title is taken from the first line of the body.
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        if not first:
            return None
        handed["title"] = first if len(first) <= 120 else first[:117] + "..."
    if door == "a2a":
        # The endpoint refuses what its protobuf carriage cannot hold: a lone surrogate, a
        # non-finite number, a data part nested past its limit (metadata one level less).
        if has_surrogate(handed) or has_non_finite(handed):
            return None
        metadata = handed["metadata"]
        depth = metadata.depth if isinstance(metadata, Deep) else json_depth(metadata)
        if depth > A2A_MAX_DATA_DEPTH - 1:
            return None
        # remember: the content must say something; the title defaults to its first line.
        if not body.strip():
            return None
        handed["title"] = handed["title"] or body.strip().splitlines()[0][:120]
        handed["valid_from"] = None  # the skill takes no validity
    if door == "cli":
        # Options are text: numbers and metadata arrive as the strings typed.
        if handed["valid_from"] is not None:
            handed["valid_from"] = str(handed["valid_from"])
        if handed["metadata"] is not None:
            try:
                handed["metadata"] = json.loads(raw_json(handed["metadata"]))
            except RecursionError:
                return None  # the CLI refuses JSON nested past what its parser reads
    return handed


def kernel_content(fields: dict[str, Any]) -> Content | None:
    try:
        return Content.model_validate(python({k: v for k, v in fields.items() if v is not None}))
    except (ValueError, RecursionError):  # nested past the kernel's limit either way
        return None


def json_depth(value: Any) -> int:
    """How many levels of objects and arrays ``value`` nests (an explicit stack)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return deepest


def has_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return any(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, dict):
        return any(has_surrogate(k) or has_surrogate(v) for k, v in value.items())
    return False


def has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite(v) for v in value.values())
    return False


def names_the_fault(answer: Answer, field: str) -> bool:
    message = answer.message
    if answer.too_large:
        return "limit" in message
    if answer.door in ("mcp", "a2a") and message.startswith(("-32700", "-32602")):
        return True  # the protocol's own refusal of the JSON, before cairn reads it
    if f"request body is nested more than {MAX_REQUEST_DEPTH} levels" in message:
        return True  # HTTP: the whole request nests past its limit, named
    return any(name in message for name in FIELD_NAMES[field])


# ---- the property ------------------------------------------------------------------------


@pytest.mark.parametrize("door", DOORS)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=cases, query=queries)
def test_hostile_text_is_stored_exactly_or_refused_by_name(
    stack: Stack, case: tuple[str, Any], door: str, query: str
) -> None:
    field, value = case
    assume(not (door == "a2a" and field == "valid_from"))  # the skill takes no validity
    token = next(_TOKENS)
    fields: dict[str, Any] = {
        "kind": "fact",
        "scope": SCOPE,
        "title": f"Fuzz title {token}",
        "body": f"Fuzz body {token}",
        "metadata": None,
        "valid_from": None,
    }
    fields[field] = value
    _create_checked(stack, door, field, fields)
    _search_checked(stack, door, query)


def _create_checked(stack: Stack, door: str, field: str, fields: dict[str, Any]) -> None:
    before = _counts(stack)
    answer = create(stack, door, fields)
    assert not answer.crashed, f"{door} crashed on {field}: {answer.message}"
    handed = handed_to_kernel(door, fields)
    expected = kernel_content(handed) if handed is not None else None
    should_store = expected is not None and not over_request_limit(door, fields)
    assert answer.stored == should_store, (door, field, answer, should_store)
    if not answer.stored:
        assert _counts(stack) == before, f"{door} refused {field} but stored something"
        assert names_the_fault(answer, field), (door, field, answer.message[:500])
        return
    assert answer.record_id is not None
    stored = stack.memory.get(answer.record_id, principal=CURATOR).version.content
    assert _counts(stack)["records"] == before["records"] + 1
    assert expected is not None
    for name in ("title", "body", "metadata", "valid_from"):
        assert getattr(stored, name) == getattr(expected, name), (door, name)
    # The stored text is searchable without a crash.
    stack.memory.search(stored.title[:MAX_QUERY_CHARS], principal=CURATOR, mode="keyword")


def _search_checked(stack: Stack, door: str, query: str) -> None:
    before = _counts(stack)
    found = search(stack, door, query)
    assert not found.crashed, f"{door} crashed on a query: {found.message}"
    sent = received(door, query)
    try:
        check_text(sent, "query", MAX_QUERY_CHARS)
        # recall needs a query; A2A refuses text no UTF-8 can carry before the kernel
        should_answer = door != "a2a" or (bool(sent.strip()) and not has_surrogate(sent))
    except LimitExceeded:
        should_answer = False
    assert found.stored == should_answer, (door, found)
    if not found.stored:
        assert names_the_fault(found, "query"), (door, found.message[:500])
    assert _counts(stack) == before, f"{door} stored something while searching"


# ---- the limits, exactly at and past them, on every door ---------------------------------


def _fields(**changes: Any) -> dict[str, Any]:
    token = next(_TOKENS)
    fields: dict[str, Any] = {
        "kind": "fact",
        "scope": SCOPE,
        "title": f"Limit title {token}",
        "body": f"Limit body {token}",
        "metadata": None,
        "valid_from": None,
    }
    return fields | changes


@pytest.mark.parametrize("door", DOORS)
def test_each_limit_is_the_same_on_every_door(stack: Stack, door: str) -> None:
    # Limits count characters: a title of two-byte ones, a body of one-byte ones (a body of
    # two-byte ones, over 4 MiB as JSON, is a test of its own below).
    for field, limit, char in (("title", MAX_TITLE_CHARS, "é"), ("body", MAX_BODY_CHARS, "x")):
        at = create(stack, door, _fields(**{field: char * limit}))
        assert at.stored, (door, field, at)
        before = _counts(stack)
        past = create(stack, door, _fields(**{field: char * (limit + 1)}))
        assert not past.stored and not past.crashed, (door, field, past)
        assert field in past.message and f"{limit:,}" in past.message, past.message
        assert _counts(stack) == before
    assert search(stack, door, "q" * MAX_QUERY_CHARS).stored
    past = search(stack, door, "q" * (MAX_QUERY_CHARS + 1))
    assert not past.stored and not past.crashed, past
    assert "query" in past.message and f"{MAX_QUERY_CHARS:,}" in past.message, past.message


@pytest.mark.parametrize("door", ["http", "mcp", "a2a"])
def test_a_request_over_8_mib_is_refused_with_413(stack: Stack, door: str) -> None:
    before = _counts(stack)
    answer = create(stack, door, _fields(body="x" * (MAX_REQUEST_BYTES + 1)))
    assert answer.too_large and f"{MAX_REQUEST_BYTES:,} bytes" in answer.message, answer
    assert _counts(stack) == before


# ---- crashes the fuzzing found, pinned until the doors are fixed -------------------------


def _try_create(stack: Stack, door: str, field: str, value: Any) -> Answer:
    """Create with one field set; whatever the door answers, a refusal stores nothing."""
    before = _counts(stack)
    answer = create(stack, door, _fields(**{field: value}))
    assert answer.stored or _counts(stack) == before
    return answer


def test_mcp_takes_a_request_up_to_the_8_mib_limit(stack: Stack) -> None:
    body = "é" * MAX_BODY_CHARS  # 6 MB as JSON escapes, under 8 MiB
    answer = _try_create(stack, "mcp", "body", body)
    assert answer.stored, answer.message


def test_a2a_refuses_a_lone_surrogate_as_invalid_params(stack: Stack) -> None:
    answer = _try_create(stack, "a2a", "title", "half \ud800 a pair")
    assert not answer.crashed, answer.message
    assert "codec" not in answer.message


def test_a2a_refuses_a_non_finite_number_as_invalid_params(stack: Stack) -> None:
    answer = _try_create(stack, "a2a", "metadata", {"ratio": math.nan})
    assert not answer.crashed, answer.message


def test_a2a_takes_metadata_to_its_documented_depth_and_refuses_deeper_by_name(
    stack: Stack,
) -> None:
    """A data part travels as a protobuf Struct, whose decoder stops short of the kernel's
    own metadata limit: the A2A door takes metadata nested up to one level less than its
    data-part limit and refuses deeper by name, never from inside the decoder."""
    deepest = A2A_MAX_DATA_DEPTH - 1
    assert _try_create(stack, "a2a", "metadata", Deep(deepest)).stored
    for depth in (deepest + 1, MAX_METADATA_DEPTH, 99):
        answer = _try_create(stack, "a2a", "metadata", Deep(depth))
        assert not answer.stored and not answer.crashed, (depth, answer.message)
        # past the whole request's limit, the request is what the refusal names
        named = "metadata" if depth < MAX_REQUEST_DEPTH else f"than {MAX_REQUEST_DEPTH} levels"
        assert answer.message.startswith("-32602") and named in answer.message, answer


def test_a2a_refuses_metadata_nested_past_its_parsers_by_name(stack: Stack) -> None:
    for depth in (150, 1_000, 10_000):
        answer = _try_create(stack, "a2a", "metadata", Deep(depth))
        assert not answer.crashed, (depth, answer.message)


def test_the_cli_refuses_metadata_nested_too_deep_for_its_json_parser(stack: Stack) -> None:
    answer = _try_create(stack, "cli", "metadata", Deep(10_000))
    assert not answer.crashed, answer.message
    assert "metadata" in answer.message


def test_mcp_refuses_a_number_as_a_time(stack: Stack) -> None:
    http = _try_create(stack, "http", "valid_from", 1_700_000_000)
    assert not http.stored and "valid_from" in http.message
    mcp = _try_create(stack, "mcp", "valid_from", 1_700_000_000)
    assert not mcp.stored, "MCP stored a number as a time"


def test_a_numeric_string_is_not_a_time(stack: Stack) -> None:
    with pytest.raises(ValidationError):
        Content.model_validate({"kind": "fact", "scope": SCOPE, "title": "t", "valid_from": "0.5"})
    for door in (d for d in DOORS if d != "a2a"):  # the A2A skill takes no validity
        answer = _try_create(stack, door, "valid_from", "0.5")
        assert not answer.stored, f"{door} stored '0.5' as a time"


def test_a2a_refusals_read_like_the_other_doors(stack: Stack) -> None:
    answer = _try_create(stack, "a2a", "title", "t" * (MAX_TITLE_CHARS + 1))
    assert not answer.stored and "title" in answer.message
    assert "pydantic" not in answer.message and "ttttt" not in answer.message, answer.message


# ---- what a store holds, answered through A2A --------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def fresh_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, dict[str, str]]]:
    """``cairn serve``'s app on a store of this test's own (no other test's records in it),
    and the curator's request headers."""
    folder = tmp_path_factory.mktemp(f"answers-{request.param}") / ".cairn"
    cluster: PgCluster | None = (
        request.getfixturevalue("pg_cluster") if request.param == "postgres" else None
    )
    url = cluster.new_database() if cluster is not None else None
    db = as_uri(url) if url else None
    keys = Workspace(folder, db=db).init().keys
    app = build_server_app(Workspace(folder, db=db), embedder="static")
    headers = {"Authorization": f"Bearer {keys['curator']}", "content-type": "application/json"}
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            yield client, headers
    finally:
        if cluster is not None and url is not None:
            cluster.drop_database(url)


def test_a2a_answers_carry_metadata_deeper_than_a_struct_holds_as_json_text(
    fresh_server: tuple[TestClient, dict[str, str]],
) -> None:
    """The kernel stores metadata 32 levels deep, A2A's protobuf Struct carries 29: an answer
    holding such a record carries that record's metadata as its JSON text instead, and the
    metadata of every other record as JSON, as before."""
    client, headers = fresh_server
    deepest = A2A_MAX_DATA_DEPTH - 1
    made: dict[str, tuple[str, dict[str, Any]]] = {}
    # Each record's word appears in its title and body and in no other record: a keyword
    # search for it finds that record on a store holding only these two.
    for word, depth in (("abyssal", MAX_METADATA_DEPTH), ("shallow", deepest)):
        metadata = Deep(depth).python()
        body = {"content": {"kind": "fact", "scope": SCOPE, "title": f"The {word} record",
                            "body": f"Metadata nested {depth} levels: {word}.",
                            "metadata": metadata}}  # fmt: skip
        stored = client.post("/v1/records", json=body, headers=headers)
        assert stored.status_code == 200, stored.text
        made[word] = (stored.json()["record"]["id"], metadata)
    for data in (
        {"skill": "recall", "query": "abyssal shallow", "mode": "keyword"},
        {"skill": "research", "query": "abyssal shallow"},
    ):
        response = client.post("/", content=a2a_request(data), headers=headers)
        answer = response.json()
        assert "error" not in answer, (data["skill"], answer)
        task = answer["result"]
        assert task["status"]["state"] == "completed", task["status"]
        carried = [task["artifacts"][0]["parts"][0]["data"],
                   task["status"]["message"]["parts"][1]["data"]]  # fmt: skip
        for result in carried:
            items = {item["record_id"]: item["metadata"] for item in result["items"]}
            deep_id, deep = made["abyssal"]
            shallow_id, shallow = made["shallow"]
            assert set(items) >= {deep_id, shallow_id}, (data["skill"], sorted(items))
            assert isinstance(items[deep_id], str) and json.loads(items[deep_id]) == deep
            assert items[shallow_id] == shallow
