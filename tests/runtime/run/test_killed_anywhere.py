"""A turn whose process dies after any of its checkpoint writes is continued, never lost and never run as new.

A process can die between any two writes of a turn: after its input checkpoint, after the step that reads
the input, between a step's writes and the next checkpoint, after its last checkpoint. Each test runs a turn
once to count its writes, then once per write with the process "killed" right after that write (the
checkpointer refuses every later write, as a dead process makes none), and then asks a fresh Runner, as the
next process would:
- how the turn stands (`Runner.turn_standing`): "new" while nothing of it is saved, "interrupted" once
  anything is, "over" once its last checkpoint is (and then `Runner.finished_event` is its end, to report);
- to continue it, as a worker taking it over does: it ends with `workflow_finished`, its answer once in
  the conversation;
- to answer the next message, as the CLI does on a session whose turn was interrupted: the interrupted turn
  is finished first, then the new message answered as itself.
(bench.scale's random worker kills found a turn killed after its first step's checkpoint taken for one that
had ended: its answer was lost and given to the next message.)
"""
from __future__ import annotations

import contextlib

import pytest

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from tests.conftest import cpn
from tests.runtime.checkpointers import new_session

# begin -> LLM:A -> Message:M
CHAT_DSL = {"components": {
    "begin": cpn("Begin", downstream=["LLM:A"]),
    "LLM:A": cpn("LLM", {"llm_id": "gpt-4o@OpenAI"}, downstream=["Message:M"]),
    "Message:M": cpn("Message", {"content": ["{LLM:A@content}"]}),
}}
WRITES = ("aput", "aput_writes")


class ProcessKilled(BaseException):
    """The process died: nothing after this write reaches the database."""


class Dying:
    """Lets `saver` make `allowed` writes, then refuses every later one (a process that died makes none)."""

    def __init__(self, saver, allowed: int | None):
        self.saver, self.allowed, self.made = saver, allowed, 0
        for name in WRITES:
            setattr(saver, name, self._wrap(getattr(saver, name)))

    def _wrap(self, write):
        async def dying_write(*args, **kwargs):
            if self.allowed is not None and self.made >= self.allowed:
                raise ProcessKilled()
            self.made += 1
            return await write(*args, **kwargs)
        return dying_write

    def revive(self) -> None:
        for name in WRITES:
            delattr(self.saver, name)       # the class's own method again


def runner(saver, replies: list) -> Runner:
    script = Script.load(replies)
    return Runner(compile_dsl(CHAT_DSL), saver, ModelFactory(script=script), script)


async def turn(saver, session: str, replies: list, request: TurnRequest) -> list[dict]:
    return [e async for e in runner(saver, replies).run_turn(session, request)]


async def killed_turn(saver, session: str, allowed: int | None) -> tuple[int, bool]:
    """The session's second turn ("second", message id "m2"), killed after `allowed` writes (None: never);
    (the writes it made, whether it finished)."""
    dying = Dying(saver, allowed)
    try:
        events = await turn(saver, session, ["Second answer."], TurnRequest(query="second", message_id="m2"))
        finished = events[-1]["event"] == "workflow_finished"
    except ProcessKilled:
        finished = False
    except Exception as e:              # the Runner ends a turn its checkpointer broke: it cannot close it either
        assert isinstance(e.__cause__ or e.__context__, ProcessKilled) or "ProcessKilled" in repr(e), repr(e)
        finished = False
    dying.revive()
    return dying.made, finished


async def history(saver, session: str) -> list:
    state = await runner(saver, []).graph.aget_state({"configurable": {"thread_id": session}})
    return state.values["history"]


async def first_turn(saver, session: str) -> None:
    events = await turn(saver, session, ["First answer."], TurnRequest(query="first", message_id="m1"))
    assert events[-1]["event"] == "workflow_finished"


async def count_writes(url) -> int:
    async with open_checkpointer(url) as saver:
        session = new_session()
        await first_turn(saver, session)
        made, finished = await killed_turn(saver, session, None)
    assert finished and made >= 6
    return made


@contextlib.asynccontextmanager
async def killed_after(url, allowed: int):
    """(saver, session, whether the turn finished): a session whose first turn finished and whose second, "m2",
    was killed after `allowed` writes."""
    async with open_checkpointer(url) as saver:
        session = new_session()
        await first_turn(saver, session)
        _made, finished = await killed_turn(saver, session, allowed)
        yield saver, session, finished


@pytest.fixture
async def writes_per_turn(checkpointer_url) -> int:
    return await count_writes(checkpointer_url)


def answers(rows: list) -> list:
    """The conversation's answers (history keeps the answering Message's outputs)."""
    return [said["content"] if isinstance(said, dict) else said for role, said in rows if role == "assistant"]


async def test_a_turn_killed_after_any_write_is_continued_to_its_answer_once(checkpointer_url, writes_per_turn):
    for allowed in range(writes_per_turn + 1):
        async with killed_after(checkpointer_url, allowed) as (saver, session, finished):
            standing = await runner(saver, []).turn_standing(session, "m2")
            if allowed == 0:
                assert standing == "new", allowed            # nothing of it saved: its request runs
                continue
            if finished or standing == "over":
                # only its last checkpoint's writes may be missing: the turn had ended
                assert allowed >= writes_per_turn - 1 and standing == "over", (allowed, standing)
                assert answers(await history(saver, session)) == ["First answer.", "Second answer."]
                # its process may have died before it reported the end: a worker taking it up reports it
                end = await runner(saver, []).finished_event(session, "m2")
                assert end["event"] == "workflow_finished" and end["message_id"] == "m2"
                assert end["data"]["outputs"]["content"] == "Second answer."
                assert await runner(saver, []).finished_event(session, "m1") is None     # not the last turn
                continue
            assert standing == "interrupted", (allowed, standing)
            events = await turn(saver, session, ["Second answer."],
                                TurnRequest(continue_interrupted=True, message_id="m2"))
            assert events[-1]["event"] == "workflow_finished", (allowed, events[-1])
            assert {e.get("message_id") for e in events} == {"m2"}, allowed
            assert answers(await history(saver, session)) == ["First answer.", "Second answer."], allowed
            assert await runner(saver, []).turn_standing(session, "m2") == "over"


async def test_the_next_message_after_a_kill_anywhere_is_answered_as_itself(checkpointer_url, writes_per_turn):
    for allowed in range(1, writes_per_turn - 1):
        async with killed_after(checkpointer_url, allowed) as (saver, session, _finished):
            interrupted = await runner(saver, []).interrupted(session)
            assert interrupted is not None and interrupted["message_id"] == "m2", allowed
            events = await turn(saver, session, ["Second answer.", "Third answer."],
                                TurnRequest(query="third", message_id="m3"))
            finished = [e for e in events if e["event"] == "workflow_finished"]
            assert [(e["message_id"], e["data"]["outputs"]["content"]) for e in finished] == [
                ("m2", "Second answer."), ("m3", "Third answer.")], allowed
            rows = await history(saver, session)
            assert [text for role, text in rows if role == "user"] == ["first", "second", "third"], allowed
            assert answers(rows) == ["First answer.", "Second answer.", "Third answer."], allowed


async def test_a_turn_given_up_after_any_write_leaves_the_session_to_start_afresh(checkpointer_url, writes_per_turn):
    for allowed in range(1, writes_per_turn - 1):
        async with killed_after(checkpointer_url, allowed) as (saver, session, _finished):
            assert await runner(saver, []).abandon(session, "m2"), allowed
            assert await runner(saver, []).interrupted(session) is None, allowed
            events = await turn(saver, session, ["Third answer."], TurnRequest(query="third", message_id="m3"))
            assert {e.get("message_id") for e in events} == {"m3"}, allowed
            assert events[-1]["data"]["outputs"]["content"] == "Third answer.", allowed
