"""The ``cairn`` command line: parse, authenticate, call one ``Memory`` verb, render.

Every command takes the global options ``--store PATH`` (default ``./.cairn``), ``--db URL``,
``--key`` (or ``CAIRN_API_KEY``) and ``--json``, before or after its name (see
``cairn.doors._cli_common``). Errors go to stderr with the exit code of their class (see
``cairn.errors``) and name the field or rule at fault.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from cairn.capture.local import trust_store
from cairn.config import load_settings
from cairn.doors import _render as render
from cairn.doors._cli_common import (
    DEFAULT_STORE,
    CairnGroup,
    DbOpt,
    GlobalDbOpt,
    GlobalKeyOpt,
    GlobalStoreOpt,
    JsonOpt,
    KeyOpt,
    StoreOpt,
    api_key,
    db_url,
    errors,
    fail,
    store_path,
    want_json,
)
from cairn.doors._cli_files import read_input
from cairn.errors import InvalidInput, Unauthenticated
from cairn.limits import MAX_METADATA_DEPTH, LimitExceeded, load_json
from cairn.memory import DEFAULT_EMBEDDER, Memory
from cairn.model import (
    Acl,
    AuditQuery,
    Confidence,
    Content,
    ContentPatch,
    PinKind,
    Principal,
    ProposalOutcome,
    ProposalStatus,
    Provenance,
    RecordQuery,
    Sensitivity,
    Status,
    VersionPin,
)
from cairn.retrieval.context import ReadContextRequest
from cairn.retrieval.types import Item, Mode, RetrievalResult
from cairn.workspace import Workspace

__all__ = [
    "DEFAULT_STORE",
    "TIME_HELP",
    "DbOpt",
    "EmbedderOpt",
    "GlobalStoreOpt",
    "JsonOpt",
    "KeyOpt",
    "StoreOpt",
    "T",
    "TimeOpt",
    "app",
    "archive",
    "audit",
    "context",
    "get",
    "history",
    "ingest",
    "init",
    "list_",
    "main",
    "publish",
    "rebase",
    "refresh",
    "reindex",
    "remember",
    "research",
    "restore",
    "review_app",
    "review_approve",
    "review_list",
    "review_reject",
    "review_show",
    "search",
    "status",
    "supersede",
    "tour",
    "transition",
    "update",
    "vacuum",
    "validate",
]

T = TypeVar("T")

app = typer.Typer(
    name="cairn",
    help="Governed, citeable memory for AI agents and the people who work with them.",
    cls=CairnGroup,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # -h as well as --help, on every command (click hands this down to sub-commands)
    context_settings={"help_option_names": ["-h", "--help"]},
)
review_app = typer.Typer(help="The review queue: list, show, approve, reject (curators).")
app.add_typer(review_app, name="review")

EmbedderOpt = Annotated[
    str | None,
    typer.Option(
        "--embedder", envvar="CAIRN_EMBEDDER", help="minilm (default), static, e5 or openai:URL."
    ),
]
ReasonOpt = Annotated[str | None, typer.Option()]
TIME_HELP = "A date-time with a time zone (RFC 3339), e.g. 2026-01-31T12:00:00Z."
TimeOpt = Annotated[str | None, typer.Option(help=TIME_HELP)]
# The names the other CLI modules import (kept so their imports need no change).
_errors = errors
_fail = fail
_want_json = want_json
_store_path = store_path


# ---- plumbing -------------------------------------------------------------------------


# A command reads --store, --key and --json from the global options (``CairnGroup`` gives
# every command them), so most declare none and open their store with no arguments.


@contextmanager
def _session(
    store: Path | None = None, key: str | None = None, *, embedder: str | None = DEFAULT_EMBEDDER
) -> Iterator[tuple[Memory, Principal]]:
    """Open the store and authenticate; fail closed on a missing or unknown key."""
    with _errors():
        workspace = _workspace(store)
        principal = _authenticate(workspace, key)
        with workspace.open_memory(embedder=embedder) as memory:
            if principal is None:  # pragma: no cover - open_memory raises first
                raise InvalidInput(f"no store in {workspace.folder}")
            yield memory, principal


def _reader(
    store: Path | None = None, key: str | None = None, embedder: str | None = None
) -> AbstractContextManager[tuple[Memory, Principal]]:
    """Like _session, but the memory embeds with the chosen model for vector reads."""
    with _errors():
        chosen = load_settings(store=_store_path(store), embedder=embedder).embedder
    return _session(store, key, embedder=chosen)


def _authenticate(workspace: Workspace, key: str | None) -> Principal | None:
    """The caller, or None when there is no store here (opening it then says so)."""
    if not workspace.exists():
        return None
    key = api_key(key)
    if not key:
        raise Unauthenticated("no API key: pass --key or set CAIRN_API_KEY")
    return workspace.authenticate(key)


def _json_arg(raw: str | None, name: str) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        value = load_json(raw, f"--{name}", max_depth=MAX_METADATA_DEPTH)
    except LimitExceeded as exc:
        raise InvalidInput(str(exc), field=name) from None
    except ValueError as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise InvalidInput(f"--{name} is not valid JSON: {why}", field=name) from None
    if not isinstance(value, dict):
        raise InvalidInput(f"--{name} must be a JSON object", field=name)
    return value


def _body(body: str | None, body_file: Path | None) -> str | None:
    if body_file is not None:
        return read_input(body_file, _store_path(), option="--body-file")
    return body


def _show_outcome(outcome: ProposalOutcome) -> None:
    if _want_json():
        render.print_json(outcome)
        return
    p = outcome.proposal
    verdict = {"approve": "[green]accepted[/]", "queue": "[yellow]queued for review[/]"}.get(
        outcome.decision.value, "[red]rejected[/]"
    )
    rule = render.literal(p.rule or "-")
    render.out.print(f"proposal {p.id} ({p.change.op}) {verdict} — rule {rule}")
    if outcome.record is not None:
        v = f" v{outcome.version.number} ({outcome.version.id})" if outcome.version else ""
        status = escape(f"[{outcome.record.status.value}]")
        render.out.print(f"record {outcome.record.id} {status}{v}")
    if outcome.feedback:
        render.out.print(f"  {escape(outcome.feedback)}")


def _run(fn: Callable[[], T], show: Callable[[T], None]) -> None:
    """Call ``fn`` and print its result: as JSON with --json, else with ``show``."""
    with _errors():
        result = fn()
        if _want_json():
            render.print_json(result)
        else:
            show(result)


# ---- commands ---------------------------------------------------------------------------


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"cairn {version('cairn')}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    store: GlobalStoreOpt = None,
    db: GlobalDbOpt = None,
    key: GlobalKeyOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print cairn's version and exit.",
        ),
    ] = False,
) -> None:
    # What every command reads its global options from (see _cli_common.options); those
    # given after the command name overwrite these as the command parses them.
    ctx.obj = {"store": store, "db": db, "key": key, "json": as_json}


def _workspace(store: Path | None = None) -> Workspace:
    """The folder and database, by flags > CAIRN_* environment > <store>/config.toml."""
    folder = _store_path(store)
    settings = load_settings(store=folder, db=db_url())
    return Workspace(folder, db=settings.db)


@app.command()
def init() -> None:
    """Create a store with the default policy and principals; print the new keys once."""
    workspace = _workspace()
    # A folder that was there before holds someone's files (a repository can ship its
    # policy, principals and config.toml, and init keeps them): not trusted by init.
    made_here = not workspace.folder.exists()
    with _errors():
        result = workspace.init()
    # Made here by this user: the coding-agent hooks may record into it (a .cairn that
    # comes with a cloned repository is not trusted until `cairn hooks trust`).
    why_not = "the folder was there before; read its config.toml first"
    if made_here:
        try:
            trust_store(result.folder)
            why_not = ""
        except (OSError, ValueError) as exc:
            why_not = str(exc)
    if why_not:
        note = f"note: the hooks record nothing into it until `cairn hooks trust`: {why_not}"
        render.err.print(note, markup=False)
    if _want_json():
        render.print_json({"store": str(result.folder), "keys": result.keys})
        return
    render.out.print(f"created cairn store in {result.folder}")
    render.out.print(f"  policy:     {result.folder / 'policy.yaml'}")
    render.out.print(f"  principals: {result.folder / 'principals.yaml'}")
    for principal_id, key in result.keys.items():
        render.out.print(f"  key for {principal_id}: {key}")
    render.out.print("These keys are shown only now. export CAIRN_API_KEY=<key> to use one.")


@app.command()
def remember(
    kind: Annotated[str, typer.Option(help="decision, belief, episode, skill, fact, document…")],
    scope: Annotated[str, typer.Option(help="Where it lives, e.g. acme/product.")],
    title: Annotated[str, typer.Option(help="A one-line title.")],
    body: Annotated[str | None, typer.Option(help="The text.")] = None,
    body_file: Annotated[
        Path | None, typer.Option(help="Read the text from a file ('-': stdin).")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option(help="A tag (repeatable).")] = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object.")] = None,
    role: Annotated[list[str] | None, typer.Option(help="ACL: a role that may read.")] = None,
    label: Annotated[list[str] | None, typer.Option(help="ACL: a label readers must hold.")] = None,
    sensitivity: Annotated[Sensitivity, typer.Option(help="ACL sensitivity.")] = Sensitivity.LOW,
    confidence: Annotated[Confidence, typer.Option()] = Confidence.INFERRED,
    valid_from: TimeOpt = None,
    valid_to: TimeOpt = None,
    path: Annotated[
        list[str] | None, typer.Option(help="A repository path it describes (drift).")
    ] = None,
    source: Annotated[str | None, typer.Option(help="Provenance: where it came from.")] = None,
    draft: Annotated[bool, typer.Option(help="Record a draft candidate instead.")] = False,
    reason: Annotated[str | None, typer.Option(help="Why (kept in the audit log).")] = None,
) -> None:
    """Propose a new record; the policy decides whether it waits for a curator."""
    with _session() as (memory, principal):
        acl_fields: dict[str, Any] = {"sensitivity": sensitivity}
        if role:
            acl_fields["roles"] = tuple(role)
        if label:
            acl_fields["labels"] = tuple(label)
        new = Content(
            kind=kind,
            scope=scope,
            title=title,
            body=_body(body, body_file) or "",
            tags=tuple(tag or ()),
            metadata=_json_arg(metadata, "metadata"),
            acl=Acl(**acl_fields),
            origin=principal.kind.value,
            confidence=confidence,
            valid_from=valid_from,
            valid_to=valid_to,
            provenance=Provenance(source=source),
        )
        outcome = memory.remember(
            new, principal=principal, draft=draft, paths=tuple(path or ()), reason=reason
        )
        _show_outcome(outcome)


@app.command()
def update(
    record_id: str,
    title: Annotated[str | None, typer.Option()] = None,
    body: Annotated[str | None, typer.Option()] = None,
    body_file: Annotated[Path | None, typer.Option()] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Replace the tags.")] = None,
    metadata: Annotated[str | None, typer.Option(help="Replace the metadata (JSON).")] = None,
    confidence: Annotated[Confidence | None, typer.Option()] = None,
    base: Annotated[str | None, typer.Option(help="The version id you read (pins it).")] = None,
    reason: ReasonOpt = None,
) -> None:
    """Propose a new version of a record, pinned to the version you read."""
    with _session() as (memory, principal):
        patch = ContentPatch(
            title=title,
            body=_body(body, body_file),
            tags=tuple(tag) if tag else None,
            metadata=_json_arg(metadata, "metadata") if metadata is not None else None,
            confidence=confidence,
        )
        outcome = memory.update(
            record_id, patch, principal=principal, base_version_id=base, reason=reason
        )
        _show_outcome(outcome)


@app.command()
def supersede(
    record_id: str,
    by: Annotated[str | None, typer.Option(help="An existing record that replaces it.")] = None,
    title: Annotated[str | None, typer.Option(help="Or: the replacement's title.")] = None,
    body: Annotated[str | None, typer.Option(help="The replacement's text.")] = None,
    reason: ReasonOpt = None,
) -> None:
    """Propose that a record is superseded by another (existing or new) one."""
    with _session() as (memory, principal):
        if by is None and title is None:
            raise InvalidInput("give --by RECORD_ID or --title for a new record", field="by")
        patch = None if by is not None else ContentPatch(title=title, body=body)
        outcome = memory.supersede(
            record_id, principal=principal, by=by, patch=patch, reason=reason
        )
        _show_outcome(outcome)


@app.command()
def archive(record_id: str, reason: ReasonOpt = None) -> None:
    """Archive a record (soft; a curator can restore it)."""
    with _session() as (memory, principal):
        _show_outcome(memory.archive(record_id, principal=principal, reason=reason))


@app.command()
def restore(record_id: str, reason: ReasonOpt = None) -> None:
    """Restore an archived record to active (curators)."""
    with _session() as (memory, principal):
        _show_outcome(memory.restore(record_id, principal=principal, reason=reason))


@app.command()
def transition(
    record_id: str,
    to: Annotated[Status, typer.Option(help="The target status.")],
    reason: ReasonOpt = None,
) -> None:
    """Move a record along the lifecycle (e.g. promote a draft: --to active)."""
    with _session() as (memory, principal):
        outcome = memory.transition(record_id, to, principal=principal, reason=reason)
        _show_outcome(outcome)


@app.command()
def get(
    record_id: str,
    version: Annotated[int | None, typer.Option(help="A version number.")] = None,
    selector: Annotated[PinKind, typer.Option(help="Which version to read.")] = (PinKind.HEAD),
    baseline: Annotated[str | None, typer.Option(help="Baseline id for baseline_ref.")] = None,
    version_id: Annotated[str | None, typer.Option(help="Version id for version_ref.")] = None,
) -> None:
    """Read one record at a pinned version."""
    with _session() as (memory, principal):
        chosen = VersionPin(kind=selector, baseline_id=baseline, version_id=version_id)
        view = memory.get(record_id, principal=principal, selector=chosen, version=version)
        if _want_json():
            render.print_json(view)
            return
        r, v = view.record, view.version
        kind, scope = render.literal(r.kind), render.literal(r.scope)
        render.out.print(f"[bold]{render.literal(v.content.title)}[/]")
        render.out.print(
            f"{r.id} · {kind} · {scope} · {r.status.value} · v{v.number}/{r.current_version}"
        )
        render.out.print(f"cite: ({r.id}, {v.id}) via {view.selector_used.kind.value}")
        if r.superseded_by:
            render.out.print(f"superseded → current: {view.resolved_id}")
        render.out.print(
            f"origin {v.content.origin.value} · confidence {v.content.confidence.value}"
        )
        if v.content.tags:
            render.out.print("tags: " + render.literal(", ".join(v.content.tags)))
        if v.content.metadata:
            render.out.print("metadata: " + render.literal(json.dumps(v.content.metadata)))
        render.out.print("")
        render.out.print(v.content.body, markup=False)


@app.command("list")
def list_(
    kind: Annotated[list[str] | None, typer.Option(help="Filter by kind (repeatable).")] = None,
    status: Annotated[list[Status] | None, typer.Option(help="Filter by status.")] = None,
    scope: Annotated[str | None, typer.Option(help="A scope glob, e.g. 'acme/*'.")] = None,
    created_after: TimeOpt = None,
    created_before: TimeOpt = None,
    metadata: Annotated[
        str | None, typer.Option(help="JSON object the metadata must match.")
    ] = None,
    limit: Annotated[
        int, typer.Option("-k", "--limit", min=1, max=10_000, help="At most this many.")
    ] = 100,
    offset: Annotated[int, typer.Option(min=0)] = 0,
) -> None:
    """List records you may see."""
    with _session() as (memory, principal):
        query = RecordQuery(
            kinds=tuple(kind or ()),
            statuses=tuple(status or ()),
            scope=scope,
            created_after=created_after,
            created_before=created_before,
            metadata=_json_arg(metadata, "metadata"),
            limit=limit,
            offset=offset,
        )
        _run(
            lambda: memory.list_records(query, principal=principal),
            lambda rs: render.out.print(render.records_table(rs)),
        )


@app.command()
def history(record_id: str) -> None:
    """Every version of a record, oldest first."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.history(record_id, principal=principal),
            lambda vs: render.out.print(render.versions_table(vs, f"history of {record_id}")),
        )


@review_app.command("list")
def review_list(
    status: Annotated[ProposalStatus, typer.Option()] = ProposalStatus.PENDING,
    limit: Annotated[int, typer.Option("-k", "--limit", min=1, help="At most this many.")] = 100,
) -> None:
    """Proposals waiting for review (stale ones are marked)."""
    with _session() as (memory, principal):
        found = memory.proposals(principal=principal, status=status, limit=limit)
        if _want_json():
            render.print_json(found)  # as GET /v1/proposals answers
            return
        stale = {p.id for p in found if p.status is ProposalStatus.PENDING and memory.is_stale(p)}
        render.out.print(render.proposals_table(found, stale, f"{status.value} proposals"))


@review_app.command("show")
def review_show(proposal_id: str) -> None:
    """One proposal: its target, the pinned version and the proposed change."""
    with _session() as (memory, principal):
        proposal = memory.proposal(proposal_id, principal=principal)
        if _want_json():
            render.print_json(proposal)  # as GET /v1/proposals/{id} answers
            return
        stale = proposal.status is ProposalStatus.PENDING and memory.is_stale(proposal)
        scope, by = render.literal(proposal.scope), render.literal(proposal.principal_id)
        render.out.print(f"[bold]{proposal.id}[/] {proposal.change.op} in {scope}")
        render.out.print(
            f"by {by} · {proposal.status.value}"
            + (" · [red]STALE: rebase before accepting[/]" if stale else "")
        )
        if proposal.record_id:
            render.out.print(f"target {proposal.record_id} pinned at {proposal.base_version_id}")
        render.print_json(proposal.change)


@review_app.command("approve")
def review_approve(proposal_id: str, reason: ReasonOpt = None) -> None:
    """Accept a proposal (curators). Stale proposals are refused: rebase first."""
    with _session() as (memory, principal):
        outcome = memory.decide(proposal_id, approve=True, principal=principal, reason=reason)
        _show_outcome(outcome)


@review_app.command("reject")
def review_reject(
    proposal_id: str,
    reason: Annotated[str, typer.Option(help="Why (required).")],
) -> None:
    """Reject a proposal with a reason (curators)."""
    with _session() as (memory, principal):
        outcome = memory.decide(proposal_id, approve=False, principal=principal, reason=reason)
        _show_outcome(outcome)


@app.command()
def rebase(proposal_id: str) -> None:
    """Re-pin a stale proposal on the current version (a new, linked proposal)."""
    with _session() as (memory, principal):
        _show_outcome(memory.rebase(proposal_id, principal=principal))


@app.command()
def publish(
    scope: Annotated[str, typer.Option(help="The scope whose published pointer moves.")],
    record: Annotated[list[str] | None, typer.Option(help="Publish only these records.")] = None,
    name: Annotated[str | None, typer.Option(help="A name for the baseline.")] = None,
    replace: Annotated[bool, typer.Option(help="Drop records not named.")] = False,
    reason: ReasonOpt = None,
) -> None:
    """Promote record versions into a new baseline and publish it (curators)."""
    with _session() as (memory, principal):
        outcome = memory.publish(
            scope,
            principal=principal,
            record_ids=record,
            name=name,
            replace=replace,
            reason=reason,
        )
        _show_outcome(outcome)
        if not _want_json():
            render.out.print(
                f"published pointer of {scope} → "
                f"{memory.published_baseline_id(scope, principal=principal)}"
            )


@app.command()
def refresh() -> None:
    """Re-hash linked files: mark drifted records stale, re-activate matching ones."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.refresh(principal=principal),
            lambda r: render.out.print(
                f"checked {r.checked} records · stale: {', '.join(r.marked_stale) or 'none'}"
                f" · re-activated: {', '.join(r.reactivated) or 'none'}"
            ),
        )


@app.command()
def audit(
    actor: Annotated[str | None, typer.Option()] = None,
    action: Annotated[str | None, typer.Option(help="propose, approve, reject, rebase…")] = None,
    subject: Annotated[str | None, typer.Option(help="A record id.")] = None,
    proposal: Annotated[str | None, typer.Option()] = None,
    since: TimeOpt = None,
    limit: Annotated[int, typer.Option("-k", "--limit", min=1, help="At most this many.")] = 100,
) -> None:
    """The append-only audit log, filtered (curators)."""
    with _session() as (memory, principal):
        query = AuditQuery(
            actor=actor,
            action=action,
            subject_id=subject,
            proposal_id=proposal,
            since=since,
            limit=limit,
        )
        _run(
            lambda: memory.audit(query, principal=principal),
            lambda es: render.out.print(render.audit_table(es)),
        )


@app.command()
def vacuum() -> None:
    """Archive drafts, rejected and stale records past the policy's retention."""
    with _session() as (memory, principal):
        _run(
            lambda: memory.vacuum(principal=principal),
            lambda r: render.out.print(f"archived {len(r.archived)} records"),
        )


@app.command()
def status(embedder: EmbedderOpt = None) -> None:
    """Counts of what you may see: the whole store (records, versions, proposals, audit, the
    vector lag) for a curator of every scope; your readable records and proposals otherwise."""
    with _reader(embedder=embedder) as (memory, principal):
        counts = memory.status(principal=principal)
        if _want_json():
            render.print_json({"store": str(_store_path()), "counts": counts})
            return
        render.out.print(f"store {_store_path()}")
        for name, value in sorted(counts.items()):
            render.out.print(f"  {name:<22} {value}")


def _items_table(items: Sequence[Item], title: str) -> Table:
    columns = [
        render.Column("#"),
        render.Column("record", ident=True),
        render.Column("v", drop=3),
        render.Column("kind", drop=4),
        render.Column("title"),
        render.Column("why", drop=2),
        render.Column("score", drop=5),
        render.Column("conf", drop=6),
    ]
    rows = [
        (
            str(n),
            item.record_id,
            str(item.version),
            item.kind,
            item.title,
            ", ".join(w.replace("_match", "") for w in item.why_included),
            f"{item.scores.fused:.4f}",
            f"{item.scores.confidence or 0:.2f}",
        )
        for n, item in enumerate(items, start=1)
    ]
    return render.table(title, columns, rows)


def _show_retrieval(result: RetrievalResult) -> None:
    render.out.print(_items_table(result.items, f"{len(result.items)} items ({result.mode})"))
    for item in result.items:
        cite = item.citations[0]
        render.out.print(f"  cite ({cite.record_id}, {cite.version_id}) {cite.chunk_key or ''}")
    for c in result.contradictions:
        render.out.print(
            f"[yellow]contradiction[/] {c.record_ids[0]} ↔ {c.record_ids[1]}: {c.reason}"
        )
    if result.token_budget_exceeded:
        render.out.print(f"{result.excluded_count} more left out by the token budget")
    for warning in result.warnings:
        render.out.print(f"[yellow]warning[/] {render.literal(warning)}")
    timings = ", ".join(f"{k} {v:.1f} ms" for k, v in result.trace.timings_ms.items())
    render.out.print(f"[dim]{timings}[/]")


@app.command()
def search(
    query: str,
    mode: Annotated[str, typer.Option(help="hybrid, keyword or vector.")] = "hybrid",
    k: Annotated[
        int, typer.Option("-k", "--limit", min=1, max=1000, help="At most this many items.")
    ] = 10,
    old_k: Annotated[
        int | None, typer.Option("--k", min=1, max=1000, hidden=True, show_default=False)
    ] = None,
    scope: Annotated[str | None, typer.Option(help="A scope glob.")] = None,
    kind: Annotated[list[str] | None, typer.Option(help="Only these kinds.")] = None,
    include_drafts: Annotated[bool, typer.Option(help="Include draft records.")] = False,
    selector: Annotated[PinKind, typer.Option()] = PinKind.HEAD,
    baseline: Annotated[str | None, typer.Option(help="Baseline id for baseline_ref.")] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="The token budget.")] = 8000,
    embedder: EmbedderOpt = None,
    store: StoreOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Validated hybrid retrieval: permission-trimmed, fused, cited, within a token budget."""
    if old_k is not None:
        # --k was this option's name before -k/--limit; scripts that use it keep working
        render.err.print("[yellow]warning[/] --k is deprecated: use -k or --limit")
        k = old_k
    with _reader(store, key, embedder) as (memory, principal):
        result = memory.retrieve(
            query,
            principal=principal,
            mode=_mode(mode),
            k=k,
            scope=scope,
            kinds=kind or (),
            include_drafts=include_drafts,
            max_tokens=max_tokens,
            selector=VersionPin(kind=selector, baseline_id=baseline),
        )
        if _want_json(as_json):
            render.print_json(result)
        else:
            _show_retrieval(result)


def _mode(mode: str) -> Mode:
    if mode not in ("hybrid", "keyword", "vector"):
        raise InvalidInput(f"unknown mode {mode!r}: hybrid, keyword or vector", field="mode")
    return mode  # type: ignore[return-value]


@app.command()
def context(
    query: Annotated[str | None, typer.Argument(help="What to look for.")] = None,
    scope: Annotated[str, typer.Option(help="The scope to read.")] = "",
    record: Annotated[str | None, typer.Option(help="Fetch this record instead.")] = None,
    selector: Annotated[PinKind, typer.Option()] = PinKind.PUBLISHED,
    baseline: Annotated[str | None, typer.Option()] = None,
    max_tokens: Annotated[int, typer.Option(min=1)] = 8000,
    embedder: EmbedderOpt = None,
    store: StoreOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What an agent reads before it works: version-pinned context of a scope, published by
    default."""
    with _reader(store, key, embedder) as (memory, principal):
        request = ReadContextRequest(
            scope=scope,
            query=query,
            record_id=record,
            max_tokens=max_tokens,
            selector=VersionPin(kind=selector, baseline_id=baseline),
        )
        response = memory.read_context(request, principal=principal)
        if _want_json(as_json):
            render.print_json(response)
            return
        render.out.print(
            _items_table(
                response.items, f"context of {response.scope} ({response.selector_used.kind.value})"
            )
        )
        for warning in response.warnings:
            render.out.print(f"[yellow]warning[/] {render.literal(warning)}")


@app.command()
def validate(
    record_ids: Annotated[list[str], typer.Argument(help="Record ids you intend to rely on.")],
) -> None:
    """Check cited records: still current, active, valid, and not contradicting each other."""
    with _session() as (memory, principal):
        report = memory.validate(record_ids, principal=principal)
        if _want_json():
            render.print_json(report)
        for check in [] if _want_json() else report.records:
            verdict = (
                "[green]valid[/]" if check.valid else "[red]" + ", ".join(check.problems) + "[/]"
            )
            render.out.print(f"{check.record_id}: {verdict}")
        for c in [] if _want_json() else report.contradictions:
            render.out.print(
                f"[yellow]contradiction[/] {c.record_ids[0]} ↔ {c.record_ids[1]}: {c.reason}"
            )
        if not all(check.valid for check in report.records):
            raise typer.Exit(1)


@app.command()
def research(
    question: str,
    scope: Annotated[str | None, typer.Option(help="A scope glob.")] = None,
    max_tokens: Annotated[int, typer.Option(min=1)] = 4000,
    embedder: EmbedderOpt = None,
    store: StoreOpt = None,
    key: KeyOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The Researcher: plans, retrieves (up to 3 attempts) and answers with citations."""
    with _reader(store, key, embedder) as (memory, principal):
        answer = memory.research(question, principal=principal, scope=scope, max_tokens=max_tokens)
        if _want_json(as_json):
            render.print_json(answer)
            return
        render.out.print(answer.summary, markup=False)
        for warning in answer.warnings:
            render.out.print(f"[yellow]warning[/] {render.literal(warning)}")


@app.command()
def ingest(
    paths: Annotated[list[str], typer.Argument(help="Files, folders or globs ('docs/**/*.md').")],
    scope: Annotated[str, typer.Option(help="The scope the documents live in.")],
    kind: Annotated[str, typer.Option(help="The record kind.")] = "document",
) -> None:
    """Ingest markdown/text files as evidence (unchanged files create nothing)."""
    with _session() as (memory, principal), render.progress(_want_json()) as bar:
        task = bar.add_task("ingest", total=None)

        def step(done: int, total: int, name: str) -> None:
            bar.update(task, completed=done, total=total, description=f"ingest {name}")

        report = memory.ingest(paths, principal=principal, scope=scope, kind=kind, progress=step)
    if _want_json():
        render.print_json(report)
        return
    render.out.print(
        f"created {len(report.created)} · updated {len(report.updated)} · unchanged "
        f"{len(report.unchanged)} · queued {len(report.queued)} · rejected "
        f"{len(report.rejected)} · skipped {len(report.skipped)}"
    )


@app.command()
def reindex(embedder: EmbedderOpt = None) -> None:
    """Embed every chunk that has no vector yet (the dense index catches up). Reads never
    embed; `cairn serve` and `cairn mcp` embed new writes in the background."""
    quiet = _want_json()
    with _reader(embedder=embedder) as (memory, principal), render.progress(quiet) as bar:
        done = memory.reindex(principal=principal, progress=render.counting(bar, "embedding"))
    if _want_json():
        render.print_json({"embedded": done})
    elif done is None:  # the count is of every scope's writes: a curator of every scope's
        render.out.print("the vector index has caught up")
    else:
        render.out.print(f"embedded {done} chunk texts")


# The command's name before reads stopped embedding; kept so existing scripts still run.
app.command("index", hidden=True)(reindex)


@app.command()
def tour() -> None:
    """A guided end-to-end run on a fresh store in a temporary folder."""
    from cairn.doors.tour import run_tour

    with _errors():
        run_tour()


def main() -> None:
    app()


def _register_server_commands() -> None:
    # serve, mcp and keys live with the server doors; they register onto this app.
    from cairn.doors import cli_capture, cli_graph, cli_hooks, cli_server, cli_store
    from cairn.doors.cli_timeline import timeline_app

    cli_server.register(app)
    cli_store.register(app)
    cli_capture.register(app)
    app.add_typer(timeline_app, name="timeline")
    cli_hooks.register(app)
    cli_graph.register(app)


_register_server_commands()
