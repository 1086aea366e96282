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
