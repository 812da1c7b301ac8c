"""Markdown chunking: keys, spans, fences, setext headings, splitting."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.ingest.markdown import ROOT_KEY, Chunk, chunk_markdown, front_matter_end, slugify

DOC = """\
---
title: Handbook
tags: [a, b]
---
Welcome to the handbook.

# Setup

## Install

Run `pip install cairn`.

## Configure
Set CAIRN_HOME.

# Usage
Use it daily.
"""


def _by_key(chunks: list[Chunk]) -> dict[str, Chunk]:
    return {c.chunk_key: c for c in chunks}


def _assert_spans(source: str, chunks: list[Chunk]) -> None:
    for chunk in chunks:
        assert source[chunk.start : chunk.end] == chunk.text
    for before, after in itertools.pairwise(chunks):
        assert before.end <= after.start


def test_sections_keys_paths_and_spans() -> None:
    chunks = chunk_markdown(DOC)
    _assert_spans(DOC, chunks)
    assert [(c.chunk_key, c.heading_path) for c in chunks] == [
        (ROOT_KEY, ()),
        ("setup/install", ("Setup", "Install")),
        ("setup/configure", ("Setup", "Configure")),
        ("usage", ("Usage",)),
    ]
    by_key = _by_key(chunks)
    assert by_key[ROOT_KEY].text == "Welcome to the handbook."
    assert by_key["setup/install"].text == "## Install\n\nRun `pip install cairn`."
    assert "title: Handbook" not in "".join(c.text for c in chunks)


def test_editing_one_section_keeps_other_keys_and_texts() -> None:
    edited = DOC.replace("Run `pip install cairn`.", "Run it.\n\n" + "Many more words. " * 300)
    before = _by_key(chunk_markdown(DOC, max_chars=500))
    after = _by_key(chunk_markdown(edited, max_chars=500))
    _assert_spans(edited, list(after.values()))
    for key in (ROOT_KEY, "setup/configure", "usage"):
        assert after[key].text == before[key].text
        assert after[key].heading_path == before[key].heading_path
    assert "setup/install" in after and "setup/install#p2" in after
    assert set(before) <= set(after)


def test_headings_inside_code_fences_are_not_headings() -> None:
    source = (
        "# Real\n\n```python\n# comment, not a heading\n\nx = 1\n```\n\n"
        "~~~~\n## still code\n~~~\nnot closed by a shorter fence\n~~~~\n\n## Next\ntext\n"
    )
    chunks = chunk_markdown(source)
    _assert_spans(source, chunks)
    assert [c.heading_path for c in chunks] == [("Real",), ("Real", "Next")]
    assert "# comment, not a heading" in chunks[0].text
    assert "## still code" in chunks[0].text


def test_unclosed_fence_runs_to_the_end() -> None:
    source = "# A\n```\n# B\n"
    assert [c.heading_path for c in chunk_markdown(source)] == [("A",)]


def test_setext_headings_and_thematic_breaks() -> None:
    source = "Title\n=====\n\nintro\n\nSub part\nsecond line\n---\nbody\n\n---\n\nafter a rule\n"
    chunks = chunk_markdown(source)
    _assert_spans(source, chunks)
    assert [(c.chunk_key, c.heading_path) for c in chunks] == [
        ("title", ("Title",)),
        ("title/sub-part-second-line", ("Title", "Sub part second line")),
    ]
    assert chunks[1].text.endswith("after a rule")
    # A list item followed by --- is a list and a rule, not a heading.
    assert [c.heading_path for c in chunk_markdown("- item\n---\ntext\n")] == [()]


def test_atx_variants() -> None:
    source = "#NoSpace\n###### Six ######\nx\n####### seven is text\n    # indented code\n"
    chunks = chunk_markdown(source)
    assert [c.heading_path for c in chunks] == [(), ("Six",)]
    assert chunks[0].text == "#NoSpace"
    assert "####### seven is text" in chunks[1].text and "# indented code" in chunks[1].text


def test_skipped_levels_and_empty_sections() -> None:
    source = "# A\n### C\ntext c\n# B\n\n\n# D\ntext d\n"
    chunks = chunk_markdown(source)
    assert [(c.chunk_key, c.heading_path) for c in chunks] == [
        ("a/c", ("A", "C")),
        ("d", ("D",)),
    ]


def test_sibling_ordinals_are_per_parent() -> None:
    source = "# A\n## Notes\n1\n## Notes\n2\n# B\n## Notes\n3\n# A\n## Notes\n4\n"
    keys = [c.chunk_key for c in chunk_markdown(source)]
    assert keys == ["a/notes", "a/notes~2", "b/notes", "a~2/notes"]


def test_long_sections_split_on_paragraph_boundaries() -> None:
    paragraphs = [f"Paragraph {i} " + "word " * 40 for i in range(10)]  # ~250 chars each
    source = "# Long\n\n" + "\n\n".join(p.strip() for p in paragraphs) + "\n"
    chunks = chunk_markdown(source, max_chars=600)
    _assert_spans(source, chunks)
    assert [c.chunk_key for c in chunks] == ["long", "long#p2", "long#p3", "long#p4", "long#p5"]
    assert all(len(c.text) <= 600 for c in chunks)
    assert all(c.heading_path == ("Long",) for c in chunks)
    assert chunks[0].text.startswith("# Long\n\nParagraph 0")
    for chunk in chunks[1:]:
        assert chunk.text.startswith("Paragraph") and chunk.text.endswith("word")


def test_oversized_paragraph_and_code_are_cut_at_lines_then_spaces() -> None:
    code = "```\n" + "\n".join(f"line {i:03d}" for i in range(100)) + "\n```"
    prose = " ".join(["token"] * 400)
    source = f"# Big\n\n{code}\n\n{prose}\n"
    chunks = chunk_markdown(source, max_chars=300)
    _assert_spans(source, chunks)
    # The heading stays glued to the first block, so only the first part may
    # exceed max_chars, and by no more than the heading.
    assert len(chunks[0].text) <= 300 + len("# Big\n\n")
    assert all(len(c.text) <= 300 for c in chunks[1:])
    assert chunks[0].text.startswith("# Big\n\n```\nline 000")
    assert chunks[3].text.endswith("line 099\n```")
    for chunk in chunks:
        assert chunk.text.split("\n")[-1].startswith(("line", "```", "token"))
        assert chunk.text.endswith(("token", "```")) or chunk.text[-3:].isdigit()


def test_plain_text_input() -> None:
    assert chunk_markdown("just some words") == [Chunk(ROOT_KEY, (), "just some words", 0, 15)]
    long_text = "\n\n".join("sentence " * 30 for _ in range(6))
    chunks = chunk_markdown(long_text, max_chars=700)
    _assert_spans(long_text, chunks)
    assert [c.chunk_key for c in chunks] == [ROOT_KEY, f"{ROOT_KEY}#p2", f"{ROOT_KEY}#p3"]
    assert chunk_markdown("") == [] and chunk_markdown("  \n\n ") == []


def test_crlf_and_front_matter_offsets() -> None:
    source = "---\r\na: 1\r\n---\r\n# T\r\nbody\r\n"
    assert front_matter_end(source) == len("---\r\na: 1\r\n---\r\n")
    chunks = chunk_markdown(source)
    _assert_spans(source, chunks)
    assert [(c.heading_path, c.text) for c in chunks] == [(("T",), "# T\r\nbody")]
    assert front_matter_end("---\nno closing line\n# x\n") == 0
    assert front_matter_end("# no front matter\n") == 0


def test_slugify() -> None:
    assert slugify("Café & Co.") == "cafe-co"
    assert slugify("  CI/CD  ") == "ci-cd"
    assert slugify("[Link](http://x.y) text") == "link-text"
    assert slugify("日本語") == "日本語"
    assert slugify("!!!") == "section"


LINES = st.sampled_from(
    ["", "# H1", "## H2", "### H3 ###", "Title", "====", "---", "```", "~~~", "- item",
     "plain words here", "    indented", "> quote", "#", "x" * 120, "a b " * 30]
)  # fmt: skip


@settings(max_examples=300)
@given(st.lists(LINES, max_size=40), st.sampled_from(["\n", "\r\n"]), st.integers(20, 400))
def test_chunk_invariants(lines: list[str], newline: str, max_chars: int) -> None:
    source = newline.join(lines)
    chunks = chunk_markdown(source, max_chars=max_chars)
    _assert_spans(source, chunks)
    assert len({c.chunk_key for c in chunks}) == len(chunks)
    for chunk in chunks:
        assert chunk.text.strip() and chunk.text == chunk.text.strip()
        if "#p" in chunk.chunk_key or not chunk.heading_path:
            assert len(chunk.text) <= max_chars
    # Outside front matter, lines that can never be (part of) a heading always
    # land in some chunk.
    covered = "".join(c.text for c in chunks)
    body = source[front_matter_end(source) :]
    for line in ("> quote", "- item"):
        if line in body:
            assert line in covered
