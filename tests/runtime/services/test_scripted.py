"""Specification of the scripted chat model (``--llm-script``, see shared/parity/README.md)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project is not installed in the venv

from canvas2graph.runtime.services.scripted import (  # noqa: E402
    Reply,
    Script,
    ScriptedChatModel,
    ScriptedProviderError,
    ScriptError,
    ScriptExhausted,
)


def model(script, component_id: str | None = None) -> ScriptedChatModel:
    return ScriptedChatModel(script=Script.load(script) if not isinstance(script, Script) else script,
                             component_id=component_id)


def merged(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


@tool
def search_my_dateset(query: str) -> str:
    """Search the knowledge base."""
    return query


# -- loading ------------------------------------------------------------------------------------

def test_a_list_is_the_replies_in_call_order():
    script = Script.load(["first", {"content": "second"}])
    assert [script.next_reply(None).content, script.next_reply(None).content] == ["first", "second"]
    assert script.calls == 2


def test_object_form_has_defaults():
    script = Script.load({"replies": ["hi"]})
    assert script.stream_chunks == 3
    assert script.retrieval is None and script.tool_results == {} and script.by_component == {}
    assert script.next_reply("Agent:A") == Reply(content="hi")


def test_load_from_a_file_path(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"replies": ["from file"], "stream_chunks": 2}))
    for source in (path, str(path)):
        script = Script.load(source)
        assert script.stream_chunks == 2
        assert script.next_reply(None).content == "from file"


def test_real_parity_scripts_load():
    for raw in (
        [{"error": "boom: upstream exploded"}],
        {"replies": [{"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "RAGFlow"}}]},
                     "RAGFlow is an open-source RAG engine."],
         "retrieval": [{"content": "RAGFlow is an open-source RAG engine.", "docnm_kwd": "intro.md", "doc_id": "d1"}]},
        {"auto_reply": "Scripted reply {n}.", "retrieval": []},
    ):
        Script.load(raw)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"replies": "hello"}, "replies must be a list"),
        ([42], "replies[0]: a reply must be a string or an object, got int"),
        ({"replies": ["ok", {"contnet": "typo"}]}, "replies[1]: unknown reply key(s) ['contnet']"),
        ({"replies": [{"tool_calls": [{"arguments": {}}]}]}, 'replies[0].tool_calls[0] must be an object with a "name"'),
        ({"replies": [{"tool_calls": [{"name": "t", "arguments": "{not json"}]}]}, "arguments is not valid JSON"),
        ({"replies": [{"chunks": "abc"}]}, "replies[0].chunks must be a list of strings"),
        ({"by_component": {"Agent:A": "hi"}}, "by_component['Agent:A'] must be a list of replies"),
        ({"stream_chunks": 0}, "stream_chunks must be a positive integer"),
        ({"tool_results": {"TavilySearch": "x"}}, "tool_results['TavilySearch'] must be a list"),
        ({"tool_results": {"TavilySearch": [{"content": "x"}]}}, "a tool result must be a string or an object"),
        ({"retrieval": [3]}, "retrieval[0]: a retrieval chunk must be a string or an object"),
        ({"auto_reply": 1}, "auto_reply must be a string"),
        ({"reply": ["x"]}, "unknown script key(s) ['reply']"),
        ("no/such/script.json", "cannot read script file no/such/script.json"),
        (3, "a script must be a list of replies or an object"),
    ],
)
def test_malformed_scripts_say_what_is_wrong(raw, message):
    with pytest.raises(ScriptError) as err:
        Script.load(raw)
    assert message in str(err.value)


def test_a_malformed_file_names_the_file(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("[oops")
    with pytest.raises(ScriptError, match="bad.json is not valid JSON"):
        Script.load(bad_json)
    bad_shape = tmp_path / "shape.json"
    bad_shape.write_text("[1]")
    with pytest.raises(ScriptError, match=r"shape.json: replies\[0\]"):
        Script.load(bad_shape)


# -- reply selection ----------------------------------------------------------------------------

def test_by_component_queue_is_checked_before_the_shared_replies():
    script = Script.load({"replies": ["shared 1", "shared 2"], "by_component": {"Agent:B": ["for B"]}})
    assert script.next_reply("Agent:A").content == "shared 1"
    assert script.next_reply("Agent:B").content == "for B"
    assert script.next_reply("Agent:B").content == "shared 2"  # B's own queue is empty now


def test_auto_reply_answers_when_the_queues_are_empty():
    script = Script.load({"replies": ["scripted"], "auto_reply": "Reply {n} from {component}; keep {braces}."})
    assert script.next_reply("Agent:A").content == "scripted"
    assert script.next_reply("Agent:A").content == "Reply 2 from Agent:A; keep {braces}."
    assert script.next_reply(None).content == "Reply 3 from ; keep {braces}."


def test_an_empty_queue_without_auto_reply_names_the_component():
    script = Script.load(["only one"])
    script.next_reply("Agent:A")
    with pytest.raises(ScriptExhausted, match="Agent:A") as err:
        script.next_reply("Agent:A")
    assert isinstance(err.value, ScriptError)


def test_models_of_one_run_share_the_queues():
    script = Script.load({"replies": ["one", "two"], "by_component": {"Agent:B": ["b"]}})
    a, b = model(script, "Agent:A"), model(script, "Agent:B")
    assert [a.invoke("x").content, b.invoke("x").content, b.invoke("x").content] == ["one", "b", "two"]


async def test_concurrent_tasks_each_take_a_distinct_reply():
    script = Script.load([f"reply {i}" for i in range(20)])
    replies = await asyncio.gather(*(model(script).ainvoke("x") for _ in range(20)))
    assert sorted(r.content for r in replies) == sorted(f"reply {i}" for i in range(20))


# -- replies chosen by the message ----------------------------------------------------------------

DESKS = {"by_message": [
    {"component": "Categorize:Desk", "match": "charg|refund", "reply": "billing"},
    {"component": "Categorize:Desk", "match": "crash", "reply": "technical"},
    {"component": "Categorize:Desk", "match": "", "reply": "other"},
    {"match": "weather", "reply": {"content": "Sunny.", "tool_calls": [{"name": "forecast", "arguments": {}}]}},
], "replies": ["from the queue"]}


def test_a_rule_answers_by_the_last_user_message_and_is_never_used_up():
    desk = model(DESKS, "Categorize:Desk")
    asked = [desk.invoke([SystemMessage("Examples: the app crashes; I was charged"), HumanMessage(q)]).content
             for q in ("Why was I CHARGED twice?", "The app crashes on start", "Opening hours?", "A refund?")]
    assert asked == ["billing", "technical", "other", "billing"]     # the system prompt's words match nothing


def test_a_rule_for_one_component_leaves_other_callers_to_the_queues():
    assert model(DESKS, "LLM:Billing").invoke("I was charged twice").content == "from the queue"


def test_a_rule_without_a_component_answers_any_caller_with_fresh_tool_call_ids():
    script = Script.load(DESKS)
    first, second = (model(script, "Agent:A").invoke("What is the weather?") for _ in range(2))
    assert first.content == second.content == "Sunny."
    assert first.tool_calls[0]["id"] != second.tool_calls[0]["id"]
    assert script.by_message[3].reply.tool_calls[0].get("id") is None       # the rule itself is unchanged


@pytest.mark.parametrize("rules, message", [
    ({"match": "x"}, r'by_message\[0\] must be an object with "match"'),
    ({"match": "(", "reply": "x"}, r"by_message\[0\].match is not a valid regular expression"),
    ({"match": "x", "reply": "x", "when": 1}, r"by_message\[0\]: unknown rule key\(s\) \['when'\]"),
    ({"match": "x", "reply": 3}, r"by_message\[0\].reply: a reply must be a string or an object"),
])
def test_malformed_rules_say_what_is_wrong(rules, message):
    with pytest.raises(ScriptError, match=message):
        Script.load({"by_message": [rules]})


# -- invoke -------------------------------------------------------------------------------------

def test_invoke_returns_content_usage_and_metadata():
    llm = model(["The capital of France is Paris."])
    message = llm.invoke([SystemMessage("You are terse."), HumanMessage("Capital of France?")])
    assert message.content == "The capital of France is Paris."
    assert message.usage_metadata == {"input_tokens": 6, "output_tokens": 6, "total_tokens": 12}
    assert message.response_metadata["finish_reason"] == "stop"
    assert message.response_metadata["model_name"] == "scripted"
    assert message.additional_kwargs == {}


def test_reasoning_goes_to_additional_kwargs():
    message = model([{"content": "42", "reasoning": "six times seven"}]).invoke("x")
    assert message.content == "42"
    assert message.additional_kwargs["reasoning_content"] == "six times seven"


async def test_an_error_reply_fails_like_a_provider():
    llm = model([{"error": "boom: upstream exploded"}, "after"])
    with pytest.raises(ScriptedProviderError, match="boom: upstream exploded"):
        await llm.ainvoke("x")
    assert (await llm.ainvoke("x")).content == "after"  # the error consumed its reply


def test_tool_calls_via_bind_tools():
    script = Script.load([
        {"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "RAGFlow"}},
                        {"name": "anything_goes", "arguments": '{"q": 1}'}]},
    ])
    llm = model(script).bind_tools([search_my_dateset], tool_choice="auto")
    assert llm.kwargs["tools"][0]["function"]["name"] == "search_my_dateset"
    message = llm.invoke("x")
    assert [(c["name"], c["args"], c["id"]) for c in message.tool_calls] == [
        ("search_my_dateset_0", {"query": "RAGFlow"}, "call_1_0"),
        ("anything_goes", {"q": 1}, "call_1_1"),
    ]
    assert message.response_metadata["finish_reason"] == "tool_calls"


def test_tool_call_ids_are_unique_across_calls():
    tool_call = {"tool_calls": [{"name": "t", "arguments": {}}]}
    llm = model([tool_call, tool_call])
    assert [llm.invoke("x").tool_calls[0]["id"] for _ in range(2)] == ["call_1_0", "call_2_0"]


# -- streaming ----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("The capital of France is Paris.", ["The capital ", "of France ", "is Paris."]),
        ("You were charged twice because of a retry; a refund is on its way.",
         ["You were charged twice because ", "of a retry; a refund ", "is on its way."]),
        ("Rome.", ["Rome."]),
        ("", []),
    ],
)
def test_split_stream_on_word_boundaries(text, pieces):
    assert Script.load([]).split_stream(text) == pieces


def test_split_stream_keeps_every_character():
    text = "  Line one.\n\nLine  two, with   spaces.  "
    script = Script.load({"stream_chunks": 4})
    assert "".join(script.split_stream(text)) == text
    assert len(script.split_stream(text)) <= 4


async def test_stream_yields_word_pieces_and_usage_on_the_last_chunk():
    chunks = [c async for c in model(["The capital of France is Paris."]).astream("Capital?")]
    assert [c.content for c in chunks] == ["The capital ", "of France ", "is Paris."]
    assert [c.usage_metadata for c in chunks[:-1]] == [None, None]
    assert chunks[-1].usage_metadata == {"input_tokens": 1, "output_tokens": 6, "total_tokens": 7}
    assert merged(chunks).response_metadata["finish_reason"] == "stop"


def test_explicit_chunks_are_streamed_as_given():
    llm = model([{"content": "ignored for streaming", "chunks": ["a", "b"]}])
    assert [c.content for c in llm.stream("x")] == ["a", "b"]


def test_stream_chunks_sets_the_number_of_pieces():
    llm = model({"replies": ["one two three four"], "stream_chunks": 2})
    assert [c.content for c in llm.stream("x")] == ["one two ", "three four"]


def test_reasoning_streams_first_as_reasoning_content():
    llm = model([{"content": "It is 42.", "reasoning": "six times seven is forty-two"}])
    chunks = list(llm.stream("x"))
    assert [(c.content, c.additional_kwargs.get("reasoning_content")) for c in chunks] == [
        ("", "six times "), ("", "seven is "), ("", "forty-two"),
        ("It ", None), ("is ", None), ("42.", None),
    ]


async def test_streamed_tool_calls_arrive_in_one_final_chunk():
    script = Script.load([{"content": "Searching.", "tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "x"}}]}])
    llm = model(script).bind_tools([search_my_dateset])
    chunks = [c async for c in llm.astream("x")]
    assert [c.content for c in chunks] == ["Searching.", ""]
    assert chunks[-1].tool_call_chunks == [
        {"name": "search_my_dateset_0", "args": '{"query": "x"}', "id": "call_1_0", "index": 0, "type": "tool_call_chunk"}
    ]
    assert chunks[-1].usage_metadata is not None
    message = merged(chunks)
    assert message.tool_calls == [{"name": "search_my_dateset_0", "args": {"query": "x"}, "id": "call_1_0", "type": "tool_call"}]
    assert message.response_metadata["finish_reason"] == "tool_calls"


def test_an_empty_reply_still_streams_one_chunk_with_usage():
    chunks = list(model([""]).stream("x"))
    assert len(chunks) == 1 and chunks[0].content == "" and chunks[0].usage_metadata is not None


async def test_a_streamed_error_raises_before_any_chunk():
    received = []
    with pytest.raises(ScriptedProviderError, match="boom"):
        async for chunk in model([{"error": "boom"}]).astream("x"):
            received.append(chunk)
    assert received == []


async def test_stream_reports_each_piece_to_callbacks():
    from langchain_core.callbacks import AsyncCallbackHandler

    class Tokens(AsyncCallbackHandler):
        def __init__(self) -> None:
            self.tokens: list[str] = []

        async def on_llm_new_token(self, token: str, **kwargs) -> None:
            self.tokens.append(token)

    handler = Tokens()
    async for _ in model(["The capital of France is Paris."]).astream("x", config={"callbacks": [handler]}):
        pass
    assert handler.tokens == ["The capital ", "of France ", "is Paris."]


# -- retrieval and tool results -----------------------------------------------------------------

def test_retrieval_chunks_are_normalised():
    script = Script.load({"retrieval": [
        "plain text",
        {"content": "rich", "docnm_kwd": "a.pdf", "doc_id": "d1", "similarity": 0.8, "page": 3},
    ]})
    assert script.retrieval == [
        {"content": "plain text", "docnm_kwd": "", "doc_id": "", "similarity": 0.9},
        {"content": "rich", "docnm_kwd": "a.pdf", "doc_id": "d1", "similarity": 0.8, "page": 3},
    ]


def test_tool_result_string_shorthand():
    script = Script.load({"tool_results": {"TavilySearch": ["Paris is in France."]}})
    assert script.next_tool_result(component_name="TavilySearch") == {
        "outputs": {"formalized_content": "Paris is in France."},
        "return": "Paris is in France.",
    }


def test_tool_result_object_form_is_kept():
    entry = {"outputs": {"formalized_content": "fc", "json": [1]}, "return": "seen by the model"}
    script = Script.load({"tool_results": {"TavilySearch": [entry]}})
    assert script.next_tool_result(component_name="TavilySearch") == entry


def test_tool_results_match_component_id_then_function_then_component_name():
    script = Script.load({"tool_results": {
        "Agent:A": ["by id"],
        "tavily_search": ["by function"],
        "TavilySearch": ["by component 1", "by component 2"],
    }})

    def take() -> str | None:
        result = script.next_tool_result(component_name="TavilySearch", function_name="tavily_search",
                                         component_id="Agent:A")
        return result and result["return"]

    assert [take(), take(), take(), take(), take()] == ["by id", "by function", "by component 1", "by component 2", None]


def test_a_tool_without_entries_runs_for_real():
    script = Script.load({"tool_results": {"TavilySearch": ["x"]}})
    assert script.next_tool_result(component_name="Retrieval", function_name="search_my_dateset") is None


def test_cite_names_the_first_passage_the_model_was_given():
    script = Script.load({"replies": ["Refunded in 5 days [ID:{cite}].", "Nothing to cite [ID:{cite}]."]})
    knowledge = SystemMessage("Answer from these passages.\nID: 198\n├── Title: refunds.md\nID: 5\n├── Title: faq.md")
    assert model(script).invoke([knowledge, HumanMessage("why?")]).content == "Refunded in 5 days [ID:198]."
    assert model(script).invoke([HumanMessage("why?")]).content == "Nothing to cite [ID:0]."
