"""Ingest reads only what a curator opened to the caller, and never the store's own secrets.

The attack this closes: an agent key asked ``cairn serve`` to ingest ``.cairn/principals.yaml``
(or a file a symbolic link led to); the text was stored as an auto-approved record or sat in
the agent's own pending proposal, readable by the agent, and held the curator's key.
"""

from __future__ import annotations

import stat
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from cairn.doors.cli import app
from cairn.errors import CairnError, NotFound, PermissionDenied
from cairn.ingest.files import IngestArea, confined_file
from tests.doors.conftest import free_port, start_server, stop_server, wait_ready
from tests.security.conftest import AGENT_INGESTS_DOCS, Project

SECRET = "zz-secret-marker-zz"


def _nothing_stored(project: Project) -> None:
    counts = project.memory.status(principal=project.curator)
    assert counts["records"] == 0 and counts["proposals"] == 0, counts


def _project(project_factory: Callable[..., Project], backend: str, policy: str) -> Project:
    project = project_factory(policy, backend=backend)
    docs = project.root / "docs"
    docs.mkdir()
    (docs / "guide.md").write_text("# Guide\n\nHow we work.\n")
    (project.root / "notes.md").write_text(f"# Notes\n\n{SECRET}\n")
    (project.root / ".env").write_text(f"TOKEN={SECRET}\n")
    return project


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_agent_ingests_nothing_unless_a_root_is_opened_to_it(
    project_factory: Callable[..., Project], backend: str
) -> None:
    from cairn.governance.policy import DEFAULT_POLICY_YAML

    project = _project(project_factory, backend, DEFAULT_POLICY_YAML)
    for pattern in ("docs/guide.md", "notes.md", "**/*.md", ".cairn/principals.yaml"):
        with pytest.raises(PermissionDenied, match="no ingest root is open to your roles"):
            project.memory.ingest([pattern], principal=project.agent, scope="acme/app")
    _nothing_stored(project)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_an_agent_ingests_only_under_its_roots(
    project_factory: Callable[..., Project], backend: str
) -> None:
    project = _project(project_factory, backend, AGENT_INGESTS_DOCS)
    with pytest.raises(PermissionDenied, match="not under an ingest root open to you"):
        project.memory.ingest(["notes.md"], principal=project.agent, scope="acme/app")
    with pytest.raises(PermissionDenied, match="not under an ingest root"):
        project.memory.ingest(["*.md"], principal=project.agent, scope="acme/app")
    _nothing_stored(project)
    report = project.memory.ingest(["docs"], principal=project.agent, scope="acme/app")
    assert len(report.queued) == 1  # documents from agents wait for a curator


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_store_folder_and_dot_files_are_never_read(
    project_factory: Callable[..., Project], backend: str
) -> None:
    project = _project(project_factory, backend, AGENT_INGESTS_DOCS)
    curator = project.curator
    refused = {
        ".cairn/principals.yaml": "dot-files or dot-folders",
        ".cairn": "dot-files or dot-folders",
        ".cairn/*": "dot-files or dot-folders",
        ".env": "dot-files or dot-folders",
        "docs/../.cairn/policy.yaml": "without '..'",
        "../project0/.cairn/principals.yaml": "without '..'",
        str(project.folder / "principals.yaml"): "dot-files or dot-folders",
        "/etc/hostname": "relative to the project",
    }
    for pattern, why in refused.items():
        with pytest.raises(CairnError, match=why):
            project.memory.ingest([pattern], principal=curator, scope="acme/app")
    # Globs never descend into dot-folders or match dot-files: the store's files are not
    # among what "everything" matches.
    report = project.memory.ingest(["**/*"], principal=curator, scope="acme/app")
    titles = sorted(r.content.title for r in project.store.get_records(report.created).values())
    assert titles == ["Guide", "Notes"]
    for record in project.store.get_records(report.created).values():
        assert project.keys["curator"] not in record.content.body


def test_a_store_folder_without_a_dot_is_never_read(
    project_factory: Callable[..., Project],
) -> None:
    project = project_factory(name="memory-store")
    (project.root / "readme.md").write_text("# Readme\n")
    for pattern in ("memory-store/principals.yaml", "memory-store", "*/principals.yaml"):
        with pytest.raises(PermissionDenied, match=r"store folder|outside its root"):
            project.memory.ingest([pattern], principal=project.curator, scope="acme/app")
    _nothing_stored(project)


def test_a_symbolic_link_may_not_lead_out_of_its_root(
    project_factory: Callable[..., Project],
) -> None:
    project = _project(project_factory, "sqlite", AGENT_INGESTS_DOCS)
    docs = project.root / "docs"
    (docs / "keys.md").symlink_to(project.folder / "principals.yaml")
    (docs / "notes.md").symlink_to(project.root / "notes.md")  # inside the project, not docs
    (docs / "hostname.md").symlink_to("/etc/hostname")
    (docs / "up").symlink_to(project.root, target_is_directory=True)
    for pattern in ("docs/keys.md", "docs/notes.md", "docs/hostname.md", "docs"):
        with pytest.raises(PermissionDenied, match=r"outside its root|store folder"):
            project.memory.ingest([pattern], principal=project.agent, scope="acme/app")
    # the curator's root is the whole project: a link into the store folder is still refused
    with pytest.raises(PermissionDenied, match=r"outside its root|store folder"):
        project.memory.ingest(["docs/keys.md"], principal=project.curator, scope="acme/app")
    _nothing_stored(project)


def test_a_root_may_name_a_dot_folder_itself(
    project_factory: Callable[..., Project],
) -> None:
    policy = AGENT_INGESTS_DOCS.replace(
        "    - path: docs\n", "    - path: .github\n      roles: [agent]\n    - path: docs\n"
    )
    project = project_factory(policy)
    github = project.root / ".github"
    github.mkdir()
    (github / "CONTRIBUTING.md").write_text("# Contributing\n\nOpen a pull request.\n")
    (github / ".hidden.md").write_text(f"# Hidden\n\n{SECRET}\n")
    report = project.memory.ingest([".github"], principal=project.agent, scope="acme/app")
    assert len(report.queued) == 1
    with pytest.raises(PermissionDenied, match="dot-files"):
        project.memory.ingest([".github/.hidden.md"], principal=project.agent, scope="acme/app")


def test_path_links_hash_only_files_ingest_could_read(
    project_factory: Callable[..., Project],
) -> None:
    project = project_factory()
    (project.root / "src").mkdir()
    (project.root / "src" / "app.py").write_text("print('hi')\n")
    area = IngestArea(project.root, (".",), project.folder)
    assert confined_file(area, "src/app.py") is not None
    for path in (".cairn/principals.yaml", "../x", "/etc/hostname", ".env", "src/../.cairn"):
        assert confined_file(area, path) is None, path


def test_keys_are_stored_as_hashes_only(project_factory: Callable[..., Project]) -> None:
    project = project_factory()
    text = (project.folder / "principals.yaml").read_text()
    for key in project.keys.values():
        assert key not in text
        assert key[len("cairn_") :] not in text


def test_ingest_refusals_through_the_http_and_cli_doors(
    project_factory: Callable[..., Project], tmp_path: Path
) -> None:
    project = _project(project_factory, "sqlite", AGENT_INGESTS_DOCS)
    project.memory.close()
    agent = project.keys["agent"]
    port = free_port()
    server = start_server(project.folder, port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_ready(url, server)
        for pattern in (".cairn/principals.yaml", "notes.md", "docs/../.cairn/principals.yaml"):
            response = httpx.post(
                f"{url}/v1/ingest",
                json={"paths": [pattern], "scope": "acme/app"},
                headers={"Authorization": f"Bearer {agent}"},
                timeout=30,
            )
            assert response.status_code in (403, 422), (pattern, response.text)
            assert response.headers["content-type"] == "application/problem+json"
            assert project.keys["curator"] not in response.text
        queue = httpx.get(
            f"{url}/v1/proposals",
            headers={"Authorization": f"Bearer {project.keys['curator']}"},
            timeout=30,
        )
        assert queue.json() == []
    finally:
        stop_server(server)
    done = CliRunner().invoke(
        app,
        ["ingest", ".cairn/principals.yaml", "--scope", "acme/app",
         "--store", str(project.folder), "--key", agent],
    )  # fmt: skip
    assert done.exit_code == PermissionDenied.exit_code, done.output
    assert "not under an ingest root" in done.stderr
    assert project.keys["curator"] not in done.output


def test_the_store_folder_is_private(project_factory: Callable[..., Project]) -> None:
    project = project_factory()
    assert stat.S_IMODE(project.folder.stat().st_mode) == 0o700
    for name in ("principals.yaml", "policy.yaml", "cairn.db"):
        assert stat.S_IMODE((project.folder / name).stat().st_mode) == 0o600, name


def test_a_pattern_outside_every_root_is_refused_before_the_file_system_is_read(
    project_factory: Callable[..., Project],
) -> None:
    """The refusal is the same whether or not the file exists: no existence oracle."""
    project = _project(project_factory, "sqlite", AGENT_INGESTS_DOCS)
    messages = []
    for pattern in ("notes.md", "no-such-file.md"):
        with pytest.raises(PermissionDenied) as refused:
            project.memory.ingest([pattern], principal=project.agent, scope="acme/app")
        messages.append(refused.value.message.replace(pattern, "<pattern>"))
    assert messages[0] == messages[1]
    with pytest.raises(NotFound, match="nothing matches"):
        project.memory.ingest(["docs/none.md"], principal=project.agent, scope="acme/app")
