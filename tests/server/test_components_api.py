"""GET /api/v1/components: every registered component with the JSON schema of its params model, which the
canvas editor turns into forms (nodes/schemas.py)."""
from __future__ import annotations

import httpx

from canvas2graph.nodes.registry import REGISTRY, lookup
from tests.server.helpers import Api, Server, make_token


def test_every_component_comes_with_its_params_schema_and_kind(tmp_path):
    db = str(tmp_path / "server.db")
    with Server(db, tmp_path, {"auto_reply": "x"}) as server:
        assert httpx.get(server.url + "/api/v1/components").json()["code"] == 109       # a token is needed
        listed = {c["component_name"]: c for c in Api(server, make_token(db, "alice")).ok("GET", "/components")}
    lookup("Begin")
    assert set(listed) == set(REGISTRY)
    llm = listed["LLM"]
    assert llm["kind"] == "component" and llm["schema"]["properties"]["llm_id"]["type"] == "string"
    assert llm["schema"]["properties"]["temperature"]["maximum"] == 1
    assert "max_retries" in llm["common"]
    assert listed["Iteration"]["kind"] == "container" and listed["IterationItem"]["kind"] == "start"
    assert listed["ExitLoop"]["kind"] == "exit" and listed["TavilySearch"]["kind"] == "tool"
    assert listed["Categorize"]["routes"] and not listed["Message"]["routes"]
    assert all(c["schema"].get("type") == "object" for c in listed.values())


def test_each_component_lists_its_outputs_with_their_types_and_a_new_llm_starts_as_ragflow_s_canvas_starts_it(tmp_path):
    """The editor's reference picker offers a component's outputs from here; a new LLM takes `x-initial`
    (RAGFlow's initialLlmBaseValues), never the engine's 0s."""
    db = str(tmp_path / "server.db")
    with Server(db, tmp_path, {"auto_reply": "x"}) as server:
        listed = {c["component_name"]: c for c in Api(server, make_token(db, "alice")).ok("GET", "/components")}
    assert listed["LLM"]["outputs"] == [{"name": "content", "type": "string"}, {"name": "structured", "type": "object"}]
    assert listed["Retrieval"]["outputs"][0] == {"name": "formalized_content", "type": "string"}
    assert {"name": "category_name", "type": "string"} in listed["Categorize"]["outputs"]
    assert not any(o["name"].startswith("_") for c in listed.values() for o in c["outputs"])
    initial = listed["Agent"]["schema"]["x-initial"]
    assert initial["temperature"] == 0.1 and initial["top_p"] == 0.3 and initial["max_tokens"] == 256
    assert initial["temperatureEnabled"] and initial["topPEnabled"] and not initial["maxTokensEnabled"]
    assert listed["LLM"]["schema"]["properties"]["temperature"]["default"] == 0          # the engine's, for DSLs without it
