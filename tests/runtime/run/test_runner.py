"""A session is a checkpointed conversation: turns continue it, failures stop a turn, not the session."""
from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel
from canvas2graph.runtime.run.runner import Runner, TurnFailed, TurnRequest
from canvas2graph.runtime.graph.state import HISTORY

SEEN: list[list] = []


class RecordingModel(ScriptedChatModel):
    """The scripted model, remembering the messages of every call."""

    async def _astream(self, messages, *args, **kwargs):
        SEEN.append([(m.type, m.content) for m in messages])
        async for chunk in super()._astream(messages, *args, **kwargs):
            yield chunk


class RecordingFactory(ModelFactory):
    def chat_model(self, llm_id, *, component_id=None, gen_conf=None):
        return RecordingModel(script=self._script, component_id=component_id)

    def __init__(self, script):
        super().__init__(script=script)
        self._script = script


def chat_dsl() -> dict:
    return {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
        "LLM:A": {"obj": {"component_name": "LLM", "params": {
            "llm_id": "m@OpenAI", "sys_prompt": "Be brief.", "prompts": [{"role": "user", "content": "{sys.query}"}]}},
            "downstream": ["Message:M"]},
        "Message:M": {"obj": {"component_name": "Message", "params": {
            "content": ["Turn {sys.conversation_turns}: {LLM:A@content}"]}}, "downstream": []},
    }}


async def run(runner: Runner, session: str, query: str) -> list[dict]:
    return [e async for e in runner.run_turn(session, TurnRequest(query=query))]


def names(events: list[dict]) -> list[str]:
    return [e["event"] + (":" + e["data"]["component_id"] if "component_id" in e["data"] else "") for e in events]


async def test_a_second_turn_continues_the_conversation_from_the_database(tmp_path):
    SEEN.clear()
    db = str(tmp_path / "sessions.db")
    script = Script.load(["Paris.", "Rome."])
    compiled = compile_dsl(chat_dsl())
    async with open_checkpointer(db) as saver:
        await run(Runner(compiled, saver, RecordingFactory(script), script), "s1", "Capital of France?")
    async with open_checkpointer(db) as saver:           # a new runner, as another process would be
        runner = Runner(compiled, saver, RecordingFactory(script), script)
        events = await run(runner, "s1", "And of Italy?")
        state = (await runner.graph.aget_state({"configurable": {"thread_id": "s1"}})).values
    final = events[-1]
    assert final["event"] == "workflow_finished"
    assert final["data"]["outputs"]["content"] == "Turn2:Rome."
    assert SEEN[1] == [("system", "Be brief."), ("human", "Capital of France?"), ("ai", "Turn1:Paris."), ("human", "And of Italy?")]
    assert [role for role, _ in state[HISTORY]] == ["user", "assistant", "user", "assistant"]
    assert state["globals"]["sys.history"][:2] == ["user: Capital of France?", "assistant: " + repr(state[HISTORY][1][1])]


async def test_sessions_do_not_see_each_other(tmp_path):
    script = Script.load({"auto_reply": "ok"})
    compiled = compile_dsl(chat_dsl())
    async with open_checkpointer(str(tmp_path / "s.db")) as saver:
        runner = Runner(compiled, saver, ModelFactory(script=script), script)
        await run(runner, "a", "one")
        await run(runner, "a", "two")
        events = await run(runner, "b", "three")
    assert events[-1]["data"]["outputs"]["content"] == "Turn1:ok"


async def test_a_streamed_llm_finishes_after_the_message_that_shows_it():
    script = Script.load(["The capital of France is Paris."])
    async with open_checkpointer(None) as saver:
        events = await run(Runner(compile_dsl(chat_dsl()), saver, ModelFactory(script=script), script), "s", "q")
    assert names(events) == [
        "workflow_started", "node_started:begin", "node_finished:begin", "node_started:LLM:A", "node_started:Message:M",
        "message", "message", "message", "message", "message", "message", "message_end",
        "node_finished:LLM:A", "node_finished:Message:M", "workflow_finished"]
    assert [e["data"]["content"] for e in events if e["event"] == "message"] == [
        "Turn", "1", ":", "The capital ", "of France ", "is Paris."]
    llm = next(e for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == "LLM:A")
    assert llm["data"]["outputs"]["content"] == "The capital of France is Paris."


async def test_a_failing_component_stops_the_turn_but_not_the_session():
    script = Script.load([{"error": "provider is down"}, "Back again."])
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(chat_dsl()), saver, ModelFactory(script=script), script)
        failed = await run(runner, "s", "first")
        assert runner.outcome.status == "stopped"
        recovered = await run(runner, "s", "second")
    assert names(failed)[-1] == "node_finished:LLM:A"
    assert failed[-1]["data"]["error"] == "**ERROR**: MAX_RETRIES_EXCEEDED - provider is down"
    assert failed[-1]["data"]["outputs"]["_ERROR"] == failed[-1]["data"]["error"]
    assert "workflow_finished" not in names(failed)
    assert recovered[-1]["event"] == "workflow_finished"
    assert recovered[-1]["data"]["outputs"]["content"] == "Turn2:Back again."


async def test_reasoning_streams_between_think_markers_and_stays_out_of_the_llm_content():
    script = Script.load([{"content": "Answer.", "reasoning": "Let me think."}])
    async with open_checkpointer(None) as saver:
        events = await run(Runner(compile_dsl(chat_dsl()), saver, ModelFactory(script=script), script), "s", "q")
    messages = [e["data"] for e in events if e["event"] == "message"]
    assert {"content": "", "start_to_think": True} in messages
    assert {"content": "", "end_to_think": True} in messages
    llm = next(e for e in events if e["event"] == "node_finished" and e["data"]["component_id"] == "LLM:A")
    assert llm["data"]["outputs"]["content"] == "Answer."
    assert events[-1]["data"]["outputs"]["content"] == "Turn1:Let me think.Answer."


def counting_loop(passes: int) -> dict:
    """begin -> Loop:L (n = 0, until n >= passes) -> Message:Out; the body adds 1 to n."""
    return {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Loop:L"]},
        "Loop:L": {"obj": {"component_name": "Loop", "params": {
            "loop_variables": [{"variable": "n", "input_mode": "constant", "type": "number", "value": 0}],
            "loop_termination_condition": [{"variable": "Loop:L@n", "operator": "≥", "value": passes,
                                            "input_mode": "constant"}],
            "maximum_loop_count": passes + 1}}, "downstream": ["Message:Out"]},
        "LoopItem:S": {"obj": {"component_name": "LoopItem", "params": {}}, "downstream": ["VariableAssigner:Inc"],
                       "parent_id": "Loop:L"},
        "VariableAssigner:Inc": {"obj": {"component_name": "VariableAssigner", "params": {"variables": [
            {"variable": "Loop:L@n", "operator": "+=", "parameter": 1}]}}, "downstream": [], "parent_id": "Loop:L"},
        "Message:Out": {"obj": {"component_name": "Message", "params": {"content": ["n={Loop:L@n}"]}}, "downstream": []},
    }}


async def cut_in_the_second_pass(db: str, compiled, query: str) -> list[dict]:
    """A turn of session "s" whose reader stops in the loop's second pass, as a process that dies would."""
    async with open_checkpointer(db) as saver:
        turn = Runner(compiled, saver, ModelFactory()).run_turn("s", TurnRequest(query=query))
        cut: list[dict] = []
        async for event in turn:
            cut.append(event)
            if names(cut).count("node_finished:VariableAssigner:Inc") == 2:
                break
        await turn.aclose()
    return cut


async def test_a_loop_cut_off_mid_turn_reports_its_node_finished_once_in_the_turn_that_completes_it(tmp_path):
    # the consumer stops reading in the second pass (as a process that dies would); a new Runner,
    # as in another process, continues the turn from the last checkpoint
    db = str(tmp_path / "sessions.db")
    compiled = compile_dsl(counting_loop(3))
    cut = await cut_in_the_second_pass(db, compiled, "go")
    async with open_checkpointer(db) as saver:
        runner = Runner(compiled, saver, ModelFactory())
        resumed = await run(runner, "s", "")
    assert "node_finished:Loop:L" not in names(cut)
    assert runner.outcome.resumed == "interruption" and runner.outcome.status == "finished"
    loop = [e["data"] for e in resumed if e["event"] == "node_finished" and e["data"]["component_id"] == "Loop:L"]
    assert len(loop) == 1 and loop[0]["outputs"]["n"] == 3
    order = names(resumed)
    assert order.index("node_finished:Loop:L") < order.index("node_started:Message:Out")
    assert resumed[-1]["data"]["outputs"]["content"] == "n=3"


async def test_a_message_to_a_session_whose_turn_was_interrupted_is_answered_after_that_turn_not_instead(tmp_path):
    # the process running turn 2 died mid-loop; the next request asks a question of its own
    db = str(tmp_path / "sessions.db")
    compiled = compile_dsl(counting_loop(3))
    async with open_checkpointer(db) as saver:
        await run(Runner(compiled, saver, ModelFactory()), "s", "first")
    cut = await cut_in_the_second_pass(db, compiled, "second")
    async with open_checkpointer(db) as saver:
        runner = Runner(compiled, saver, ModelFactory())
        events = await run(runner, "s", "third")
        state = (await runner.graph.aget_state({"configurable": {"thread_id": "s"}})).values
    # the interrupted turn finishes first, under its own message id, then the new question is a turn of its own
    ends = [i for i, e in enumerate(events) if e["event"] == "workflow_finished"]
    assert len(ends) == 2 and "workflow_started" not in names(events[:ends[0]])
    assert {e["message_id"] for e in events[:ends[0] + 1]} == {cut[0]["message_id"]}
    assert events[ends[0] + 1]["event"] == "workflow_started" and events[-1]["message_id"] != cut[0]["message_id"]
    assert runner.outcome.status == "finished" and runner.outcome.extra["finished_first"] == cut[0]["message_id"]
    assert [content if role == "user" else "answer" for role, content in state[HISTORY]] == [
        "first", "answer", "second", "answer", "third", "answer"]
    assert state["globals"]["sys.conversation_turns"] == 3


async def test_an_empty_request_only_finishes_the_interrupted_turn(tmp_path):
    db = str(tmp_path / "sessions.db")
    compiled = compile_dsl(counting_loop(3))
    async with open_checkpointer(db) as saver:
        turn = Runner(compiled, saver, ModelFactory()).run_turn("s", TurnRequest(query="go"))
        async for event in turn:
            if event["event"] == "node_finished" and event["data"]["component_id"] == "VariableAssigner:Inc":
                break
        await turn.aclose()
    async with open_checkpointer(db) as saver:
        runner = Runner(compiled, saver, ModelFactory())
        events = await run(runner, "s", "")
    assert names(events).count("workflow_finished") == 1 and runner.outcome.resumed == "interruption"


def sink_beside_a_join() -> dict:
    """begin -> [Message:A (ends there), Message:B -> Message:J, Message:C -> Message:J]."""
    def message(text: str, downstream: list[str]) -> dict:
        return {"obj": {"component_name": "Message", "params": {"content": [text]}}, "downstream": downstream}
    return {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["Message:A", "Message:B", "Message:C"]},
        "Message:A": message("a", []), "Message:B": message("b", ["Message:J"]),
        "Message:C": message("c", ["Message:J"]), "Message:J": message("joined", []),
    }}


async def test_a_turn_whose_join_ends_after_another_branch_finishes_once_with_the_join_s_answer():
    # A ends in the same step as B and C; the finish and the join J become ready together
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(sink_beside_a_join()), saver, ModelFactory())
        events = await run(runner, "s", "q")
        state = (await runner.graph.aget_state({"configurable": {"thread_id": "s"}})).values
        second = await run(runner, "s", "again")
    assert names(events).count("workflow_finished") == 1
    assert names(events)[-2:] == ["node_finished:Message:J", "workflow_finished"]
    assert events[-1]["data"]["outputs"]["content"] == "joined"
    assert runner.outcome.status == "finished"
    assert [role for role, _ in state[HISTORY]] == ["user", "assistant"]
    assert state[HISTORY][1][1]["content"] == "joined"
    assert [line.split(":")[0] for line in state["globals"]["sys.history"]] == ["user", "assistant"]
    assert state["request"]["open"] is False
    assert names(second)[:2] == ["workflow_started", "node_started:begin"]      # the next turn is a new one
    assert names(second).count("workflow_finished") == 1


async def test_a_turn_that_exceeds_its_step_limit_fails_clearly_and_the_next_request_starts_a_new_turn(monkeypatch):
    from canvas2graph.compiler import canvas as compiler
    compiled = compile_dsl(counting_loop(5))
    async with open_checkpointer(None) as saver:
        runner = Runner(compiled, saver, ModelFactory())
        monkeypatch.setattr(compiler.CompiledCanvas, "recursion_limit", property(lambda self: 6))
        events: list[dict] = []
        with pytest.raises(TurnFailed, match="step limit of 6 steps"):
            async for event in runner.run_turn("s", TurnRequest(query="go")):
                events.append(event)
        assert runner.outcome.status == "stopped" and "step limit" in runner.outcome.error
        assert "workflow_finished" not in names(events)
        state = (await runner.graph.aget_state({"configurable": {"thread_id": "s"}})).values
        assert state["request"]["open"] is False             # closed: not an interruption to resume
        monkeypatch.undo()
        again = await run(runner, "s", "again")
    assert runner.outcome.resumed is None and runner.outcome.status == "finished"
    assert names(again)[:2] == ["workflow_started", "node_started:begin"]
    assert again[-1]["data"]["outputs"]["content"] == "n=5"


class FailsOnce(InMemorySaver):
    """An in-memory checkpointer whose third checkpoint write fails, as a database hiccup would."""

    def __init__(self):
        super().__init__()
        self.puts = 0

    async def aput(self, *args, **kwargs):
        self.puts += 1
        if self.puts == 3:
            raise OSError("disk I/O error")
        return await super().aput(*args, **kwargs)


async def test_an_engine_error_mid_turn_closes_the_turn_and_the_session_stays_usable():
    saver = FailsOnce()
    runner = Runner(compile_dsl(counting_loop(2)), saver, ModelFactory())
    with pytest.raises(TurnFailed, match="the turn failed: OSError: disk I/O error"):
        await run(runner, "s", "go")
    assert runner.outcome.status == "stopped"
    state = (await runner.graph.aget_state({"configurable": {"thread_id": "s"}})).values
    assert state["request"]["open"] is False
    again = await run(runner, "s", "again")
    assert runner.outcome.resumed is None and runner.outcome.status == "finished"
    assert again[-1]["data"]["outputs"]["content"] == "n=2"
    history = (await runner.graph.aget_state({"configurable": {"thread_id": "s"}})).values[HISTORY]
    # like a failed component, the broken turn leaves its user line and no answer
    assert [(role, content if role == "user" else "answer") for role, content in history] == [
        ("user", "go"), ("user", "again"), ("assistant", "answer")]
