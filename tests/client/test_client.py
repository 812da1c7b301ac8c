"""The Python API's promises other than the shared story (test_parity.py): one protocol with
the same signatures on both clients, keys that fail closed and never show, errors that come
back as the kernel's classes, and ``cairn.open``'s ways of naming a store."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

import cairn
from cairn import LocalMemory, MemoryClient, RemoteMemory
from cairn.client import local as local_module
from cairn.doors._errors import HTTP_STATUS, STATUS_ERRORS, error_body, http_status
from cairn.errors import CairnError, error_class
from cairn.model import Content, Principal
from cairn.workspace import Workspace
from tests.client.conftest import LocalStore
from tests.doors.conftest import Live, free_port
from tests.pg import PgCluster, as_uri

AGENT = Principal(id="agent", scopes=("*",))


def _members(cls: type) -> dict[str, str]:
    """The public methods and properties a class defines, with their signatures as text."""
    found: dict[str, str] = {}
    for name in dir(cls):
        if name.startswith("_") and name not in {"__enter__", "__exit__"}:
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, property):
            assert value.fget is not None
            found[name] = "property " + str(inspect.signature(value.fget))
        elif inspect.isfunction(value):
            found[name] = str(inspect.signature(value))
    return found


def test_both_clients_have_the_protocols_methods_with_the_same_signatures() -> None:
    protocol = _members(MemoryClient)
    # at least what the issue names, so that a method cannot quietly leave the protocol
    for verb in (
        "remember", "get", "list_records", "search", "retrieve", "update", "supersede",
        "archive", "proposals", "decide", "approve", "reject", "history", "audit",
        "append_events", "timeline_search", "why", "close", "__enter__", "__exit__",
        "principal",
    ):  # fmt: skip
        assert verb in protocol, verb
    assert _members(LocalMemory) == protocol
    assert _members(RemoteMemory) == protocol


def test_a_changed_signature_is_caught() -> None:
    class Drifted(LocalMemory):
        def get(self, record_id: str, *, version: int | None = None) -> Any:  # type: ignore[override]
            raise NotImplementedError

    assert _members(Drifted) != _members(MemoryClient)


def test_both_are_memory_clients_at_run_time(local_store: LocalStore, server: Live) -> None:
    with (
        cairn.open(local_store.folder, key=local_store.agent) as mine,
        cairn.connect(server.url, server.agent) as theirs,
    ):
        assert isinstance(mine, MemoryClient) and isinstance(theirs, MemoryClient)
        # both stores' `cairn init` agent (whose default scope names its own folder)
        same = {"default_scope"}
        assert mine.principal.model_dump(exclude=same) == theirs.principal.model_dump(exclude=same)
        assert mine.memory.folder == local_store.folder.resolve()


# ---- keys --------------------------------------------------------------------------------


def test_open_without_a_key_fails_closed(local_store: LocalStore) -> None:
    with pytest.raises(cairn.Unauthenticated, match="CAIRN_API_KEY"):
        cairn.open(local_store.folder)
    with pytest.raises(cairn.Unauthenticated):
        cairn.open(local_store.folder, key="")


def test_open_reads_the_key_from_the_environment(
    local_store: LocalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_API_KEY", local_store.curator)
    with cairn.open(local_store.folder) as memory:
        assert memory.principal.id == "curator"


def test_connect_without_a_key_fails_closed_before_any_request() -> None:
    asked: list[httpx.Request] = []
    transport = httpx.MockTransport(lambda request: asked.append(request) or httpx.Response(500))
    with pytest.raises(cairn.Unauthenticated, match="CAIRN_API_KEY"):
        cairn.connect("http://cairn.test", transport=transport)
    assert asked == []


def test_a_wrong_key_is_refused_alike_and_never_shown(
    local_store: LocalStore, server: Live
) -> None:
    wrong = "cairn_" + "x" * 43
    for attempt in (
        lambda: cairn.open(local_store.folder, key=wrong),
        lambda: cairn.connect(server.url, wrong),
    ):
        with pytest.raises(cairn.Unauthenticated) as refused:
            attempt()
        assert refused.value.code == "unauthenticated"
        assert wrong not in str(refused.value) and wrong not in repr(refused.value)


def test_a_key_no_header_can_carry_is_refused_without_quoting_it() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(500))
    for odd in ("cairn_secret\nX-Injected: 1", "cairn_secret with spaces", "cairn_sécret"):
        with pytest.raises(cairn.Unauthenticated) as refused:
            cairn.connect("http://cairn.test", odd, transport=transport)
        assert "secret" not in str(refused.value)


def test_the_key_is_in_no_repr(local_store: LocalStore, server: Live) -> None:
    with (
        cairn.open(local_store.folder, key=local_store.agent) as mine,
        cairn.connect(server.url, server.agent) as theirs,
    ):
        assert repr(mine) == f"<LocalMemory {local_store.folder.resolve()} as agent>"
        assert repr(theirs) == f"<RemoteMemory {server.url} as agent>"
        for client, key in ((mine, local_store.agent), (theirs, server.agent)):
            assert key not in repr(client) and key not in str(client)
            assert key not in repr(vars(client))
            with pytest.raises(cairn.NotFound) as missing:
                client.get("rec_missing")
            assert key not in str(missing.value) and key not in repr(missing.value.details)


def test_a_revoked_key_stops_a_remote_client_at_once(server: Live) -> None:
    from cairn.auth import add_key, load_principals, revoke_key, save_principals

    path = server.store / "principals.yaml"
    principals, key, api_key = add_key(load_principals(path), "agent", label="revoked soon")
    save_principals(path, principals)
    with cairn.connect(server.url, key) as client:
        assert client.status()["records"] >= 0
        save_principals(path, revoke_key(load_principals(path), api_key.id))
        with pytest.raises(cairn.Unauthenticated):
            client.status()


# ---- errors ------------------------------------------------------------------------------


def _answering(status: int, body: Any, *, content_type: str = "application/problem+json") -> Any:
    """A transport whose whoami answers the agent and every other request ``body``."""

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/whoami":
            return httpx.Response(200, json=AGENT.model_dump(mode="json"))
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.Response(status, content=raw, headers={"content-type": content_type})

    return httpx.MockTransport(handle)


def _kernel_errors() -> list[type[CairnError]]:
    found, stack = [], [CairnError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", _kernel_errors(), ids=lambda cls: cls.code)
def test_every_kernel_error_comes_back_as_its_own_class(cls: type[CairnError]) -> None:
    # the HTTP door's own body for the error, read back by the client
    sent = cls("what went wrong", field="title", limit=3)
    body = error_body(sent).model_dump(exclude_none=True)
    client = cairn.connect(
        "http://cairn.test", "cairn_k", transport=_answering(body["status"], body)
    )
    with pytest.raises(cls) as raised:
        client.status()
    assert type(raised.value) is cls
    assert (raised.value.code, raised.value.field) == (sent.code, "title")
    assert raised.value.message == sent.public_message
    assert raised.value.details == {"limit": 3}
    assert http_status(raised.value) == body["status"]  # one table, read both ways


@pytest.mark.parametrize("code", sorted(HTTP_STATUS))
def test_every_code_the_http_door_answers_maps_to_a_class(code: str) -> None:
    status = HTTP_STATUS[code]
    body = {"status": status, "title": "x", "detail": "refused", "code": code}
    client = cairn.connect("http://cairn.test", "cairn_k", transport=_answering(status, body))
    with pytest.raises(CairnError) as raised:
        client.status()
    expected = error_class(code) or STATUS_ERRORS.get(status, CairnError)
    assert type(raised.value) is expected
    assert raised.value.code == code  # the server's own code, even where the class is broader


def test_the_fallback_classes_agree_with_the_status_table() -> None:
    for status, cls in STATUS_ERRORS.items():
        if status not in (400, 405):  # the HTTP door's own refusals of a malformed request
            assert http_status(cls("x")) == status, cls


def test_an_unknown_code_or_an_answer_without_a_body_falls_back_on_the_status() -> None:
    odd = {"status": 409, "title": "Conflict", "detail": "newer", "code": "from_the_future"}
    client = cairn.connect("http://cairn.test", "cairn_k", transport=_answering(409, odd))
    with pytest.raises(cairn.Conflict, match="newer"):
        client.status()
    html = cairn.connect(
        "http://cairn.test",
        "cairn_k",
        transport=_answering(502, b"<html>bad gateway</html>", content_type="text/html"),
    )
    with pytest.raises(CairnError, match="answered 502"):
        html.status()


def test_an_unreachable_server_is_a_store_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(cairn.StoreError, match="could not reach") as raised:
        cairn.connect(url, "cairn_k", timeout=5)
    assert "cairn_k" not in str(raised.value)


def test_an_answer_of_another_shape_is_a_cairn_error() -> None:
    odd = httpx.MockTransport(lambda request: httpx.Response(200, json={"id": 7}))
    with pytest.raises(CairnError, match="not what cairn expected") as raised:
        cairn.connect("http://cairn.test", "cairn_k", transport=odd)
    assert "7" not in str(raised.value)  # the problem is named, the answer not quoted


def test_the_address_may_name_the_api(server: Live) -> None:
    with cairn.connect(server.url + "/v1/", server.agent) as client:
        assert client.url == server.url
        assert client.principal.id == "agent"


def test_what_the_http_api_cannot_say_is_refused_not_dropped(server: Live) -> None:
    with cairn.connect(server.url, server.agent) as client:
        with pytest.raises(cairn.InvalidInput) as refused:
            client.list_records(cairn.RecordQuery(metadata={"team": "a"}))
        assert refused.value.field == "metadata"


def test_a_misspelt_filter_is_refused_not_dropped(local_store: LocalStore, server: Live) -> None:
    """Filters arrive as ``**filters``: a name they do not declare is refused as Python
    refuses an unknown keyword, by both clients and the kernel, before any read."""
    with (
        cairn.open(local_store.folder, key=local_store.agent) as mine,
        cairn.connect(server.url, server.agent) as theirs,
    ):
        for client in (mine, theirs):
            with pytest.raises(TypeError, match="'scopes'"):
                client.search("tests", scopes="acme/*")  # type: ignore[call-arg]
            # the kernel's tuning knob is not a door's
            with pytest.raises(TypeError, match="'candidates'"):
                client.retrieve("tests", candidates=5)  # type: ignore[call-arg]
            with pytest.raises(TypeError, match="'sesion_id'"):
                client.events(sesion_id="s-1")  # type: ignore[call-arg]
            with pytest.raises(TypeError, match="'limit'"):
                client.timeline_search("tests", limit=5)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="'scopes'"):
            mine.memory.recall("tests", principal=mine.principal, scopes="acme/*")  # type: ignore[call-arg]
        kept = mine.memory.recall("tests", principal=mine.principal, mode="keyword", candidates=5)
        assert kept.keyword == ()


def test_ids_cannot_reach_another_route(server: Live) -> None:
    with cairn.connect(server.url, server.agent) as client:
        for odd in ("", ".", "..", "../proposals", "rec_1/versions", "rec_1?selector=x"):
            with pytest.raises(cairn.NotFound):
                client.get(odd)


# ---- naming a store ----------------------------------------------------------------------


def test_open_names_what_is_wrong_with_a_store(tmp_path: Path, local_store: LocalStore) -> None:
    with pytest.raises(cairn.NotFound, match="cairn init"):
        cairn.open(tmp_path / "nowhere", key=local_store.agent)
    with pytest.raises(cairn.InvalidInput, match=r"cairn\.connect"):
        cairn.open("http://127.0.0.1:8765", key=local_store.agent)
    with pytest.raises(cairn.InvalidInput, match="once"):
        cairn.open("sqlite:///x.db", key=local_store.agent, db="sqlite:///y.db")
    with pytest.raises(cairn.InvalidInput, match="http"):
        cairn.connect(str(local_store.folder), local_store.agent)


def test_open_takes_a_database_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_store: LocalStore
) -> None:
    url = f"sqlite:///{local_store.folder / 'cairn.db'}"
    monkeypatch.setenv("CAIRN_STORE", str(local_store.folder))
    with cairn.open(url, key=local_store.agent) as by_url:
        made = by_url.remember(Content(kind="episode", scope="acme/app", title="By URL"))
        assert made.record is not None
    with cairn.open(local_store.folder, key=local_store.agent, db=url) as by_folder:
        assert [r.content.title for r in by_folder.list_records()] == ["By URL"]


def test_open_takes_a_postgresql_url(
    pg_cluster: PgCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = as_uri(pg_cluster.new_database())
    folder = tmp_path / "pg-store"
    keys = Workspace(folder, db=db).init().keys
    monkeypatch.setenv("CAIRN_STORE", str(folder))  # where the policy and principals are
    with cairn.open(db, key=keys["agent"]) as by_url:
        made = by_url.remember(Content(kind="episode", scope="acme/app", title="In Postgres"))
        assert made.record is not None
    monkeypatch.delenv("CAIRN_STORE")
    with cairn.open(folder, key=keys["curator"], db=db) as by_folder:
        assert [r.content.title for r in by_folder.list_records()] == ["In Postgres"]
        assert not (folder / "cairn.db").exists()  # nothing went to SQLite


def test_clients_on_one_store_share_one_kernel(local_store: LocalStore) -> None:
    agent = cairn.open(local_store.folder, key=local_store.agent)
    curator = cairn.open(local_store.folder, key=local_store.curator)
    assert agent.memory is curator.memory
    agent.close()
    agent.close()  # closing twice lets go once
    assert curator.status()["records"] == 0  # still open for the other
    curator.close()
    assert local_module._open_stores == {}
    with cairn.open(local_store.folder, key=local_store.agent) as again:
        assert again.memory is not agent.memory


def test_importing_cairn_loads_neither_the_kernel_nor_httpx() -> None:
    probe = (
        "import sys, cairn; cairn.MemoryClient; "
        "print(sorted(m for m in sys.modules if m.startswith(('cairn.memory', 'httpx', "
        "'cairn.store'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    remote = "import sys, cairn; cairn.connect; print('cairn.memory' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", remote], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"  # a remote client needs no kernel
