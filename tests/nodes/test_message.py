"""Message: what the user sees, streamed or rendered (SPEC 3.5, 4.1, 6.3)."""
from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from canvas2graph.runtime.graph.event_order import TASK_KEY
from canvas2graph.runtime.graph.state import build_state_schema
from canvas2graph.runtime.graph.values import PENDING
from tests.nodes.helpers import build, context, errors, state


def message(*content: str, **params):
    return build("Message:M", "Message", {"content": list(content), **params})


async def collect(node, st, ctx=None):
    """Run a node inside a one-node graph so its stream writer works; return (result update, custom items)."""
    graph = StateGraph(build_state_schema())
    graph.add_node("m", node.__call__)
    graph.add_edge(START, "m")
    graph.add_edge("m", END)
    items, update = [], None
    async for mode, chunk in graph.compile().astream(st, stream_mode=["custom", "updates"], context=ctx):
        if mode == "updates":
            update = chunk["m"]
        elif "event" in chunk:
            # every message names the graph node that wrote it (runtime/graph/event_order.py): here always "m"
            assert chunk.pop(TASK_KEY) == "m"
            items.append(chunk)
    return update, items


async def test_streaming_splices_values_and_drops_the_spaces_next_to_references():
    update, items = await collect(message("Hello {sys.query} , bye"), state("Ann"))
    assert [i["content"] for i in items if i.get("event") == "message"] == ["Hello", "Ann", ", bye"]
    assert update["outputs"]["Message:M"]["content"] == "HelloAnn, bye"
    assert items[-1] == {"event": "message_end"}


async def test_non_string_values_print_as_json():
    update, _ = await collect(message("{begin@x}"), state(**{"begin": {"x": {"a": [1, "é"]}}}))
    assert update["outputs"]["Message:M"]["content"] == '{"a": [1, "é"]}'


async def test_without_streaming_spaces_are_kept_and_one_message_is_sent():
    update, items = await collect(message("Hello {sys.query} , bye", stream=False), state("Ann"))
    assert update["outputs"]["Message:M"]["content"] == "Hello Ann , bye"
    assert [i for i in items if i.get("event") == "message"] == [{"event": "message", "content": "Hello Ann , bye"}]


async def test_jinja_templates_render_with_the_values():
    node = message("{% for x in begin@items %}[{{ x }}]{% endfor %}".replace("begin@items", "{begin@items}"))
    update, _ = await collect(node, state(**{"begin": {"items": ["a", "b"]}}))
    assert update["outputs"]["Message:M"]["content"] == "[a][b]"


async def test_a_pending_generation_streams_through_and_becomes_the_llm_content():
    pending = {PENDING: True, "component_id": "LLM:A", "llm_id": "m@OpenAI", "gen_conf": {},
               "messages": [{"role": "user", "content": "hi"}]}
    st = state("hi", **{"LLM__A": {"content": pending, "_created_time": 0.0}})
    node = build("Message:M", "Message", {"content": ["Answer: {LLM:A@content}"]},
                 **{"LLM:A": {"component_name": "LLM", "params": {"llm_id": "m@OpenAI"}}})
    update, items = await collect(node, st, context("One two three."))
    assert [i["content"] for i in items if i.get("event") == "message"] == ["Answer:", "One ", "two ", "three."]
    assert update["outputs"]["LLM:A"]["content"] == "One two three."
    assert update["outputs"]["Message:M"]["content"] == "Answer:One two three."


async def test_status_is_copied_into_message_end():
    _, items = await collect(message("x", status="404"), state())
    assert items[-1] == {"event": "message_end", "status": "404"}


def test_content_must_not_be_empty():
    assert [d.field for d in errors("Message", {"content": []})] == ["params.content"]
