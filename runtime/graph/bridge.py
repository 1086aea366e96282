"""Synchronous twins of the graph's async nodes, for LangGraph's synchronous calls (`invoke`, `stream`).

Every component is an async function: models, tools and services are awaited. LangGraph runs a node's
sync function under `invoke`/`stream`, so each node also gets a twin that runs the coroutine to the end
on one event loop kept in a background thread for the whole process. One loop, not a new one per call:
clients that belong to a loop (HTTP connection pools, MCP sessions, the retrieval backend) are then
used from the loop that made them. The twin runs the coroutine with the calling thread's context
variables, which is how LangGraph hands a node its config (`interrupt()`, the stream writer).
"""
from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from typing import Any, Callable, Coroutine

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None:
            loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=loop.run_forever, name="canvas2graph-sync-nodes", daemon=True)
            _thread.start()
            _loop = loop
        return _loop


def run_sync(coro: Coroutine) -> Any:
    """Run `coro` on the background loop and wait for its result (or its exception)."""
    loop = _background_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError("a synchronous graph call from inside a node running on canvas2graph's node loop; "
                           "use ainvoke/astream there")
    # run_coroutine_threadsafe schedules the task with a copy of this thread's context variables
    return asyncio.run_coroutine_threadsafe(coro, loop).result()


def _call(afn: Callable[..., Coroutine], *args: Any, **kwargs: Any) -> Any:
    return run_sync(afn(*args, **kwargs))


@functools.lru_cache(maxsize=256)
def _partial_signature(function: Callable, bound: int, keywords: tuple[str, ...]) -> inspect.Signature:
    # the parameters left by binding `bound` positional arguments and these keywords (their values do not matter)
    return inspect.signature(functools.partial(function, *([None] * bound), **dict.fromkeys(keywords)))


def sync_twin(afn: Callable[..., Coroutine]) -> Callable[..., Any]:
    """A sync function with `afn`'s signature (LangGraph injects `runtime`, `error`, ... by parameter name).

    It is a partial, so LangGraph does not scan its bytecode for subgraphs at compile time; the graph's
    nodes are partials of a few functions, so their signatures are computed once per function."""
    twin = functools.partial(_call, afn)
    if isinstance(afn, functools.partial):
        twin.__signature__ = _partial_signature(afn.func, len(afn.args), tuple(sorted(afn.keywords)))
    else:
        twin.__signature__ = inspect.signature(afn)
    return twin
