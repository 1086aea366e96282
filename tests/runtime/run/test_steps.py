"""A session's step trace, read back from its checkpoints, and forks from any of its steps.

Every checkpointer (in memory, SQLite, PostgreSQL) holds the same trace: it is LangGraph's own state
history, laid out as turns of steps.
"""
from __future__ import annotations

import asyncio
import json
import os
import subprocess

import pytest
from langgraph.types import Command

import canvas2graph
from canvas2graph.types import RunContext
from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from canvas2graph.runtime.run.steps import ForkError, atrace, atrace_message, fork_plan
from tests.conftest import cpn
from tests.runtime.checkpointers import new_session
from tests import forkserver

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RETRIEVAL_TOOL = {"component_name": "Retrieval", "name": "KB search", "params": {"dataset_ids": ["kb-1"]}}


def router_dsl() -> dict:
    """begin -> LLM:Kind -> Switch:S -- the query names RAGFlow --> Agent:T (KB search tool) -> Message:M
                                      \\-- else -------------------> Message:E"""
    return {"components": {
        "begin": cpn("Begin", downstream=["LLM:Kind"]),
        "LLM:Kind": cpn("LLM", {"llm_id": "m@OpenAI", "sys_prompt": "Say search or chat.",
                                "prompts": [{"role": "user", "content": "{sys.query}"}]}, downstream=["Switch:S"]),
        "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["Agent:T"], "items": [
            {"cpn_id": "sys.query", "operator": "contains", "value": "RAGFlow"}]}], "end_cpn_ids": ["Message:E"]},
            downstream=["Agent:T", "Message:E"]),
        "Agent:T": cpn("Agent", {"llm_id": "m@OpenAI", "sys_prompt": "Use the KB.", "cite": False, "max_rounds": 3,
                                 "prompts": [{"role": "user", "content": "{sys.query}"}], "tools": [RETRIEVAL_TOOL]},
                       downstream=["Message:M"]),
        "Message:M": cpn("Message", {"content": ["{Agent:T@content}"]}),
        "Message:E": cpn("Message", {"content": ["chat: {LLM:Kind@content}"]}),
    }}


def script() -> Script:
    return Script.load({
        "replies": ["search",                                                   # turn 1: LLM:Kind
                    {"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "RAGFlow"}}]},
                    "RAGFlow is a RAG engine.",                                 # turn 1: Agent:T
                    "chat"],                                                    # turn 2: LLM:Kind
        "auto_reply": "more",
        "retrieval": [{"content": "RAGFlow is an open-source RAG engine.", "docnm_kwd": "intro.md", "doc_id": "d1"}]})


async def run(runner: Runner, session: str, request: TurnRequest) -> list[dict]:
    return [e async for e in runner.run_turn(session, request)]


def answer(events: list[dict]) -> str:
    return events[-1]["data"]["outputs"]["content"]


async def two_turns(saver):
    s = script()
    runner = Runner(compile_dsl(router_dsl()), saver, ModelFactory(script=s), s)
    session = new_session()
    runs = [await run(runner, session, TurnRequest(query=q)) for q in ("What is RAGFlow?", "Hi there")]
    return runner, session, runs


def config(session: str, checkpoint_id: str | None = None) -> dict:
    configurable = {"thread_id": session, **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}
    return {"configurable": configurable}


def ids(turn: dict) -> list[str]:
    return [s["component_id"] for s in turn["steps"]]


async def test_every_step_of_every_turn_with_its_prompt_usage_and_tool_calls(checkpointer_url):
    async with open_checkpointer(checkpointer_url) as saver:
        runner, session, runs = await two_turns(saver)
        first, second = await atrace(runner.graph, config(session))
    assert (first["turn"], first["query"], first["status"]) == (1, "What is RAGFlow?", "finished")
    assert (second["turn"], second["query"], second["status"]) == (2, "Hi there", "finished")
    assert [first["message_id"], second["message_id"]] == [runs[0][0]["message_id"], runs[1][0]["message_id"]]
    assert 0 < first["started_at"] <= second["started_at"]
    assert ids(first) == ["begin", "LLM:Kind", "Switch:S", "Agent:T", "Message:M"]
    assert ids(second) == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    steps = first["steps"] + second["steps"]
    assert len({s["checkpoint_id"] for s in steps}) == len(steps)           # one checkpoint per step
    assert [s["step"] for s in first["steps"]] == sorted(s["step"] for s in first["steps"])
    for step in steps:
        assert step["elapsed"] >= 0 and step["error"] is None and isinstance(step["outputs"], dict)
    llm = first["steps"][1]
    assert (llm["component_type"], llm["inputs"], llm["outputs"]["content"]) == ("LLM", {"sys.query": "What is RAGFlow?"},
                                                                                "search")
    assert llm["messages"] == [{"role": "system", "content": "Say search or chat."},
                               {"role": "user", "content": "What is RAGFlow?"}]
    assert llm["usage"]["calls"] == 1 and llm["usage"]["total_tokens"] == (
        llm["usage"]["prompt_tokens"] + llm["usage"]["completion_tokens"]) > 0
    switch = first["steps"][2]
    assert switch["inputs"] == {"sys.query": "What is RAGFlow?"} and switch["outputs"]["_next"] == ["Agent:T"]
    assert not {"messages", "usage", "tool_calls"} & set(switch)           # only components that called a model
    agent = first["steps"][3]
    assert agent["outputs"]["content"] == "RAGFlow is a RAG engine."       # streamed by the Message, recorded here
    assert agent["messages"][-1] == {"role": "user", "content": "What is RAGFlow?"} and agent["usage"]["calls"] == 2
    [call] = agent["tool_calls"]
    assert (call["name"], call["arguments"]) == ("search_my_dateset_0", {"query": "RAGFlow"})
    assert "RAGFlow is an open-source RAG engine." in call["result"] and call["elapsed"] >= 0 and call["id"]
    # the second turn's prompt carries the conversation so far
    assert any(m["role"] == "assistant" and m["content"].endswith("RAGFlow is a RAG engine.")
               for m in second["steps"][1]["messages"])


async def test_a_fork_with_edited_inputs_gives_a_new_answer_and_keeps_the_old_branch(checkpointer_url):
    async with open_checkpointer(checkpointer_url) as saver:
        runner, session, runs = await two_turns(saver)
        before = await atrace(runner.graph, config(session))
        switch = before[1]["steps"][2]
        plan = await fork_plan(runner.graph, config(session), switch["checkpoint_id"],
                               inputs={"sys.query": "And RAGFlow?"})
        runner.script = runner.models._script = Script.load({
            "replies": [{"tool_calls": [{"name": "search_my_dateset_0", "arguments": {"query": "again"}}]}, "Forked."],
            "retrieval": [{"content": "c", "docnm_kwd": "a.md", "doc_id": "d"}]})
        runner.models = ModelFactory(script=runner.script)
        events = await run(runner, session, TurnRequest(query=plan.query, fork=plan))
        assert answer(events) == "Forked." and runner.outcome.status == "finished"
        assert events[0]["event"] == "workflow_started"               # a fork is a run of its own
        after = await atrace(runner.graph, config(session))
        old_tail = before[1]["steps"][3]["checkpoint_id"]
        old_branch = await atrace(runner.graph, config(session, old_tail))
        old_turn = await atrace_message(runner.graph, config(session), runs[1][0]["message_id"])
        # the session continues from the new branch
        runner.script = Script.load({"auto_reply": "ok"})
        runner.models = ModelFactory(script=runner.script)
        await run(runner, session, TurnRequest(query="Thanks"))
        latest = (await atrace(runner.graph, config(session)))[-1]
    assert [t["turn"] for t in after] == [1, 2, 3]
    assert ids(after[1]) == ["begin", "LLM:Kind"]                 # cut at the forked step on this branch
    assert after[1]["status"] == "finished"                       # as its run ended, on the old branch
    assert after[2]["fork_of"] == 2 and after[2]["query"] == "Hi there"
    assert ids(after[2]) == ["Switch:S", "Agent:T", "Message:M"]
    assert after[2]["steps"][0]["inputs"] == {"sys.query": "And RAGFlow?"}
    assert after[2]["message_id"] == events[0]["message_id"]
    # the old branch is still in the checkpointer, whole
    assert ids(old_branch[1]) == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    assert ids(old_turn) == ["begin", "LLM:Kind", "Switch:S", "Message:E"]
    assert old_tail not in {s["checkpoint_id"] for t in after for s in t["steps"]}
    assert latest["query"] == "Thanks" and latest["turn"] == 4
    assert any(m["role"] == "assistant" and m["content"].endswith("Forked.") for m in latest["steps"][1]["messages"])


async def test_a_fork_with_given_outputs_goes_on_from_the_steps_successors():
    async with open_checkpointer(None) as saver:
        runner, session, _ = await two_turns(saver)
        llm = (await atrace(runner.graph, config(session)))[1]["steps"][1]
        plan = await fork_plan(runner.graph, config(session), llm["checkpoint_id"], outputs={"content": "given"})
        events = await run(runner, session, TurnRequest(query=plan.query, fork=plan))
        forked = (await atrace(runner.graph, config(session)))[-1]
    assert answer(events) == "chat:given"
    assert ids(forked) == ["LLM:Kind", "Switch:S", "Message:E"]
    assert forked["steps"][0]["outputs"]["content"] == "given" and "messages" not in forked["steps"][0]


async def test_fork_requests_that_do_not_fit_name_the_field():
    async with open_checkpointer(None) as saver:
        runner, session, _ = await two_turns(saver)
        other = new_session()
        await run(runner, other, TurnRequest(query="Hi"))
        turns = await atrace(runner.graph, config(session))
        foreign = (await atrace(runner.graph, config(other)))[0]["steps"][1]["checkpoint_id"]
        llm = turns[1]["steps"][1]
        problems = {}
        for name, args in {"unknown": ("nope", {}), "foreign": (foreign, {}),
                           "input": (llm["checkpoint_id"], {"inputs": {"sys.nope": 1}}),
                           "both": (llm["checkpoint_id"], {"inputs": {}, "outputs": {}})}.items():
            with pytest.raises(ForkError) as raised:
                await fork_plan(runner.graph, config(session), args[0], **args[1])
            problems[name] = (raised.value.field, str(raised.value))
    assert problems["unknown"][0] == problems["foreign"][0] == "checkpoint_id"
    assert problems["input"][0] == "inputs" and "sys.nope" in problems["input"][1] and "sys.query" in problems["input"][1]
    assert problems["both"][0] == "outputs"


def form_dsl() -> dict:
    return {"components": {
        "begin": cpn("Begin", downstream=["LLM:Draft"]),
        "LLM:Draft": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "Slogan: {sys.query}"}]},
                         downstream=["UserFillUp:Ask"]),
        "UserFillUp:Ask": cpn("UserFillUp", {"enable_tips": True, "tips": "Any feedback?", "inputs": {
            "feedback": {"type": "line", "name": "Feedback", "optional": False}}}, downstream=["Message:Out"]),
        "Message:Out": cpn("Message", {"content": ["{LLM:Draft@content} / {UserFillUp:Ask@feedback}"]}),
    }}


async def test_a_paused_turn_its_answer_and_a_fork_of_the_form(checkpointer_url):
    s = Script.load({"auto_reply": "Draft"})
    async with open_checkpointer(checkpointer_url) as saver:
        runner = Runner(compile_dsl(form_dsl()), saver, ModelFactory(script=s), s)
        session = new_session()
        await run(runner, session, TurnRequest(query="coffee"))
        paused = await atrace(runner.graph, config(session))
        await run(runner, session, TurnRequest(inputs={"feedback": "bolder"}))
        answered = await atrace(runner.graph, config(session))
        form = answered[1]["steps"][0]
        plan = await fork_plan(runner.graph, config(session), form["checkpoint_id"], inputs={"feedback": "shorter"})
        events = await run(runner, session, TurnRequest(query=plan.query, fork=plan))
        forked = await atrace(runner.graph, config(session))
    assert [t["status"] for t in paused] == ["paused"]
    assert ids(paused[0]) == ["begin", "LLM:Draft", "UserFillUp:Ask"]
    assert paused[0]["steps"][-1]["form"]["tips"] == "Any feedback?" and paused[0]["steps"][-1]["outputs"] == {}
    assert [t["status"] for t in answered] == ["paused", "finished"]
    assert ids(answered[1]) == ["UserFillUp:Ask", "Message:Out"]
    assert form["outputs"]["feedback"] == "bolder" and form["checkpoint_id"] == paused[0]["steps"][-1]["checkpoint_id"]
    assert answer(events) == "Draft/shorter"
    assert forked[-1]["fork_of"] == 1 and ids(forked[-1]) == ["UserFillUp:Ask", "Message:Out"]


async def test_a_failed_turn_and_the_next_one():
    dsl = {"components": {
        "begin": cpn("Begin", downstream=["LLM:A"]),
        "LLM:A": cpn("LLM", {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": "{sys.query}"}]},
                     downstream=["Message:M"]),
        "Message:M": cpn("Message", {"content": ["{LLM:A@content}"]})}}
    s = Script.load({"replies": [{"error": "the provider is down"}, "fine"]})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=s), s)
        session = new_session()
        await run(runner, session, TurnRequest(query="one"))
        await run(runner, session, TurnRequest(query="two"))
        turns = await atrace(runner.graph, config(session))
        # the failed turn, mended: the LLM's step forked with the answer it should have given
        plan = await fork_plan(runner.graph, config(session), turns[0]["steps"][1]["checkpoint_id"],
                               outputs={"content": "mended"})
        events = await run(runner, session, TurnRequest(query=plan.query, fork=plan))
        mended = await atrace(runner.graph, config(session))
    assert answer(events) == "mended"
    assert [(t["turn"], t["query"], t["status"]) for t in mended] == [(1, "one", "failed"), (2, "one", "finished")]
    assert ids(mended[0]) == ["begin"] and ids(mended[1]) == ["LLM:A", "Message:M"]
    assert [t["status"] for t in turns] == ["failed", "finished"]
    failed = turns[0]["steps"][-1]
    assert failed["component_id"] == "Message:M" and "the provider is down" in failed["error"]   # it streamed LLM:A
    assert turns[0]["steps"][1]["outputs"]["content"] is None          # the generation never came
    assert turns[0]["steps"][1]["messages"] == [{"role": "user", "content": "one"}]


async def test_a_cancelled_turn():
    from tests.runtime.run.test_cancellation import SlowFactory, two_llms
    s = Script.load({"auto_reply": "answer {n}"})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(two_llms()), saver, SlowFactory(s), s)
        async for event in runner.run_turn("c", TurnRequest(query="go")):
            if event["event"] == "node_started" and event["data"]["component_id"] == "LLM:A":
                asyncio.get_running_loop().call_later(0.1, lambda: runner.cancel(at_once=False))
        await run(runner, "c", TurnRequest(query="again"))
        turns = await atrace(runner.graph, config("c"))
    assert [t["status"] for t in turns] == ["cancelled", "finished"]
    assert ids(turns[0]) == ["begin", "LLM:A", "LLM:B"]
    assert turns[0]["steps"][-1]["error"] == "Task has been canceled"


async def test_a_turn_cancelled_mid_run():
    # cancelled at once while LLM:A waits for its model: its step shows the cancel, LLM:B never ran
    from tests.runtime.run.test_cancellation import SlowFactory, two_llms
    s = Script.load({"auto_reply": "answer {n}"})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(two_llms()), saver, SlowFactory(s), s)
        async for event in runner.run_turn("c", TurnRequest(query="go")):
            if event["event"] == "node_started" and event["data"]["component_id"] == "LLM:A":
                asyncio.get_running_loop().call_later(0.1, runner.cancel)
        await run(runner, "c", TurnRequest(query="again"))
        turns = await atrace(runner.graph, config("c"))
    assert [t["status"] for t in turns] == ["cancelled", "finished"]
    assert ids(turns[0]) == ["begin", "LLM:A"]
    assert turns[0]["steps"][-1]["error"] == "Task has been canceled"


def test_the_public_facade_traces_a_graph_run_with_langgraphs_own_calls():
    from langgraph.checkpoint.memory import InMemorySaver
    graph = canvas2graph.compile(form_dsl(), checkpointer=InMemorySaver())
    context = RunContext(script=Script.load({"auto_reply": "Draft"}))
    cfg = {"configurable": {"thread_id": "t1"}}
    graph.invoke({"query": "tea"}, cfg, context=context)
    graph.invoke(Command(resume={"feedback": "ok"}), cfg, context=context)
    turns = canvas2graph.trace(graph, cfg)
    # without ragflow_events no run names its message: a turn runs from one input to the next,
    # the form's answer included
    assert [t["status"] for t in turns] == ["finished"]
    assert turns[0]["message_id"] is None and turns[0]["query"] == "tea"
    assert ids(turns[0]) == ["begin", "LLM:Draft", "UserFillUp:Ask", "Message:Out"]
    assert turns[0]["steps"][2]["outputs"]["feedback"] == "ok" and "form" in turns[0]["steps"][2]
    # a fork with LangGraph's own call: the checkpoint the step ran from, and the edit in the run's context
    draft = turns[0]["steps"][1]
    edited = RunContext(script=Script.load({"auto_reply": "Draft"}),
                        overrides={"LLM:Draft": {"inputs": {"sys.query": "coffee"}}})
    graph.invoke(None, {"configurable": {"thread_id": "t1", "checkpoint_id": draft["checkpoint_id"]}}, context=edited)
    first, fork = canvas2graph.trace(graph, cfg)
    assert ids(first) == ["begin"] and fork["fork_of"] == 1 and fork["status"] == "paused"
    assert ids(fork) == ["LLM:Draft", "UserFillUp:Ask"]
    assert fork["steps"][0]["messages"] == [{"role": "user", "content": "Slogan: coffee"}]


async def test_the_async_facade_is_the_same_trace():
    async with open_checkpointer(None) as saver:
        runner, session, _ = await two_turns(saver)
        assert await canvas2graph.atrace(runner.graph, config(session)) == await atrace(runner.graph, config(session))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*forkserver.python(), "-m", "canvas2graph.cli", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": REPO}, timeout=120)


def test_the_trace_command_prints_a_run_sessions_trace_as_json(tmp_path):
    dsl = tmp_path / "agent.json"
    dsl.write_text(json.dumps(form_dsl()))
    db, answers = str(tmp_path / "s.db"), tmp_path / "script.json"
    answers.write_text(json.dumps({"auto_reply": "Draft"}))
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"feedback": "ok"}))
    base = ["--session", "s1", "--db", db]
    assert cli("run", str(dsl), "--query", "tea", "--llm-script", str(answers), "--format", "jsonl", *base).returncode == 0
    assert cli("run", str(dsl), "--inputs", str(inputs), "--llm-script", str(answers), "--format", "jsonl",
               *base).returncode == 0
    done = cli("trace", *base, "--dsl", str(dsl))
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["session_id"] == "s1" and [t["status"] for t in printed["turns"]] == ["paused", "finished"]
    assert printed["turns"][0]["steps"][1]["messages"] == [{"role": "user", "content": "Slogan: tea"}]
    no_dsl = cli("trace", *base)
    assert no_dsl.returncode == 2 and "--dsl" in no_dsl.stderr and "Traceback" not in no_dsl.stderr
    unknown = cli("trace", "--session", "nobody", "--db", db, "--dsl", str(dsl))
    assert unknown.returncode == 2 and "nobody" in unknown.stderr


async def test_components_that_ran_in_parallel_share_a_step_and_a_fork_names_one():
    dsl = {"components": {
        "begin": cpn("Begin", downstream=["Message:A", "Message:B"]),
        "Message:A": cpn("Message", {"content": ["a {sys.query}"]}),
        "Message:B": cpn("Message", {"content": ["b {sys.query}"]})}}
    s = Script.load({"auto_reply": "x"})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory(script=s), s)
        await run(runner, "p", TurnRequest(query="q"))
        [turn] = await atrace(runner.graph, config("p"))
        a, b = turn["steps"][1:]
        with pytest.raises(ForkError) as ambiguous:
            await fork_plan(runner.graph, config("p"), a["checkpoint_id"], outputs={"content": "A!"})
        plan = await fork_plan(runner.graph, config("p"), a["checkpoint_id"], outputs={"content": "A!"},
                               component_id="Message:A")
        await run(runner, "p", TurnRequest(query=plan.query, fork=plan))
        forked = (await atrace(runner.graph, config("p")))[-1]
    assert ids(turn) == ["begin", "Message:A", "Message:B"] and turn["status"] == "finished"
    assert a["step"] == b["step"] and a["checkpoint_id"] == b["checkpoint_id"]
    assert ambiguous.value.field == "component_id" and "Message:A, Message:B" in str(ambiguous.value)
    # the fork runs the whole superstep again; only Message:A takes the given outputs
    outputs = {s["component_id"]: s["outputs"]["content"] for s in forked["steps"] if s["component_id"] != "begin"}
    assert outputs == {"Message:A": "A!", "Message:B": "bq"}       # RAGFlow drops the space before a reference


async def test_a_parallel_iteration_shows_its_max_concurrency_and_each_item_as_a_step():
    dsl = {"components": {
        "begin": cpn("Begin", downstream=["StringTransform:Split"]),
        "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","]},
                                     ["Iteration:I"]),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result", "max_concurrency": 2,
                                         "outputs": {"out": {"ref": "StringTransform:Up@result"}}}, ["Message:Out"]),
        "IterationItem:S": cpn("IterationItem", {}, ["StringTransform:Up"], parent_id="Iteration:I"),
        "StringTransform:Up": cpn("StringTransform", {"method": "merge", "script": "<{IterationItem:S@item}>",
                                                      "delimiters": [","]}, parent_id="Iteration:I"),
        "Message:Out": cpn("Message", {"content": ["{Iteration:I@out}"]}),
    }}
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(dsl), saver, ModelFactory())
        [e async for e in runner.run_turn("t", TurnRequest(query="a,b,c"))]
        turns = await atrace(runner.graph, {"configurable": {"thread_id": "t"}})
    steps = [s for s in turns[0]["steps"] if s["component_id"] == "Iteration:I"]
    assert steps[0]["max_concurrency"] == 2 and "item" not in steps[0]
    items = sorted((s["item"], s["outputs"]["out"]) for s in steps[1:])
    assert items == [(0, "<a>"), (1, "<b>"), (2, "<c>")]
    assert all(s["max_concurrency"] == 2 for s in steps)
