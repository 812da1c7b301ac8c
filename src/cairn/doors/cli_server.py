"""CLI commands for the doors: ``cairn serve``, ``cairn mcp`` and ``cairn keys``.

``register(app)`` adds them to the main typer app. They take the global options
(``--store``, ``--db``, ``--key``, ``--json``) like every command (see ``_cli_common``); a
kernel error they let out is said and mapped to its exit code there.
"""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer

from cairn.auth import add_key, revoke_key, save_principals
from cairn.capture.local import socket_path
from cairn.config import Settings, load_settings
from cairn.doors import _render as render
from cairn.doors._cli_common import KeyOpt, api_key, db_url, store_path, want_json
from cairn.doors._net import host_port, http_base
from cairn.errors import InvalidInput, NotFound, Unauthenticated
from cairn.workspace import Workspace

__all__ = ["register"]

keys_app = typer.Typer(help="Manage API keys (shown once at creation; stored hashed).")


def _settings(**flags: Any) -> Settings:
    """flags > CAIRN_* > <store>/config.toml > defaults, for the store folder and database
    of the global options (the same layers as every command)."""
    return load_settings(store=store_path(), db=db_url(), **flags)


def _workspace() -> Workspace:
    settings = _settings()
    return Workspace(settings.store, db=settings.db)


class LogLevel(StrEnum):
    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


def serve_command(
    host: Annotated[
        str | None, typer.Option(help="interface to bind (default 127.0.0.1; CAIRN_HOST)")
    ] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (default 8765; CAIRN_PORT)")] = None,
    log_level: Annotated[LogLevel, typer.Option(help="how much the server logs")] = LogLevel.INFO,
    embedder: Annotated[
        str | None,
        typer.Option(help="embedder for vector search: minilm (default) or static; CAIRN_EMBEDDER"),
    ] = None,
    a2a_anonymous: Annotated[
        str | None,
        typer.Option(
            help="let A2A requests WITHOUT a key act as this low-privilege principal (never a "
            "curator); off by default, never applies to /v1 or /mcp. For conformance kits "
            "that send no credentials.",
            show_default=False,
        ),
    ] = None,
    socket: Annotated[
        bool,
        typer.Option(
            "--socket/--no-socket",
            help="also listen on the store's capture socket, for coding-agent hooks "
            "(owner-only; 'cairn daemon start' turns it on)",
        ),
    ] = False,
    tcp: Annotated[
        bool, typer.Option("--tcp/--no-tcp", help="listen on host:port (on by default)")
    ] = True,
    grpc_port: Annotated[
        int | None,
        typer.Option(
            help="also serve the timeline over gRPC on this port, with health and reflection "
            "(off by default; CAIRN_GRPC_PORT)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the HTTP API (/v1), MCP (/mcp) and the A2A agent (/) in one process, and the
    gRPC door when --grpc-port is given."""
    from cairn.doors.server import serve
    from cairn.search.embedder import check_embedder_spec

    settings = _settings(host=host, port=port, embedder=embedder, grpc_port=grpc_port)
    workspace = Workspace(settings.store, db=settings.db)
    if not workspace.exists():
        raise NotFound(f"no cairn store in {workspace.folder}: run 'cairn init'", field="store")
    if not tcp and not socket:
        raise InvalidInput("--no-tcp needs --socket: nothing to serve", field="tcp")
    if tcp and settings.grpc_port is not None and settings.grpc_port == settings.port:
        raise InvalidInput("--grpc-port must differ from --port", field="grpc_port")
    # a misspelt embedder is said now, not as a traceback once the server has started
    check_embedder_spec(settings.embedder)
    base = http_base(settings.host, settings.port)
    capture = socket_path(workspace.folder) if socket else None
    if capture is not None:
        typer.echo(f"cairn listens for coding-agent hooks on {capture}", err=True)
    grpc_line = ""
    if settings.grpc_port is not None:
        grpc_address = host_port(settings.host, settings.grpc_port)
        grpc_line = (
            f"  gRPC       {grpc_address}  cairn.timeline.v1.TimelineService, health, reflection\n"
        )
    if tcp:
        typer.echo(
            f"cairn serves {workspace.folder} on {base}\n"
            f"  HTTP API   {base}/v1   (docs: {base}/docs)\n"
            f"  MCP        {base}/mcp  claude mcp add --transport http cairn {base}/mcp "
            '--header "Authorization: Bearer $CAIRN_API_KEY"\n'
            f"  A2A        {base}/     card: {base}/.well-known/agent-card.json\n"
            f"{grpc_line}"
            "  every door takes Authorization: Bearer <key> (keys: cairn keys create); "
            "Ctrl-C stops",
            err=True,
        )
    serve(
        workspace,
        host=settings.host,
        port=settings.port,
        log_level=log_level.value,
        embedder=settings.embedder,
        a2a_anonymous=a2a_anonymous,
        grpc_port=settings.grpc_port,
        socket=capture,
        tcp=tcp,
    )


def mcp_command(key: KeyOpt = None) -> None:
    """Run the MCP server on stdio (for Claude Code and other MCP clients). The embedder is
    CAIRN_EMBEDDER, else <store>/config.toml's, else minilm, as for ``cairn serve``."""
    import logging

    from cairn.doors.mcp_server import build_mcp_server
    from cairn.doors.server import configure_logging

    # stdout carries the protocol and nothing else: every log line goes to stderr.
    configure_logging("warning")
    logging.getLogger("cairn").setLevel(logging.INFO)
    settings = _settings()
    workspace = Workspace(settings.store, db=settings.db)
    secret = api_key(key)
    if not secret:
        raise Unauthenticated("no API key: pass --key or set CAIRN_API_KEY")
    workspace.authenticate(secret)  # fail fast with a clear message, before any protocol
    memory = workspace.open_memory(embedder=settings.embedder)
    memory.start_indexing()  # vectors are made in the background, never in a read

    def principal_for(_ctx: object) -> Any:
        # Re-checked per call so a key revoked while the session runs stops working.
        return workspace.authenticate(secret)

    try:
        build_mcp_server(memory, principal_for).run("stdio")
    finally:
        memory.close()


@keys_app.command("create")
def keys_create(
    principal: Annotated[str, typer.Argument(help="principal id, e.g. agent or curator")],
    label: Annotated[str | None, typer.Option(help="a note to recognise the key by")] = None,
) -> None:
    """Create a key for a principal and print it (once)."""
    workspace = _workspace()
    updated, secret, made = add_key(workspace.principals(), principal, label=label)
    save_principals(workspace.principals_path, updated)
    if want_json():
        typer.echo(json.dumps({"id": made.id, "principal": principal, "key": secret}))
    else:
        typer.echo(f"key {made.id} for {principal} (shown once, keep it safe):\n{secret}")


@keys_app.command("list")
def keys_list() -> None:
    """List keys (ids, principals, state; never the keys themselves)."""
    rows = [
        {
            "id": k.id,
            "principal": p.id,
            "roles": list(p.roles),
            "label": k.label,
            "created_at": k.created_at.isoformat(),
            "revoked": k.revoked,
        }
        for p in _workspace().principals().principals
        for k in p.keys
    ]
    if want_json():
        typer.echo(json.dumps(rows))
    else:
        render.out.print(render.keys_table(rows))


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="the key id (key_…)")],
) -> None:
    """Revoke a key; requests with it are refused from the next request on."""
    workspace = _workspace()
    save_principals(workspace.principals_path, revoke_key(workspace.principals(), key_id))
    typer.echo(json.dumps({"revoked": key_id}) if want_json() else f"revoked {key_id}")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve_command)
    app.command("mcp")(mcp_command)
    app.add_typer(keys_app, name="keys")
