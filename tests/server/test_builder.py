"""Building and fixing agents: a component's input form and its debug run alone, reset, tags, templates."""
from __future__ import annotations

import uuid

from tests.server.helpers import CHAT_DSL, FEEDBACK_DSL, cpn

PROMPTED_DSL = {"components": {
    "begin": cpn("Begin", {"inputs": {"topic": {"type": "line", "name": "Topic", "optional": False}}},
                 ["Categorize:Route"]),
    "Categorize:Route": cpn("Categorize", {"llm_id": "gpt-4o@OpenAI", "query": "begin@topic", "category_description": {
        "anything": {"description": "Any question.", "to": ["LLM:Write"]}}}),
    "LLM:Write": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "sys_prompt": "Write about {begin@topic}.",
                             "prompts": [{"role": "user", "content": "{sys.query} in {env.lang}"}]}, ["Message:Show"]),
    "Message:Show": cpn("Message", {"content": ["{LLM:Write@content}"]}),
    "TavilySearch:Web": cpn("TavilySearch", {"query": "sys.query"}),
    "CodeExec:Calc": cpn("CodeExec", {"lang": "python", "script": "def main(a):\n    return {'result': a}\n",
                                      "arguments": {"a": "sys.query"}}),
}, "graph": {"nodes": [{"id": "begin", "data": {"name": "Start"}}]},
   "variables": {"lang": {"type": "string", "value": "English"}}}


def form(api, agent_id: str, cid: str) -> dict:
    return api.ok("GET", f"/agents/{agent_id}/components/{cid}/input-form")


def debug(api, agent_id: str, cid: str, params: dict) -> dict:
    return api.call("POST", f"/agents/{agent_id}/components/{cid}/debug", {"params": params})


# --- input forms -----------------------------------------------------------------------------------------
def test_input_forms_name_what_each_component_reads(alice):
    agent_id = alice.agent(PROMPTED_DSL)
    assert form(alice, agent_id, "begin") == {"topic": {"type": "line", "name": "Topic", "optional": False}}
    assert form(alice, agent_id, "LLM:Write") == {
        "begin@topic": {"type": "line", "name": "Start@topic"}, "sys.query": {"type": "line", "name": "sys.query"},
        "env.lang": {"type": "line", "name": "env.lang"}}
    assert form(alice, agent_id, "Categorize:Route") == {"query": {"type": "line", "name": "Query"}}
    assert form(alice, agent_id, "TavilySearch:Web") == {"query": {"type": "line", "name": "Query"}}
    assert form(alice, agent_id, "CodeExec:Calc") == {"a": {"type": "line", "name": "a"}}
    feedback = alice.agent(FEEDBACK_DSL)
    assert list(form(alice, feedback, "UserFillUp:Ask")) == ["feedback"]


def test_an_unknown_or_misconfigured_component_is_named(alice):
    agent_id = alice.agent(CHAT_DSL)
    reply = alice.call("GET", f"/agents/{agent_id}/components/Nope:X/input-form")
    assert reply["code"] == 102 and "no component 'Nope:X'" in reply["message"]
    broken = alice.agent({"components": {"begin": cpn("Begin", {}, ["LLM:Bad"]),
                                         "LLM:Bad": cpn("LLM", {"llm_id": "m@OpenAI", "temperature": 7})}})
    reply = debug(alice, broken, "LLM:Bad", {})
    assert reply["code"] == 102 and "cannot run as configured" in reply["message"]
    assert reply["data"]["diagnostics"][0]["field"] == "params.temperature"


# --- debug runs --------------------------------------------------------------------------------------------
def test_an_llm_runs_alone_on_the_given_values_even_when_it_would_stream(alice):
    agent_id = alice.agent(PROMPTED_DSL)
    reply = debug(alice, agent_id, "LLM:Write", {"sys.query": {"value": "tides"}, "begin@topic": {"value": "sea"}})
    assert reply["code"] == 0, reply
    assert reply["data"]["content"] == "Answer 1 from LLM:Write."      # drained, not a pending stream
    assert reply["data"]["_elapsed_time"] >= 0


def test_a_message_renders_the_given_values(alice):
    agent_id = alice.agent(CHAT_DSL)
    data = debug(alice, agent_id, "Message:M", {"LLM:A@content": {"value": "42"},
                                                 "sys.conversation_turns": {"value": 5}})["data"]
    assert data["content"] == "Turn5:42"


def test_begin_and_userfillup_take_their_form_values(alice):
    agent_id = alice.agent(PROMPTED_DSL)
    assert debug(alice, agent_id, "begin", {"topic": {"value": "sea"}})["data"]["topic"] == "sea"
    feedback = alice.agent(FEEDBACK_DSL)
    data = debug(alice, feedback, "UserFillUp:Ask", {"feedback": {"value": "bolder"},
                                                      "LLM:Draft@content": {"value": "a draft"}})["data"]
    assert data["feedback"] == "bolder" and data["tips"] == "Draft: a draft\nAny feedback?"


def test_a_categorize_routes_the_given_query(alice):
    agent_id = alice.agent(PROMPTED_DSL)
    data = debug(alice, agent_id, "Categorize:Route", {"query": {"value": "what is a tide?"}})["data"]
    assert data["category_name"] == "anything" and data["_next"] == ["LLM:Write"]


def test_a_tool_failure_is_its_error_output_as_in_ragflow(alice):
    agent_id = alice.agent(PROMPTED_DSL)
    reply = debug(alice, agent_id, "CodeExec:Calc", {"a": {"value": "x"}})
    assert reply["code"] == 0 and "disabled" in reply["data"]["_ERROR"]      # this server runs no local code


def test_a_component_of_an_unfinished_canvas_can_be_debugged(alice):
    unfinished = {"components": {"begin": cpn("Begin", {}, ["LLM:A"]),
                                 "LLM:A": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user",
                                                                                        "content": "{sys.query}"}]},
                                              ["Message:Missing"])}}
    agent_id = alice.agent(unfinished)
    assert alice.ok("GET", f"/agents/{agent_id}")["compiles"] is False
    assert debug(alice, agent_id, "LLM:A", {"sys.query": {"value": "hi"}})["data"]["content"] == "Answer 1 from LLM:A."


def test_malformed_debug_requests_are_refused(alice):
    agent_id = alice.agent(CHAT_DSL)
    path = f"/agents/{agent_id}/components/LLM:A/debug"
    assert alice.call("POST", path, {})["code"] == 101                      # no params
    assert alice.call("POST", path, {"params": ["x"]})["code"] == 101
    reply = debug(alice, agent_id, "LLM:A", {"sys.query": "no value wrapper"})
    assert reply["code"] == 102 and "`params.sys.query` must be an object with a `value`" in reply["message"]
    reply = debug(alice, agent_id, "LLM:A", {"mystery": {"value": 1}})
    assert reply["code"] == 102 and "not an input of component LLM:A (its inputs: sys.query)" in reply["message"]


def test_another_tenants_agent_answers_as_an_unknown_one(alice, bob):
    agent_id = alice.agent(CHAT_DSL)
    unknown = uuid.uuid4().hex
    for method, path, body in (("GET", f"/agents/{agent_id}/components/LLM:A/input-form", None),
                               ("POST", f"/agents/{agent_id}/components/LLM:A/debug", {"params": {}}),
                               ("POST", f"/agents/{agent_id}/reset", None),
                               ("PUT", f"/agents/{agent_id}/tags", {"tags": ["x"]})):
        theirs, missing = bob.call(method, path, body), bob.call(method, path.replace(agent_id, unknown), body)
        assert theirs["code"] == missing["code"] == 102, (path, theirs)
        assert theirs["message"].replace(agent_id, unknown) == missing["message"]


# --- reset --------------------------------------------------------------------------------------------------
def test_reset_clears_what_earlier_runs_left_in_the_dsl(alice):
    ran = {**CHAT_DSL, "history": [["user", "hi"]], "path": ["begin", "LLM:A"], "retrieval": [{"chunks": []}],
           "globals": {"sys.query": "hi", "sys.conversation_turns": 3, "sys.files": ["f"], "env.lang": "fr"},
           "variables": {"lang": {"type": "string", "value": "en"}}}
    ran["components"] = {**CHAT_DSL["components"], "LLM:A": cpn("LLM", {
        **CHAT_DSL["components"]["LLM:A"]["obj"]["params"], "outputs": {"content": {"type": "string", "value": "old"}}},
        ["Message:M"])}
    agent_id = alice.agent(ran)
    dsl = alice.ok("POST", f"/agents/{agent_id}/reset")
    assert dsl["history"] == dsl["path"] == dsl["retrieval"] == dsl["memory"] == []
    assert dsl["globals"] == {"sys.query": "", "sys.conversation_turns": 0, "sys.files": [], "env.lang": "en"}
    assert dsl["components"]["LLM:A"]["obj"]["params"]["outputs"]["content"] == {"type": "string", "value": None}
    assert alice.ok("GET", f"/agents/{agent_id}")["dsl"] == dsl
    assert len(alice.ok("GET", f"/agents/{agent_id}/versions")) == 2         # the reset is a save


# --- tags -----------------------------------------------------------------------------------------------------
def test_tags_are_set_listed_counted_and_filter_agents(alice, bob):
    suffix = uuid.uuid4().hex[:6]
    first, second = alice.agent(CHAT_DSL), alice.agent(CHAT_DSL)
    assert alice.ok("PUT", f"/agents/{first}/tags", {"tags": [f"sales-{suffix}", f"eu-{suffix}"]}) is True
    assert alice.ok("PUT", f"/agents/{second}/tags", {"tags": f"sales-{suffix}, us-{suffix}"}) is True
    assert alice.ok("GET", f"/agents/{first}")["tags"] == f"sales-{suffix},eu-{suffix}"
    counts = {t["tag"]: t["count"] for t in alice.ok("GET", "/agents/tags")}
    assert counts[f"sales-{suffix}"] == 2 and counts[f"eu-{suffix}"] == 1
    assert all(not t["tag"].endswith(suffix) for t in bob.ok("GET", "/agents/tags"))
    listed = alice.ok("GET", "/agents", params={"tags": f"us-{suffix}"})
    assert [a["id"] for a in listed["canvas"]] == [second] and listed["total"] == 1
    assert {a["id"] for a in alice.ok("GET", "/agents", params={"keywords": f"EU-{suffix}"})["canvas"]} == {first}
    assert alice.ok("GET", "/agents/tags", params={"canvas_category": "dataflow_canvas"}) == []
    assert alice.call("PUT", f"/agents/{first}/tags", {"tags": [{"nested": 1}]})["code"] == 101
    assert alice.call("PUT", f"/agents/{first}/tags", {"tags": 5})["code"] == 101


def test_tags_given_at_creation_are_kept(alice):
    data = alice.ok("POST", "/agents", {"title": f"tagged-{uuid.uuid4().hex[:6]}", "dsl": CHAT_DSL,
                                        "tags": ["a", "A", "b"], "canvas_type": "Customer Support"})
    assert data["tags"] == "a,b" and data["canvas_type"] == "Customer Support"


# --- templates -------------------------------------------------------------------------------------------------
def test_templates_list_canvas2graphs_demos_and_ragflows_templates(alice):
    templates = alice.ok("GET", "/agents/templates")
    by_name = {t["name"]: t for t in templates}
    assert by_name["support_desk"]["source"] == "canvas2graph" and by_name["deep_research"]["source"] == "ragflow"
    deep = by_name["deep_research"]
    assert deep["id"] == "1" and deep["title"]["en"] == "Deep research" and deep["canvas_category"] == "agent_canvas"
    assert "components" in deep["dsl"]
    # a template's DSL is what POST /agents takes, as RAGFlow's editor does with it
    agent = alice.ok("POST", "/agents", {"title": f"from-template-{uuid.uuid4().hex[:6]}",
                                         "dsl": by_name["support_desk"]["dsl"]})
    assert agent["compiles"] is True


def test_the_templates_route_needs_a_token(server):
    import httpx
    reply = httpx.get(server.url + "/api/v1/agents/templates").json()
    assert reply["code"] == 109
