"""TitleChunker: headings found by RAGFlow's level families, chunks by hierarchy or by group."""
from __future__ import annotations

import pytest

from canvas2graph.nodes.pipeline import tokens
from tests.nodes.pipeline.helpers import node, run, texts

MARKDOWN_LEVELS = [["^#[^#]", "^##[^#]", "^###[^#]"], ["Chapter [0-9]+", "Section [0-9]+"]]
GUIDE = "# Guide\nIntro.\n## Install\nRun it.\n### Linux\nUse apt.\n## Use\nOpen it.\n"


@pytest.fixture(autouse=True)
def estimated_tokens(monkeypatch):
    monkeypatch.setenv("CANVAS2GRAPH_TIKTOKEN_FILE", "/nonexistent")
    tokens.reset()
    yield
    tokens.reset()


def chunk(params, upstream):
    return run(node("TitleChunker", params), {"name": "g.md", **upstream})[0]


def test_hierarchy_makes_one_chunk_per_heading_at_the_chosen_depth_with_its_ancestors():
    out = chunk({"levels": MARKDOWN_LEVELS, "hierarchy": 2}, {"output_format": "text", "text": GUIDE})
    assert texts(out) == ["# Guide\nIntro.\n## Install\nRun it.\n### Linux\nUse apt.\n",
                          "# Guide\nIntro.\n## Use\nOpen it.\n"]


def test_include_heading_content_gives_a_headings_own_body_its_own_chunk():
    out = chunk({"levels": MARKDOWN_LEVELS, "hierarchy": 3, "include_heading_content": True},
                {"output_format": "text", "text": GUIDE})
    assert texts(out) == ["# Guide\nIntro.\n", "# Guide\n## Install\nRun it.\n", "# Guide\n## Install\n### Linux\nUse apt.\n",
                          "# Guide\n## Use\nOpen it.\n"]


def test_root_chunk_as_heading_prefixes_every_chunk_with_the_first():
    out = chunk({"levels": MARKDOWN_LEVELS, "hierarchy": 3, "include_heading_content": True,
                 "root_chunk_as_heading": True}, {"output_format": "text", "text": GUIDE})
    assert texts(out)[0] == "# Guide\nIntro.\n\n# Guide\n## Install\nRun it.\n"


def test_the_family_matching_most_lines_is_used():
    text = "Chapter 1\nText one.\nChapter 2\nText two.\n# not a heading here"
    out = chunk({"levels": MARKDOWN_LEVELS, "hierarchy": 1}, {"output_format": "text", "text": text})
    assert texts(out) == ["Chapter 1\nText one.\n", "Chapter 2\nText two.\n# not a heading here\n"]


def test_group_keeps_a_section_together_and_small_groups_absorb_the_next_record():
    items = [{"text": "# A"}, {"text": "x" * 200}, {"text": "# B"}, {"text": "y" * 200}]
    out = chunk({"method": "group", "levels": MARKDOWN_LEVELS, "hierarchy": 1}, {"output_format": "json", "json": items})
    assert texts(out) == ["# A\n" + "x" * 200 + "\n", "# B\n" + "y" * 200 + "\n"]
    assert all(c["doc_type_kwd"] == "text" for c in out["chunks"])


def test_the_token_cap_resplits_long_chunks_on_sentences():
    text = "# A\n" + "Word word word word. " * 60
    out = chunk({"levels": MARKDOWN_LEVELS, "hierarchy": 1, "chunk_token_cap": 128}, {"output_format": "text", "text": text})
    assert len(out["chunks"]) > 1 and all(tokens.count_tokens(t) <= 128 for t in texts(out))
    assert "".join(texts(out)) == "# A\n" + ("Word word word word. " * 60).strip() + "\n"    # text lines are stripped


@pytest.mark.parametrize("params,message", [({"levels": []}, "levels"), ({"levels": [["^#"]]}, "Hierarchy number"),
                                            ({"levels": [["("]], "hierarchy": 1}, "not a regular expression"),
                                            ({"levels": [["^#"]], "hierarchy": 1, "chunk_token_cap": 50}, "128 and 8000"),
                                            ({"levels": [["^#"]], "method": "words"}, "Unsupported")])
def test_bad_params_are_compile_errors(params, message):
    from canvas2graph.compiler.canvas import diagnose
    doc = {"components": {"File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["TitleChunker:A"]},
                          "TitleChunker:A": {"obj": {"component_name": "TitleChunker", "params": params},
                                             "downstream": []}}}
    _, diags = diagnose(doc)
    assert [d.code for d in diags] == ["invalid-param"] and message in diags[0].message
