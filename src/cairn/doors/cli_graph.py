"""``cairn graph …``, ``cairn why`` and ``cairn trace …``: load a decision graph, ask why a
decision came about as your role (or a lower one), and read or download an answer's trace.

``cairn why --json`` prints exactly the body ``POST /v1/graph/ask`` returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from cairn.doors import _render as render
from cairn.doors._cli_files import written_privately
from cairn.doors.cli import _errors, _run, _session, _want_json, _workspace
from cairn.errors import InvalidInput
from cairn.graph.fixtures import example_fixtures, plan_graph
from cairn.graph.verbs import GraphIngestReport
from cairn.graph.why import WhyBudgets, WhyRequest

__all__ = ["graph_app", "register", "trace_app"]

graph_app = typer.Typer(
    help="The decision graph: decisions and events joined by typed edges, each role "
    "walking only what its profile allows.",
    no_args_is_help=True,
)
trace_app = typer.Typer(help="Graph answers' traces: what was shown, withheld and why.")


@graph_app.command("ingest")
def ingest(
    folder: Annotated[
        Path | None,
        typer.Argument(
            help="A fixtures folder: decisions/, events/, transitions/, edges/aliases/."
        ),
    ] = None,
    example: Annotated[
        bool, typer.Option("--example", help="Load the ACME example graph shipped with cairn.")
    ] = False,
) -> None:
    """Check every file of a graph (its JSON Schema, and that every id it names exists),
    then write it through the gate in one transaction. A second run changes nothing and
    says so. Needs a curator's key."""
    with _errors():
        if (folder is None) == (not example):
            raise InvalidInput("give a fixtures folder, or --example", field="folder")
        plan = plan_graph(folder if folder is not None else example_fixtures())
    with _session() as (memory, principal):

        def show(report: GraphIngestReport) -> None:
            if not report.changed:
                render.out.print(
                    f"nothing to do: the graph is already stored "
                    f"({report.vertices_unchanged} vertices, {report.edges_unchanged} edges)"
                )
                return
            render.out.print(
                f"vertices: {report.vertices_created} created, {report.vertices_updated} "
                f"updated, {report.vertices_unchanged} unchanged; edges: "
                f"{report.edges_created} created, {report.edges_updated} updated, "
                f"{report.edges_unchanged} unchanged"
            )

        _run(lambda: memory.graph_ingest(plan, principal=principal), show)


@graph_app.command("roles")
def roles() -> None:
    """The role profiles you may ask as, with the policy key a passport names."""
    with _session() as (memory, principal):

        def show(found: list[dict[str, Any]]) -> None:
            table = Table(title="graph roles")
            table.add_column("role", no_wrap=True)
            table.add_column("domains")
            table.add_column("sensitivity")
            table.add_column("policy key", overflow="fold")
            for role in found:
                profile = role["profile"]
                table.add_row(
                    *map(render.literal, (role["role"], ", ".join(profile["domains"]),
                                          profile["sensitivity"], role["policy_key"])),
                )  # fmt: skip
            render.out.print(table)

        _run(lambda: memory.graph_roles(principal=principal), show)


def why(
    anchor: Annotated[str, typer.Argument(help="A decision's graph key or record id.")],
    as_role: Annotated[
        str | None,
        typer.Option("--as", help="Ask as this role (yours or a lower one); default: yours."),
    ] = None,
    question: Annotated[
        str | None, typer.Option("--question", "-q", help="Steer the ranking with a question.")
    ] = None,
    query: Annotated[
        bool, typer.Option("--query", help="Have the configured LLM write the answer.")
    ] = False,
    hops: Annotated[int, typer.Option(min=1, max=3, help="How far to walk.")] = 1,
    budget: Annotated[
        int, typer.Option(min=64, max=1_000_000, help="The context window, in tokens.")
    ] = 2048,
) -> None:
    """Why a decision came about, for your role: only what the role may walk and read is
    used, and the answer says when something was withheld."""
    with _session() as (memory, principal):
        request = WhyRequest(
            anchor=anchor,
            question=question,
            hops=hops,
            budgets=WhyBudgets(context_window=budget),
        )

        def show(body: dict[str, Any]) -> None:
            meta = body["_meta"]
            render.out.print(escape(body["answer"]))
            withheld = meta["policy_trace"]["counts"]
            render.out.print(
                f"[dim]role {render.literal(meta['actor']['role'])} · "
                f"{len(body['evidence'])} item(s) used · "
                f"hidden: {withheld['hidden_vertices']} vertices, {withheld['hidden_edges']} "
                f"edges · trace {body['trace_id']}[/]"
            )

        _run(
            lambda: memory.why(
                request, principal=principal, role=as_role, mode="query" if query else "ask"
            ),
            show,
        )


@trace_app.command("show")
def trace_show(trace_id: Annotated[str, typer.Argument(help="A trace id, trc_….")]) -> None:
    """An answer's trace: your own copy, or the audit copy if you curate its scope."""
    with _session() as (memory, principal):

        def show(found: dict[str, Any]) -> None:
            meta = found["files"]["_meta.json"]
            render.out.print(f"trace {found['trace_id']} ({found['view']} copy)")
            render.out.print(escape(found["files"]["envelope.json"]["text"]))
            trace = meta["policy_trace"]
            render.out.print(f"withheld: {escape(str(trace['reasons_by_id']))}")
            render.out.print(f"edge types used: {', '.join(trace['edge_types_used']) or '-'}")
            excluded = meta["evidence_sets"]["prompt_excluded_ids"]
            render.out.print(f"left out by the budget: {len(excluded)}")

        _run(lambda: memory.trace(trace_id, principal=principal), show)


@trace_app.command("download")
def trace_download(
    trace_id: Annotated[str, typer.Argument(help="A trace id, trc_….")],
    name: Annotated[str, typer.Argument(help="bundle_view or bundle_full.")] = "bundle_view",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Where to write the zip.")
    ] = None,
) -> None:
    """Write an answer's bundle (a zip) when its meta allows you to take it."""
    with _session() as (memory, principal):
        with _errors():
            data = memory.trace_download(trace_id, name, principal=principal)
            target = output or Path(f"{trace_id}-{name}.zip")
            # a bundle can hold what the store holds: written as an export is
            with written_privately(target, _workspace(), field="output") as out:
                out.buffer.write(data)  # a zip: its bytes go under the (empty) text layer
        if _want_json():
            render.print_json({"path": str(target), "bytes": len(data)})
        else:
            render.out.print(f"wrote {target} ({len(data):,} bytes)")


def register(app: typer.Typer) -> None:
    app.add_typer(graph_app, name="graph")
    app.command("why")(why)
    app.add_typer(trace_app, name="trace")
