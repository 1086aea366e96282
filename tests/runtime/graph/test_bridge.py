"""LangGraph's synchronous calls run the graph's async nodes on one background event loop."""
from __future__ import annotations

import asyncio
import contextvars
import inspect
from functools import partial

import pytest

from canvas2graph.runtime.graph.bridge import run_sync, sync_twin

WHO = contextvars.ContextVar("who", default="nobody")


async def read_who(suffix: str = "") -> str:
    await asyncio.sleep(0)
    return WHO.get() + suffix


def test_a_coroutine_runs_to_its_end_with_the_caller_s_context_variables():
    WHO.set("the caller")
    assert run_sync(read_who("!")) == "the caller!"


def test_its_exceptions_reach_the_caller_and_every_call_uses_the_same_loop():
    async def fail():
        raise ValueError("broken")

    async def loop_id():
        return id(asyncio.get_running_loop())

    with pytest.raises(ValueError, match="broken"):
        run_sync(fail())
    assert run_sync(loop_id()) == run_sync(loop_id())


def test_a_twin_has_the_signature_langgraph_injects_by():
    class Node:
        async def __call__(self, state, runtime, timeout=None):
            return {"state": state, "runtime": runtime, "timeout": timeout}

    node = Node()
    twin = sync_twin(partial(type(node).__call__, node, timeout=5))
    assert list(inspect.signature(twin).parameters) == ["state", "runtime", "timeout"]
    assert twin({"a": 1}, runtime="rt") == {"state": {"a": 1}, "runtime": "rt", "timeout": 5}


def test_a_synchronous_call_from_a_node_on_the_loop_is_refused_instead_of_deadlocking():
    async def nested():
        return run_sync(read_who())

    with pytest.raises(RuntimeError, match="use ainvoke/astream"):
        run_sync(nested())
