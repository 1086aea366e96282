"""Agent: native tool calling, sub-agents, citations, question rewrite and structured output (SPEC 3.4, 7)."""
from __future__ import annotations

import pytest

from langgraph.checkpoint.memory import InMemorySaver

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.nodes.llm import AnswerText, merge_think_blocks
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn

CHUNKS = [{"content": "RAGFlow is an open-source RAG engine.", "docnm_kwd": "intro.md", "doc_id": "d1"},
          {"content": "Agents are built from a DSL.", "docnm_kwd": "agents.md", "doc_id": "d2"}]
RETRIEVAL_TOOL = {"component_name": "Retrieval", "name": "KB search", "params": {"dataset_ids": ["kb-1"]}}


def agent_dsl(params: dict, *, message: bool = True, before: dict | None = None) -> dict:
    """begin -> [before ->] Agent:A [-> Message:M showing its content]."""
    agent = {"llm_id": "m@OpenAI", "sys_prompt": "You are helpful.",
             "prompts": [{"role": "user", "content": "{sys.query}"}], "max_rounds": 3, **params}
    comps = {"begin": cpn("Begin", downstream=[next(iter(before)) if before else "Agent:A"])}
    for cid, entry in (before or {}).items():
        comps[cid] = {**entry, "downstream": ["Agent:A"]}
    comps["Agent:A"] = cpn("Agent", agent, downstream=["Message:M"] if message else [])
    if message:
        comps["Message:M"] = cpn("Message", {"content": ["{Agent:A@content}"]})
    return {"components": comps}


async def run(dsl: dict, script: dict, query: str = "What is RAGFlow?", history_turns: list[str] = ()):
    """Run the turns of `history_turns` then `query` on one in-memory session: (events, script)."""
    s = Script.load(script)
    runner = Runner(compile_dsl(dsl), InMemorySaver(), ModelFactory(script=s), s)
    for q in history_turns:
        [e async for e in runner.run_turn("s", TurnRequest(query=q))]
    events = [e async for e in runner.run_turn("s", TurnRequest(query=query))]
    return events, s


def finished(events: list[dict], cid: str) -> dict:
    return next(e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == cid)


def shown(events: list[dict]) -> str:
    return "".join(e["data"]["content"] for e in events if e["event"] == "message")


def call(name: str, **arguments) -> dict:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


# --- the tool loop ---------------------------------------------------------------------------

async def test_tools_are_offered_as_function_index_and_their_results_go_back_to_the_model():
    events, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False}, message=False),
                          {"replies": [call("search_my_dateset_0", query="RAGFlow"), "It is a RAG engine."],
                           "retrieval": CHUNKS})
    assert s.requests[0]["tools"] == ["search_my_dateset_0"]
    tool_message = s.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "RAGFlow is an open-source RAG engine." in tool_message["content"]
    assert "ID: " in tool_message["content"]          # chunk blocks headed by their citation id
    assert finished(events, "Agent:A")["outputs"]["content"] == "It is a RAG engine."


async def test_all_tool_calls_of_a_round_run_and_each_result_is_answered():
    reply = {"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "a"}},
                            {"name": "search_my_dateset_0", "arguments": {"query": "b"}}]}
    _, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False}, message=False),
                     {"replies": [reply, "done"], "tool_results": {"Retrieval": ["first", "second"]}})
    tools = [m for m in s.requests[1]["messages"] if m["role"] == "tool"]
    assert sorted(m["content"] for m in tools) == ["first", "second"]
    assert len({m["tool_call_id"] for m in tools}) == 2


async def test_after_max_rounds_of_tool_calls_the_model_is_told_and_answers():
    looping = call("search_my_dateset_0", query="x")
    events, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "max_rounds": 2, "cite": False}, message=False),
                          {"replies": [looping, looping, looping, "gave up"], "tool_results": {"Retrieval": ["r"] * 3}})
    assert len(s.requests) == 4                  # max_rounds + 1 rounds, then the final answer
    assert s.requests[-1]["messages"][-1] == {"role": "human", "content": "Exceed max rounds: 2"}
    assert finished(events, "Agent:A")["outputs"]["content"] == "gave up"


async def test_an_unknown_tool_or_a_failing_tool_is_a_result_the_model_reads():
    events, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False}, message=False),
                          {"replies": [{"tool_calls": [{"name": "nope_3", "arguments": {}},
                                                       {"name": "search_my_dateset_0", "arguments": {"query": "x"}}]},
                                       "sorry"]})
    results = [m["content"] for m in s.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0] == "There is no tool named nope_3."
    assert results[1].startswith("Retrieval error: ")    # no backend configured, no scripted chunks
    assert finished(events, "Agent:A")["error"] is None


# --- streaming into a Message (RAGFlow's traces: tests/parity/cases/agent_stream_*) ---------------
#
# While the Agent streams, the Message shows its text as it comes, its reasoning and one
# "Running the <fn> tool..." notice per tool call as thinking, and thinking that follows thinking as
# one block: the block ends (end_to_think) only when answer text follows, or when the stream ends.
# The Agent's content is its answer alone: the text it wrote outside the thinking, in every round.

WEB_TOOL = {"component_name": "TavilySearch", "name": "Web search", "params": {"api_key": ""}}
BOTH_TOOLS = {"tools": [RETRIEVAL_TOOL, WEB_TOOL], "cite": False}


def stream(events: list[dict]) -> list[str]:
    """The Message's events as THINK / END markers and text, runs of text joined."""
    out: list[str] = []
    for e in events:
        if e["event"] != "message":
            continue
        d = e["data"]
        if d.get("start_to_think") or d.get("end_to_think"):
            out.append("THINK" if d.get("start_to_think") else "END")
        elif out and out[-1] not in ("THINK", "END"):
            out[-1] += d["content"]
        else:
            out.append(d["content"])
    return out


def shown_text(events: list[dict], cid: str = "Message:M") -> str:
    return finished(events, cid)["outputs"]["content"]


async def test_parallel_tool_calls_are_announced_in_one_thinking_block_that_ends_when_the_answer_starts():
    reply = {"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "a"}},
                            {"name": "tavily_search_1", "arguments": {"query": "b"}}]}
    events, _ = await run(agent_dsl(BOTH_TOOLS), {"replies": [reply, "Answer."],
                                                  "tool_results": {"Retrieval": ["kb"], "TavilySearch": ["web"]}})
    assert stream(events) == ["THINK", "Running the search_my_dateset_0 tool...Running the tavily_search_1 tool...",
                              "END", "Answer."]
    assert finished(events, "Agent:A")["outputs"]["content"] == "Answer."
    # the Message keeps what it showed, thinking text included (without the markers), as RAGFlow's does
    assert shown_text(events) == "Running the search_my_dateset_0 tool...Running the tavily_search_1 tool...Answer."


async def test_each_tool_call_has_its_notice_even_two_calls_of_one_tool():
    reply = {"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "a"}},
                            {"name": "search_my_dateset_0", "arguments": {"query": "b"}}]}
    events, _ = await run(agent_dsl(BOTH_TOOLS), {"replies": [reply, "Answer."], "tool_results": {"Retrieval": ["1", "2"]}})
    assert stream(events) == ["THINK", "Running the search_my_dateset_0 tool..." * 2, "END", "Answer."]


async def test_notices_of_successive_rounds_stay_in_the_same_block():
    events, _ = await run(agent_dsl(BOTH_TOOLS),
                          {"replies": [call("search_my_dateset_0", query="a"), call("tavily_search_1", query="b"), "Answer."],
                           "tool_results": {"Retrieval": ["kb"], "TavilySearch": ["web"]}})
    assert stream(events) == ["THINK", "Running the search_my_dateset_0 tool...Running the tavily_search_1 tool...",
                              "END", "Answer."]


async def test_reasoning_notices_and_the_next_rounds_reasoning_make_one_block_and_stay_out_of_the_content():
    events, _ = await run(agent_dsl(BOTH_TOOLS),
                          {"replies": [{"reasoning": "Search first.", "tool_calls": [{"name": "search_my_dateset_0",
                                                                                       "arguments": {"query": "a"}}]},
                                       {"reasoning": "Found it.", "content": "Answer."}],
                           "tool_results": {"Retrieval": ["kb"]}})
    assert stream(events) == ["THINK", "Search first.Running the search_my_dateset_0 tool...Found it.", "END", "Answer."]
    assert finished(events, "Agent:A")["outputs"]["content"] == "Answer."


async def test_text_written_beside_a_tool_call_is_answer_text_and_part_of_the_content():
    events, _ = await run(agent_dsl(BOTH_TOOLS),
                          {"replies": [{"content": "Let me look.", "tool_calls": [{"name": "search_my_dateset_0",
                                                                                    "arguments": {"query": "a"}}]},
                                       "Answer."],
                           "tool_results": {"Retrieval": ["kb"]}})
    assert stream(events) == ["Let me look.", "THINK", "Running the search_my_dateset_0 tool...", "END", "Answer."]
    assert finished(events, "Agent:A")["outputs"]["content"] == "Let me look.Answer."


async def test_a_failing_tool_is_announced_like_any_other_and_the_agent_answers(monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)             # no key: Tavily fails before any request
    events, s = await run(agent_dsl(BOTH_TOOLS), {"replies": [call("tavily_search_1", query="a"), "No luck."]})
    assert "Tavily" in s.requests[1]["messages"][-1]["content"]        # the failure, as the model reads it
    assert stream(events) == ["THINK", "Running the tavily_search_1 tool...", "END", "No luck."]
    assert finished(events, "Agent:A")["error"] is None


async def test_a_component_reading_the_streamed_agents_content_gets_the_answer_without_the_thinking():
    dsl = agent_dsl(BOTH_TOOLS)
    dsl["components"]["Message:M"]["downstream"] = ["Message:Echo"]
    dsl["components"]["Message:Echo"] = cpn("Message", {"content": ["Again: {Agent:A@content}"]})
    events, _ = await run(dsl, {"replies": [call("search_my_dateset_0", query="a"), "Answer."],
                                "tool_results": {"Retrieval": ["kb"]}})
    assert shown_text(events, "Message:Echo") == "Again:Answer."


@pytest.mark.parametrize("reader_first", [True, False])
async def test_a_message_and_a_component_reading_an_agents_content_in_one_step_run_its_tool_loop_once(reader_first):
    """The Agent's tool loop is its generation: whoever reads it first runs it, the other gets its text (found by
    bench.differential: a StringTransform beside the Message that streamed it ran the loop a second time, on
    replies meant for nothing, and the Message showed that second answer)."""
    dsl = agent_dsl(BOTH_TOOLS)
    split = cpn("StringTransform", {"method": "split", "split_ref": "Agent:A@content", "delimiters": [" "],
                                    "outputs": {"result": {"type": "Array<string>", "value": []}}})
    readers = {"StringTransform:S": split, "Message:M": dsl["components"]["Message:M"]}
    dsl["components"].update(dict(reversed(readers.items())) if not reader_first else readers)
    dsl["components"]["Agent:A"]["downstream"] = list(readers) if reader_first else list(reversed(readers))
    events, s = await run(dsl, {"replies": [call("search_my_dateset_0", query="a"), "The tools say so.", "Once more."],
                                "tool_results": {"Retrieval": ["kb"]}, "auto_reply": "A second run."})
    assert finished(events, "StringTransform:S")["outputs"]["result"] == ["The", "tools", "say", "so."]
    assert shown_text(events).endswith("The tools say so.")
    assert finished(events, "Agent:A")["outputs"]["content"] == "The tools say so."
    assert "Once more." not in shown(events) and "A second run." not in shown(events)


async def test_the_same_agent_not_streamed_has_the_same_content():
    script = {"replies": [{"content": "Let me look.", "tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "a"}}]},
                          {"reasoning": "Found it.", "content": "Answer."}],
              "tool_results": {"Retrieval": ["kb"]}}
    streamed, _ = await run(agent_dsl(BOTH_TOOLS), script)
    blocking, _ = await run(agent_dsl(BOTH_TOOLS, message=False), script)
    assert finished(blocking, "Agent:A")["outputs"]["content"] == "Answer."       # the last reply, as RAGFlow's
    assert finished(streamed, "Agent:A")["outputs"]["content"] == "Let me look.Answer."
    assert not [e for e in blocking if e["event"] == "message"]


async def test_after_max_rounds_the_last_answers_reasoning_joins_the_block():
    looping = call("search_my_dateset_0", query="x")
    events, _ = await run(agent_dsl({**BOTH_TOOLS, "max_rounds": 1}),
                          {"replies": [looping, looping, {"reasoning": "Enough.", "content": "Best guess."}],
                           "tool_results": {"Retrieval": ["r", "r"]}})
    assert stream(events) == ["THINK", "Running the search_my_dateset_0 tool..." * 2 + "Enough.", "END", "Best guess."]
    assert finished(events, "Agent:A")["outputs"]["content"] == "Best guess."


async def test_a_reasoning_answer_without_tool_calls_is_one_block_then_the_answer():
    events, _ = await run(agent_dsl({"tools": [RETRIEVAL_TOOL]}),
                          {"replies": [{"content": "Yes.", "reasoning": "Let me see."}]})
    assert stream(events) == ["THINK", "Let me see.", "END", "Yes."]
    assert finished(events, "Agent:A")["outputs"]["content"] == "Yes."


# --- merging thinking blocks, piece by piece ------------------------------------------------------

async def merged(*pieces: str) -> list[str]:
    async def source():
        for p in pieces:
            yield p
    return [p async for p in merge_think_blocks(source())]


async def test_a_block_that_follows_a_block_continues_it():
    assert await merged("<think>", "a", "</think>", "<think>", "b", "</think>", "answer") == \
        ["<think>", "a", "b", "</think>", "answer"]


async def test_the_end_of_a_block_waits_for_the_next_text_or_the_end_of_the_stream():
    assert await merged("<think>", "a", "</think>") == ["<think>", "a", "</think>"]
    assert await merged("text", "<think>", "a", "</think>", " ", "more") == ["text", "<think>", "a", "</think>", " ", "more"]


async def test_an_opening_inside_a_block_opens_nothing_and_empty_pieces_are_dropped():
    assert await merged("<think>", "a", "<think>", "", "b", "</think>", "c") == ["<think>", "a", "b", "</think>", "c"]


async def test_an_end_without_a_beginning_is_kept_before_the_text_that_follows():
    # providers that put reasoning inline sometimes leave the opening tag out
    assert await merged("reasoning", "</think>", "answer") == ["reasoning", "</think>", "answer"]


def test_the_answer_text_is_what_was_written_outside_the_thinking():
    text = AnswerText()
    for piece in ["Let me look.", "<think>", "Running the x tool...", "</think>", "Answer."]:
        text.add(piece)
    assert text.text == "Let me look.Answer."


# --- sub-agents ---------------------------------------------------------------------------------

async def test_a_sub_agent_is_a_tool_named_after_it_that_gets_the_composed_task():
    sub = {"component_name": "Agent", "name": "Web Researcher",
           "params": {"llm_id": "m@OpenAI", "sys_prompt": "You research.", "description": "Finds facts."}}
    _, s = await run(agent_dsl({"tools": [sub], "cite": False}, message=False),
                     {"replies": [call("Web_Researcher_0", user_prompt="find X", reasoning="needed", context="none"),
                                  "X is 42.", "The answer is 42."]})
    assert s.requests[0]["tools"] == ["Web_Researcher_0"]
    sub_request = s.requests[1]
    assert sub_request["component_id"] == "Agent:A-->Web_Researcher"
    assert sub_request["messages"][0] == {"role": "system", "content": "You research."}
    assert sub_request["messages"][-1]["content"] == "\nREASONING:\nneeded\n\nCONTEXT:\nnone\n\nQUERY:\nfind X\n"
    assert s.requests[2]["messages"][-1]["content"] == "X is 42."


def test_tool_params_are_checked_when_the_canvas_compiles():
    bad = agent_dsl({"tools": [{"component_name": "Retrieval", "params": {"top_n": 0}}]})
    _, diags = diagnose(bad)
    assert any(d.component_id == "Agent:A" and d.field == "params.tools.0.params.top_n" for d in diags)
    unknown = agent_dsl({"tools": [{"component_name": "Teleport"}]})
    _, diags = diagnose(unknown)
    assert any(d.component_id == "Agent:A" and d.field == "params.tools.0.component_name" for d in diags)


# --- citations ------------------------------------------------------------------------------------

RETRIEVAL_NODE = {"Retrieval:R": {"obj": {"component_name": "Retrieval",
                                          "params": {"query": "sys.query", "dataset_ids": ["kb-1"]}}}}


async def test_chunks_retrieved_earlier_put_citation_rules_in_the_prompt_and_the_answer_streams_directly():
    events, s = await run(agent_dsl({}, before=RETRIEVAL_NODE),
                          {"replies": ["RAGFlow is a RAG engine [ID:446]."], "retrieval": CHUNKS})
    assert len(s.requests) == 1
    assert "[ID:" in s.requests[0]["messages"][0]["content"]        # the rules are in the system prompt
    assert shown(events) == "RAGFlow is a RAG engine [ID:446]."
    end = next(e["data"] for e in events if e["event"] == "message_end")
    assert set(end["reference"]["chunks"]) == {"446", "336"} and "intro.md" in end["reference"]["doc_aggs"]


async def test_chunks_found_by_the_agents_own_tools_get_a_second_citation_pass():
    events, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL]}),
                          {"replies": [call("search_my_dateset_0", query="RAGFlow"), "RAGFlow is a RAG engine.",
                                       "RAGFlow is a RAG engine [ID:446]."], "retrieval": CHUNKS})
    assert len(s.requests) == 3
    citation_request = s.requests[2]
    assert citation_request["tools"] == []
    assert "ID: 446" in citation_request["messages"][0]["content"]          # the sources
    assert citation_request["messages"][-1]["content"] == "RAGFlow is a RAG engine."   # the silent answer
    assert shown(events) == "Running the search_my_dateset_0 tool...RAGFlow is a RAG engine [ID:446]."
    assert finished(events, "Agent:A")["outputs"]["content"] == "RAGFlow is a RAG engine [ID:446]."
    end = next(e["data"] for e in events if e["event"] == "message_end")
    assert "446" in end["reference"]["chunks"]


async def test_without_cite_there_are_no_citation_rules_and_no_second_pass():
    events, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False}),
                          {"replies": [call("search_my_dateset_0", query="x"), "Plain."], "retrieval": CHUNKS})
    assert len(s.requests) == 2 and "[ID:" not in s.requests[1]["messages"][0]["content"]
    assert shown(events).endswith("Plain.")


# --- multi-turn rewrite and structured output --------------------------------------------------

async def test_a_long_conversation_is_rewritten_into_one_question_before_streaming():
    events, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False}),
                          {"replies": ["Hi.", "What is the capital of France?", "Paris."]},
                          query="and of France?", history_turns=["What is the capital of Italy?"])
    rewrite = s.requests[1]
    assert rewrite["tools"] == [] and "and of France?" in rewrite["messages"][-1]["content"]
    assert s.requests[2]["messages"][-1]["content"] == "What is the capital of France?"
    assert finished(events, "Agent:A")["outputs"]["content"] == "Paris."


async def test_structured_output_is_parsed_and_asked_again_when_it_is_not_json():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    events, s = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False, "max_retries": 1,
                                     "outputs": {"structured": schema}}, message=False),
                          {"replies": ["not json at all", '{"city": "Paris"}']})
    assert finished(events, "Agent:A")["outputs"]["structured"] == {"city": "Paris"}
    assert "Output ONLY valid JSON" in s.requests[1]["messages"][-1]["content"]


async def test_structured_output_that_never_parses_is_the_agents_error():
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    events, _ = await run(agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False,
                                     "outputs": {"structured": schema}}, message=False),
                          {"replies": ["nope", "still nope"]})
    assert "not valid JSON" in finished(events, "Agent:A")["error"]


@pytest.mark.parametrize("params", [{"max_rounds": -1}, {"llm_id": ""}])
def test_agent_params_are_checked(params):
    _, diags = diagnose(agent_dsl(params))
    assert any(d.component_id == "Agent:A" and d.severity == "error" for d in diags)


# --- an Agent behind a Message that does not stream --------------------------------------------

async def test_behind_a_message_that_does_not_stream_the_agent_still_calls_its_tools():
    dsl = agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False})
    dsl["components"]["Message:M"]["obj"]["params"]["stream"] = False
    events, s = await run(dsl, {"replies": [call("search_my_dateset_0", query="RAGFlow"), "It is a RAG engine."],
                                "tool_results": {"Retrieval": ["RAGFlow is an open-source RAG engine."]}})
    assert s.requests[0]["tools"] == ["search_my_dateset_0"]           # the tool loop ran, not a plain completion
    assert [m["content"] for m in s.requests[1]["messages"] if m["role"] == "tool"] == ["RAGFlow is an open-source RAG engine."]
    assert finished(events, "Agent:A")["outputs"]["content"] == "It is a RAG engine."
    assert shown(events) == "It is a RAG engine."


async def test_a_jinja_message_reading_a_failing_agent_reports_the_agents_failure():
    dsl = agent_dsl({"tools": [RETRIEVAL_TOOL], "cite": False})
    dsl["components"]["Message:M"]["obj"]["params"]["content"] = ["{% if true %}{Agent:A@content}{% endif %}"]
    events, _ = await run(dsl, {"replies": [{"error": "the provider is down"}]})
    failed = [e["data"] for e in events if e["event"] == "node_finished" and e["data"]["error"]]
    assert [f["component_id"] for f in failed] == ["Agent:A"]
