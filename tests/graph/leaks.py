"""The no-leak rule, checked from the fixture files themselves rather than from the code
under test.

For a role, *withheld* is every string of a vertex its asker may not read (key, record id,
title, text, snippet, decision maker, tags, every ``x-extra`` value), every masked field
of a vertex it may read (the whole body of a headers-only vertex; the ``x-extra`` values
off the role's whitelist), and the text and ids of every edge it may not read or whose
ends it may not both read. Text also legitimately shown to the role (the same decision
maker on a readable vertex, say) and text shorter than four characters is left out; keys
and ids never are (a visible vertex's ``x-extra`` naming a hidden one still leaks it).

An answer leaks when a withheld string, or a withheld id its own audit copy names, shows
up in the answer's body, in any file of the asker's trace or in a download."""

from __future__ import annotations

import fnmatch
import io
import json
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cairn.errors import NotFound, PermissionDenied
from cairn.graph.roles import RoleProfile
from cairn.graph.schema import load_schema
from cairn.graph.why import WhyRequest
from cairn.memory import Memory
from cairn.model import Acl, Principal
from tests.factories import CURATOR
from tests.graph.conftest import echo_answerer, record_ids, stored_edges

RANK = {"low": 0, "medium": 1, "high": 2}
HANDLE = re.compile(r"^withheld-\d+$")
MIN_CHARS = 4
TEXT_FIELDS = ("rationale", "description", "snippet", "decision_maker")


def _property_names(schema: Any) -> Iterator[str]:
    if isinstance(schema, dict):
        for name, inner in schema.get("properties", {}).items():
            yield name
            yield from _property_names(inner)
        for inner in schema.values():
            if isinstance(inner, dict | list):
                yield from _property_names(inner)
    elif isinstance(schema, list):
        for inner in schema:
            yield from _property_names(inner)


META_NAMES = frozenset(_property_names(load_schema("meta")))


def fixtures(folder: Path) -> dict[str, dict[str, Any]]:
    """Every decision and event in ``folder``, by key."""
    found: dict[str, dict[str, Any]] = {}
    for sub in ("decisions", "events"):
        for path in sorted((folder / sub).glob("*.json")):
            data = json.loads(path.read_text())
            found[data["id"]] = data | {"_kind": sub[:-1]}
    return found


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for inner in value.values():
            yield from strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from strings(inner)


def split_extra(
    extra: dict[str, Any], allowed: tuple[str, ...], prefix: str = ""
) -> tuple[list[str], list[str]]:
    """(shown, hidden) strings of ``extra`` under the whitelist ``allowed``."""
    shown: list[str] = []
    hidden: list[str] = []
    for key, value in extra.items():
        path = prefix + key
        if any(path == a or path.startswith(a + ".") for a in allowed):
            shown += strings(value)
        elif isinstance(value, dict):
            more_shown, more_hidden = split_extra(value, allowed, path + ".")
            shown += more_shown
            hidden += more_hidden
        else:
            hidden += strings(value)
    return shown, hidden


@dataclass
class Oracle:
    """What one asker may read of a graph, worked out from the fixtures."""

    principal: Principal
    profile: RoleProfile
    vertices: dict[str, dict[str, Any]]
    ids: dict[str, str]  # key → record id
    withheld: set[str] = field(default_factory=set)
    allowed: set[str] = field(default_factory=set)

    def acl_ok(self, roles: tuple[str, ...], labels: tuple[str, ...], sensitivity: str) -> bool:
        ceiling = min(RANK[self.principal.sensitivity.value], RANK[self.profile.sensitivity.value])
        role = self.principal.roles[0]
        return (
            (not roles or role in roles)
            and ("*" in self.principal.labels or set(labels) <= set(self.principal.labels))
            and RANK[sensitivity] <= ceiling
        )

    def readable(self, key: str) -> bool:
        data = self.vertices[key]
        return (
            self.acl_ok(
                tuple(data["roles_allowed"]), tuple(data["namespaces"]), data["sensitivity"]
            )
            and self.profile.in_domain(data["domain"])
            and any(fnmatch.fnmatchcase(data["domain"], s) for s in self.principal.scopes)
        )

    def edge_ok(self, acl: Acl) -> bool:
        return self.acl_ok(acl.roles, acl.labels, acl.sensitivity.value)


def oracle(memory: Memory, folder: Path, principal: Principal) -> Oracle:
    graph = memory.policy_in_force.graph
    role = graph.best_role(principal.roles)
    assert role is not None
    found = Oracle(principal, graph.roles[role], fixtures(folder), record_ids(memory))
    hidden: set[str] = set()
    shown: set[str] = set()
    names: set[str] = set()  # keys and ids: withheld even when some visible text holds them
    for key, data in found.vertices.items():
        title = data.get("option") or data["summary"]
        body = [data.get(name) for name in TEXT_FIELDS] + list(data.get("tags", ()))
        extra = data.get("x-extra") or {}
        if not found.readable(key):
            names |= {key, found.ids[key]}
            hidden |= {title, *strings(body), *strings(extra)}
            continue
        shown |= {key, title}
        if found.profile.shows(data["domain"]) == "headers":
            hidden |= {*strings(body), *strings(extra)}
        else:
            extra_shown, extra_hidden = split_extra(extra, found.profile.x_extra)
            shown |= {*strings(body), *extra_shown}
            hidden |= set(extra_hidden)
    by_id = {record_id: key for key, record_id in found.ids.items()}
    for key, edge in stored_edges(memory).items():
        text = {*strings(edge.metadata.get("reason")), *strings(edge.metadata.get("x-extra"))}
        ends_ok = found.readable(by_id[edge.src]) and found.readable(by_id[edge.dst])
        if ends_ok and found.edge_ok(edge.acl):
            shown |= text
        else:
            names |= {key, edge.id}
            hidden |= text
    # a one-word tag such as "latency" is also part of the meta's own field names
    # (stage_latencies_ms): those are no leak
    hidden = {h for h in hidden if len(h) >= MIN_CHARS and not any(h in n for n in META_NAMES)}
    found.allowed = shown
    found.withheld = names | {h for h in hidden if not any(h in s for s in shown)}
    return found


def _zip_texts(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name).decode() for name in archive.namelist()}


def artifacts(memory: Memory, body: dict[str, Any], asker: Principal) -> dict[str, str]:
    """Everything the asker can take away from one answer, by where it came from."""
    seen = {"body": json.dumps(body, ensure_ascii=False)}
    trace = memory.trace(body["trace_id"], principal=asker)
    assert trace["view"] == "asker"
    for name, content in trace["files"].items():
        seen[f"trace/{name}"] = json.dumps(content, ensure_ascii=False)
    for download in body["_meta"]["downloads"]["artifacts"]:
        try:
            data = memory.trace_download(body["trace_id"], download["name"], principal=asker)
        except PermissionDenied:
            assert not download["allowed"]
            continue
        assert download["allowed"]
        for name, text in _zip_texts(data).items():
            seen[f"{download['name']}/{name}"] = text
    return seen


def assert_no_leak(
    memory: Memory, body: dict[str, Any], asker: Principal, known: Oracle, where: str
) -> None:
    seen = artifacts(memory, body, asker)
    policy_trace = body["_meta"]["policy_trace"]
    assert all(HANDLE.match(h) for h in policy_trace["withheld_ids"]), where
    assert all(HANDLE.match(h) for h in policy_trace["reasons_by_id"]), where
    # the audit copy names the real ids, and only in its policy trace
    audit = memory.trace(body["trace_id"], principal=CURATOR)
    assert audit["view"] == "audit"
    audit_trace = audit["files"]["_meta.json"]["policy_trace"]
    real = set(audit_trace["withheld_ids"])
    assert set(audit_trace["handles"].values()) == real
    assert set(audit_trace["reasons_by_id"]) == real
    assert len(real) == len(policy_trace["withheld_ids"])
    rest = dict(audit["files"]) | {
        "_meta.json": {k: v for k, v in audit["files"]["_meta.json"].items() if k != "policy_trace"}
    }
    audit_text = json.dumps(rest, ensure_ascii=False)
    for wid in real:
        assert wid not in audit_text, f"{where}: withheld id {wid} outside the audit trace"
    for name, text in seen.items():
        for secret in known.withheld | real:
            assert secret not in text, f"{where}: {secret!r} leaked into {name}"


MODES = ("ask", "query", "query+llm")


def check_answers(
    memory: Memory, folder: Path, asker: Principal, anchors: list[str], *,
    modes: tuple[str, ...] = MODES, hops: int = 1,
) -> int:  # fmt: skip
    """Ask about each of ``anchors`` in each mode and check no answer leaks; an anchor the
    asker may not read must be "not found", named as given. Returns the answers checked."""
    known = oracle(memory, folder, asker)
    checked = 0
    for anchor in anchors:
        request = WhyRequest(anchor=anchor, hops=hops)
        if not known.readable(anchor):
            try:
                memory.why(request, principal=asker)
            except NotFound as exc:
                assert repr(anchor) in str(exc)
                assert "rec_" not in str(exc)
            else:
                raise AssertionError(f"{asker.id} read {anchor}, which it may not")
            continue
        for mode in modes:
            memory._answerer = echo_answerer() if mode == "query+llm" else None
            try:
                body = memory.why(
                    request, principal=asker, mode="ask" if mode == "ask" else "query"
                )
            finally:
                memory._answerer = None
            where = f"{asker.id} at {anchor} ({mode}, {hops} hop(s))"
            response = body["_meta"]["response"]
            if mode == "query+llm":
                # the echo really answered, so the prompt is in the answer to be searched
                assert response["mode"] == "llm", where
                assert "Evidence:" in body["answer"], where
            else:
                assert response["mode"] == "templater", where
            assert_no_leak(memory, body, asker, known, where)
            checked += 1
    return checked
