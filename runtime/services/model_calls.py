"""Calling a chat model: LangChain's `ainvoke`/`astream`, or its `_agenerate`/`_astream` when no one listens.

`BaseChatModel.ainvoke` wraps the provider call (`_agenerate`, the method every LangChain chat model
implements) in LangChain's callback machinery: it configures a callback manager, starts and ends a
run with fresh ids, merges metadata and formats the messages for tracers. With a tracer (LangSmith,
Langfuse), LangGraph's `messages` stream mode, `astream_events` or a cache that work is the point.
Without any of them it is pure overhead: about 0.25 ms of CPU per call on these machines, a third of
an LLM component's whole cost in the scripted benchmarks (docs/performance.md, "Model calls").

So components call `invoke(model, messages)` and `stream(model, messages)`, which take LangChain's
public path whenever anything could observe the call, and call the model's own `_agenerate` /
`_astream` directly only when nothing can: no callback handler in the run's config (LangGraph adds
one for `stream_mode="messages"` and for `astream_events`; tracers add theirs), no LangSmith tracing
(environment or `tracing_context`), no configure hook set (how integrations inject handlers), no
debug or verbose mode, no cache or rate limiter on the model, plain text messages, and LangChain's
default output format. The provider call is the same either way. What the skipped wrapper would add
to the reply (a `run-` message id, `model_provider` in the response metadata) is read by no
component: they read the text, the tool calls and the usage, which the provider's method sets.
"""
from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, AsyncIterator, Sequence

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessageChunk, BaseMessage


async def invoke(model: Any, messages: Sequence[BaseMessage]) -> BaseMessage:
    """`model.ainvoke(messages)`, without the callback wrapper when nothing observes the call."""
    direct = _unobserved(model, messages)
    if direct is None:
        return await model.ainvoke(list(messages))
    chat, kwargs = direct
    result = await chat._agenerate(list(messages), **kwargs)
    return result.generations[0].message


async def stream(model: Any, messages: Sequence[BaseMessage]) -> AsyncIterator[AIMessageChunk]:
    """`model.astream(messages)`, without the callback wrapper when nothing observes the call."""
    direct = _unobserved(model, messages)
    if direct is None or not _streams_natively(direct[0]):
        async for chunk in model.astream(list(messages)):
            yield chunk
        return
    chat, kwargs = direct
    async for chunk in chat._astream(list(messages), **kwargs):
        yield chunk.message


@cache
def _langchain() -> Any:
    """What the check needs from langchain-core, imported on the first call (a CLI `compile` imports
    the components without running any). Some of it is private to langchain-core: if it moves,
    every call takes the public path."""
    from types import SimpleNamespace
    try:
        from langchain_core.callbacks.manager import _get_debug
        from langchain_core.globals import get_llm_cache
        from langchain_core.language_models import BaseChatModel
        from langchain_core.runnables import RunnableBinding
        from langchain_core.runnables.config import var_child_runnable_config
        from langchain_core.tracers.context import _configure_hooks, _tracing_v2_is_enabled
        from langchain_core.utils.env import env_var_is_set
    except ImportError:                         # pragma: no cover - depends on langchain-core's internals
        return None
    return SimpleNamespace(get_debug=_get_debug, get_llm_cache=get_llm_cache, BaseChatModel=BaseChatModel,
                           RunnableBinding=RunnableBinding, config_var=var_child_runnable_config,
                           configure_hooks=_configure_hooks, tracing_enabled=_tracing_v2_is_enabled,
                           env_var_is_set=env_var_is_set)


def _streams_natively(model: Any) -> bool:
    return type(model)._astream is not _langchain().BaseChatModel._astream


def _unobserved(model: Any, messages: Sequence[BaseMessage]) -> tuple[BaseChatModel, dict] | None:
    """(the chat model, its bound call arguments) when nothing could observe a call, else None."""
    lc = _langchain()
    if lc is None:
        return None
    kwargs: dict = {}
    if isinstance(model, lc.RunnableBinding):      # `bind_tools` and `bind` results
        if model.config or model.config_factories or not isinstance(model.bound, lc.BaseChatModel):
            return None
        kwargs = dict(model.kwargs)
        model = model.bound
    if not isinstance(model, lc.BaseChatModel):
        return None
    if (model.callbacks or model.verbose or model.rate_limiter is not None
            or getattr(model, "output_version", None) not in (None, "v0")
            or model.cache not in (None, False) or (model.cache is None and lc.get_llm_cache() is not None)):
        return None
    if any(not isinstance(m.content, str) for m in messages):
        return None                             # LangChain normalizes content blocks on its path
    config = lc.config_var.get() or {}
    callbacks = config.get("callbacks")
    if callbacks:
        if isinstance(callbacks, list) or callbacks.handlers or callbacks.inheritable_handlers:
            return None
    if lc.tracing_enabled() or lc.get_debug():
        return None
    for var, _inheritable, handler_class, env_var in lc.configure_hooks:
        if var.get() is not None or (env_var is not None and handler_class is not None and lc.env_var_is_set(env_var)):
            return None
    return model, kwargs
