"""Ingestion into Elasticsearch in RAGFlow's index layout (noida-db's Elasticsearch 8 API on 127.0.0.1):
the same folder goes into both stores, and an agent's Retrieval answers from each."""
from __future__ import annotations

import asyncio
import json

from elasticsearch import Elasticsearch

from canvas2graph.runtime.services.retrieval import RetrievalConfig, RetrievalRequest, open_backend
from tests.runtime.ingest.test_ingest import PIPELINE, cli, mixed_folder
from tests.runtime.retrieval.conftest import es_url  # noqa: F401  (the noida-db fixture)

TENANT = "ingest-tenant"


def test_a_folder_goes_into_ragflows_index_layout_and_an_agent_answers_from_it(es_url, tmp_path):  # noqa: F811
    docs = mixed_folder(tmp_path)
    url = es_url.replace("http://", "elasticsearch://")
    db = str(tmp_path / "s.db")
    first = cli("ingest", str(PIPELINE), str(docs), "--kb", "es-kb", "--db", db, "--retrieval", url, "--tenant", TENANT)
    assert first.returncode == 0, first.stderr
    assert "5 file(s) ingested" in first.stdout
    again = cli("ingest", str(PIPELINE), str(docs), "--kb", "es-kb", "--db", db, "--retrieval", url, "--tenant", TENANT)
    assert "5 unchanged" in again.stdout, again.stderr

    es = Elasticsearch(es_url)
    index = f"ragflow_{TENANT}"
    stored = es.search(index=index, body={"query": {"term": {"docnm_kwd": "exchanges.docx"}}, "size": 10})["hits"]
    sources = [h["_source"] for h in stored["hits"]]
    assert {s["kb_id"] for s in sources} == {"es-kb"} and all(s["content_ltks"] for s in sources)
    assert any("60 days" in s["content_with_weight"] for s in sources)
    assert {h["_id"] for h in stored["hits"]} == {s["id"] for s in sources}

    config = tmp_path / "retrieval.toml"
    config.write_text(f'timeout = 120\n[datasets."es-kb"]\ntenant = "{TENANT}"\n')

    async def search():
        backend = open_backend(url, RetrievalConfig.load(config))
        try:
            return await backend.retrieve(RetrievalRequest("how long can shoes be exchanged", ["es-kb"]))
        finally:
            await backend.aclose()
    found = asyncio.run(search())
    assert found.chunks[0]["docnm_kwd"] == "exchanges.docx"

    dsl = json.loads((PIPELINE.parent / "kb_answer.json").read_text())
    dsl["components"]["Retrieval:Docs"]["obj"]["params"]["dataset_ids"] = ["es-kb"]
    (tmp_path / "agent.json").write_text(json.dumps(dsl))
    run = cli("run", str(tmp_path / "agent.json"), "--llm-script", str(PIPELINE.parent / "kb_answer.script.json"),
              "--db", db, "--retrieval", url, "--query", "I was charged twice for my order", "--format", "jsonl",
              env_config=config)
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    retrieval = next(e["data"] for e in events if e["event"] == "node_finished"
                     and e["data"]["component_id"] == "Retrieval:Docs")
    assert retrieval["outputs"]["json"][0]["docnm_kwd"] == "refunds.md"
