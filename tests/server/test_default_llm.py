"""A server started with --default-llm stores that model wherever an agent's DSL leaves llm_id empty
(as RAGFlow's editor asks a user to choose one), so RAGFlow's templates run as uploaded."""
from __future__ import annotations

import copy
import json

import pytest

from tests.server.helpers import CHAT_DSL, Api, Server, chat_answer, make_token

NO_MODEL = copy.deepcopy(CHAT_DSL)
NO_MODEL["components"]["LLM:A"]["obj"]["params"]["llm_id"] = ""


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("default-llm")
    db = str(tmp / "server.db")
    with Server(db, tmp, None, "--default-llm", "gpt-4o-mini@OpenAI") as server:
        client = Api(server, make_token(db, "alice"))
        yield client
        client.close()


def test_an_agent_without_a_model_is_stored_with_the_default_and_runs(api):
    data = api.ok("POST", "/agents", {"title": "no model", "dsl": NO_MODEL})
    assert data["compiles"] is True
    assert data["dsl"]["components"]["LLM:A"]["obj"]["params"]["llm_id"] == "gpt-4o-mini@OpenAI"
    reply = api.ok("POST", "/agents/chat/completions", {"agent_id": data["id"], "query": "hi"})
    assert reply["data"]["content"] == chat_answer(1)


def test_a_chosen_model_is_kept(api):
    data = api.ok("POST", "/agents", {"title": "chosen", "dsl": CHAT_DSL})
    assert data["dsl"] == CHAT_DSL


def test_compile_and_run_routes_use_the_default_too(api):
    checked = api.ok("POST", "/graphs/compile", {"dsl": NO_MODEL})
    assert checked["ok"] is True and checked["diagnostics"] == []


def _nested(depth: int) -> dict:
    """A DSL whose Message content nests `depth` levels deep (lists in objects, past canvas2graph.compiler.dsl.load.MAX_DEPTH)."""
    value: object = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    dsl = copy.deepcopy(NO_MODEL)
    dsl["components"]["deep"] = {"obj": {"component_name": "Message", "params": {"content": [value]}}, "downstream": []}
    return dsl


@pytest.mark.parametrize("depth", [600, 900])
def test_a_deep_dsl_is_a_400_naming_the_component_and_field_when_the_default_model_is_filled_in(api, depth):
    """Filling the default model in walks the whole document: past the nesting limit it leaves the document
    alone, and both routes that take a DSL refuse it as a malformed request (HTTP 400, ARGUMENT_ERROR) whose
    diagnostic names the component and the field that nest too deeply (it used to be a RecursionError, then a
    200). Nothing is stored."""
    before = api.ok("GET", "/agents")["total"]
    for dsl in (_nested(depth), json.dumps(_nested(depth))):          # as an object and as its JSON text
        for path, body in (("/graphs/compile", {"dsl": dsl}), ("/agents", {"title": f"deep {depth} {type(dsl).__name__}", "dsl": dsl})):
            response = api.http.post(path, json=body)
            assert response.status_code == 400, (path, response.status_code, response.text[:300])
            reply = response.json()
            assert reply["code"] == 101, reply
            assert "component 'deep', field 'params.content.0'" in reply["message"], reply
            assert "nests at most 200 levels" in reply["message"], reply
            [diagnostic] = reply["data"]["diagnostics"]
            assert diagnostic["code"] == "too-deep" and diagnostic["component_id"] == "deep"
            assert diagnostic["field"] == "params.content.0"
    assert api.ok("GET", "/agents")["total"] == before
