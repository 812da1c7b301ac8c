"""A small random world for the cross-door no-leak property, and what its reader may not see.

A curator writes records (random scopes and ACLs, one unique marker word per version),
publishes a scope, edits and supersedes records; another agent leaves proposals pending;
the reader leaves a proposal or two of its own. Timeline events are appended in random
scopes, under the policy's event ACL or a narrower one, each with a marker word, an id and
a session of its own; a rollup builds the hierarchy, late events re-version (and may
retire) segments, and a second rollup follows. ``Secrets`` lists every id and marker word
the reader may not see, computed from a restatement of the read rule here, independent of
``cairn.governance.access``.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from hypothesis import strategies as st

from cairn.errors import Conflict
from cairn.memory import Memory
from cairn.model import (
    Acl,
    Content,
    ContentPatch,
    EventDraft,
    EventRole,
    Principal,
    PrincipalKind,
    Sensitivity,
    TocNode,
    Verdict,
    new_id,
)
from cairn.store.base import Store, TocFilter
from tests.factories import CURATOR

T = TypeVar("T")

SCOPES = ("acme/app", "acme/ops", "globex/app")
SCOPE_GLOBS = ("acme/*", "*", "acme/app", "acme/ops", "globex/*", "globex/app", "*/app")
# The reader is an agent: never a curator (curators read everything in their scopes).
READER_ROLES = ("agent", "ops")
LABELS = ("public", "internal", "confidential")
VOCAB = ("deploy", "rotation", "kafka", "backup")
RANK = {Sensitivity.LOW: 0, Sensitivity.MEDIUM: 1, Sensitivity.HIGH: 2}
MAX_RECORDS = 6
READER_ID = "reader"

# Another agent that sees everything (but curates nothing): its proposals must stay
# invisible to the reader.
OTHER = Principal(
    id="other",
    kind=PrincipalKind.AGENT,
    roles=("agent", "ops"),
    scopes=("*",),
    labels=("*",),
    sensitivity=Sensitivity.HIGH,
)


def record_marker(n: int, version: int) -> str:
    return f"zmark{n}v{version}q"


def proposal_marker(n: int) -> str:
    return f"zprop{n}q"


def own_marker(n: int) -> str:
    return f"zmine{n}q"


def event_marker(n: int) -> str:
    return f"zevt{n}q"


def event_id(n: int) -> str:
    return f"zev{n}q"


def session_id(scope: str, n: int) -> str:
    return f"zses{SCOPES.index(scope)}x{n}q"


# ---- what hypothesis draws ---------------------------------------------------------------


def _sorted(values: list[str]) -> tuple[str, ...]:
    return tuple(sorted(values))


def weighted(*choices: tuple[int, T]) -> st.SearchStrategy[T]:
    """One of ``choices``, each as often as its weight."""
    return st.sampled_from([value for weight, value in choices for _ in range(weight)])


LOW, MEDIUM, HIGH = Sensitivity.LOW, Sensitivity.MEDIUM, Sensitivity.HIGH
# Broad globs come up more often, so that the reader usually reads something.
scope_globs = weighted(*((2 if glob in ("*", "acme/*") else 1, glob) for glob in SCOPE_GLOBS))

# The weights make a typical world hold records the reader reads next to records it may not.
acls = st.builds(
    Acl,
    roles=weighted((3, ()), (1, ("agent",)), (1, ("ops",)), (1, ("agent", "ops"))),
    labels=weighted(
        (2, ()),
        (3, ("internal",)),
        (1, ("public",)),
        (1, ("confidential",)),
        (1, ("confidential", "internal")),
    ),
    sensitivity=weighted((3, LOW), (1, MEDIUM), (1, HIGH)),
)


@dataclass(frozen=True)
class RecordSpec:
    scope: str
    acl: Acl
    words: tuple[str, ...]
    # The ACL of a second version the curator writes after the first publish; None: no
    # second version. Often narrower or wider than the first, so that one version of a
    # record may be readable and another not.
    second_acl: Acl | None


record_specs = st.builds(
    RecordSpec,
    scope=st.sampled_from(SCOPES),
    acl=acls,
    words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=2).map(tuple),
    second_acl=st.none() | acls,
)


# The ACL events are appended under: the policy's (None), or a narrower one a policy may
# name instead (events appended before and after such a change form separate hierarchies).
EVENT_ACLS: tuple[Acl | None, ...] = (None, Acl(labels=("confidential",), sensitivity=HIGH))
EVENT_T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)  # a Monday
MAX_EVENTS = 10


@dataclass(frozen=True)
class EventSpec:
    scope: str
    session: int
    minute: int  # after EVENT_T0: within three days, so that days, weeks and segments vary
    words: tuple[str, ...]
    acl: int  # an index into EVENT_ACLS
    late: bool  # appended after the first rollup (it re-versions, or retires, segments)


event_specs = st.builds(
    EventSpec,
    scope=st.sampled_from(SCOPES),
    session=st.integers(0, 1),
    minute=st.sampled_from([0, 2, 5, 9, 50, 52, 120, 24 * 60 + 3, 2 * 24 * 60 + 7]),
    words=st.lists(st.sampled_from(VOCAB), min_size=1, max_size=3).map(tuple),
    acl=weighted((3, 0), (1, 1)),
    late=weighted((3, False), (1, True)),
)


@dataclass(frozen=True)
class WorldSpec:
    records: tuple[RecordSpec, ...]
    publish: str | None  # a scope published after the first versions
    republish: bool  # publish it again after the second versions
    supersessions: tuple[tuple[int, int], ...]  # (old, by) record numbers
    other_updates: tuple[int, ...]  # records the other agent proposes to edit
    other_create: str | None  # a scope the other agent proposes a new record in
    reader_create: bool  # the reader proposes a record of its own
    reader_update: int | None  # a record the reader proposes to edit (then made stale)
    events: tuple[EventSpec, ...] = ()


@st.composite
def world_specs(draw: st.DrawFn) -> WorldSpec:
    records = draw(st.lists(record_specs, min_size=2, max_size=MAX_RECORDS))
    number = st.integers(0, len(records) - 1)
    pairs = st.lists(st.tuples(number, number), min_size=len(records) > 1, max_size=3)
    return WorldSpec(
        records=tuple(records),
        publish=draw(st.none() | st.sampled_from(SCOPES)),
        republish=draw(st.booleans()),
        supersessions=tuple(draw(pairs)),
        other_updates=tuple(draw(st.lists(number, unique=True, max_size=2))),
        other_create=draw(st.none() | st.sampled_from(SCOPES)),
        reader_create=draw(st.booleans()),
        reader_update=draw(st.none() | number),
        events=tuple(draw(st.lists(event_specs, max_size=MAX_EVENTS))),
    )


readers = st.builds(
    Principal,
    id=st.just(READER_ID),
    kind=st.just(PrincipalKind.AGENT),
    roles=weighted((2, ("agent",)), (1, ("ops",)), (1, ("agent", "ops")), (1, ())),
    scopes=st.lists(scope_globs, unique=True, min_size=1, max_size=2).map(_sorted),
    labels=weighted(
        (3, ("internal", "public")),
        (1, ("internal",)),
        (1, ("confidential", "internal")),
        (1, ("*",)),
        (1, ("public",)),
        (1, ()),
    ),
    sensitivity=weighted((2, MEDIUM), (1, LOW), (1, HIGH)),
)

# Words a reader may search for: vocabulary, and marker words of any version or proposal
# (visible or not). Joined by single spaces and free of filler words, so that the
# Researcher's planned query is the query itself (what is stripped as the reader's echo).
_ALL_MARKERS = (
    *(record_marker(n, v) for n in range(MAX_RECORDS) for v in (1, 2, 3)),
    *(proposal_marker(n) for n in range(3)),
    *(own_marker(n) for n in range(2)),
    *(event_marker(n) for n in range(MAX_EVENTS)),
)
queries = st.lists(
    st.sampled_from(VOCAB) | st.sampled_from(_ALL_MARKERS), min_size=1, max_size=3
).map(" ".join)


# ---- the oracle: the read rule, restated -------------------------------------------------


def in_scope(reader: Principal, scope: str) -> bool:
    return any(fnmatch.fnmatchcase(scope, glob) for glob in reader.scopes)


def admits(reader: Principal, acl: Acl) -> bool:
    """An agent passes an ACL when its roles meet the ACL's (if it names any), it holds
    every label (or all of them, ``*``) and the sensitivity is within its ceiling."""
    return (
        (not acl.roles or bool(set(acl.roles) & set(reader.roles)))
        and ("*" in reader.labels or set(acl.labels) <= set(reader.labels))
        and RANK[acl.sensitivity] <= RANK[reader.sensitivity]
    )


# ---- the world as built ------------------------------------------------------------------


@dataclass
class VersionFact:
    id: str
    number: int
    content: Content

    @property
    def marker(self) -> str:
        return self.content.title.split()[-1]


@dataclass
class RecordFact:
    n: int
    id: str
    scope: str
    versions: list[VersionFact]
    superseded_by: str | None = None

    @property
    def head(self) -> VersionFact:
        return self.versions[-1]


@dataclass(frozen=True)
class BaselineFact:
    id: str
    scope: str
    pins: dict[str, str]  # record id -> version id
    proposal_id: str


@dataclass(frozen=True)
class EventFact:
    n: int
    id: str
    scope: str
    session: str
    acl: Acl
    marker: str


@dataclass
class World:
    memory: Memory
    store: Store  # the memory's own, for the oracle's view of everything stored
    records: list[RecordFact] = field(default_factory=list)
    baselines: list[BaselineFact] = field(default_factory=list)
    foreign_proposals: dict[str, str] = field(default_factory=dict)  # id -> whose
    foreign_markers: list[str] = field(default_factory=list)
    own_proposals: list[str] = field(default_factory=list)
    own_stale: str | None = None  # the reader's proposal a later edit made stale
    events: list[EventFact] = field(default_factory=list)
    nodes: list[TocNode] = field(default_factory=list)  # the latest version of every node

    def record(self, record_id: str) -> RecordFact:
        return next(r for r in self.records if r.id == record_id)

    def version(self, version_id: str) -> tuple[RecordFact, VersionFact]:
        return next((r, v) for r in self.records for v in r.versions if v.id == version_id)

    def published_pins(self) -> dict[str, str]:
        """The pins of each scope's published (latest) baseline."""
        latest = {b.scope: b for b in self.baselines}
        return {r: v for b in latest.values() for r, v in b.pins.items()}

    def sees_record(self, reader: Principal, record: RecordFact) -> bool:
        return in_scope(reader, record.scope) and admits(reader, record.head.content.acl)

    def sees_version(self, reader: Principal, record: RecordFact, version: VersionFact) -> bool:
        return self.sees_record(reader, record) and admits(reader, version.content.acl)

    def visible_records(self, reader: Principal) -> list[RecordFact]:
        return [r for r in self.records if self.sees_record(reader, r)]

    def hidden_records(self, reader: Principal) -> list[RecordFact]:
        return [r for r in self.records if not self.sees_record(reader, r)]

    def sees_timeline(self, reader: Principal, scope: str, acl: Acl) -> bool:
        """Events, and the nodes and grips built from them, read like a record: the scope
        and the ACL (one ACL per hierarchy, so a node never summarises what its reader may
        not read)."""
        return in_scope(reader, scope) and admits(reader, acl)

    def visible_events(self, reader: Principal) -> list[EventFact]:
        return [e for e in self.events if self.sees_timeline(reader, e.scope, e.acl)]

    def visible_nodes(self, reader: Principal) -> list[TocNode]:
        return [n for n in self.nodes if self.sees_timeline(reader, n.scope, n.acl)]

    def hidden_nodes(self, reader: Principal) -> list[TocNode]:
        return [n for n in self.nodes if not self.sees_timeline(reader, n.scope, n.acl)]


def _content(n: int, version: int, spec: RecordSpec, acl: Acl) -> Content:
    marker = record_marker(n, version)
    return Content(
        kind="fact",
        scope=spec.scope,
        title=f"Note {marker}",
        body=f"{' '.join(spec.words)} {marker}.",
        acl=acl,
    )


def build_world(memory: Memory, store: Store, spec: WorldSpec, reader: Principal) -> World:
    world = World(memory, store)
    curated = world.foreign_proposals
    for n, record_spec in enumerate(spec.records):
        content = _content(n, 1, record_spec, record_spec.acl)
        outcome = memory.remember(content, principal=CURATOR, paths=(f"src/m{n}.py",))
        assert outcome.record is not None and outcome.version is not None, outcome
        curated[outcome.proposal.id] = "the curator's"
        version = VersionFact(outcome.version.id, 1, content)
        world.records.append(RecordFact(n, outcome.record.id, record_spec.scope, [version]))

    def publish(scope: str) -> None:
        try:
            outcome = memory.publish(scope, principal=CURATOR)
        except Conflict:  # nothing active in that scope
            return
        curated[outcome.proposal.id] = "the curator's publish"
        baseline_id = store.published_baseline_id(scope)
        baseline = store.get_baseline(baseline_id or "")
        assert baseline is not None
        world.baselines.append(BaselineFact(baseline.id, scope, baseline.pins, outcome.proposal.id))

    if spec.publish:
        publish(spec.publish)
    for fact, record_spec in zip(world.records, spec.records, strict=True):
        if record_spec.second_acl is not None:
            _curator_edit(world, fact, _content(fact.n, 2, record_spec, record_spec.second_acl))
    if spec.publish and spec.republish:
        publish(spec.publish)
    for old, by in spec.supersessions:
        if old == by:
            continue
        try:
            outcome = memory.supersede(
                world.records[old].id, by=world.records[by].id, principal=CURATOR
            )
        except Conflict:  # already superseded, or a cycle
            continue
        curated[outcome.proposal.id] = "the curator's supersede"
        world.records[old].superseded_by = world.records[by].id

    for number, index in enumerate(spec.other_updates):
        target = world.records[index]
        marker = proposal_marker(number)
        patch = ContentPatch(body=f"{target.head.content.body} {marker}")
        outcome = memory.update(target.id, patch, principal=OTHER)
        assert outcome.decision is Verdict.QUEUE, outcome
        curated[outcome.proposal.id] = "another agent's"
        world.foreign_markers.append(marker)
    if spec.other_create is not None:
        marker = proposal_marker(2)
        idea = Content(kind="fact", scope=spec.other_create, title=f"Idea {marker}", body=marker)
        outcome = memory.remember(idea, principal=OTHER)
        assert outcome.decision is Verdict.QUEUE, outcome
        curated[outcome.proposal.id] = "another agent's"
        world.foreign_markers.append(marker)

    writable = [scope for scope in SCOPES if in_scope(reader, scope)]
    if spec.reader_create and writable:
        mine = Content(kind="fact", scope=writable[0], title=f"Mine {own_marker(0)}", body="x")
        outcome = memory.remember(mine, principal=reader)
        assert outcome.decision is Verdict.QUEUE, outcome
        world.own_proposals.append(outcome.proposal.id)
    if spec.reader_update is not None:
        target = world.records[spec.reader_update]
        if world.sees_record(reader, target):
            patch = ContentPatch(body=f"{target.head.content.body} {own_marker(1)}")
            outcome = memory.update(target.id, patch, principal=reader)
            assert outcome.decision is Verdict.QUEUE, outcome
            world.own_proposals.append(outcome.proposal.id)
            world.own_stale = outcome.proposal.id
            # The curator edits the text only (who may read it stays the same): the
            # reader's proposal is now stale and can be rebased.
            head = target.head.content
            number = len(target.versions) + 1
            marker = record_marker(target.n, number)
            edited = head.model_copy(update={"title": f"Note {marker}", "body": f"{marker}."})
            _curator_edit(world, target, edited)
    _append_and_roll_up(world, spec.events)
    memory.index_pending()
    return world


def _append_and_roll_up(world: World, specs: tuple[EventSpec, ...]) -> None:
    """The events, appended by the curator under the policy's event ACL or another, in two
    rounds with a rollup after each: late events re-version segments, days and above (or
    merge two segments, retiring one)."""
    memory = world.memory
    default = memory.policy_in_force.events.acl
    for late in (False, True):
        for acl_index, acl in enumerate(EVENT_ACLS):
            chosen = acl or default
            drafts: list[EventDraft] = []
            for n, spec in enumerate(specs):
                if spec.late is not late or spec.acl != acl_index:
                    continue
                fact = EventFact(
                    n, event_id(n), spec.scope, session_id(spec.scope, spec.session), chosen,
                    event_marker(n),
                )  # fmt: skip
                world.events.append(fact)
                drafts.append(
                    EventDraft(
                        event_id=fact.id,
                        ts=EVENT_T0 + timedelta(minutes=spec.minute, seconds=n),
                        session_id=fact.session,
                        scope=spec.scope,
                        agent="claude-code",
                        role=EventRole.USER if n % 2 == 0 else EventRole.ASSISTANT,
                        kind="user_message" if n % 2 == 0 else "assistant_message",
                        text=f"We talked about {' and '.join(spec.words)} {fact.marker}.",
                    )
                )
            if not drafts:
                continue
            policy = memory.policy_in_force
            events = policy.events.model_copy(update={"acl": chosen})
            memory.govern_by(policy.model_copy(update={"events": events}))
            try:
                memory.append_events(drafts, principal=CURATOR)
            finally:
                memory.govern_by(policy)
        memory.rollup(principal=CURATOR)
    every = TocFilter(
        acl_ids=frozenset(row.id for row in world.store.acls()), scope_ids=None,
        include_retired=True,
    )  # fmt: skip
    world.nodes = world.store.toc_nodes(every, limit=100_000)


def _curator_edit(world: World, fact: RecordFact, content: Content) -> None:
    patch = ContentPatch(title=content.title, body=content.body, acl=content.acl)
    outcome = world.memory.update(fact.id, patch, principal=CURATOR)
    assert outcome.version is not None, outcome
    world.foreign_proposals[outcome.proposal.id] = "the curator's edit"
    fact.versions.append(VersionFact(outcome.version.id, len(fact.versions) + 1, content))


# ---- what the reader may not see ---------------------------------------------------------


@dataclass(frozen=True)
class Secrets:
    """Every id and marker word the reader may not see (``tokens``: token -> what it is),
    and one id of each kind that never existed, to compare "hidden" answers against."""

    tokens: dict[str, str]
    never: dict[str, str]

    def of(self, ids: list[str]) -> list[str]:
        return [i for i in ids if i in self.tokens]


def secrets_of(world: World, reader: Principal) -> Secrets:
    tokens: dict[str, str] = {}
    for record in world.records:
        if not world.sees_record(reader, record):
            tokens[record.id] = f"hidden record {record.n}"
        for version in record.versions:
            if not world.sees_version(reader, record, version):
                what = f"hidden version {version.number} of record {record.n}"
                tokens[version.id] = what
                tokens[version.marker] = f"the text of the {what}"
    for proposal_id, whose in world.foreign_proposals.items():
        tokens[proposal_id] = f"{whose} proposal"
    for marker in world.foreign_markers:
        tokens[marker] = "the text of another agent's proposal"
    for baseline in world.baselines:
        if not in_scope(reader, baseline.scope):
            tokens[baseline.id] = f"a baseline of {baseline.scope}"
    seen_sessions = {e.session for e in world.visible_events(reader)}
    for event in world.events:
        if event not in world.visible_events(reader):
            tokens[event.id] = f"hidden event {event.n}"
            tokens[event.marker] = f"the text of hidden event {event.n}"
            if event.session not in seen_sessions:
                tokens[event.session] = f"a session of hidden events ({event.scope})"
    for node in world.hidden_nodes(reader):
        partition = node.node_id.split(".", 1)[0]
        tokens[partition] = f"a hierarchy the reader may not see ({node.scope})"
        tokens[node.node_id] = f"a hidden {node.level.value} node ({node.scope})"
        for grip in node.grips:
            tokens[grip.grip_id] = f"a grip of a hidden {node.level.value} ({node.scope})"
    never = {kind: new_id(kind) for kind in ("rec", "ver", "prp", "bsl")}
    never["node"] = "tl_00000000000000000000.segment.0000000000000000"
    never["grip"] = "grp_000000000000000000000000"
    never["event"] = "zevneverq"
    never["session"] = "zsesneverq"
    return Secrets(tokens, never)
