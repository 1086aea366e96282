"""What must hold for every input, as plain functions: the Hypothesis tests and the long runner
(`python -m tests.fuzz`) check the same properties.

- compile: `diagnose()` returns diagnostics or a graph, never raises, within a time limit; a graph
  it returns is one LangGraph accepts; `compile_dsl` agrees; everything printed is encodable.
- run: one turn (and its resumption, when it pauses) ends with `workflow_finished`, a pause, or a stop
  naming the failed component or the step limit; every event encodes as strict JSON in UTF-8.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import threading
from typing import Any, Iterator

from langgraph.checkpoint.memory import InMemorySaver

from canvas2graph.types import CompileError

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from canvas2graph.compiler.export import to_json, to_mermaid

COMPILE_SECONDS = 20.0     # generated DSLs are small: anything near this is a hang, not a slow compile
RUN_SECONDS = 60.0
# A runaway turn (a loop that never meets its condition) must stop at its step bound, named in the
# error; a low bound here makes the fuzzer meet it in seconds rather than minutes.
MAX_STEPS = 3000


class Hang(BaseException):
    """Raised by `time_limit` (a BaseException, so no `except Exception` in the code under test eats it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise Hang in the main thread after `seconds` (SIGALRM); elsewhere, no limit."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def expired(signum, frame):
        raise Hang(f"no answer within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def assert_encodable(value: Any, what: str) -> None:
    """`value` encodes as strict JSON (no NaN) in strict UTF-8, as clients and terminals need."""
    try:
        json.dumps(value, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")
    except (ValueError, UnicodeEncodeError) as e:
        raise AssertionError(f"{what} cannot be encoded: {e}: {str(value)[:300]!r}") from None


# --- compile ---------------------------------------------------------------------------------------
def check_compile(source: Any, seconds: float = COMPILE_SECONDS):
    """The compile property; returns the compiled canvas or None."""
    with time_limit(seconds):
        compiled, diags = diagnose(source)
        for d in diags:
            assert d.code and d.message, d
            assert_encodable(d.to_dict(), "a diagnostic")
            str(d).encode("utf-8")
        if compiled is None:
            assert any(d.severity == "error" for d in diags), "no graph, yet no error says why"
        else:
            compiled.graph(None)                   # LangGraph accepts the node names and edges
            to_mermaid(compiled.plan).encode("utf-8")
            assert_encodable(to_json(compiled.plan), "the exported graph")
            assert compiled.recursion_limit >= 1
        try:
            agreed = compile_dsl(source) is not None
        except CompileError as e:
            assert e.diagnostics, "a CompileError carries its diagnostics"
            agreed = False
        assert agreed == (compiled is not None), "compile_dsl and diagnose disagree"
    return compiled


# --- run -------------------------------------------------------------------------------------------
NO_LOCAL_CODE = {"code": {"allow_local": False}}     # generated CodeExec scripts never run on this machine


async def one_turn(runner, session: str, query: str, inputs: dict | None) -> list[dict] | None:
    """The turn's events; None when the request is refused before it starts (values no session can
    store), which is a clear answer too."""
    from canvas2graph.runtime.run.runner import TurnFailed, TurnRejected, TurnRequest
    try:
        request = TurnRequest(query=query, inputs=inputs)
    except TurnRejected as e:
        assert "cannot be stored" in str(e), e
        return None
    events: list[dict] = []
    try:
        async for event in runner.run_turn(session, request):
            events.append(event)
    except TurnFailed:
        pass                # the outcome says why; checked below
    return events


def check_turn(compiled, runner, events: list[dict]) -> str:
    """The turn ended properly; returns its status."""
    outcome = runner.outcome
    for e in events:
        assert_encodable(e, f"a {e.get('event')} event")
    finished = [i for i, e in enumerate(events) if e["event"] == "workflow_finished"]
    assert len(finished) <= 1, "more than one workflow_finished"
    if outcome.status == "finished":
        assert finished and finished[0] == len(events) - 1, "a finished turn ends with workflow_finished"
    elif outcome.status == "paused":
        assert any(e["event"] == "user_inputs" for e in events), "a paused turn says what it waits for"
    elif outcome.status == "stopped":
        error = outcome.error or ""
        named = any(error.startswith(f"{cid}: ") for cid in compiled.plan.dsl.components)
        assert named or "step limit" in error, f"a stopped turn names the component or the bound: {error!r}"
    else:
        raise AssertionError(f"unexpected outcome {outcome.status!r}: {outcome.error!r}")
    return outcome.status


async def _run(compiled, query: str, script: dict, inputs: dict | None) -> list[str]:
    from canvas2graph.runtime.services.models import ModelFactory
    from canvas2graph.runtime.services.scripted import Script
    from canvas2graph.runtime.run.runner import Runner

    loaded = Script.load(script)
    runner = Runner(compiled, InMemorySaver(), ModelFactory(script=loaded), loaded, services=NO_LOCAL_CODE)
    events = await one_turn(runner, "fuzz", query, inputs)
    if events is None:
        return ["refused"]
    statuses = [check_turn(compiled, runner, events)]
    if statuses[-1] == "paused":               # answer the form: the turn resumes and must end too
        form = await runner.waiting_for("fuzz") or {}
        answers = {k: {"value": "yes"} for k in (form.get("inputs") or {})}
        statuses.append(check_turn(compiled, runner, await one_turn(runner, "fuzz", "", answers)))
    return statuses


def check_run(source: Any, query: str, script: dict, inputs: dict | None = None,
              seconds: float = RUN_SECONDS) -> list[str] | None:
    """The run property for a DSL that compiles: its turns' statuses, or None when it does not compile."""
    compiled = check_compile(source)
    if compiled is None or getattr(compiled, "kind", "agent") == "pipeline":
        return None     # an ingestion pipeline runs over files (`ingest`, tests/runtime/run/ingest), not turns
    with time_limit(seconds), environment(CANVAS2GRAPH_MAX_STEPS=str(MAX_STEPS)):
        return asyncio.run(_run(compiled, query, script, inputs))


@contextlib.contextmanager
def environment(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
