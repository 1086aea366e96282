"""Component failures: exception_method goto / comment, no handler, retries and the component timeout (SPEC 3.0, 5.6)."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from langgraph.errors import NodeTimeoutError

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.nodes.base import ComponentError
from canvas2graph.nodes.errors import ModelCallError, classify, is_retryable, retry_interval, retry_policy_for
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.events import final_content, finished, trace
from tests.conftest import cpn


# --- helpers ------------------------------------------------------------------------------------

async def run(source: dict, query: str = "q", *, replies=(), models: ModelFactory | None = None):
    """One turn on a fresh session: (events, outcome, script)."""
    script = Script.load({"replies": list(replies)}) if models is None else None
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, models or ModelFactory(script=script), script)
        events = [e async for e in runner.run_turn("s", TurnRequest(query=query))]
    return events, runner.outcome, script


def llm(prompt: str = "Do it: {sys.query}", downstream=("Message:OK",), **params) -> dict:
    return cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": prompt}], "cite": False, **params},
               list(downstream))


def msg(text: str) -> dict:
    return cpn("Message", {"content": [text]})


def risky_llm_dsl(*, downstream=("Message:OK",), ok: str = "OK: {LLM:Risky@content}", **params) -> dict:
    """begin -> LLM:Risky -> Message:OK; Message:Fallback shows the error."""
    return {"components": {
        "begin": cpn("Begin", downstream=["LLM:Risky"]),
        "LLM:Risky": llm(downstream=downstream, **params),
        "Message:OK": msg(ok),
        "StringTransform:Show": cpn("StringTransform", {"method": "merge", "script": "[{LLM:Risky@content}]"}, ["Message:OK"]),
        "Message:Fallback": msg("Fallback. Error was: {LLM:Risky@_ERROR}"),
    }}


def list_ops_dsl(**params) -> dict:
    """ListOperations on sys.query, which is text, not a list: the component always fails."""
    return {"components": {
        "begin": cpn("Begin", downstream=["ListOperations:L"]),
        "ListOperations:L": cpn("ListOperations", {"query": "sys.query", "operations": "head", "n": 1, **params}, ["Message:OK"]),
        "Message:OK": msg("first={ListOperations:L@result}"),
        "Message:Fallback": msg("failed: {ListOperations:L@_ERROR}"),
    }}


BOOM = {"error": "boom: upstream exploded"}
BOOM_TEXT = "**ERROR**: MAX_RETRIES_EXCEEDED - boom: upstream exploded"


# --- goto -----------------------------------------------------------------------------------------

async def test_goto_routes_a_failure_to_the_exception_targets_instead_of_the_downstream():
    source = risky_llm_dsl(exception_method="goto", exception_goto=["Message:Fallback"])
    events, outcome, _ = await run(source, replies=[BOOM])
    assert outcome.status == "finished"
    assert [x for x in trace(events) if x.startswith("node_")] == [
        "node_started:begin", "node_finished:begin", "node_started:LLM:Risky", "node_finished:LLM:Risky",
        "node_started:Message:Fallback", "node_finished:Message:Fallback"]
    assert finished(events, "Message:OK") == []


async def test_goto_reports_the_error_in_node_finished_and_keeps_it_readable_as_a_reference():
    source = risky_llm_dsl(exception_method="goto", exception_goto=["Message:Fallback"])
    events, _, _ = await run(source, replies=[BOOM])
    failure = finished(events, "LLM:Risky")[0]
    assert failure["error"] == BOOM_TEXT
    assert failure["outputs"]["_ERROR"] == BOOM_TEXT
    assert final_content(events) == "Fallback. Error was:" + BOOM_TEXT


async def test_goto_accepts_a_single_target_as_a_string():
    source = risky_llm_dsl(exception_method="goto", exception_goto="Message:Fallback")
    events, _, _ = await run(source, replies=[BOOM])
    assert final_content(events).startswith("Fallback.")


async def test_goto_works_for_non_llm_components():
    events, outcome, _ = await run(list_ops_dsl(exception_method="goto", exception_goto=["Message:Fallback"]), "text")
    assert outcome.status == "finished"
    assert finished(events, "ListOperations:L")[0]["error"] == "The input of List Operations should be an array."
    assert final_content(events) == "failed:The input of List Operations should be an array."


async def test_without_a_failure_goto_leaves_the_normal_downstream_alone():
    source = risky_llm_dsl(exception_method="goto", exception_goto=["Message:Fallback"])
    events, _, _ = await run(source, replies=["fine"])
    assert finished(events, "Message:Fallback") == []
    assert final_content(events) == "OK:fine"


# --- comment (default value) -------------------------------------------------------------------------

async def test_comment_stores_the_default_in_content_for_an_llm_and_continues():
    source = risky_llm_dsl(downstream=("StringTransform:Show",), exception_method="comment",
                           exception_default_value="(default answer)", ok="{StringTransform:Show@result}")
    events, outcome, _ = await run(source, replies=[BOOM])
    assert outcome.status == "finished"
    llm_done = finished(events, "LLM:Risky")[0]
    assert llm_done["outputs"]["content"] == "(default answer)"
    assert llm_done["error"] is None and "_ERROR" not in llm_done["outputs"]
    assert final_content(events) == "[(default answer)]"


async def test_comment_on_a_streaming_llm_streams_the_default_through_the_message():
    source = risky_llm_dsl(exception_method="comment", exception_default_value="(default answer)")
    events, outcome, _ = await run(source, replies=[BOOM])
    assert outcome.status == "finished"
    assert [e["data"]["content"] for e in events if e["event"] == "message"] == ["OK:", "(default answer)"]
    assert trace(events)[-4:] == ["message_end", "node_finished:LLM:Risky", "node_finished:Message:OK", "workflow_finished"]
    assert finished(events, "LLM:Risky")[0]["outputs"]["content"] == "(default answer)"
    assert final_content(events) == "OK:(default answer)"


async def test_comment_stores_the_default_in_result_for_other_components_and_continues():
    events, outcome, _ = await run(list_ops_dsl(exception_method="comment", exception_default_value="nothing"), "text")
    assert outcome.status == "finished"
    outputs = finished(events, "ListOperations:L")[0]["outputs"]
    assert outputs["result"] == "nothing" and "_ERROR" not in outputs
    assert final_content(events) == "first=nothing"


async def test_comment_without_a_default_records_the_error_and_continues():
    events, outcome, _ = await run(list_ops_dsl(exception_method="comment"), "text")
    assert outcome.status == "finished"
    assert finished(events, "ListOperations:L")[0]["error"] == "The input of List Operations should be an array."
    assert final_content(events) == "first="


# --- no handler -----------------------------------------------------------------------------------

async def test_without_a_handler_a_failure_stops_the_turn_without_workflow_finished():
    events, outcome, _ = await run(risky_llm_dsl(downstream=("StringTransform:Show",)), replies=[BOOM])
    assert outcome.status == "stopped"
    assert outcome.error == "LLM:Risky: " + BOOM_TEXT
    assert trace(events)[-1] == "node_finished:LLM:Risky"
    assert finished(events, "LLM:Risky")[0]["error"] == BOOM_TEXT
    assert "workflow_finished" not in trace(events)
    assert finished(events, "StringTransform:Show") == []


async def test_without_a_handler_a_failing_streamed_llm_is_reported_on_the_llm():
    events, outcome, _ = await run(risky_llm_dsl(), replies=[BOOM])
    assert outcome.status == "stopped"
    assert finished(events, "LLM:Risky")[-1]["error"] == BOOM_TEXT
    assert "workflow_finished" not in trace(events)


async def test_without_a_handler_a_non_llm_failure_stops_the_turn():
    events, outcome, _ = await run(list_ops_dsl(), "text")
    assert outcome.status == "stopped"
    assert finished(events, "ListOperations:L")[0]["error"] == "The input of List Operations should be an array."
    assert finished(events, "Message:OK") == [] and "workflow_finished" not in trace(events)


# --- retries ----------------------------------------------------------------------------------------

async def test_max_retries_retries_a_provider_error_until_it_succeeds():
    source = risky_llm_dsl(downstream=("StringTransform:Show",), ok="{StringTransform:Show@result}",
                           max_retries=2, delay_after_error=0)
    events, outcome, script = await run(source, replies=[BOOM, BOOM, "ok"])
    assert outcome.status == "finished"
    assert script.calls == 3
    assert finished(events, "LLM:Risky")[0]["outputs"]["content"] == "ok"
    assert final_content(events) == "[ok]"


async def test_max_retries_gives_up_after_max_retries_plus_one_attempts():
    source = risky_llm_dsl(downstream=("StringTransform:Show",), max_retries=1, delay_after_error=0)
    events, outcome, script = await run(source, replies=[BOOM, BOOM, "never used"])
    assert outcome.status == "stopped"
    assert script.calls == 2
    assert finished(events, "LLM:Risky")[0]["error"] == BOOM_TEXT


async def test_without_max_retries_a_provider_error_is_not_retried():
    source = risky_llm_dsl(downstream=("StringTransform:Show",))
    _, outcome, script = await run(source, replies=[BOOM, "never used"])
    assert outcome.status == "stopped" and script.calls == 1


async def test_max_retries_also_applies_to_a_streaming_llm():
    # the generation runs inside the Message that shows it; the LLM's retry settings still apply
    source = risky_llm_dsl(max_retries=2, delay_after_error=0)
    events, outcome, script = await run(source, replies=[BOOM, "ok"])
    assert outcome.status == "finished" and final_content(events) == "OK:ok"
    assert script.calls == 2
    assert finished(events, "LLM:Risky")[0]["outputs"]["content"] == "ok"
    assert finished(events, "LLM:Risky")[0]["error"] is None


async def test_a_streaming_llm_gives_up_after_max_retries_plus_one_attempts_and_reports_the_failure_on_the_llm():
    source = risky_llm_dsl(max_retries=1, delay_after_error=0)
    events, outcome, script = await run(source, replies=[BOOM, BOOM, "never used"])
    assert outcome.status == "stopped" and script.calls == 2
    assert finished(events, "LLM:Risky")[-1]["error"] == BOOM_TEXT
    assert finished(events, "Message:OK") == []


class BreaksMidStream(ScriptedChatModel):
    """The scripted model, losing its connection after the first piece of every answer."""

    async def _astream(self, messages, *args, **kwargs):
        async for chunk in super()._astream(messages, *args, **kwargs):
            yield chunk
            raise ConnectionError("connection reset mid-answer")


class BreakingFactory(ModelFactory):
    def __init__(self, script):
        super().__init__(script=script)
        self._script = script

    def chat_model(self, llm_id, *, component_id=None, gen_conf=None):
        return BreaksMidStream(script=self._script, component_id=component_id)


async def test_a_streaming_llm_is_not_retried_once_part_of_its_answer_was_shown():
    # a retry would show the beginning of the answer a second time
    script = Script.load({"replies": ["first answer here", "second answer here"]})
    events, outcome, _ = await run(risky_llm_dsl(max_retries=3, delay_after_error=0), models=BreakingFactory(script))
    assert outcome.status == "stopped"
    assert script.calls == 1
    shown = "".join(e["data"]["content"] for e in events if e["event"] == "message")
    assert shown == "OK:first "
    assert "connection reset mid-answer" in finished(events, "LLM:Risky")[-1]["error"]


async def test_a_message_does_not_retry_a_failure_of_the_generation_it_relays():
    # the Message's own max_retries covers its own failures; re-running it would repeat "OK:"
    source = risky_llm_dsl()
    source["components"]["Message:OK"]["obj"]["params"].update(max_retries=2, delay_after_error=0)
    events, outcome, script = await run(source, replies=[BOOM, "never used"])
    assert outcome.status == "stopped" and script.calls == 1
    assert [e["data"]["content"] for e in events if e["event"] == "message"] == ["OK:"]


def test_retry_intervals_back_off_exponentially_with_no_jitter_for_short_delays():
    assert [retry_interval(0, n) for n in (1, 2, 3)] == [0, 0, 0]
    assert [retry_interval(2, n) for n in (1, 2, 3, 10)] == [2, 4, 8, 60]


def test_long_retry_intervals_get_up_to_one_second_of_jitter():
    waits = [retry_interval(20, 1) for _ in range(50)]
    assert all(20 <= w <= 21 for w in waits) and len(set(waits)) > 1


def test_the_retry_policy_uses_the_same_intervals():
    def policy(delay):
        source = risky_llm_dsl(max_retries=2, delay_after_error=delay)
        node = compile_dsl(source).plan.nodes["LLM:Risky"]
        return retry_policy_for(node)
    short, long_ = policy(2), policy(20)
    assert (short.initial_interval, short.backoff_factor, short.max_interval, short.jitter) == (2, 2.0, 60, False)
    assert (long_.initial_interval, long_.jitter, long_.max_attempts) == (20, True, 3)


async def test_a_non_retryable_error_fails_at_once_despite_max_retries():
    # an empty prompt is a bug in the canvas, not a provider hiccup: retrying cannot help
    source = risky_llm_dsl(downstream=("StringTransform:Show",), max_retries=2, delay_after_error=30)
    source["components"]["LLM:Risky"]["obj"]["params"]["prompts"] = [{"role": "user", "content": "{sys.query}"}]
    started = time.perf_counter()
    events, outcome, script = await run(source, query="")
    assert time.perf_counter() - started < 10          # a retry would have waited 30 s first
    assert outcome.status == "stopped"
    assert script.calls == 0
    assert "empty" in finished(events, "LLM:Risky")[0]["error"]


def test_retryable_errors_are_provider_failures_timeouts_and_lost_connections():
    assert is_retryable(ModelCallError("MAX_RETRIES_EXCEEDED", "503", retryable=True))
    wrapped = ComponentError("LLM:A", "boom")
    wrapped.__cause__ = ModelCallError("MAX_RETRIES_EXCEEDED", "boom", retryable=True)
    assert is_retryable(wrapped)
    assert is_retryable(ConnectionError("reset")) and is_retryable(TimeoutError())
    assert is_retryable(NodeTimeoutError("LLM.A", 1.0, kind="run", run_timeout=1.0))
    assert not is_retryable(ComponentError("LLM:A", "the last message sent to the model is empty"))
    assert not is_retryable(ValueError("the last message sent to the model is empty"))
    assert not is_retryable(ModelCallError("AUTH_ERROR", "bad key", retryable=False))


def test_provider_errors_are_classified_by_status():
    class Status(Exception):
        def __init__(self, code):
            super().__init__(f"status {code}")
            self.status_code = code
    assert classify(Status(401)).kind == "AUTH_ERROR" and not classify(Status(401)).retryable
    assert classify(Status(400)).kind == "INVALID_REQUEST" and not classify(Status(400)).retryable
    assert classify(Status(429)).retryable and classify(Status(503)).retryable
    assert str(classify(Status(503))) == "**ERROR**: MAX_RETRIES_EXCEEDED - status 503"


# --- component timeout -------------------------------------------------------------------------------

class SlowChatServer:
    """A local OpenAI-compatible endpoint that answers every chat completion after `delay` seconds."""

    def __init__(self, delay: float):
        delay_s = delay

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                time.sleep(delay_s)
                body = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "late"}, "finish_reason": "stop"}]}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass               # the client gave up: that is the point

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def slow_llm_dsl(marker: str, **params) -> dict:
    """An LLM with no Message downstream (a blocking call); `marker` keeps compile_dsl's cache from
    returning a graph built under another COMPONENT_EXEC_TIMEOUT."""
    return {"components": {
        "begin": cpn("Begin", downstream=["LLM:Slow"]),
        "LLM:Slow": cpn("LLM", {"llm_id": "m@OpenAI-API-Compatible", "prompts": [{"role": "user", "content": f"{marker} {{sys.query}}"}],
                                **params}, ["StringTransform:Show"]),
        "StringTransform:Show": cpn("StringTransform", {"method": "merge", "script": "[{LLM:Slow@content}]"}, ["Message:Out"]),
        "Message:Out": msg("{StringTransform:Show@result}"),
    }}


async def test_a_component_that_exceeds_component_exec_timeout_fails_with_a_timeout_error(monkeypatch):
    monkeypatch.setenv("COMPONENT_EXEC_TIMEOUT", "0.2")
    with SlowChatServer(delay=2.0) as server:
        models = ModelFactory(env={"OPENAI_API_COMPATIBLE_BASE_URL": server.url})
        # build the client first: the first import of the OpenAI SDK blocks the event loop for a
        # second or two, which would delay the timeout and make the elapsed time meaningless
        models.chat_model("m@OpenAI-API-Compatible", component_id="LLM:Slow")
        started = time.perf_counter()
        events, outcome, _ = await run(slow_llm_dsl(f"timeout-{time.time_ns()}"), models=models)
        elapsed = time.perf_counter() - started
    assert elapsed < 1.5
    assert outcome.status == "stopped"
    failure = finished(events, "LLM:Slow")
    assert len(failure) == 1
    assert "timed out" in failure[0]["error"] and "0.2" in failure[0]["error"]
    assert "workflow_finished" not in trace(events)


async def test_a_timed_out_component_with_a_default_value_continues_with_the_default(monkeypatch):
    monkeypatch.setenv("COMPONENT_EXEC_TIMEOUT", "0.2")
    with SlowChatServer(delay=2.0) as server:
        models = ModelFactory(env={"OPENAI_API_COMPATIBLE_BASE_URL": server.url})
        source = slow_llm_dsl(f"timeout-default-{time.time_ns()}", exception_method="comment",
                              exception_default_value="too slow")
        events, outcome, _ = await run(source, models=models)
    assert outcome.status == "finished"
    assert final_content(events) == "[too slow]"


async def test_a_component_within_the_timeout_is_unaffected(monkeypatch):
    monkeypatch.setenv("COMPONENT_EXEC_TIMEOUT", "5")
    with SlowChatServer(delay=0.1) as server:
        models = ModelFactory(env={"OPENAI_API_COMPATIBLE_BASE_URL": server.url})
        events, outcome, _ = await run(slow_llm_dsl(f"in-time-{time.time_ns()}"), models=models)
    assert outcome.status == "finished"
    assert final_content(events) == "[late]"
