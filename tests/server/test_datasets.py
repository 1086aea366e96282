"""POST /api/v1/datasets/{id}/ingest: a pipeline over uploaded documents, progress as server-sent events,
the chunks in the server's embedded store where a stored agent's Retrieval finds them."""
from __future__ import annotations

import json
import os

import pytest

from tests.server.helpers import REPO, Api, Server, make_token

PIPELINE = (REPO / "fixtures" / "kb" / "pipeline.json").read_text()
DOCS = REPO / "fixtures" / "kb" / "docs"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ingest")
    db = str(tmp / "server.db")
    script = json.loads((REPO / "fixtures/kb/kb_answer.script.json").read_text())
    config = tmp / "retrieval.toml"        # the first retrieval loads the tokenizer: slow on a busy machine
    config.write_text("timeout = 120\n")
    with Server(db, tmp, script, env={**os.environ, "CANVAS2GRAPH_RETRIEVAL_CONFIG": str(config)}) as server:
        api = Api(server, make_token(db, "ingest-tenant"))
        yield api
        api.close()


def ingest(api: Api, dataset: str, names: list[str], dsl: str = PIPELINE) -> tuple[int, list[dict] | dict]:
    files = [("file", (n, (DOCS / n).read_bytes(), "application/octet-stream")) for n in names]
    with api.http.stream("POST", f"/datasets/{dataset}/ingest", data={"dsl": dsl}, files=files) as response:
        body = response.read().decode()
        if not response.headers["content-type"].startswith("text/event-stream"):
            return response.status_code, json.loads(body)
    return response.status_code, [json.loads(f[len("data:"):]) for f in body.split("\n\n") if f]


def test_ingest_streams_progress_and_an_agent_answers_from_the_dataset(api):
    status, events = ingest(api, "support-kb", ["refunds.md", "shipping.html", "warranty.txt"])
    assert status == 200
    kinds = [e["event"] for e in events]
    assert kinds[0] == "ingest_started" and kinds[-1] == "ingest_finished"
    assert kinds.count("file_finished") == 3
    parser = [e["data"] for e in events if e["event"] == "progress" and e["data"]["component_id"] == "Parser:Docs"
              and e["data"]["name"] == "refunds.md"]
    assert parser[-1]["progress"] == 1 and parser[-1]["message"] == "Done" and parser[-1]["elapsed_time"] >= 0
    assert events[-1]["data"]["ingested"] == 3

    again = ingest(api, "support-kb", ["refunds.md"])[1]
    assert [e["event"] for e in again] == ["ingest_started", "file_skipped", "ingest_finished"]

    agent = api.agent(json.loads((REPO / "fixtures/kb/kb_answer.json").read_text()))
    sid = api.session(agent)["id"]
    reply = api.stream("/agents/chat/completions", {"agent_id": agent, "session_id": sid, "stream": True,
                                                    "query": "I was charged twice for my order"})
    retrieval = next(e["data"] for e in reply if e["event"] == "node_finished"
                     and e["data"]["component_id"] == "Retrieval:Docs")
    assert retrieval["outputs"]["json"][0]["docnm_kwd"] == "refunds.md"


def test_an_agent_dsl_or_a_broken_pipeline_is_refused_naming_why(api):
    status, reply = ingest(api, "kb2", ["refunds.md"], (REPO / "fixtures/kb/kb_answer.json").read_text())
    assert status == 400 and "agent canvas" in reply["message"]
    broken = json.loads(PIPELINE)
    broken["dsl"]["components"]["TokenChunker:Chunks"]["obj"]["params"]["chunk_token_size"] = -1
    status, reply = ingest(api, "kb2", ["refunds.md"], json.dumps(broken))
    assert reply["code"] != 0 and "does not compile" in reply["message"]
    assert any(d["component_id"] == "TokenChunker:Chunks" for d in reply["data"]["diagnostics"])


def test_running_a_pipeline_as_an_agent_is_refused_saying_where_it_goes(api):
    reply = api.call("POST", "/graphs/run", {"dsl": json.loads(PIPELINE), "query": "hi", "stream": False})
    assert reply["code"] != 0 and "ingestion pipeline" in reply["message"] and "/ingest" in reply["message"]
