"""Ingestion into Elasticsearch in RAGFlow's index layout (noida-db's Elasticsearch 8 API on 127.0.0.1):
the same folder goes into both stores, and an agent's Retrieval answers from each."""
from __future__ import annotations

import asyncio
import json

from elasticsearch import Elasticsearch

from canvas2graph.runtime.services.retrieval import RetrievalConfig, RetrievalRequest, open_backend
from tests.runtime.run.ingest.test_ingest import PIPELINE, cli, mixed_folder
from tests.runtime.services.retrieval.conftest import es_url  # noqa: F401  (the noida-db fixture)

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


def test_a_compilers_entity_and_relation_rows_go_into_the_index_beside_the_chunks(es_url, tmp_path):  # noqa: F811
    from tests.nodes.pipeline.test_compiler import PEOPLE, SHIPPED_COMPILER
    dsl = json.loads(SHIPPED_COMPILER.read_text())
    dsl["components"]["Compiler:CurvySunsLove"]["obj"]["params"]["compilation_template_group_id"] = "g-people"
    (tmp_path / "compiler.json").write_text(json.dumps(dsl))
    (tmp_path / "templates.json").write_text(json.dumps({"groups": {"g-people": ["tpl-people"]},
                                                         "templates": {"tpl-people": PEOPLE}}))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "team.md").write_text("# Team\n\nAda Lovelace answers refunds with Grace Hopper.\n")
    (tmp_path / "script.json").write_text(json.dumps({"by_component": {"Compiler:CurvySunsLove": [
        json.dumps({"items": [{"type": "person", "name": "Ada Lovelace"}, {"type": "person", "name": "Grace Hopper"}]}),
        json.dumps({"items": [{"type": "works_with", "source": "Ada Lovelace", "target": "Grace Hopper"}]})]}}))
    url = es_url.replace("http://", "elasticsearch://")
    done = cli("ingest", str(tmp_path / "compiler.json"), str(docs), "--kb", "kg-kb", "--db", str(tmp_path / "s.db"),
               "--retrieval", url, "--tenant", TENANT, "--llm-script", str(tmp_path / "script.json"),
               "--default-llm", "gpt-4o@OpenAI", "--compiler-templates", str(tmp_path / "templates.json"))
    assert done.returncode == 0, done.stderr
    es = Elasticsearch(es_url)
    es.indices.refresh(index=f"ragflow_{TENANT}")
    hits = es.search(index=f"ragflow_{TENANT}", body={"query": {"term": {"kb_id": "kg-kb"}}, "size": 10})["hits"]["hits"]
    rows = sorted((h["_source"] for h in hits if h["_source"].get("knowledge_graph_kwd")),
                  key=lambda s: s["knowledge_graph_kwd"])
    [chunk] = [h["_source"] for h in hits if not h["_source"].get("knowledge_graph_kwd")]
    assert [(r["knowledge_graph_kwd"], r.get("name_kwd"), r.get("to_entity_kwd")) for r in rows] == [
        ("entity", "ada lovelace", None), ("entity", "grace hopper", None), ("relation", None, "Grace Hopper")]
    assert all(r["source_chunk_ids"] == [chunk["id"]] and r["compile_kwd"] == "hypergraph" for r in rows)
