"""Ingest under attack from an agent: it never tells what a hidden record holds, never
reads a file swapped in after its path was checked, a hard link or a special file, never
walks a link loop for ever, and stamps the agent's records as the agent's."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from cairn.errors import InvalidInput, NotFound, PermissionDenied
from cairn.governance.policy import DEFAULT_POLICY_YAML, parse_policy
from cairn.ingest.files import MAX_HASHED_BYTES, IngestArea, hash_confined, read_text
from cairn.memory import Memory
from cairn.model import Origin, Principal, PrincipalKind
from cairn.store.sqlite import SqliteStore
from tests.factories import CURATOR

AGENT = Principal(id="bot", kind=PrincipalKind.AGENT, roles=("agent",), scopes=("team/a",))
OPEN_TO_AGENTS = DEFAULT_POLICY_YAML.replace(
    "    - path: .\n      roles: [curator, admin]\n",
    "    - path: .\n      roles: [curator, admin, agent]\n",
)


def _memory(root: Path) -> Memory:
    assert OPEN_TO_AGENTS != DEFAULT_POLICY_YAML
    store = SqliteStore(root / ".cairn" / "cairn.db")
    return Memory(store, parse_policy(OPEN_TO_AGENTS), root=root, folder=root / ".cairn",
                  embedder=None)  # fmt: skip


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".cairn").mkdir()
    (tmp_path / ".cairn" / "principals.yaml").write_text("keys: the store's own file\n")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "board.md").write_text("# Board\n\nThe board's minutes.\n")
    return tmp_path


def test_ingest_never_matches_a_record_the_agent_may_not_see(project: Path) -> None:
    memory = _memory(project)
    (hidden,) = memory.ingest(["docs/board.md"], principal=CURATOR, scope="exec/board").created
    # a scope the agent may not write is refused before any file or record is looked at:
    # no "unchanged" naming the curator's record, no answer that differs with its content
    with pytest.raises(PermissionDenied) as caught:
        memory.ingest(["docs/board.md"], principal=AGENT, scope="exec/board")
    assert hidden not in str(caught.value)
    (project / "docs" / "board.md").write_text("# Board\n\nA guess at the minutes.\n")
    with pytest.raises(PermissionDenied) as again:
        memory.ingest(["docs/board.md"], principal=AGENT, scope="exec/board")
    assert str(again.value) == str(caught.value)


def test_an_agents_ingested_record_is_the_agents(project: Path) -> None:
    memory = _memory(project)
    report = memory.ingest(["docs/board.md"], principal=AGENT, scope="team/a")
    (pending,) = report.queued
    proposal = memory.proposal(pending, principal=AGENT)
    assert proposal.change.content.origin is Origin.AGENT  # type: ignore[union-attr]


def _area(project: Path) -> IngestArea:
    return IngestArea(project, ("docs",), project / ".cairn")


def test_a_hard_link_or_a_special_file_is_never_read(project: Path) -> None:
    os.link(project / ".cairn" / "principals.yaml", project / "docs" / "keys.md")
    assert read_text(project / "docs" / "keys.md", 10_000, _area(project)) is None
    os.mkfifo(project / "docs" / "pipe.md")
    # opened without blocking and never read: a FIFO with no writer would hang a thread
    assert read_text(project / "docs" / "pipe.md", 10_000, _area(project)) is None
    assert read_text(project / "docs" / "board.md", 10_000, _area(project)) is not None


def test_a_file_swapped_for_a_link_after_its_check_is_never_read(project: Path) -> None:
    # the race, played out: a writer keeps swapping the file for a link into the store
    target = project / "docs" / "r.md"
    target.write_text("# R\n\nplain\n")
    stop = threading.Event()

    def swap() -> None:
        link = project / "docs" / "link.tmp"
        plain = project / "docs" / "plain.tmp"
        while not stop.is_set():
            link.symlink_to(project / ".cairn" / "principals.yaml")
            os.replace(link, target)
            plain.write_text("# R\n\nplain\n")
            os.replace(plain, target)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        texts = [read_text(target, 10_000, _area(project)) for _ in range(2_000)]
    finally:
        stop.set()
        swapper.join()
    assert not any(text and "the store's own file" in text for text in texts)


def test_a_link_loop_under_a_recursive_glob_ends(project: Path) -> None:
    (project / "docs" / "up").symlink_to("..")
    (project / "docs" / "again").symlink_to("..")
    memory = _memory(project)
    report = memory.ingest(["docs/**/*.md"], principal=CURATOR, scope="team/a")
    assert len(report.created) == 1  # board.md once; the links to folders are not walked


def test_a_linked_file_is_hashed_a_piece_at_a_time_and_only_up_to_a_bound(
    project: Path,
) -> None:
    area = IngestArea(project, (".",), project / ".cairn")
    big = project / "docs" / "big.bin"
    with big.open("wb") as out:
        out.truncate(MAX_HASHED_BYTES + 1)  # sparse: no disk used
    assert hash_confined(big, area) is None
    assert hash_confined(project / "docs" / "board.md", area) is not None
    assert hash_confined(project / ".cairn" / "principals.yaml", area) is None


def test_too_many_files_are_refused_before_any_is_read(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cairn.ingest.files as files
    import cairn.memory.writes as writes

    for n in range(5):
        (project / "docs" / f"n{n}.md").write_text(f"# Note {n}\n")
    monkeypatch.setattr(files, "MAX_RECORD_BATCH", 3)  # the batch limit, made small
    read: list[Path] = []
    monkeypatch.setattr(writes, "read_text", lambda path, *a: read.append(path))
    with pytest.raises(InvalidInput, match="more than 3 files match"):
        _memory(project).ingest(["docs"], principal=CURATOR, scope="team/a")
    assert read == []


def _memory_with_root(project: Path, root: str) -> Memory:
    """A memory whose policy opens only ``root`` to ingest, to agents and curators alike."""
    policy = OPEN_TO_AGENTS.replace("    - path: .\n", f"    - path: {root}\n")
    assert policy != OPEN_TO_AGENTS
    store = SqliteStore(project / ".cairn" / "cairn.db")
    return Memory(store, parse_policy(policy), root=project, folder=project / ".cairn",
                  embedder=None)  # fmt: skip


def test_a_root_that_links_out_of_the_project_opens_nothing(
    project: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # The policy opens "docs"; whoever can write the working tree makes "docs" a link to
    # another store's folder (or /etc): nothing there may be read through the root.
    elsewhere = tmp_path_factory.mktemp("other-store")
    (elsewhere / "principals.yaml").write_text("keys: another store's file\n")
    (elsewhere / "notes.md").write_text("# Notes\n\nsomeone else's notes\n")
    (project / "docs" / "board.md").unlink()
    (project / "docs").rmdir()
    (project / "docs").symlink_to(elsewhere)
    memory = _memory_with_root(project, "docs")
    for pattern in ("docs/principals.yaml", "docs/notes.md", "docs", "docs/*", "docs/**/*.md"):
        with pytest.raises(PermissionDenied, match="its ingest root is a symbolic link"):
            memory.ingest([pattern], principal=AGENT, scope="team/a")
    assert memory.proposals(principal=CURATOR) == []
    # and the check on the opened file, which re-reads go through, agrees
    area = IngestArea(project, ("docs",), project / ".cairn")
    assert read_text(project / "docs" / "notes.md", 10_000, area) is None
    assert hash_confined(project / "docs" / "notes.md", area) is None


def test_a_root_made_a_link_to_another_folder_of_the_project_opens_nothing(
    project: Path,
) -> None:
    # "notes" is open to agents; made a link to "docs" (a curators' folder, say) it would
    # hand them what other roots cover
    (project / "notes").symlink_to(project / "docs")
    memory = _memory_with_root(project, "notes")
    with pytest.raises(PermissionDenied, match="its ingest root is a symbolic link"):
        memory.ingest(["notes/board.md"], principal=AGENT, scope="team/a")
    # the same folder named as itself is open as before
    (project / "notes").unlink()
    (project / "notes").mkdir()
    (project / "notes" / "n.md").write_text("# N\n")
    assert len(memory.ingest(["notes/n.md"], principal=CURATOR, scope="team/a").created) == 1


def test_a_tree_nested_past_the_walk_depth_is_refused_with_a_clear_error(project: Path) -> None:
    # (a thousand levels would end Python 3.11's recursive os.walk in RecursionError)
    deep = (project / "docs").joinpath(*["d"] * 150)
    deep.mkdir(parents=True)
    (deep / "x.md").write_text("# Deep\n")
    memory = _memory(project)
    for pattern in ("docs", "docs/**/*.md", "**/*.md"):
        with pytest.raises(InvalidInput, match="nested more than 100 deep"):
            memory.ingest([pattern], principal=CURATOR, scope="team/a")


def test_the_folders_an_ingest_may_walk_are_bounded(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cairn.ingest.files as files

    many = project / "docs" / "many"
    for n in range(30):
        (many / f"f{n}").mkdir(parents=True)
    (many / "f0" / "x.md").write_text("# X\n")
    monkeypatch.setattr(files, "MAX_WALKED", 50)
    memory = _memory(project)
    # one pattern walks ~32 entries; the same pattern twice walks past the bound of 50
    assert len(memory.ingest(["docs/many/**/x.md"], principal=CURATOR, scope="t/a").created) == 1
    with pytest.raises(InvalidInput, match="more than 50 files and folders"):
        memory.ingest(["docs/many/**/x.md"] * 2, principal=CURATOR, scope="team/a")


def test_a_project_whose_path_looks_like_a_glob_ingests_its_own_files(
    tmp_path: Path,
) -> None:
    project = tmp_path / "pr[1]"
    sibling = tmp_path / "pr1"
    for folder, title in ((project, "Own"), (sibling, "Sibling")):
        (folder / "docs").mkdir(parents=True)
        (folder / "docs" / "a.md").write_text(f"# {title}\n")
    (project / ".cairn").mkdir()
    memory = _memory(project)
    (created,) = memory.ingest(["docs"], principal=CURATOR, scope="team/a").created
    assert memory.get(created, principal=CURATOR).record.content.title == "Own"


def test_a_file_named_like_a_pattern_is_found_by_its_name_and_odd_names_are_skipped(
    project: Path,
) -> None:
    (project / "docs" / "[x].md").write_text("# Bracketed\n")
    (project / "docs" / os.fsdecode(b"bad\xff.md")).write_text("# Not UTF-8 named\n")
    memory = _memory(project)
    (created,) = memory.ingest(["docs/[x].md"], principal=CURATOR, scope="team/a").created
    assert memory.get(created, principal=CURATOR).record.content.title == "Bracketed"
    report = memory.ingest(["docs/*.md"], principal=CURATOR, scope="team/a")
    # board.md is new, [x].md unchanged, the file whose name is not UTF-8 skipped by name
    assert (len(report.created), len(report.unchanged)) == (1, 1)
    assert report.skipped == ["docs/bad\\xff.md"]


def test_glob_parts_match_without_recursion_whatever_the_pattern_length() -> None:
    from cairn.ingest.files import _parts_match

    assert _parts_match(("a", "b", "c.md"), ("**", "*.md"))
    assert _parts_match(("c.md",), ("**", "**", "*.md"))
    assert _parts_match(("a", "x", "b", "c.md"), ("a", "**", "b", "*.md"))
    assert not _parts_match(("a", "b"), ("a", "**", "b", "*.md"))
    assert not _parts_match(("a", "c.txt"), ("**", "*.md"))
    long = ("d",) * 5_000
    assert _parts_match((*long, "x.md"), ("**", *long, "x.md"))
    assert not _parts_match(long, ("**", *long, "x.md"))


@pytest.mark.parametrize(("target", "pattern"), [(".env", "docs"), (".git", "docs/config")])
def test_a_root_made_a_link_to_a_dot_file_of_the_project_opens_nothing(
    project: Path, target: str, pattern: str
) -> None:
    (project / ".env").write_text("AWS_SECRET_ACCESS_KEY=hunter2\n")
    (project / ".git").mkdir()
    (project / ".git" / "config").write_text("url = https://ghp_TOKEN@example.com/x\n")
    (project / "docs" / "board.md").unlink()
    (project / "docs").rmdir()
    (project / "docs").symlink_to(target)
    memory = _memory_with_root(project, "docs")
    with pytest.raises(PermissionDenied, match="its ingest root is a symbolic link"):
        memory.ingest([pattern], principal=AGENT, scope="team/a")
    assert memory.proposals(principal=CURATOR) == []


def test_a_pattern_never_follows_links_to_folders_nor_outgrows_the_walk(project: Path) -> None:
    # two links to "." that a repository can ship: the standard glob took 2^n for n "*/"
    (project / "docs" / "l1").symlink_to(".")
    (project / "docs" / "l2").symlink_to(".")
    memory = _memory(project)
    with pytest.raises(NotFound):
        memory.ingest(["docs/" + "*/" * 40 + "*.md"], principal=CURATOR, scope="team/a")
    with pytest.raises(InvalidInput, match="more than 100 parts"):
        memory.ingest(["docs/" + "*/" * 1_000 + "a.md"], principal=CURATOR, scope="team/a")
    # and what a pattern names one level down is still found
    (project / "docs" / "sub").mkdir()
    (project / "docs" / "sub" / "n.md").write_text("# N\n")
    report = memory.ingest(["docs/*/*.md"], principal=CURATOR, scope="team/a")
    assert len(report.created) == 1
