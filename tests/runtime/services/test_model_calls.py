"""Model calls skip LangChain's callback wrapper only when nothing could observe them."""
from __future__ import annotations

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda

from canvas2graph.runtime.services import model_calls
from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel


class Seen(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.starts = 0

    async def on_chat_model_start(self, *args, **kwargs) -> None:
        self.starts += 1


def model(*replies: str) -> ScriptedChatModel:
    return ScriptedChatModel(script=Script.load({"replies": [{"content": r} for r in replies]}))


@pytest.fixture
def public_path_forbidden(monkeypatch):
    """Makes LangChain's public entry points fail, so a passing call proves it went direct."""
    async def refuse(*args, **kwargs):
        raise AssertionError("the public path was taken")
    monkeypatch.setattr(BaseChatModel, "ainvoke", refuse)
    monkeypatch.setattr(BaseChatModel, "astream", refuse)


async def test_an_unobserved_call_goes_straight_to_the_provider_method(public_path_forbidden):
    reply = await model_calls.invoke(model("Paris is the capital."), [HumanMessage("Capital of France?")])
    assert reply.content == "Paris is the capital."


async def test_an_unobserved_stream_yields_the_provider_chunks(public_path_forbidden):
    pieces = [c.content async for c in model_calls.stream(model("one two three"), [HumanMessage("count")])]
    assert "".join(pieces) == "one two three" and len(pieces) > 1


async def test_a_callback_handler_in_the_run_config_sees_every_call():
    seen = Seen()

    async def call(_):
        first = await model_calls.invoke(model("a"), [HumanMessage("q")])
        second = [c async for c in model_calls.stream(model("b c"), [HumanMessage("q")])]
        return first, second

    await RunnableLambda(call).ainvoke(None, config={"callbacks": [seen]})
    assert seen.starts == 2


async def test_langsmith_tracing_takes_the_public_path(monkeypatch):
    from langchain_core.tracers.context import tracing_v2_enabled
    calls = []
    original = BaseChatModel.ainvoke

    async def counted(self, *args, **kwargs):
        calls.append(1)
        return await original(self, *args, **kwargs)
    monkeypatch.setattr(BaseChatModel, "ainvoke", counted)
    monkeypatch.setenv("LANGSMITH_API_KEY", "test")
    with tracing_v2_enabled(project_name="t", client=_NullClient()):
        await model_calls.invoke(model("x"), [HumanMessage("q")])
    assert calls == [1]


async def test_a_model_with_its_own_callbacks_or_a_cache_takes_the_public_path(monkeypatch):
    from langchain_core.caches import InMemoryCache
    seen = Seen()
    with_callbacks = model("x")
    with_callbacks.callbacks = [seen]
    await model_calls.invoke(with_callbacks, [HumanMessage("q")])
    assert seen.starts == 1

    cached = ScriptedChatModel(script=Script.load({"auto_reply": "same"}), cache=InMemoryCache())
    assert model_calls._unobserved(cached, [HumanMessage("q")]) is None


async def test_bound_tools_are_passed_to_the_provider_method(public_path_forbidden):
    script = Script.load({"replies": [{"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}]}]})
    bound = ScriptedChatModel(script=script).bind_tools(
        [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}])
    reply = await model_calls.invoke(bound, [HumanMessage("find x")])
    assert [c["name"] for c in reply.tool_calls] == ["lookup"]
    assert script.requests[-1]["tools"] == ["lookup"]


class _NullClient:
    """Stands in for a LangSmith client: takes runs and sends nothing anywhere."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None
