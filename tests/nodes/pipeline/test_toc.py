"""The Extractor's `toc` field: headings found per batch, levelled, and one TOC chunk (scripted model)."""
from __future__ import annotations

import json

import xxhash

from canvas2graph.nodes.pipeline.toc import batches
from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
from tests.nodes.pipeline.helpers import node, run

CHUNKS = [{"text": "Refund policy overview", "page_num_int": [1], "top_int": [10]},
          {"text": "1. Scope This policy covers every order.", "page_num_int": [1], "top_int": [40]},
          {"text": "Orders are refunded within 14 days.", "page_num_int": [1], "top_int": [90]},
          {"text": "2. Exceptions Gift cards are final.", "page_num_int": [2], "top_int": [10]}]


def extractor_run(tmp_path, replies, chunks=CHUNKS, doc_id="doc-7"):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"by_component": {"Extractor:T": [json.dumps(r) for r in replies]}}))
    ctx = RunEnvironment(RunSettings(llm_script=str(script))).context("t")
    extractor = node("Extractor", {"llm_id": "m@OpenAI", "field_name": "toc", "sys_prompt": "unused for toc",
                                   "prompts": [{"role": "user", "content": "{TitleChunker:A@chunks}"}]},
                     cid="Extractor:T")
    return run(extractor, {"name": "policy.md"}, outputs={"TitleChunker:A": {"chunks": chunks}},
               file={"name": "policy.md", "doc_id": doc_id}, ctx=ctx)


def test_a_toc_chunk_lists_the_headings_levels_and_the_chunks_each_covers(tmp_path):
    headings = [{"title": "Refund policy overview", "chunk_id": "0"}, {"title": "-1", "chunk_id": "0"},
                {"title": "1. Scope", "chunk_id": "1"}, {"title": "3.2", "chunk_id": "2"},
                {"title": "2. Exceptions", "chunk_id": "3"}]
    levels = [{"level": "1", "title": "Refund policy overview"}, ["2", "1. Scope"], {"level": "2", "title": "2. Exceptions"}]
    out, progress = extractor_run(tmp_path, [headings, levels])
    ids = [xxhash.xxh64((c["text"] + "doc-7").encode()).hexdigest() for c in CHUNKS]
    chunks = out["chunks"]
    assert [(c["id"], c["doc_id"]) for c in chunks[:4]] == [(i, "doc-7") for i in ids]
    toc_chunk = chunks[4]
    toc = json.loads(toc_chunk["toc"])
    # "-1" and a bare number are dropped; each entry covers its chunk up to the next entry's
    assert toc == [{"level": "1", "title": "Refund policy overview", "ids": [ids[0], ids[1]]},
                   {"level": "2", "title": "1. Scope", "ids": [ids[1], ids[2], ids[3]]},
                   {"level": "2", "title": "2. Exceptions", "ids": [ids[3]]}]
    assert toc_chunk["content_with_weight"] == toc_chunk["toc"] and toc_chunk["toc_kwd"] == "toc"
    assert toc_chunk["available_int"] == 0 and toc_chunk["page_num_int"] == [100000000]
    assert toc_chunk["text"] == CHUNKS[3]["text"]            # a copy of the last chunk, as RAGFlow makes it
    assert toc_chunk["id"] == xxhash.xxh64((toc_chunk["toc"] + "doc-7").encode()).hexdigest()
    assert (0.2, "Start to generate table of content ...") in progress


def test_without_headings_no_toc_chunk_is_added(tmp_path):
    out, _ = extractor_run(tmp_path, [[{"title": "-1", "chunk_id": str(i)} for i in range(4)]])
    assert [c["text"] for c in out["chunks"]] == [c["text"] for c in CHUNKS]       # RAGFlow appends a None here


def test_chunks_are_batched_up_to_1024_tokens_and_a_long_one_stays_whole():
    long = "alpha beta gamma " * 400
    assert [[list(item)[0] for item in b] for b in batches([long, long, "c", "d"])] == [[], [0], [1], [2, 3]]
    assert [[list(item)[0] for item in b] for b in batches(["a b", "c d"])] == [[0, 1]]


def test_the_heading_prompt_holds_each_chunk_as_a_json_line_in_page_order(tmp_path, monkeypatch):
    import canvas2graph.nodes.pipeline.extractor as module
    asked = []

    async def complete(llm_id, cid, messages, ctx, gen_conf=None):
        asked.append((messages, gen_conf))
        return "[]"
    monkeypatch.setattr(module, "complete", complete)
    shuffled = [CHUNKS[3], CHUNKS[0]]
    out, _ = extractor_run(tmp_path, [], chunks=shuffled)
    [(messages, conf)] = asked
    assert conf == {"temperature": 0.0, "top_p": 0.9}
    assert messages[1]["content"].endswith('INPUT\n{"0": "Refund policy overview"}\n'
                                           '{"1": "2. Exceptions Gift cards are final."}')
    assert [c["text"] for c in out["chunks"]] == [CHUNKS[3]["text"], CHUNKS[0]["text"]]   # the output keeps its order
