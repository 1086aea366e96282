"""The embedded store: indexing local files, the same Retrieval DSLs as on Elasticsearch, and the same
top chunks as Elasticsearch on a small corpus."""
from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import uuid

import pytest
from elasticsearch import Elasticsearch

from canvas2graph.compiler.canvas import diagnose
from canvas2graph.runtime.services.retrieval import RetrievalConfig, RetrievalRequest, open_backend
from canvas2graph.runtime.services.retrieval.config import Endpoint
from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
from canvas2graph.runtime.services.retrieval.indexing import index_files
from tests.conftest import REPO, cpn, dsl
from tests.runtime.services.retrieval.conftest import ragflow_mapping, vec
from tests.runtime.services.retrieval.test_elasticsearch import EMBD, chunk
from tests import forkserver

KB_DOCS = REPO / "fixtures" / "kb" / "docs"


def cli(*args: str, cwd=REPO) -> subprocess.CompletedProcess:
    return subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_indexing_is_idempotent_and_replaces_changed_files(tmp_path):
    docs = tmp_path / "docs"
    shutil.copytree(KB_DOCS, docs)
    store = EmbeddedBackend(tmp_path / "retrieval.db")
    first = asyncio.run(index_files(store, [str(docs)], "kb", progress=False))
    again = asyncio.run(index_files(store, [str(docs)], "kb", progress=False))
    assert (first.indexed, first.unchanged, first.chunks) == (3, 0, 4)
    assert (again.indexed, again.unchanged, again.chunks) == (0, 3, 0)
    (docs / "warranty.txt").write_text("Warranty\n\nThree years on every device.\n")
    changed = asyncio.run(index_files(store, [str(docs)], "kb", progress=False))
    assert (changed.indexed, changed.unchanged) == (1, 2)
    assert store.datasets() == [{"id": "kb", "embd_id": None, "documents": 3, "chunks": 4}]
    result = asyncio.run(store.retrieve(RetrievalRequest("how long is the warranty", ["kb"])))
    assert "Three years on every device." in result.chunks[0]["content_with_weight"]
    store.close()


def test_readme_demo_answers_from_the_indexed_documents_with_citations(tmp_path):
    db = str(tmp_path / "sessions.db")
    index = cli("index", "fixtures/kb/docs", "--kb", "support-kb", "--db", db, "--quiet")
    assert index.returncode == 0, index.stderr
    assert "3 file(s) indexed (4 chunks)" in index.stdout and (tmp_path / "retrieval.db").is_file()
    run = cli("run", "fixtures/kb/kb_answer.json", "--llm-script", "fixtures/kb/kb_answer.script.json", "--db", db,
              "--query", "I was charged twice for my order", "--format", "jsonl")
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    retrieval = next(e["data"] for e in events if e["event"] == "node_finished"
                     and e["data"]["component_id"] == "Retrieval:Docs")
    assert retrieval["outputs"]["formalized_content"].startswith("\nID: 300\n├── Title: refunds.md\n└── Content:\n# Duplicate")
    assert retrieval["outputs"]["json"][0]["docnm_kwd"] == "refunds.md"
    end = next(e["data"] for e in events if e["event"] == "message_end")
    assert end["reference"]["chunks"]["300"]["document_name"] == "refunds.md"
    assert end["reference"]["doc_aggs"]["refunds.md"]["count"] >= 1
    assert "(text only: --embd-id MODEL@FACTORY adds vectors)" in index.stdout   # said once, when indexing
    assert "no embedding model" not in run.stderr       # not again on every run


def test_re_indexing_unchanged_files_does_not_load_the_tokenizer(tmp_path):
    assert cli("index", "fixtures/kb/docs", "--kb", "kb", "--db", str(tmp_path / "s.db"), "--quiet").returncode == 0
    again = subprocess.run([sys.executable, "-c", f"""
import sys
from canvas2graph.cli import main
status = main(["index", "fixtures/kb/docs", "--kb", "kb", "--db", {str(tmp_path / "s.db")!r}, "--quiet"])
print(status, sys.modules["canvas2graph.runtime.services.retrieval.tokenizer"]._shared.cache_info().currsize, "nltk" in sys.modules)
"""], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.stdout.splitlines()[-1] == "0 0 False", again.stderr       # no tokenizer loaded, no NLTK
    assert "0 file(s) indexed (0 chunks), 3 unchanged" in again.stdout


def test_nothing_found_gives_the_empty_response(tmp_path):
    store_url = f"sqlite://{tmp_path}/r.db"
    assert cli("index", "fixtures/kb/docs", "--kb", "support-kb", "--retrieval", store_url, "--quiet").returncode == 0
    run = cli("run", "fixtures/kb/kb_answer.json", "--llm-script", "fixtures/kb/kb_answer.script.json",
              "--db", str(tmp_path / "s.db"), "--retrieval", store_url, "--query", "zeppelin hangar", "--format", "jsonl")
    events = [json.loads(line) for line in run.stdout.splitlines()]
    outputs = next(e["data"]["outputs"] for e in events if e["event"] == "node_finished"
                   and e["data"]["component_id"] == "Retrieval:Docs")
    assert outputs["formalized_content"] == "Nothing in the knowledge base answers that." and outputs["json"] == []


def test_options_that_need_an_llm_are_reported_at_compile_time():
    doc = dsl(**{"Retrieval:R": cpn("Retrieval", {"query": "sys.query", "dataset_ids": ["kb"], "toc_enhance": True,
                                                  "use_kg": True, "cross_languages": ["German"],
                                                  "meta_data_filter": {"method": "auto"}})})
    compiled, diags = diagnose(json.dumps(doc).encode())
    assert compiled is not None
    fields = sorted(d.field for d in diags if d.code == "unsupported-option")
    assert fields == ["params.cross_languages", "params.meta_data_filter", "params.toc_enhance", "params.use_kg"]


def test_a_missing_dataset_is_a_component_error(tmp_path):
    store = EmbeddedBackend(tmp_path / "r.db")
    with pytest.raises(Exception, match="dataset.*nope.*not found"):
        asyncio.run(store.retrieve(RetrievalRequest("x", ["nope"])))
    store.close()


CORPUS = [
    ("d1", "refunds.md", "refund policy for damaged cars is 30 days", vec(0.9, 0.1, 0.2)),
    ("d2", "refunds-old.md", "old refund policy for cars", vec(0.5, 0.5, 0.4)),
    ("d3", "shipping.md", "cars ship from the depot on mondays", vec(0.1, 0.9, 0.1)),
    ("d4", "insurance.md", "damaged cars are covered by the insurance policy", vec(0.7, 0.2, 0.6)),
    ("d5", "warranty.md", "the warranty does not cover damage by water", vec(0.2, 0.1, 0.9)),
    ("d6", "pricing.md", "prices of cars include tax", vec(0.3, 0.6, 0.3)),
]


@pytest.mark.parametrize("question, qvec", [
    ("What is the refund policy for damaged cars?", vec(1.0, 0.0, 0.1)),
    ("damaged cars insurance", vec(0.6, 0.1, 0.7)),
])
def test_both_backends_return_the_same_top_chunks(es_url, embedding_server, tmp_path, question, qvec):
    tenant = uuid.uuid4().hex[:12]
    chunks = [chunk("kb", doc, name, text, v) for doc, name, text, v in CORPUS]
    es = Elasticsearch(es_url)
    es.indices.create(index=f"ragflow_{tenant}", body=ragflow_mapping())
    ops = [op for c in chunks for op in ({"index": {"_index": f"ragflow_{tenant}", "_id": c["id"]}}, c)]
    assert not es.bulk(operations=ops, refresh=True)["errors"]
    embedding_server.vectors[question] = qvec

    def config():
        cfg = RetrievalConfig.from_dict({"datasets": {"kb": {"tenant": tenant, "embd_id": EMBD}}})
        cfg.embeddings[EMBD] = Endpoint(base_url=embedding_server.url, model="m")
        return cfg

    async def both():
        remote = open_backend(es_url.replace("http://", "elasticsearch://"), config())
        local = open_backend(f"sqlite://{tmp_path}/r.db", config())
        local.add_chunks("kb", chunks, EMBD)
        request = RetrievalRequest(question, ["kb"], top_n=3)
        try:
            return await remote.retrieve(request), await local.retrieve(request)
        finally:
            await remote.aclose()
            await local.aclose()

    try:
        on_es, embedded = asyncio.run(both())
    finally:
        es.indices.delete(index=f"ragflow_{tenant}")
    assert [c["chunk_id"] for c in on_es.chunks] == [c["chunk_id"] for c in embedded.chunks]
    assert len(on_es.chunks) == 3
    for a, b in zip(on_es.chunks, embedded.chunks):
        assert a["similarity"] == pytest.approx(b["similarity"], abs=1e-5)
