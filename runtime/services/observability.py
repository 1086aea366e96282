"""Tracing: every run shows up the same way in LangSmith and in Langfuse, and costs nothing when off.

    config = {"configurable": {"thread_id": session_id}, **trace_config(agent, session_id)}
    graph.astream(graph_input, config, ...)

`trace_config` gives the pieces of a LangGraph run config that name and group a run: the run named
after the agent, the session as its thread (`thread_id` and `session_id` metadata, which LangSmith
groups threads by; `langfuse_session_id`, Langfuse's sessions), the user, and the Langfuse callback
handler. The Runner applies it where it starts a turn; any other caller of the compiled graph (the
public API) applies the same function. Each node's run carries its component's id and type (the
node metadata `canvas2graph.compiler.build` sets), each model call its prompt, reply and token usage (LangChain's
own model runs), and each Agent tool call is a tool run (`tool_run`).

- LangSmith: LangChain's own tracer, switched on by `LANGSMITH_TRACING=true` (with `LANGSMITH_API_KEY`,
  `LANGSMITH_ENDPOINT`, `LANGSMITH_PROJECT`). It sees runs without any help; this adds the names.
- Langfuse: `LANGFUSE_PUBLIC_KEY` and `LANGFUSE_SECRET_KEY` (and `LANGFUSE_HOST`, else Langfuse's
  cloud) add Langfuse's LangChain callback handler to every run. `LANGFUSE_TRACING_ENABLED=false`
  switches it off with the keys set.

With neither enabled, `trace_config` returns `{}`: no callback, no metadata, and LangGraph runs the
graph exactly as without this module (`python -m bench.tracing` measures it).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Awaitable, Callable

log = logging.getLogger("canvas2graph.tracing")
DEFAULT_NAME = "canvas2graph"
TAG = "canvas2graph"


def langsmith_enabled() -> bool:
    """Whether LangChain's own LangSmith tracer is on (LANGSMITH_TRACING=true or its older names).

    Asked of langsmith itself, so the answer is the one LangChain acts on (which also honours
    `langsmith.tracing_context(enabled=...)`)."""
    from langsmith.utils import tracing_is_enabled
    return bool(tracing_is_enabled())


def langfuse_enabled() -> bool:
    """Whether runs go to Langfuse: both keys set, and not switched off by LANGFUSE_TRACING_ENABLED."""
    if not (os.environ.get("LANGFUSE_PUBLIC_KEY") and os.environ.get("LANGFUSE_SECRET_KEY")):
        return False
    return os.environ.get("LANGFUSE_TRACING_ENABLED", "true").strip().lower() not in ("false", "0", "no", "off")


def tracing_enabled() -> bool:
    """Whether any tracer is on (callers skip work that only feeds traces, e.g. looking up a title)."""
    return langfuse_enabled() or langsmith_enabled()


def trace_config(agent: str, session_id: str, *, user_id: str = "", tenant: str = "") -> dict[str, Any]:
    """The run config pieces that trace a turn of `agent` on the thread `session_id`.

    Returns `{}` when no tracer is enabled; else `run_name` (the agent), `metadata` (agent, session and
    thread ids, user, tenant; Langfuse's trace attributes when Langfuse is on), `tags` and, for
    Langfuse, `callbacks`. Merge it into the config given to `invoke`/`astream`; LangChain passes the
    metadata and tags on to every node's and model's run."""
    langfuse = langfuse_enabled()
    if not langfuse and not langsmith_enabled():
        return {}
    name = agent.strip() or DEFAULT_NAME
    metadata: dict[str, Any] = {"agent": name, "session_id": session_id, "thread_id": session_id}
    if user_id:
        metadata["user_id"] = user_id
    if tenant:
        metadata["tenant"] = tenant
    config: dict[str, Any] = {"run_name": name, "metadata": metadata, "tags": [TAG]}
    if langfuse:
        # Langfuse reads its trace attributes from these metadata keys of the root run
        metadata.update(langfuse_session_id=session_id, langfuse_trace_name=name,
                        **({"langfuse_user_id": user_id} if user_id else {}))
        config["callbacks"] = [langfuse_handler()]
    return config


def langfuse_handler():
    """A Langfuse LangChain callback handler for one run; the Langfuse client behind it is shared
    (it sends spans in the background, and once more when the process exits)."""
    from langfuse.langchain import CallbackHandler
    return CallbackHandler()


PROBE_SECONDS = 0.8          # how long a run waits to learn that a tracer's host cannot be reached
LANGSMITH_DEFAULT = "https://api.smith.langchain.com"
LANGFUSE_DEFAULT = "https://cloud.langfuse.com"


def endpoints() -> dict[str, str]:
    """The base URL of each tracer that is on, by name (LangSmith, Langfuse)."""
    found = {}
    if langsmith_enabled():
        found["LangSmith"] = os.environ.get("LANGSMITH_ENDPOINT") or os.environ.get("LANGCHAIN_ENDPOINT") or LANGSMITH_DEFAULT
    if langfuse_enabled():
        found["Langfuse"] = os.environ.get("LANGFUSE_BASE_URL") or os.environ.get("LANGFUSE_HOST") or LANGFUSE_DEFAULT
    return found


def _probe(url: str, result: dict) -> None:
    """Resolve `url`'s host and open a TCP connection to it; a failure's reason goes into `result`."""
    import socket
    from urllib.parse import urlsplit
    try:
        parts = urlsplit(url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "", port), timeout=PROBE_SECONDS):
            result["ok"] = True
    except (OSError, ValueError) as e:
        result["error"] = getattr(e, "strerror", None) or str(e) or type(e).__name__


def unreachable(urls: dict[str, str], timeout: float = PROBE_SECONDS) -> dict[str, str]:
    """The tracers whose host cannot be reached within `timeout` seconds (all probed at once), with why.

    Daemon threads, not an executor: a lookup that hangs past the deadline must not hold up the exit."""
    import threading
    import time
    results = {name: {} for name in urls}
    threads = [threading.Thread(target=_probe, args=(url, results[name]), daemon=True) for name, url in urls.items()]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {name: r.get("error") or f"no answer within {timeout:g} s" for name, r in results.items() if not r.get("ok")}


class reachable_tracers:
    """`with reachable_tracers():` around a command's run: a tracer whose host cannot be reached is switched
    off for the run, said in one line on stderr, instead of costing seconds of retries and a traceback.

    Costs nothing with tracing off; with it on, one connection per tracer (at most PROBE_SECONDS)."""

    def __enter__(self) -> "reachable_tracers":
        import sys
        self._langsmith_off = None
        urls = endpoints()
        for name, why in (unreachable(urls) if urls else {}).items():
            print(f"canvas2graph: {name} at {urls[name]} cannot be reached ({why}): this run is not traced there",
                  file=sys.stderr)
            if name == "Langfuse":
                os.environ["LANGFUSE_TRACING_ENABLED"] = "false"    # read by langfuse_enabled() on each call
            else:
                from langsmith import tracing_context
                self._langsmith_off = tracing_context(enabled=False)
                self._langsmith_off.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._langsmith_off is not None:
            self._langsmith_off.__exit__(*exc)


def flush() -> None:
    """Send what the tracers still hold: a command that exits right after its run calls this.

    A collector that cannot be reached delays it by the tracers' own timeouts and retries (they print
    why); it never fails the command, whose run is over."""
    try:
        if langsmith_enabled():
            from langchain_core.tracers.langchain import wait_for_all_tracers
            wait_for_all_tracers()
        if langfuse_enabled():
            from langfuse import get_client
            get_client().flush()
    except Exception as e:          # noqa: BLE001 - tracing must not turn a finished run into a failure
        log.warning("could not send the traces: %s: %s", type(e).__name__, e)


async def tool_run(name: str, args: dict, call_id: str | None, call: Callable[[], Awaitable[str]], *,
                   agent_id: str = "") -> str:
    """Run an Agent's tool call as a tool run of the current node, so traces show the call and its result.

    The Agent calls its tools itself (not through LangChain tools), so nothing would trace them; with
    no tracer in the node's config this is `await call()` and nothing more. `agent_id` is the Agent
    component that made the call (a Message may be the node that runs it, streaming the Agent)."""
    from langchain_core.callbacks.base import BaseCallbackManager
    from langchain_core.runnables.config import get_async_callback_manager_for_config, var_child_runnable_config

    config = var_child_runnable_config.get()
    callbacks = config.get("callbacks") if config else None
    if not callbacks or (isinstance(callbacks, BaseCallbackManager) and not callbacks.handlers):
        return await call()
    manager = get_async_callback_manager_for_config(config)
    if agent_id:
        manager.add_metadata({"agent_component_id": agent_id}, inherit=False)
    run = await manager.on_tool_start({"name": name, "description": f"the {name} tool"}, str(args), name=name,
                                      inputs=args, tool_call_id=call_id)
    try:
        result = await call()
    except BaseException as e:
        await run.on_tool_error(e)
        raise
    await run.on_tool_end(result)
    return result
