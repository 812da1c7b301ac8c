"""``cairn tour``: the whole governed loop on a fresh store, narrated step by step.

It uses only public verbs (``Workspace``, ``Memory``) with real keys, so it doubles as a
smoke test of the kernel: `make run` prints it, and tests/doors/test_cli.py runs it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.panel import Panel

from cairn.doors import _render as render
from cairn.errors import CairnError
from cairn.model import AuditQuery, Content, ContentPatch, VersionPin
from cairn.workspace import Workspace

__all__ = [
    "run_tour",
]


def run_tour(console: Console | None = None) -> None:
    # A fixed, roomy width: the tour is read in terminals and in CI logs alike.
    out = console or Console(highlight=False, width=110)
    step = 0

    def say(title: str, detail: str = "") -> None:
        nonlocal step
        step += 1
        out.print(Panel.fit(detail or title, title=f"step {step}: {title}", title_align="left"))

    with tempfile.TemporaryDirectory(prefix="cairn-tour-") as tmp:
        folder = Path(tmp) / ".cairn"
        workspace = Workspace(folder)
        keys = workspace.init().keys
        curator = workspace.authenticate(keys["curator"])
        agent = workspace.authenticate(keys["agent"])
        say("init", f"a fresh store in {folder}\nprincipals: curator (curator, admin), agent")

        with workspace.open_memory() as memory:
            belief = Content(
                kind="belief",
                scope="acme/app",
                title="How to run the tests",
                body="Run `make test`: it sets up the environment and runs ruff, mypy and pytest.",
                tags=("testing",),
            )
            proposed = memory.remember(belief, principal=agent)
            say(
                "propose",
                f"the agent proposes a belief → {proposed.decision.value}d "
                f"(rule {proposed.proposal.rule}: {proposed.feedback})",
            )

            queue = memory.proposals(principal=curator)
            out.print(render.proposals_table(queue, set(), "review queue"))
            try:
                memory.decide(proposed.proposal.id, approve=True, principal=agent)
            except CairnError as exc:
                say("agents cannot approve", f"the agent tries to approve it: refused ({exc.code})")

            approved = memory.decide(
                proposed.proposal.id, approve=True, principal=curator, reason="matches the Makefile"
            )
            assert approved.record is not None and approved.version is not None
            record_id = approved.record.id
            say(
                "review and approve",
                f"the curator approves → record {record_id} v{approved.version.number} is active",
            )

            view = memory.get(record_id, principal=agent)
            say(
                "read with a pinned version",
                f"{view.version.content.title!r}\ncite: ({view.record.id}, {view.version.id})",
            )

            agents_edit = memory.update(
                record_id,
                ContentPatch(body=belief.body + " Use `make test -j2` on two cores."),
                principal=agent,
                base_version_id=view.version.id,
            )
            curators_edit = memory.update(
                record_id,
                ContentPatch(body=belief.body + " CI runs the same command."),
                principal=curator,
            )
            assert curators_edit.version is not None
            say(
                "two edits race",
                f"the agent's update is {agents_edit.decision.value}d (pinned to v1); meanwhile "
                f"the curator's own edit lands as v{curators_edit.version.number}",
            )
            try:
                memory.decide(agents_edit.proposal.id, approve=True, principal=curator)
            except CairnError as exc:
                say("stale proposal blocked", f"{exc.code}: {exc.message}")

            rebased = memory.rebase(agents_edit.proposal.id, principal=agent)
            merged = memory.decide(rebased.proposal.id, approve=True, principal=curator)
            assert merged.version is not None
            say(
                "rebase",
                f"rebase made {rebased.proposal.id} pinned to the head; approved → "
                f"v{merged.version.number}",
            )

            published = memory.publish("acme/app", principal=curator, name="first release")
            pinned = memory.get(record_id, principal=agent, selector=VersionPin.published())
            say(
                "publish",
                f"publishing is a governed change too ({published.proposal.rule}); "
                f"readers of 'published' now see v{pinned.version.number}",
            )

            try:
                memory.remember(
                    belief.model_copy(update={"body": pinned.version.content.body}), principal=agent
                )
            except CairnError as exc:
                say("duplicates refused", exc.message)

            entries = memory.audit(AuditQuery(limit=1000), principal=curator)
            out.print(render.audit_table(entries))
            counts = memory.status(principal=curator)
            say(
                "audit",
                f"{len(entries)} audit entries: {counts['proposals']} proposals, "
                f"{counts['versions']} versions, {counts['baselines']} baseline; "
                "every decision names its actor and rule",
            )
    out.print("[bold green]tour complete[/]")
