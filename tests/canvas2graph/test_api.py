"""The public API: a DSL compiled into a plain LangGraph graph that LangGraph's own calls drive.

Every test runs on a SQLite file and on PostgreSQL (`durable_url`), with LangGraph's own savers: the
synchronous ones for `invoke`, the asynchronous ones for `ainvoke` and `astream`.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from langgraph.graph import StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command

import canvas2graph
from canvas2graph import CompileError, RunContext
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.environment import reset_default_environment
from canvas2graph.runtime.services.scripted import Script
from tests.canvas2graph.support import comparable, sync_saver, thread
from tests.conftest import cpn
from tests.runtime.checkpointers import new_session
from tests.server.helpers import CHAT_DSL, DRAFT, FEEDBACK_DSL, FINAL, SCRIPT, TIPS, chat_answer

REPO = Path(__file__).resolve().parents[2]
FORM = {"feedback": {"type": "line", "name": "Feedback", "optional": False, "value": None}}

# begin (asks for a name) -> Message:Hello
BEGIN_FORM_DSL = {"components": {
    "begin": cpn("Begin", {"inputs": {"name": {"type": "line", "name": "Name", "optional": False}}, "tips": "Who are you?"},
                 ["Message:Hello"]),
    "Message:Hello": cpn("Message", {"content": ["Hello {begin@name}, turn {sys.conversation_turns}"]}),
}}


def scripted() -> RunContext:
    """The run context of a test: every model answers from a fresh copy of the servers' test script."""
    return RunContext(script=Script.load(json.loads(json.dumps(SCRIPT))))


# --- compiling --------------------------------------------------------------------------------------
def test_a_dsl_compiles_from_a_path_text_or_dict_into_a_plain_compiled_state_graph(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CHAT_DSL))
    for source in (path, str(path), json.dumps(CHAT_DSL), CHAT_DSL):
        graph = canvas2graph.compile(source)
        assert type(graph) is CompiledStateGraph
        assert set(graph.get_graph().nodes) >= {"begin", "LLM.A", "Message.M"}
    assert graph.get_input_jsonschema()["properties"].keys() == {"query", "inputs", "files", "user_id"}
    assert graph.get_output_jsonschema()["properties"].keys() == {"answer", "outputs"}
    assert graph.builder.nodes["LLM.A"].metadata["component_id"] == "LLM:A"      # ids keep their ':' here


def test_the_builder_is_the_uncompiled_state_graph_a_user_extends(durable_url):
    builder = canvas2graph.builder(CHAT_DSL)
    assert isinstance(builder, StateGraph)

    def shout(state):                       # a node of the user's own, after the canvas's answer
        return {"answer": state["answer"].upper()}
    builder.add_node("shout", shout)
    builder.add_edge("Message.M", "shout")
    with sync_saver(durable_url) as saver:
        graph = builder.compile(checkpointer=saver)
        result = graph.invoke({"query": "hi"}, thread(new_session()), context=scripted())
    assert result["answer"] == chat_answer(1).upper()


def test_an_empty_llm_id_needs_a_default_model_and_a_broken_dsl_raises_every_problem(monkeypatch):
    dsl = {"components": {"begin": cpn("Begin", {}, ["LLM:A"]), "LLM:A": cpn("LLM", {"llm_id": ""}, ["Message:M"]),
                          "Message:M": cpn("Message", {"content": ["{LLM:A@content}"]})}}
    monkeypatch.delenv("CANVAS2GRAPH_DEFAULT_LLM", raising=False)
    with pytest.raises(CompileError) as failed:
        canvas2graph.compile(dsl)
    assert [(d.component_id, d.field) for d in failed.value.errors] == [("LLM:A", "params.llm_id")]
    graph = canvas2graph.compile(dsl, default_llm="gpt-4o-mini@OpenAI")
    assert graph.invoke({"query": "x"}, context=scripted())["answer"] == "Answer 1 from LLM:A."
    monkeypatch.setenv("CANVAS2GRAPH_DEFAULT_LLM", "gpt-4o-mini@OpenAI")    # as `serve` reads it
    assert canvas2graph.compile(dsl).invoke({"query": "x"}, context=scripted())["answer"] == "Answer 1 from LLM:A."
    with pytest.raises(FileNotFoundError, match="no DSL file at missing.json"):
        canvas2graph.compile("missing.json")


# --- turns on a thread ---------------------------------------------------------------------------
def test_invoke_on_a_thread_continues_the_conversation(durable_url):
    config = thread(new_session())
    with sync_saver(durable_url) as saver:
        graph = canvas2graph.compile(CHAT_DSL, checkpointer=saver)
        first = graph.invoke({"query": "Capital of France?"}, config, context=scripted())
        second = graph.invoke({"query": "And of Italy?", "user_id": "u1"}, config, context=scripted())
        streamed = [part["content"] for part in graph.stream({"query": "And Spain?"}, config, context=scripted(),
                                                             stream_mode="custom") if part.get("event") == "message"]
        state = graph.get_state(config).values
    assert first == {"answer": chat_answer(1), "outputs": first["outputs"]}
    assert first["outputs"]["Message:M"]["content"] == chat_answer(1)
    assert second["answer"] == chat_answer(2)                   # sys.conversation_turns counted on
    assert "".join(streamed) == chat_answer(3)                   # LangGraph's sync stream, tokens included
    assert [role for role, _ in state["history"]] == ["user", "assistant"] * 3
    assert state["history"][2] == ["user", "And of Italy?"]
    assert state["globals"]["sys.conversation_turns"] == 3
    assert state["globals"]["sys.user_id"] == "u1"
    assert state["request"]["open"] is False
    assert "query" not in state             # the request is read once, by the turn it started


def test_the_answer_leaves_out_the_reasoning_a_message_showed(durable_url):
    """A Message streaming a reasoning model keeps the thinking in its content (RAGFlow's); the turn's
    answer is the text outside it."""
    with sync_saver(durable_url) as saver:
        graph = canvas2graph.compile(REPO / "fixtures" / "demo" / "support_desk.json", checkpointer=saver)
        result = graph.invoke({"query": "Why was I charged twice?"}, thread(new_session()),
                              context=RunContext(script=Script.load(REPO / "fixtures" / "demo" / "support_desk.script.json")))
    reasoning = "The customer sees two charges; a retried payment is the usual cause."
    answer = ("You were charged twice because the first payment timed out and was retried. "
              "The duplicate charge is refunded within five working days.")
    assert result["answer"] == f"Desk: (billing)\n{answer}"
    assert result["outputs"]["Message:Answer"]["content"] == f"Desk: (billing)\n{reasoning}{answer}"


async def test_ainvoke_and_astream_run_turns_with_the_graph_s_own_stream(durable_url):
    config = thread(new_session())
    async with open_checkpointer(durable_url) as saver:
        graph = canvas2graph.compile(CHAT_DSL, checkpointer=saver)
        first = await graph.ainvoke({"query": "hi"}, config, context=scripted())
        updates, texts = [], []
        async for mode, part in graph.astream({"query": "again"}, config, context=scripted(),
                                              stream_mode=["updates", "custom"]):
            if mode == "updates":
                updates.extend(part)
            elif part.get("event") == "message":
                texts.append(part["content"])
    assert first["answer"] == chat_answer(1)
    assert updates == ["begin", "LLM.A", "Message.M"]           # the canvas's components, one step each
    assert "".join(texts) == chat_answer(2)


# --- forms ---------------------------------------------------------------------------------------
async def test_a_paused_user_fill_up_resumes_with_command_resume(durable_url):
    config = thread(new_session())
    async with open_checkpointer(durable_url) as saver:
        graph = canvas2graph.compile(FEEDBACK_DSL, checkpointer=saver)
        paused = await graph.ainvoke({"query": "coffee"}, config, context=scripted())
        waiting = await graph.aget_state(config)
        done = await graph.ainvoke(Command(resume={"feedback": "bolder"}), config, context=scripted())
        state = (await graph.aget_state(config)).values
    assert paused["__interrupt__"][0].value == {"component_id": "UserFillUp:Ask", "inputs": FORM, "tips": TIPS}
    assert paused["answer"] == ""
    assert waiting.next == ("UserFillUp.Ask",)
    assert done["answer"] == FINAL
    assert done["outputs"]["UserFillUp:Ask"]["feedback"] == "bolder"
    assert done["outputs"]["LLM:Draft"]["content"] == DRAFT        # the draft from before the pause
    # the answering request is a turn of its own, with no query, as RAGFlow counts it (SPEC 5.1)
    assert state["history"][:2] == [["user", "coffee"], ["user", ""]]
    assert state["globals"]["sys.conversation_turns"] == 2


def test_an_answer_without_the_required_fields_is_asked_again_for_them(durable_url):
    config = thread(new_session())
    with sync_saver(durable_url) as saver:
        graph = canvas2graph.compile(FEEDBACK_DSL, checkpointer=saver)
        graph.invoke({"query": "coffee"}, config, context=scripted())
        again = graph.invoke(Command(resume={"note": "later"}), config, context=scripted())
        done = graph.invoke(Command(resume={"feedback": "bolder"}), config, context=scripted())
        state = graph.get_state(config).values
    assert again["__interrupt__"][0].value == {"component_id": "UserFillUp:Ask", "inputs": FORM, "tips": TIPS}
    assert done["answer"] == FINAL
    assert done["outputs"]["UserFillUp:Ask"]["feedback"] == "bolder" and done["outputs"]["UserFillUp:Ask"]["note"] == "later"
    assert state["globals"]["sys.conversation_turns"] == 3           # each answering request counts


def test_a_paused_begin_form_resumes_with_command_resume_and_the_query_can_come_with_it(durable_url):
    with sync_saver(durable_url) as saver:
        graph = canvas2graph.compile(BEGIN_FORM_DSL, checkpointer=saver)
        config = thread(new_session())
        paused = graph.invoke({"query": ""}, config)      # (a query alone would fill a one-field form)
        done = graph.invoke(Command(resume={"name": "Ada"}), config)
        # canvas2graph's Runner sends the request's query beside the inputs
        other = thread(new_session())
        graph.invoke({"query": ""}, other)
        graph.invoke(Command(resume={"inputs": {"name": "Bob"}, "query": "it is Bob"}), other)
        history = graph.get_state(other).values["history"]
    assert paused["__interrupt__"][0].value["inputs"] == {
        "name": {"type": "line", "name": "Name", "optional": False, "value": None}}
    assert done["answer"] == "HelloAda, turn2"       # RAGFlow drops the spaces beside a reference (SPEC 10)
    assert history[:2] == [["user", ""], ["user", "it is Bob"]]


# --- history and forks -------------------------------------------------------------------------
def test_get_state_history_lists_every_step_and_a_run_from_an_earlier_checkpoint_forks(durable_url):
    config = thread(new_session())
    with sync_saver(durable_url) as saver:
        graph = canvas2graph.compile(CHAT_DSL, checkpointer=saver)
        graph.invoke({"query": "first"}, config, context=scripted())
        steps = list(graph.get_state_history(config))
        # oldest first: the input, then one step per component
        assert [s.next for s in reversed(steps)] == [("__start__",), ("begin",), ("LLM.A",), ("Message.M",), ()]
        before_message = next(s for s in steps if s.next == ("Message.M",))

        # replay from there with another model reply: the Message runs again, and with it the generation
        # it streams (the LLM's step left it pending, as RAGFlow's lazy output)
        context = RunContext(script=Script.load({"by_component": {"LLM:A": ["Forked."]}}))
        forked = graph.invoke(None, before_message.config, context=context)
        assert forked["answer"] == "Turn1:Forked."
        kept = {s.config["configurable"]["checkpoint_id"] for s in graph.get_state_history(config)}
        assert {s.config["configurable"]["checkpoint_id"] for s in steps} < kept     # a branch beside the first run

        # edit the state there, then run on from the edit
        edited = graph.update_state(before_message.config, {"globals": {"sys.conversation_turns": 7}}, as_node="LLM.A")
        assert graph.invoke(None, edited, context=scripted())["answer"] == "Turn7:Answer 1 from LLM:A."
        latest = graph.get_state(config)
    assert latest.values["answer"] == "Turn7:Answer 1 from LLM:A."
    assert [role for role, _ in latest.values["history"]] == ["user", "assistant"]   # one turn, edited


# --- the run context --------------------------------------------------------------------------------
def test_without_a_context_runs_are_configured_by_the_environment_with_a_fresh_script_each(durable_url, tmp_path,
                                                                                           monkeypatch):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"by_component": {"LLM:A": ["Only once."]}}))
    monkeypatch.setenv("CANVAS2GRAPH_LLM_SCRIPT", str(script))
    reset_default_environment()
    config = thread(new_session())
    try:
        with sync_saver(durable_url) as saver:
            graph = canvas2graph.compile(CHAT_DSL, checkpointer=saver)
            answers = [graph.invoke({"query": q}, config)["answer"] for q in ("one", "two")]
    finally:
        reset_default_environment()
    assert answers == ["Turn1:Only once.", "Turn2:Only once."]      # each run has its own copy of the script


# --- RAGFlow's events -----------------------------------------------------------------------------
def run_cli(tmp_path: Path, dsl: dict, db: str, session: str, *, query: str = "", inputs: dict | None = None) -> list:
    files = {name: tmp_path / f"{name}.json" for name in ("dsl", "script", "inputs")}
    files["dsl"].write_text(json.dumps(dsl))
    files["script"].write_text(json.dumps(SCRIPT))
    args = [sys.executable, "-m", "canvas2graph.cli", "run", str(files["dsl"]), "--format", "jsonl", "--db", db,
            "--session", session, "--query", query, "--llm-script", str(files["script"])]
    if inputs is not None:
        files["inputs"].write_text(json.dumps(inputs))
        args += ["--inputs", str(files["inputs"])]
    done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


async def test_ragflow_events_from_the_graph_s_own_stream_are_what_run_jsonl_prints(durable_url, tmp_path):
    cli_session, api_session = new_session(), new_session()
    cli = [run_cli(tmp_path, FEEDBACK_DSL, durable_url, cli_session, query="coffee"),
           run_cli(tmp_path, FEEDBACK_DSL, durable_url, cli_session, inputs={"feedback": "bolder"})]
    async with open_checkpointer(durable_url) as saver:
        graph = canvas2graph.compile(FEEDBACK_DSL, checkpointer=saver)
        config = thread(api_session)
        first = canvas2graph.ragflow_events(graph, {"query": "coffee"}, config, context=scripted())
        paused = [e async for e in first]
        second = canvas2graph.ragflow_events(graph, Command(resume={"feedback": "bolder"}), config, context=scripted())
        resumed = [e async for e in second]
    assert (first.status, second.status) == ("paused", "finished")
    assert comparable(paused) == comparable(cli[0])
    assert comparable(resumed) == comparable(cli[1])
    assert [e["event"] for e in paused][:2] == ["workflow_started", "node_started"]
    assert resumed[-1]["event"] == "workflow_finished" and resumed[-1]["data"]["outputs"]["content"] == FINAL
    assert {e["task_id"] for e in paused} == {api_session}


async def test_a_pipeline_is_refused_by_ragflow_events_saying_how_to_run_it():
    from langgraph.checkpoint.memory import InMemorySaver
    from canvas2graph.types import UsageError
    graph = canvas2graph.compile(REPO / "fixtures" / "kb" / "pipeline.json", checkpointer=InMemorySaver())
    with pytest.raises(UsageError, match=r"ingestion pipeline .*canvas2graph ingest"):
        async for _ in canvas2graph.ragflow_events(graph, {"query": "hello"}, {"configurable": {"thread_id": "t"}}):
            pass
