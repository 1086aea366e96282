"""Component failures the way RAGFlow handles them, built from LangGraph's own mechanisms (SPEC 5.6).

- `exception_method: goto` -> a node error handler that records `_ERROR` and goes to `exception_goto`;
- `exception_method: comment` -> an error handler that stores `exception_default_value` (in
  `content` for LLM and Agent, in `result` for the rest, as RAGFlow does) and continues downstream;
  a component that reports its own failure in RAGFlow (`reports_own_failure`: the Browser) keeps its
  error and empty outputs instead, and the default is shown as a message;
- no method -> no handler: the failure ends the turn (the runner reports it);
- `max_retries` / `delay_after_error` -> a RetryPolicy that retries what RAGFlow's model layer
  retries: rate limits, server errors, timeouts and lost connections, not bad requests or bugs.
  A streamed generation runs inside the Message that shows it, so the LLM's settings are applied
  there by `canvas2graph.nodes.llm.stream_generation`, with the same backoff (`retry_interval`).
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:    # imported where used: `canvas2graph compile` loads every component without LangGraph
    from langgraph.errors import NodeError
    from langgraph.types import Command, RetryPolicy

from canvas2graph.nodes.base import ComponentError, handler_done
from canvas2graph.runtime.graph.state import LAST, OUTPUTS

# Components whose failure default goes into `content` (they handle their own **ERROR** answers);
# every other one, Categorize included, gets it in `result` (RAGFlow's ComponentBase.set_exception_default_value)
CONTENT_DEFAULT = {"LLM", "Agent"}


class ModelCallError(Exception):
    """A provider call failed; the message is RAGFlow's `**ERROR**: <KIND> - <detail>`."""

    def __init__(self, kind: str, detail: str, retryable: bool):
        super().__init__(f"**ERROR**: {kind} - {detail}")
        self.kind = kind
        self.retryable = retryable


def classify(e: BaseException) -> ModelCallError:
    """Name a provider failure as RAGFlow's model layer does; decide whether retrying can help."""
    if isinstance(e, ModelCallError):
        return e
    status = getattr(e, "status_code", None) or getattr(getattr(e, "response", None), "status_code", None)
    name = type(e).__name__
    if status in (401, 403) or name in ("AuthenticationError", "PermissionDeniedError"):
        return ModelCallError("AUTH_ERROR", str(e), retryable=False)
    if status in (400, 404, 422) or name in ("BadRequestError", "NotFoundError", "UnprocessableEntityError"):
        return ModelCallError("INVALID_REQUEST", str(e), retryable=False)
    # rate limits, 5xx, timeouts, connection failures, and the scripted model's errors (which stand
    # for a provider error): RAGFlow retries these and reports MAX_RETRIES_EXCEEDED at the end
    tried = unreached_host(e)
    return ModelCallError("MAX_RETRIES_EXCEEDED", f"{e} (tried {tried})" if tried else str(e), retryable=True)


def unreached_host(e: BaseException) -> str:
    """Where a failed connection went (`https://host:port`, from the request the error carries), so that
    "Connection error." says which base URL to check; "" for other failures."""
    if not (isinstance(e, (ConnectionError, TimeoutError)) or "Connection" in type(e).__name__
            or "Timeout" in type(e).__name__ or "Connect" in type(e).__name__):
        return ""
    try:
        url = getattr(getattr(e, "request", None), "url", None)
    except RuntimeError:            # httpx raises when an error has no request
        return ""
    host = getattr(url, "host", None)
    if not host:
        return ""
    port = getattr(url, "port", None)
    return f"{url.scheme}://{host}" + (f":{port}" if port else "")


def is_retryable(e: BaseException) -> bool:
    while isinstance(e, ComponentError) and e.__cause__ is not None:
        e = e.__cause__
    if isinstance(e, ModelCallError):
        return e.retryable
    from langgraph.errors import NodeTimeoutError
    return isinstance(e, (NodeTimeoutError, TimeoutError, ConnectionError))


BACKOFF_FACTOR = 2.0
# LangGraph's jitter adds a uniform 0-1 s to every retry interval. That spreads retries of many
# sessions against a rate-limited provider, but for a short delay_after_error it would dominate the
# delay asked for (0 s would become up to 1 s), so intervals shorter than this get no jitter.
JITTER_FROM_S = 10.0


def max_interval(delay: float) -> float:
    return max(60.0, delay)


def retry_interval(delay: float, attempt: int) -> float:
    """Seconds to wait before retry number `attempt` (1, 2, ...), as the RetryPolicy below waits."""
    interval = min(max_interval(delay), delay * BACKOFF_FACTOR ** (attempt - 1))
    return interval + random.uniform(0, 1) if delay >= JITTER_FROM_S else interval


async def pause_before_retry(delay: float, attempt: int) -> None:
    await asyncio.sleep(retry_interval(delay, attempt))


def retry_policy_for(node) -> RetryPolicy | None:
    from langgraph.types import RetryPolicy
    retries = node.params.max_retries
    if retries <= 0:
        return None
    delay = node.params.delay_after_error

    def retry_on(e: BaseException) -> bool:
        # a node retries its own failures only: a Message that relays a failed generation must
        # not run again and show the text it already showed (the LLM's own settings apply there)
        if isinstance(e, ComponentError) and e.component_id != node.id:
            return False
        return is_retryable(e)

    return RetryPolicy(max_attempts=retries + 1, initial_interval=delay, backoff_factor=BACKOFF_FACTOR,
                       max_interval=max_interval(delay), jitter=delay >= JITTER_FROM_S, retry_on=retry_on)


def failure_outputs(node, error: BaseException) -> dict[str, Any]:
    if isinstance(error, ComponentError) and error.component_id == node.id:
        return dict(error.outputs)
    message = str(error) or type(error).__name__
    from langgraph.errors import NodeTimeoutError
    if isinstance(error, NodeTimeoutError):
        message = f"{node.id} timed out after {error.timeout:g} s"
    now = time.perf_counter()
    return {"_created_time": now, **node.absent, "_ERROR": message, "_elapsed_time": 0.0}


def normal_targets(node, plan, names: dict[str, str]) -> list[str]:
    """The graph nodes a component goes to when it succeeds (its static edges)."""
    return [names[e.target] for e in plan.edges if e.source == node.id and e.kind in ("next", "exit", "loop", "enter")]


def error_targets(node, plan, names: dict[str, str]) -> list[str]:
    """Where the error handler of a component with `exception_method` goes: the `exception_goto`
    targets (method goto), else on as if it succeeded, else the end of the turn."""
    goto = [names[t] for t in node.error_targets() if t in names]
    if node.params.exception_method == "goto" and goto:
        return goto
    return normal_targets(node, plan, names) or [names["__finish__"]]


def _run_context():
    """The run context of the running graph, or None outside a run (or without the steps' registry)."""
    try:
        from langgraph.runtime import get_runtime
        ctx = get_runtime().context
    except (RuntimeError, LookupError, ImportError):
        return None
    return ctx if getattr(ctx, "running", None) is not None else None


def error_handler_for(node, plan, names: dict[str, str], inline_finish: bool = False,
                      targets: list[str] | None = None):
    """The LangGraph error handler for a component with `exception_method`, or None.

    `names` maps component ids (and the plan's finish pseudo-target) to graph node names. With
    `inline_finish` (see compiler/build.py) a handler whose way leads to the end of the turn records
    it itself instead of going to the finish node. `targets` (graph node names) replaces where the
    handler goes (`error_targets` below): an ejected canvas writes them out.
    """
    method = node.params.exception_method
    if not method:
        return None
    from langgraph.types import Command

    from canvas2graph.runtime.graph.turn import finish_after
    finish = names["__finish__"]             # the graph node the plan's end of the turn maps to
    goto = [names[t] for t in node.error_targets() if t in names]
    default = node.params.exception_default_value
    normal = normal_targets(node, plan, names)

    async def handle(state: dict, error: NodeError) -> Command:
        from canvas2graph.types import TurnCancelled
        if isinstance(error.error, TurnCancelled):
            raise error.error                   # cancellation is not the component's failure
        # a component failing beside it without a handler waits for this (nodes/base.py handler_due)
        try:
            return _handled(state, error)
        finally:
            ctx = _run_context()
            if ctx is not None:
                handler_done(ctx, node.id)

    def _handled(state: dict, error: NodeError) -> Command:
        outputs = failure_outputs(node, error.error)
        if method == "goto" and goto:
            target = goto
        elif getattr(node, "reports_own_failure", False):
            # the component (RAGFlow's Browser) catches its failure itself: it finishes with the error
            # and its declared outputs empty, and the canvas shows the default as a message
            outputs = {**{k: None for k in node.declared}, **outputs}
            if default:
                from canvas2graph.nodes.base import stream_writer
                write = stream_writer()
                write({"event": "message", "content": str(default)})
                write({"event": "message_end"})
            target = normal
        else:
            if default:
                key = "content" if node.component_type in CONTENT_DEFAULT else "result"
                outputs = {"_created_time": outputs.get("_created_time"), **node.outputs_when_failed(state), key: default,
                           "_elapsed_time": outputs.get("_elapsed_time")}
            target = normal
        update = {OUTPUTS: {node.id: outputs}, LAST: {"component_id": node.id, "inputs": {}}}
        target = list(targets) if targets is not None else (target or [finish])
        if inline_finish and finish in target:
            update = finish_after(state, update)
            target = [t for t in target if t != finish]
        return Command(update=update, goto=target)

    return handle
