"""A PDF parsed by a MinerU server (a local one on 127.0.0.1 speaking its protocol) is ingested with its
coordinates as RAGFlow stores them (`position_int`, `page_num_int`, `top_int`), and Retrieval gives them back."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess

from canvas2graph.runtime.services.retrieval import RetrievalRequest
from canvas2graph.runtime.services.retrieval.embedded import EmbeddedBackend
from tests.conftest import REPO
from tests.nodes.pipeline.test_parse_services import FakeService, mineru_zip, multipart, two_page_pdf
from tests.runtime.services.retrieval.conftest import es_url  # noqa: F401  (the noida-db fixture)
from tests import forkserver

BLOCKS = [
    {"type": "text", "text": "The blender has three speeds and a pulse button.", "bbox": [100, 50, 900, 100], "page_idx": 0},
    {"type": "text", "text": "Descale the kettle monthly with citric acid.", "bbox": [100, 500, 900, 560], "page_idx": 1},
]


def test_a_pdf_parsed_by_mineru_is_stored_with_ragflows_position_fields(tmp_path):
    def handle(method, path, headers, body):
        name = multipart(headers, body)["files"][0]
        return 200, "application/zip", mineru_zip(name.rsplit(".", 1)[0], BLOCKS)
    server = FakeService(handle)
    pipeline = json.loads((REPO / "fixtures" / "kb" / "pipeline.json").read_text())
    parser = pipeline["dsl"]["components"]["Parser:Docs"]["obj"]["params"]["setups"]
    parser["pdf"] = {"parse_method": "MinerU", "suffix": ["pdf"], "output_format": "json", "lang": "English"}
    (tmp_path / "pipeline.json").write_text(json.dumps(pipeline))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "manual.pdf").write_bytes(two_page_pdf())
    env = {**os.environ, "MINERU_APISERVER": server.url}
    try:
        done = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "ingest", str(tmp_path / "pipeline.json"),
                               str(tmp_path / "docs"), "--kb", "manuals", "--db", str(tmp_path / "s.db")],
                              cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    assert "1 file(s) ingested" in done.stdout and len(server.requests) == 1

    store = EmbeddedBackend(tmp_path / "retrieval.db")
    try:
        rows = [json.loads(r[0]) for r in store._query("SELECT fields FROM chunks WHERE kb_id = 'manuals'")]
        [chunk] = rows          # both blocks fit one chunk: it keeps the coordinates of each, in order
        assert "kettle" in chunk["content_with_weight"] and "blender" in chunk["content_with_weight"]
        # MinerU's 0-1000 boxes on the 612 x 792 pages (top 39.6 and 396, bottom 79.2 and 443.5), as ints
        assert chunk["position_int"] == [[1, 61, 550, 39, 79], [2, 61, 550, 396, 443]]
        assert chunk["page_num_int"] == [1, 2] and chunk["top_int"] == [39, 396]
        found = asyncio.run(store.retrieve(RetrievalRequest("descale the kettle", ["manuals"])))
        assert found.chunks[0]["positions"] == [[1, 61, 550, 39, 79], [2, 61, 550, 396, 443]]
    finally:
        store.close()


def test_a_pipeline_ending_before_a_chunker_stores_parser_positions_as_ragflows_fields():
    from canvas2graph.runtime.run.ingest.chunks import stored_chunks
    from canvas2graph.runtime.services.retrieval.tokenizer import get_tokenizer
    items = [{"text": "Descale the kettle.", "doc_type_kwd": "text", "positions": [[2, 61.2, 550.8, 396.0, 443.5]],
              "_pdf_positions": [[2, 61.2, 550.8, 396.0, 443.5]]}]
    [fields], _, _ = stored_chunks(items, doc_id="d", kb_id="k", name="manual.pdf", tokenizer=get_tokenizer())
    # pages as the Parser counts them (from 1); RAGFlow's add_positions would add one more here
    assert fields["position_int"] == [[2, 61, 550, 396, 443]] and fields["page_num_int"] == [2]
    assert fields["top_int"] == [396] and "positions" not in fields and "_pdf_positions" not in fields


def test_elasticsearch_keeps_the_position_fields_in_ragflows_layout(es_url, tmp_path):  # noqa: F811
    from elasticsearch import Elasticsearch

    def handle(method, path, headers, body):
        name = multipart(headers, body)["files"][0]
        return 200, "application/zip", mineru_zip(name.rsplit(".", 1)[0], BLOCKS)
    server = FakeService(handle)
    pipeline = json.loads((REPO / "fixtures" / "kb" / "pipeline.json").read_text())
    pipeline["dsl"]["components"]["Parser:Docs"]["obj"]["params"]["setups"]["pdf"] = {
        "parse_method": "MinerU", "suffix": ["pdf"], "output_format": "json"}
    (tmp_path / "pipeline.json").write_text(json.dumps(pipeline))
    (tmp_path / "manual.pdf").write_bytes(two_page_pdf())
    try:
        done = subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", "ingest", str(tmp_path / "pipeline.json"),
                               str(tmp_path / "manual.pdf"), "--kb", "manuals", "--db", str(tmp_path / "s.db"),
                               "--retrieval", es_url.replace("http://", "elasticsearch://"), "--tenant", "pos-tenant"],
                              cwd=REPO, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "MINERU_APISERVER": server.url})
    finally:
        server.close()
    assert done.returncode == 0, done.stderr
    es = Elasticsearch(es_url)
    es.indices.refresh(index="ragflow_pos-tenant")
    [hit] = es.search(index="ragflow_pos-tenant", body={"query": {"term": {"kb_id": "manuals"}}})["hits"]["hits"]
    source = hit["_source"]
    assert source["position_int"] == [[1, 61, 550, 39, 79], [2, 61, 550, 396, 443]]
    assert source["page_num_int"] == [1, 2] and source["top_int"] == [39, 396]
    # the mapping's *_int template makes them integers: a range query on the page finds the chunk
    found = es.search(index="ragflow_pos-tenant", body={"query": {"range": {"page_num_int": {"gte": 2}}}})
    assert found["hits"]["total"]["value"] == 1
