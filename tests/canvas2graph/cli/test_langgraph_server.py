"""`canvas2graph langgraph DSL... --out DIR` writes a folder LangGraph Server serves.

The folder is checked as written, then served by a real `langgraph dev` process on 127.0.0.1 (PyPI
`langgraph-cli[inmem]`) and driven with LangGraph's own client, `langgraph-sdk`, as Studio drives it:
threads, streamed runs with tokens and node updates, a second turn, a form answered through an
interrupt, the thread's history and a fork from an earlier checkpoint.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from canvas2graph import RunContext
from canvas2graph.cli import main
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.cli.langgraph_server import graph_id
from tests.conftest import cpn
from tests.server.helpers import CHAT_DSL, DRAFT, FEEDBACK_DSL, FINAL, SCRIPT, TIPS, chat_answer, free_port

REPO = Path(__file__).resolve().parents[3]
LANGGRAPH = Path(sys.executable).parent / "langgraph"


def write(folder: Path, name: str, value) -> Path:
    path = folder / name
    path.write_text(json.dumps(value, ensure_ascii=False))
    return path


# --- the folder ------------------------------------------------------------------------------------
def test_graph_ids_come_from_titles_or_file_names_as_python_names():
    assert graph_id("Customer Support (v2)") == "customer_support_v2"
    assert graph_id("2024 report") == "agent_2024_report"
    assert graph_id("class") == "class_agent" and graph_id("canvas2graph") == "canvas2graph_agent"
    assert graph_id("客服") == ""                       # no ASCII left: the file name is used instead


def test_the_folder_holds_one_graph_per_dsl_a_langgraph_json_and_the_dsls(tmp_path, capsys):
    import langgraph_cli.config

    chat = write(tmp_path, "chat.json", CHAT_DSL)
    template = write(tmp_path, "t.json", {"id": 7, "title": "Feedback desk", "dsl": FEEDBACK_DSL})
    unnamed = write(tmp_path, "客服.json", {"title": "客服", "dsl": CHAT_DSL})
    out = tmp_path / "served"
    assert main(["langgraph", str(chat), str(template), str(unnamed), "--out", str(out)]) == 0
    config = json.loads((out / "langgraph.json").read_text())
    assert config["graphs"] == {"chat": "./agents.py:chat", "feedback_desk": "./agents.py:feedback_desk",
                                "agent": "./agents.py:agent"}
    assert config["dependencies"][0] == "." and (out / config["dependencies"][1]).resolve() == REPO
    assert langgraph_cli.config.validate_config_file(out / "langgraph.json")["graphs"] == config["graphs"]
    assert json.loads((out / "dsl" / "feedback_desk.json").read_text())["title"] == "Feedback desk"
    assert "graph 'feedback_desk' (5 components)" in capsys.readouterr().out

    module = {"__file__": str(out / "agents.py")}
    exec(compile((out / "agents.py").read_text(), "agents.py", "exec"), module)     # what the server imports
    assert module["chat"].checkpointer is None and module["chat"].name == "chat"
    paused = module["feedback_desk"].invoke({"query": "x"}, context=RunContext(script=Script.load(SCRIPT)))
    assert paused["__interrupt__"][0].value["tips"] == TIPS


def test_langgraph_server_tells_a_client_why_a_component_failed():
    # LangGraph Server shows the message of a few exception types only ("An internal error occurred" otherwise):
    # a component's failure (a model without its key, say) is one of them
    from langgraph_api.serde import default
    from canvas2graph.types import ComponentError
    failed = default(ComponentError("LLM:A", "LLM:A: OPENAI_API_KEY is not set"))
    assert failed == {"error": "ComponentError", "message": "LLM:A: OPENAI_API_KEY is not set"}


def test_the_printed_next_step_says_how_to_serve_offline_too(tmp_path, capsys):
    out = tmp_path / "served"
    assert main(["langgraph", str(write(tmp_path, "chat.json", CHAT_DSL)), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"cd {out} && langgraph dev" in printed and "CANVAS2GRAPH_LLM_SCRIPT=" in printed


def test_a_dsl_that_does_not_compile_is_reported_and_nothing_is_written(tmp_path, capsys):
    broken = write(tmp_path, "broken.json", {"components": {"begin": cpn("Begin", {}, ["Nope:1"])}})
    out = tmp_path / "served"
    assert main(["langgraph", str(write(tmp_path, "chat.json", CHAT_DSL)), str(broken), "--out", str(out)]) == 1
    assert "broken.json: error: begin" in capsys.readouterr().err
    assert not out.exists()


def test_a_default_model_given_to_the_command_is_written_into_the_folder(tmp_path):
    dsl = {"components": {"begin": cpn("Begin", {}, ["LLM:A"]), "LLM:A": cpn("LLM", {"llm_id": ""}, ["Message:M"]),
                          "Message:M": cpn("Message", {"content": ["{LLM:A@content}"]})}}
    out = tmp_path / "served"
    assert main(["langgraph", str(write(tmp_path, "a.json", dsl)), "--out", str(out),
                 "--default-llm", "gpt-4o-mini@OpenAI"]) == 0
    assert "DEFAULT_LLM = 'gpt-4o-mini@OpenAI'" in (out / "agents.py").read_text()


# --- served by langgraph dev -------------------------------------------------------------------------
class LangGraphDev:
    """`langgraph dev` serving a folder, on 127.0.0.1, offline, with the scripted model."""

    def __init__(self, folder: Path, script: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "CANVAS2GRAPH_LLM_SCRIPT": str(script), "LANGGRAPH_CLI_NO_ANALYTICS": "1",
               "LANGSMITH_TRACING": "false"}
        self.log = (folder / "server.log").open("w")
        self.proc = subprocess.Popen([str(LANGGRAPH), "dev", "--host", "127.0.0.1", "--port", str(self.port),
                                      "--no-browser", "--no-reload"], cwd=folder, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.folder = folder

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("langgraph dev exited:\n" + (self.folder / "server.log").read_text()[-3000:])
            try:
                if httpx.get(self.url + "/ok", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("langgraph dev did not answer:\n" + (self.folder / "server.log").read_text()[-3000:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(15)
        self.log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The chat and feedback canvases, served by `langgraph dev` for the tests of this module."""
    if not LANGGRAPH.exists():
        message = "langgraph-cli[inmem] is not installed (pip install -e '.[test]')"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    tmp = tmp_path_factory.mktemp("langgraph")
    out = tmp / "served"
    assert main(["langgraph", str(write(tmp, "chat.json", CHAT_DSL)), str(write(tmp, "feedback.json", FEEDBACK_DSL)),
                 "--out", str(out)]) == 0
    server = LangGraphDev(out, write(tmp, "script.json", SCRIPT))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def served(server):
    """A langgraph-sdk client of the server (one per test: it belongs to the test's event loop)."""
    from langgraph_sdk import get_client
    return get_client(url=server.url)


async def stream(client, thread_id: str, graph: str, **run) -> dict[str, list]:
    """A streamed run's parts by event: messages (chunk, metadata), updates, ..."""
    parts: dict[str, list] = {}
    async for part in client.runs.stream(thread_id, graph, stream_mode=["messages-tuple", "updates"], **run):
        parts.setdefault(part.event, []).append(part.data)
    return parts


async def test_a_streamed_run_shows_node_updates_and_tokens_with_their_component(served):
    thread = await served.threads.create()
    parts = await stream(served, thread["thread_id"], "chat", input={"query": "Capital of France?"})
    assert [node for update in parts["updates"] for node in update] == ["begin", "LLM.A", "Message.M"]
    tokens = [(chunk["content"], meta["component_id"]) for chunk, meta in parts["messages"]]
    # LLM:A's generation streams in the step of the Message that shows it (RAGFlow's lazy output)
    assert "".join(text for text, _ in tokens) == "Answer 1 from LLM:A."
    assert {cid for _, cid in tokens} == {"Message:M"} and len(tokens) > 1       # in pieces, as written
    assert parts["messages"][0][1]["langgraph_node"] == "Message.M"
    state = await served.threads.get_state(thread["thread_id"])
    assert state["values"]["answer"] == chat_answer(1)


async def test_a_second_turn_on_the_thread_sees_the_first(served):
    thread = (await served.threads.create())["thread_id"]
    await served.runs.wait(thread, "chat", input={"query": "first"})
    second = await served.runs.wait(thread, "chat", input={"query": "second"})
    state = (await served.threads.get_state(thread))["values"]
    assert second["answer"] == chat_answer(2)
    assert [entry[1] for entry in state["history"] if entry[0] == "user"] == ["first", "second"]


async def test_a_user_fill_up_pauses_as_an_interrupt_and_resumes_through_the_sdk(served):
    thread = (await served.threads.create())["thread_id"]
    await served.runs.wait(thread, "feedback", input={"query": "coffee"})
    paused = await served.threads.get_state(thread)
    assert paused["next"] == ["UserFillUp.Ask"]
    assert paused["tasks"][0]["interrupts"][0]["value"]["tips"] == TIPS
    done = await served.runs.wait(thread, "feedback", command={"resume": {"feedback": "bolder"}})
    assert done["answer"] == FINAL
    assert done["outputs"]["LLM:Draft"]["content"] == DRAFT


async def test_the_history_lists_every_step_and_a_run_forks_from_an_earlier_checkpoint(served):
    thread = (await served.threads.create())["thread_id"]
    await served.runs.wait(thread, "chat", input={"query": "first"})
    history = await served.threads.get_history(thread)
    assert [h["next"] for h in reversed(history)] == [["__start__"], ["begin"], ["LLM.A"], ["Message.M"], []]
    before_message = next(h for h in history if h["next"] == ["Message.M"])

    # run again from that checkpoint: the Message's step (and the generation it streams) runs again
    replayed = await served.runs.wait(thread, "chat", input=None,
                                      checkpoint_id=before_message["checkpoint"]["checkpoint_id"])
    assert replayed["answer"] == chat_answer(1)

    # change the state at that checkpoint as LLM:A would have, then run on from there
    edited = await served.threads.update_state(thread, {"globals": {"sys.conversation_turns": 7}}, as_node="LLM.A",
                                               checkpoint_id=before_message["checkpoint"]["checkpoint_id"])
    forked = await served.runs.wait(thread, "chat", input=None,
                                    checkpoint_id=edited["checkpoint"]["checkpoint_id"])
    assert forked["answer"] == "Turn7:Answer 1 from LLM:A."
    # the first run's steps are still there, beside the fork's
    ids = {h["checkpoint"]["checkpoint_id"] for h in await served.threads.get_history(thread, limit=50)}
    assert {h["checkpoint"]["checkpoint_id"] for h in history} < ids


async def test_studio_sees_the_canvas_its_schemas_and_a_context_sent_as_json(served):
    assistant = next(a for a in await served.assistants.search(graph_id="chat"))
    drawn = await served.assistants.get_graph(assistant["assistant_id"])
    assert {n["id"] for n in drawn["nodes"]} >= {"begin", "LLM.A", "Message.M"}
    assert {(e["source"], e["target"]) for e in drawn["edges"]} >= {("begin", "LLM.A"), ("LLM.A", "Message.M")}
    schemas = await served.assistants.get_schemas(assistant["assistant_id"])
    assert set(schemas["input_schema"]["properties"]) == {"query", "inputs", "files", "user_id"}
    assert set(schemas["output_schema"]["properties"]) == {"answer", "outputs"}
    assert set(schemas["context_schema"]["properties"]) == {"script", "session_id", "services"}
    thread = (await served.threads.create())["thread_id"]
    done = await served.runs.wait(thread, "chat", input={"query": "hi"},
                                  context={"script": {"by_component": {"LLM:A": ["From the context."]}}})
    assert done["answer"] == "Turn1:From the context."
