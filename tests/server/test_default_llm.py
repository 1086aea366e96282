"""A server started with --default-llm stores that model wherever an agent's DSL leaves llm_id empty
(as RAGFlow's editor asks a user to choose one), so RAGFlow's templates run as uploaded."""
from __future__ import annotations

import copy

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
