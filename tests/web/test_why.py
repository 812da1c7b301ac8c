"""The console's Why page: the decision graph's answer for the signed-in key's role, with
the audit drawer (edge types, withheld counts and reasons, prompt versus payload
exclusions, downloads), never a withheld word."""

from __future__ import annotations

import io
import zipfile

from cairn.graph.fixtures import example_fixtures, plan_graph
from tests.web.conftest import Console, sign_in

# Text of vertices hidden from staff in the example graph (see its README): a
# high-sensitivity EMEA event and its confidential holdout list.
ANCHOR = "acme-emea-end-onprem-connector-support-2025"


def _load_example(console: Console) -> None:
    with console.workspace.open_memory(embedder=None) as memory:
        curator = console.workspace.authenticate(console.curator_key)
        memory.graph_ingest(plan_graph(example_fixtures()), principal=curator)


def _hidden_text(console: Console) -> list[str]:
    """The titles and bodies of the example's vertices the agent (staff) may not read."""
    with console.workspace.open_memory(embedder=None) as memory:
        curator = console.workspace.authenticate(console.curator_key)
        agent = console.workspace.authenticate(console.agent_key)
        view = memory.graph_view(principal=agent)
        texts = []
        for plan in plan_graph(example_fixtures()).vertices:
            content = plan.content
            readable = view.in_domain(content.scope) and not (
                (content.acl.roles and "staff" not in content.acl.roles)
                or content.acl.sensitivity.value != "low"
                or not set(content.acl.labels) <= set(agent.labels)
            )
            if not readable:
                texts += [content.title, content.body]
        assert memory.graph_roles(principal=curator)
    found = [t for t in texts if len(t) > 20]
    assert found, "the example graph hides something from staff"
    return found


def test_staff_see_the_answer_with_the_drawer_and_no_withheld_text(console: Console) -> None:
    _load_example(console)
    client = console.client()
    sign_in(client, console.agent_key)
    page = client.get("/ui/why", params={"anchor": ANCHOR})
    assert page.status_code == 200, page.text
    html = page.text
    assert "Answer for the staff role" in html
    assert "Some evidence was withheld due to your permissions." in html
    assert "Audit drawer" in html and "withheld-1" in html
    assert "bundle_full: not allowed (acl:role_missing)" in html
    for text in _hidden_text(console):
        assert text not in html
    # the view bundle it links to downloads through the console session
    link = html.split('href="/ui/traces/')[1].split('"')[0]
    download = client.get(f"/ui/traces/{link}")
    assert download.status_code == 200
    names = zipfile.ZipFile(io.BytesIO(download.content)).namelist()
    assert "_meta.json" in names and "evidence_pre.json" not in names


def test_asking_as_a_higher_role_is_refused(console: Console) -> None:
    _load_example(console)
    client = console.client()
    sign_in(client, console.agent_key)
    page = client.get("/ui/why", params={"anchor": ANCHOR, "role": "director"})
    assert page.status_code == 403
    assert "may not ask as director" in page.text


def test_a_curator_asking_as_exec_sees_the_corporate_rationale(console: Console) -> None:
    _load_example(console)
    client = console.client()
    sign_in(client, console.curator_key)
    page = client.get("/ui/why", params={"anchor": "acme-corp-descope-onprem-2024"})
    assert page.status_code == 200
    assert "Answer for the exec role" in page.text
    assert "bundle_full</a>" in page.text
