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


def _agent_on(api: Api, dataset: str) -> str:
    dsl = json.loads((REPO / "fixtures/kb/kb_answer.json").read_text())
    dsl["components"]["Retrieval:Docs"]["obj"]["params"]["dataset_ids"] = [dataset]
    return api.agent(dsl)


def _retrieved(api: Api, agent: str, query: str) -> dict:
    sid = api.session(agent)["id"]
    reply = api.stream("/agents/chat/completions", {"agent_id": agent, "session_id": sid, "stream": True,
                                                    "query": query})
    found = next(e["data"] for e in reply if e["event"] == "node_finished"
                 and e["data"]["component_id"] == "Retrieval:Docs")
    return found["outputs"]


def test_tenants_datasets_of_one_name_are_apart_and_one_cannot_retrieve_anothers_chunks(api):
    other = Api(api.server, make_token(api.server.db, "other-tenant"))
    try:
        def send(who: Api, name: str, data: bytes) -> list[dict]:
            with who.http.stream("POST", "/datasets/team-kb/ingest", data={"dsl": PIPELINE},
                                 files=[("file", (name, data, "text/markdown"))]) as response:
                assert response.status_code == 200
                return [json.loads(f[len("data:"):]) for f in response.read().decode().split("\n\n") if f]

        mine = send(api, "refunds.md", (DOCS / "refunds.md").read_bytes())
        assert mine[0]["data"]["kb_id"] == "team-kb" and mine[-1]["data"]["ingested"] == 1
        # the other tenant's dataset has the same name and a document of the same name, about something else
        theirs = send(other, "refunds.md", b"# Gift cards\n\nGift cards never expire and cannot be charged twice.\n")
        assert theirs[-1]["data"]["ingested"] == 1      # not "unchanged": it is not the first tenant's document

        own = _retrieved(api, _agent_on(api, "team-kb"), "I was charged twice for my order")["json"]
        assert own and all("Gift cards" not in c["content_with_weight"] for c in own)
        assert {c["kb_id"] for c in own} == {"team-kb"}             # the tenant's name, not the store's

        seen = _retrieved(other, _agent_on(other, "team-kb"), "I was charged twice for my order")["json"]
        assert seen and all("Gift cards" in c["content_with_weight"] for c in seen)
        # naming the first tenant's dataset by the store's id reaches nothing: it is not found, as a missing one
        foreign = _retrieved(other, _agent_on(other, "t/ingest-tenant/team-kb"), "charged twice refund")
        assert "json" not in foreign and "not found" in foreign["_ERROR"]
        assert _retrieved(other, _agent_on(other, "no-such-kb"), "charged twice refund")["_ERROR"] == \
            foreign["_ERROR"].replace("t/ingest-tenant/team-kb", "no-such-kb")
    finally:
        other.close()
