"""TokenChunker: RAGFlow's merging and splitting of text payloads and JSON items, param by param."""
from __future__ import annotations

import pytest

from canvas2graph.nodes.pipeline import tokens
from canvas2graph.nodes.pipeline.token_chunker import field_pattern, naive_merge, overlap_percent
from tests.nodes.pipeline.helpers import node, run, texts


@pytest.fixture(autouse=True)
def estimated_tokens(monkeypatch):
    """Four characters a token, whatever tiktoken files this machine has: budgets below are in those."""
    monkeypatch.setenv("CANVAS2GRAPH_TIKTOKEN_FILE", "/nonexistent")
    tokens.reset()
    yield
    tokens.reset()


def chunk(params, upstream):
    return run(node("TokenChunker", params), {"name": "a.md", **upstream})[0]


def test_a_text_payload_is_split_on_newlines_and_merged_up_to_the_budget():
    text = "\n".join(["aaaa bbbb cccc"] * 6)           # 4 tokens a line
    out = chunk({"chunk_token_size": 8, "delimiters": ["\n"]}, {"output_format": "text", "text": text})
    # a group closes once it holds more than 8 tokens: three lines (4+4 ≤ 8, then 12 > 8)
    assert texts(out) == ["aaaa bbbb cccc\naaaa bbbb cccc\naaaa bbbb cccc"] * 2
    assert out["output_format"] == "chunks"


def test_backtick_delimiters_make_every_piece_a_chunk_whatever_the_budget():
    out = chunk({"delimiters": ["`##`"], "chunk_token_size": 512},
                {"output_format": "markdown", "markdown": "one##two##three"})
    assert texts(out) == ["one", "two", "three"]


def test_overlap_carries_the_tail_of_the_previous_chunk():
    assert overlap_percent(0.2) == 20 and overlap_percent(95) == 90 and overlap_percent("x") == 0
    chunks = naive_merge("a" * 40 + "\n" + "b" * 40, 10, "\n", 50)
    assert chunks[0] == "\n" + "a" * 40 and chunks[1] == "a" * 21 + "\n" + "b" * 40     # half of "\na...a" (41 characters)


def test_children_delimiters_split_chunks_and_keep_the_whole_as_mom():
    out = chunk({"children_delimiters": ["."], "chunk_token_size": 512},
                {"output_format": "text", "text": "First. Second."})
    assert [(c["text"], c["mom"]) for c in out["chunks"]] == [("\nFirst", "First. Second."), (" Second", "First. Second.")]   # as RAGFlow: the piece keeps its "\n"


def test_delimiter_mode_one_makes_a_single_chunk():
    out = chunk({"delimiter_mode": "one"}, {"output_format": "json",
                                            "json": [{"text": "a"}, {"text": "  "}, {"text": "b@@1\t2\t3\t4\t5##"}]})
    assert texts(out) == ["a\nb"]


def test_json_items_merge_tables_stand_alone_with_their_context_and_positions_become_fields():
    items = [{"text": "Intro sentence. Second sentence.", "doc_type_kwd": "text", "positions": [[1, 10, 20, 30, 40]]},
             {"text": "<table><tr><td>x</td></tr></table>", "doc_type_kwd": "table"},
             {"text": "After the table.", "doc_type_kwd": "text", "positions": [[2, 1, 2, 3, 4]]}]
    out = chunk({"table_context_size": 4, "chunk_token_size": 512}, {"output_format": "json", "json": items})
    first, table, last = out["chunks"]
    assert first["text"] == "Intro sentence. Second sentence." and first["page_num_int"] == [1]
    assert first["position_int"] == [[1, 10, 20, 30, 40]] and "_pdf_positions" not in first
    assert table["doc_type_kwd"] == "table"
    assert table["text"] == "Second sentence.<table><tr><td>x</td></tr></table>After the table."
    assert last["top_int"] == [3]


def test_json_items_with_backtick_delimiters_split_across_items():
    items = [{"text": "a|b"}, {"text": "c"}]
    out = chunk({"delimiters": ["`|`"]}, {"output_format": "json", "json": items})
    assert texts(out) == ["a", "b\nc"]


def test_the_delimiter_field_is_parsed_like_ragflows():
    assert field_pattern("\n!`##`") == "\\#\\#|\\\n|!"
    assert field_pattern("\r\n") == "\\\n"


@pytest.mark.parametrize("params,field", [({"chunk_token_size": 0}, "chunk_token_size"),
                                          ({"overlapped_percent": 100}, "overlapped_percent"),
                                          ({"delimiter_mode": "words"}, "delimiter_mode")])
def test_bad_params_are_compile_errors_naming_the_field(params, field):
    from canvas2graph.compiler.canvas import diagnose
    doc = {"components": {"File": {"obj": {"component_name": "File", "params": {}}, "downstream": ["TokenChunker:A"]},
                          "TokenChunker:A": {"obj": {"component_name": "TokenChunker", "params": params},
                                             "downstream": []}}}
    _, diags = diagnose(doc)
    assert [(d.code, d.component_id, d.field) for d in diags] == [("invalid-param", "TokenChunker:A", f"params.{field}")]
