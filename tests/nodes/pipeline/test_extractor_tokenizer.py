"""Extractor (scripted model, one call per chunk) and Tokenizer (full-text fields, embeddings)."""
from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.services.environment import RunEnvironment, RunSettings
from tests.conftest import REPO
from tests.nodes.pipeline.helpers import node, run

SHIPPED = REPO / "tests" / "runtime" / "run" / "ingest" / "ragflow_pipelines"


def test_the_extractor_asks_once_per_chunk_with_the_chunks_text_in_the_prompt(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"auto_reply": "summary {n}"}))
    ctx = RunEnvironment(RunSettings(llm_script=str(script))).context("t")
    extractor = node("Extractor", {"llm_id": "m@OpenAI", "field_name": "summary", "sys_prompt": "Summarize.",
                                   "prompts": [{"role": "user", "content": "Text:\n{TokenChunker:A@chunks}"}]},
                     cid="Extractor:S")
    chunks = [{"text": "alpha"}, {"text": "beta"}]
    out, _ = run(extractor, {"name": "a.md"}, outputs={"TokenChunker:A": {"chunks": chunks}}, ctx=ctx)
    assert out["output_format"] == "chunks"
    assert [(c["text"], c["summary"]) for c in out["chunks"]] == [("alpha", "summary 1"), ("beta", "summary 2")]
    assert chunks == [{"text": "alpha"}, {"text": "beta"}]            # the upstream's chunks are left alone


def test_the_tokenizer_writes_ragflows_full_text_fields_from_summary_questions_and_keywords():
    tokenizer = node("Tokenizer", {"search_method": ["full_text"]})
    chunks = [{"text": "The kettle boils water", "summary": "Kettle summary", "questions": "How hot?\nHow fast?",
               "keywords": "kettle, water"}]
    out, progress = run(tokenizer, {"name": "kettle.md", "output_format": "chunks", "chunks": chunks})
    ck = out["chunks"][0]
    assert ck["title_tks"] == "kettl" and ck["chunk_order_int"] == 0
    assert ck["content_ltks"] == "kettl summari"              # the summary, not the text, is what full text finds
    assert ck["question_kwd"] == ["How hot?", "How fast?"] and ck["important_kwd"] == ["kettle", " water"]
    assert (0.5, "Finish tokenizing.") in progress


def test_the_chunk_summary_template_ingests_with_scripted_summaries(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "kettle.md").write_text("# Kettle\n\nThe kettle boils a litre in two minutes.\n")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"by_component": {"Extractor:SharpTaxisSay": ["A fast electric kettle."]}}))
    out = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "ingest", str(SHIPPED / "chunk_summary.json"),
                          str(docs), "--kb", "k", "--db", str(tmp_path / "s.db"), "--llm-script", str(script),
                          "--default-llm", "gpt-4o@OpenAI"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "1 file(s) ingested (1 chunks)" in out.stdout
    store = EmbeddedBackend(tmp_path / "retrieval.db")
    fields = json.loads(store.db.execute("SELECT fields FROM chunks").fetchone()[0])
    assert fields["content_with_weight"] == "# Kettle\nThe kettle boils a litre in two minutes."
    assert fields["content_ltks"] == "a fast electr kettl" and "summary" not in fields
    assert fields["docnm_kwd"] == "kettle.md" and fields["kb_id"] == "k"
    store.close()
