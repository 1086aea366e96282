"""Durable sessions: every step is checkpointed, so a session continues in another process.

Each test runs against a SQLite file and against PostgreSQL (`durable_url`), and in memory too when
it stays in one process (`checkpointer_url`); see tests/runtime/checkpointers.py. The turns that
matter run as real `canvas2graph run` processes, one per turn; the test process reads the
checkpointed state afterwards, as a third process would.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn
from tests.runtime.checkpointers import new_session
from tests.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[3]

# begin -> LLM:Draft -> UserFillUp:AskFeedback (pauses) -> LLM:Final -> Message:Out
# (the parity case shared/parity/cases/userfillup)
FEEDBACK_DSL = {"components": {
    "begin": cpn("Begin", downstream=["LLM:Draft"]),
    "LLM:Draft": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "sys_prompt": "You are a helpful assistant.",
                             "prompts": [{"role": "user", "content": "Write a one-line slogan about: {sys.query}"}]},
                     downstream=["UserFillUp:AskFeedback"]),
    "UserFillUp:AskFeedback": cpn("UserFillUp", {
        "enable_tips": True, "tips": "Draft: {LLM:Draft@content}\nAny feedback?",
        "inputs": {"feedback": {"type": "line", "name": "Feedback", "optional": False}}}, downstream=["LLM:Final"]),
    "LLM:Final": cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "sys_prompt": "You are a helpful assistant.", "prompts": [
        {"role": "user", "content": "Rewrite '{LLM:Draft@content}' using this feedback: {UserFillUp:AskFeedback@feedback}"}]},
        downstream=["Message:Out"]),
    "Message:Out": cpn("Message", {"content": ["{LLM:Final@content}"]}),
}}
DRAFT, FINAL = "Coffee: wake up to flavor.", "Coffee: bold mornings."
FORM = {"feedback": {"type": "line", "name": "Feedback", "optional": False, "value": None}}
TIPS = f"Draft: {DRAFT}\nAny feedback?"

# begin -> LLM:A -> LLM:B -> Message:M, both models served by a local OpenAI-compatible server
CHAIN_DSL = {"components": {
    "begin": cpn("Begin", downstream=["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "tiny@OpenAI-API-Compatible",
                         "prompts": [{"role": "user", "content": "Step A, answer: {sys.query}"}]}, downstream=["LLM:B"]),
    "LLM:B": cpn("LLM", {"llm_id": "tiny@OpenAI-API-Compatible",
                         "prompts": [{"role": "user", "content": "Step B, shorten: {LLM:A@content}"}]}, downstream=["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{LLM:B@content}"]}),
}}

# begin -> LLM:A -> Message:M
CHAT_DSL = {"components": {
    "begin": cpn("Begin", downstream=["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI"}, downstream=["Message:M"]),
    "Message:M": cpn("Message", {"content": ["Turn {sys.conversation_turns}: {LLM:A@content}"]}),
}}


# --- helpers -----------------------------------------------------------------------------------
def _file(folder: Path, value) -> str:
    path = folder / f"{uuid.uuid4().hex}.json"
    path.write_text(json.dumps(value))
    return str(path)


def cli_args(tmp_path: Path, dsl: dict, db: str, session: str, *, query: str = "", inputs: dict | None = None,
             script: list | None = None) -> list[str]:
    args = [sys.executable, "-m", "canvas2graph.cli", "run", _file(tmp_path, dsl), "--format", "jsonl",
            "--db", db, "--session", session, "--query", query]
    if inputs is not None:
        args += ["--inputs", _file(tmp_path, inputs)]
    if script is not None:
        args += ["--llm-script", _file(tmp_path, script)]
    return args


def run_cli(tmp_path: Path, dsl: dict, db: str, session: str, *, env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    """One `canvas2graph run` turn in a new process."""
    return subprocess.run(cli_args(tmp_path, dsl, db, session, **kw), cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **(env or {})})


def events_of(proc) -> list[dict]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def names(events: list[dict]) -> list[str]:
    """`event:component_id` per event; consecutive message events collapse into one `message`."""
    out: list[str] = []
    for e in events:
        name = e["event"] + (":" + e["data"]["component_id"] if "component_id" in e["data"] else "")
        if not (name == "message" and out and out[-1] == "message"):
            out.append(name)
    return out


def finished(events: list[dict], component_id: str) -> dict:
    return next(e["data"] for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == component_id)


async def session_state(dsl: dict, db: str | None, session: str):
    """The checkpointed state of a session and the form it waits for, as a new process reads them."""
    async with open_checkpointer(db) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory())
        snapshot = await runner.graph.aget_state({"configurable": {"thread_id": session}})
        return snapshot, await runner.waiting_for(session)


async def run_turn(saver, dsl: dict, session: str, replies: list, **request) -> list[dict]:
    """One turn in this process, on a fresh Runner (nothing kept in memory between turns)."""
    script = Script.load(replies)
    runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=script), script)
    return [e async for e in runner.run_turn(session, TurnRequest(**request))]


def killed_at(tmp_path: Path, dsl: dict, db: str, session: str, server: "ModelServer", key: str, env: dict,
              query: str) -> str:
    """A `canvas2graph run` turn SIGKILLed once the model call for `key` has reached `server`; its stdout."""
    proc = subprocess.Popen(cli_args(tmp_path, dsl, db, session, query=query), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert server.arrived[key].wait(30), f"the request for {key!r} never reached the server"
    finally:
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    return out


class ModelServer(OpenAIServer):
    """A local OpenAI-compatible server. It answers a prompt containing a key of `replies` with that
    reply, records which key each request had, and holds the reply of the `hold` key part-way until
    released."""

    def __init__(self, replies: dict[str, str], hold: str | None = None) -> None:
        super().__init__()
        self.by_key, self.hold = replies, hold
        self.calls: list[str] = []
        self.arrived = {key: threading.Event() for key in replies}
        self.release = threading.Event()
        self.__enter__()

    def reply_for(self, body: dict) -> str:
        prompt = json.dumps(body["messages"])
        key = next(k for k in self.by_key if k in prompt)
        self.calls.append(key)
        self.arrived[key].set()
        return self.by_key[key]

    def midway(self, body: dict, reply: str | dict) -> None:
        if self.hold and self.hold in json.dumps(body["messages"]):
            self.release.wait(30)

    def close(self) -> None:
        self.release.set()
        super().close()


# --- 1. pause, then resume in another process ----------------------------------------------------
async def test_a_paused_session_resumes_in_another_process(tmp_path, durable_url):
    session = new_session()
    first = run_cli(tmp_path, FEEDBACK_DSL, durable_url, session, query="coffee", script=[DRAFT])
    assert first.returncode == 0, first.stderr
    paused = events_of(first)
    assert names(paused) == ["workflow_started", "node_started:begin", "node_finished:begin",
                             "node_started:LLM:Draft", "node_finished:LLM:Draft", "user_inputs"]
    assert paused[-1]["data"] == {"inputs": FORM, "tips": TIPS}

    second = run_cli(tmp_path, FEEDBACK_DSL, durable_url, session, inputs={"feedback": "make it bolder"}, script=[FINAL])
    assert second.returncode == 0, second.stderr
    resumed = events_of(second)
    assert names(resumed) == [
        "node_started:UserFillUp:AskFeedback", "node_finished:UserFillUp:AskFeedback",
        "node_started:LLM:Final", "node_started:Message:Out", "message", "message_end",
        "node_finished:LLM:Final", "node_finished:Message:Out", "workflow_finished"]
    assert finished(resumed, "UserFillUp:AskFeedback")["outputs"]["feedback"] == "make it bolder"
    assert finished(resumed, "LLM:Final")["inputs"] == {        # the draft from the first process is still there
        "LLM:Draft@content": DRAFT, "UserFillUp:AskFeedback@feedback": "make it bolder"}
    assert resumed[-1]["data"]["outputs"]["content"] == FINAL

    snapshot, waiting = await session_state(FEEDBACK_DSL, durable_url, session)
    assert waiting is None and snapshot.next == ()
    state = snapshot.values
    # the resuming request adds its own (empty) user line, as RAGFlow's run does (SPEC 5.1)
    assert state["history"] == [["user", "coffee"], ["user", ""], ["assistant", resumed[-1]["data"]["outputs"]]]
    assert state["globals"]["sys.conversation_turns"] == 2
    assert state["outputs"]["UserFillUp:AskFeedback"]["feedback"] == "make it bolder"
    assert state["outputs"]["UserFillUp:AskFeedback"]["tips"] == TIPS
    assert state["outputs"]["LLM:Draft"]["content"] == DRAFT


# --- 2. a resume without the required inputs ---------------------------------------------------
async def test_a_resume_without_the_required_inputs_is_refused_and_the_session_keeps_waiting(tmp_path, durable_url):
    session = new_session()
    async with open_checkpointer(durable_url) as saver:         # the pausing process
        assert (await run_turn(saver, FEEDBACK_DSL, session, [DRAFT], query="coffee"))[-1]["event"] == "user_inputs"
    before, _ = await session_state(FEEDBACK_DSL, durable_url, session)

    refused = run_cli(tmp_path, FEEDBACK_DSL, durable_url, session, query="no form", script=[FINAL])
    assert refused.returncode == 2
    assert refused.stdout == ""
    assert refused.stderr.splitlines() == [
        f"canvas2graph: session {session} is waiting for UserFillUp:AskFeedback: provide inputs for feedback"]

    after, waiting = await session_state(FEEDBACK_DSL, durable_url, session)
    assert waiting == {"component_id": "UserFillUp:AskFeedback", "inputs": FORM, "tips": TIPS}
    assert after.values == before.values           # the refused request changed nothing
    resumed = run_cli(tmp_path, FEEDBACK_DSL, durable_url, session, inputs={"feedback": "bolder"}, script=[FINAL])
    assert resumed.returncode == 0, resumed.stderr
    assert events_of(resumed)[-1]["data"]["outputs"]["content"] == FINAL


# --- 3. SIGKILL in the middle of a turn, then resume in another process -------------------------
async def test_a_turn_killed_mid_step_resumes_in_another_process_without_repeating_finished_steps(tmp_path, durable_url):
    session = new_session()
    server = ModelServer({"Step A": "Alpha answer.", "Step B": "Bravo short."}, hold="Step B")
    env = {**os.environ, "OPENAI_API_COMPATIBLE_BASE_URL": server.url}
    try:
        out = killed_at(tmp_path, CHAIN_DSL, durable_url, session, server, "Step B", env, query="go")
        killed = [json.loads(line) for line in out.splitlines()]
        assert "node_finished:LLM:A" in names(killed) and "workflow_finished" not in names(killed)

        server.hold = None                          # the server now answers at once
        again = run_cli(tmp_path, CHAIN_DSL, durable_url, session, env=env)
    finally:
        server.close()
    assert again.returncode == 0, again.stderr
    resumed = events_of(again)
    assert server.calls == ["Step A", "Step B", "Step B"]       # LLM:A ran once; only the cut-off call is repeated
    # no workflow_started and nothing from Begin or LLM:A: the turn goes on where the process died.
    # LLM:B's own step had finished (its content is the generation the Message streams), so only its
    # node_finished, held until the stream ends, is still to come
    assert names(resumed) == ["node_started:Message:M", "message", "message_end",
                              "node_finished:LLM:B", "node_finished:Message:M", "workflow_finished"]
    assert finished(resumed, "LLM:B")["outputs"]["content"] == "Bravo short."
    assert finished(resumed, "LLM:B")["inputs"] == {"LLM:A@content": "Alpha answer."}
    assert finished(resumed, "Message:M")["outputs"]["content"] == "Bravo short."
    assert "".join(e["data"]["content"] for e in resumed if e["event"] == "message") == "Bravo short."
    assert resumed[-1]["data"]["outputs"]["content"] == "Bravo short."

    snapshot, _ = await session_state(CHAIN_DSL, durable_url, session)
    state = snapshot.values
    assert snapshot.next == ()
    assert state["outputs"]["LLM:A"]["content"] == "Alpha answer."
    assert state["outputs"]["LLM:B"]["content"] == "Bravo short."
    assert state["history"] == [["user", "go"], ["assistant", resumed[-1]["data"]["outputs"]]]
    assert state["request"]["open"] is False


# --- 4. after a resumed turn has finished, the next turn starts at Begin ------------------------
async def test_the_turn_after_a_finished_resume_starts_at_begin(checkpointer_url):
    session = new_session()
    async with open_checkpointer(checkpointer_url) as saver:
        await run_turn(saver, FEEDBACK_DSL, session, [DRAFT], query="coffee")
        resumed = await run_turn(saver, FEEDBACK_DSL, session, [FINAL], inputs={"feedback": "bolder"})
        assert resumed[-1]["event"] == "workflow_finished"
        third = await run_turn(saver, FEEDBACK_DSL, session, ["Tea: calm in a cup."], query="tea")
    # RAGFlow would resume at the UserFillUp again (SPEC 5.5, its sticky-resume bug); we do not
    assert names(third) == ["workflow_started", "node_started:begin", "node_finished:begin",
                            "node_started:LLM:Draft", "node_finished:LLM:Draft", "user_inputs"]
    assert third[-1]["data"]["tips"] == "Draft: Tea: calm in a cup.\nAny feedback?"


# --- 5. a failed turn is not an interruption: the next turn starts afresh ---------------------
async def test_after_a_failed_turn_the_next_process_starts_a_new_turn(tmp_path, durable_url):
    session = new_session()
    failed = run_cli(tmp_path, CHAT_DSL, durable_url, session, query="first", script=[{"error": "provider is down"}])
    assert failed.returncode == 1
    assert names(events_of(failed))[-1] == "node_finished:LLM:A"
    assert events_of(failed)[-1]["data"]["error"] == "**ERROR**: MAX_RETRIES_EXCEEDED - provider is down"

    again = run_cli(tmp_path, CHAT_DSL, durable_url, session, query="second", script=["Back again."])
    assert again.returncode == 0, again.stderr
    events = events_of(again)
    assert names(events)[:3] == ["workflow_started", "node_started:begin", "node_finished:begin"]
    assert events[-1]["event"] == "workflow_finished"
    assert events[-1]["data"]["outputs"]["content"] == "Turn2:Back again."

    snapshot, _ = await session_state(CHAT_DSL, durable_url, session)
    # the failed turn left its user line and no answer; the new turn added both
    assert snapshot.values["history"] == [["user", "first"], ["user", "second"], ["assistant", events[-1]["data"]["outputs"]]]
    assert snapshot.values["request"]["open"] is False
