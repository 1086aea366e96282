"""The LangGraph graph built from a plan: who records the end of the turn, and when.

When no component can start more than one other, one component runs at a time, and the one whose way
leads to the end records the assistant turn in its own step; otherwise a deferred finish node does,
after every branch. Either way the turn ends with the same events and the same checkpointed state.
"""
from __future__ import annotations

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.compiler.build import FINISH, one_at_a_time
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.conftest import cpn


def msg(text: str, *downstream: str, **params) -> dict:
    return cpn("Message", {"content": [text], **params}, list(downstream))


def chain() -> dict:
    return {"components": {"begin": cpn("Begin", downstream=["Message:A"]),
                           "Message:A": msg("a", "Message:B"), "Message:B": msg("b={Message:A@content}")}}


def switch(case_targets: list[str]) -> dict:
    """begin -> Switch:S (query contains 'x' -> case_targets, else -> Message:C)."""
    return {"components": {
        "begin": cpn("Begin", downstream=["Switch:S"]),
        "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": case_targets, "items": [
            {"cpn_id": "sys.query", "operator": "contains", "value": "x"}]}], "end_cpn_ids": ["Message:C"]}),
        "Message:A": msg("a"), "Message:B": msg("b"), "Message:C": msg("c"),
    }}


def fan_out() -> dict:
    return {"components": {"begin": cpn("Begin", downstream=["Message:A", "Message:B"]),
                           "Message:A": msg("a"), "Message:B": msg("b")}}


def failing_sink(**handling) -> dict:
    """begin -> ListOperations:L (always fails: sys.query is text); goto targets may fan out."""
    return {"components": {
        "begin": cpn("Begin", downstream=["ListOperations:L"]),
        "ListOperations:L": cpn("ListOperations", {"query": "sys.query", "operations": "head", "n": 1, **handling}),
        "Message:A": msg("a"), "Message:B": msg("b"),
    }}


def test_chains_and_exclusive_branches_run_one_component_at_a_time():
    assert one_at_a_time(compile_dsl(chain()).plan)
    assert one_at_a_time(compile_dsl(switch(["Message:A"])).plan)
    assert one_at_a_time(compile_dsl(failing_sink(exception_method="goto", exception_goto=["Message:A"])).plan)


def test_a_component_that_starts_several_others_at_once_is_fan_out():
    assert not one_at_a_time(compile_dsl(fan_out()).plan)
    assert not one_at_a_time(compile_dsl(switch(["Message:A", "Message:B"])).plan)
    assert not one_at_a_time(compile_dsl(failing_sink(exception_method="goto",
                                                      exception_goto=["Message:A", "Message:B"])).plan)


async def turn(source: dict, query: str = "q") -> tuple[list[dict], list[str], dict]:
    """(events, graph node names that ran, checkpointed state) of one turn on a fresh session."""
    ran: list[str] = []
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(source), saver, ModelFactory())
        graph = runner.graph
        original = graph.astream

        async def spy(*args, **kwargs):
            async for part in original(*args, **kwargs):
                if part["type"] == "tasks" and "input" in part["data"]:
                    ran.append(part["data"]["name"])
                yield part
        graph.astream = spy
        try:
            events = [e async for e in runner.run_turn("s", TurnRequest(query=query))]
        finally:
            del graph.astream
        state = (await graph.aget_state({"configurable": {"thread_id": "s"}})).values
    return events, ran, state


def assert_turn_recorded(events: list[dict], state: dict, answer: str) -> None:
    assert [e["event"] for e in events].count("workflow_finished") == 1
    assert events[-1]["event"] == "workflow_finished"
    assert events[-1]["data"]["outputs"]["content"] == answer
    assert [role for role, _ in state["history"]] == ["user", "assistant"]
    assert state["history"][-1][1]["content"] == answer
    assert state["globals"]["sys.history"][-1].startswith("assistant: {")
    assert state["request"]["open"] is False


async def test_without_fan_out_the_last_component_records_the_end_of_the_turn_in_its_own_step():
    events, ran, state = await turn(chain())
    assert ran == ["begin", "Message.A", "Message.B"]          # no finish step
    assert_turn_recorded(events, state, "b=a")


async def test_a_branch_chosen_by_a_switch_ends_the_turn_in_its_own_step():
    events, ran, state = await turn(switch(["Message:A"]), query="xyz")
    assert ran == ["begin", "Switch.S", "Message.A"]
    assert_turn_recorded(events, state, "a")


async def test_an_error_handler_on_the_way_to_the_end_records_the_end_of_the_turn():
    events, ran, state = await turn(failing_sink(exception_method="comment", exception_default_value="fallback"))
    assert FINISH not in ran
    assert events[-1]["event"] == "workflow_finished"
    assert state["history"][-1][1]["result"] == "fallback"
    assert state["request"]["open"] is False


async def test_with_fan_out_a_deferred_finish_node_records_the_end_after_every_branch():
    events, ran, state = await turn(fan_out())
    assert ran[-1] == FINISH and ran.count(FINISH) == 1
    assert_turn_recorded(events, state, "b")
