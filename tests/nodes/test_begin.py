"""Begin: the request's inputs become its outputs (SPEC 3.1)."""
from __future__ import annotations

from compiler import diagnose
from tests.nodes.helpers import state

FORM = {"name": {"type": "line", "name": "Name", "optional": False},
        "data": {"type": "object", "name": "Data", "optional": True}}


def begin(**params):
    compiled, diags = diagnose({"components": {"begin": {"obj": {"component_name": "Begin", "params": params}, "downstream": []}}})
    assert compiled is not None, diags
    return compiled.plan.nodes["begin"]


def with_request(st, inputs):
    st["request"] = {"inputs": inputs}
    return st


async def test_request_inputs_are_unwrapped_and_become_outputs():
    result = await begin(inputs=FORM).run(with_request(state(), {"name": {"type": "line", "value": "Ann"}, "data": '{"a": 1}'}), None)
    assert result.outputs == {"name": "Ann", "data": {"a": 1}}
    assert result.inputs == result.outputs


async def test_undeclared_request_inputs_are_kept():
    result = await begin().run(with_request(state(), {"extra": 5}), None)
    assert result.outputs == {"extra": 5}


async def test_a_single_field_form_takes_the_query():
    result = await begin(inputs={"topic": {"type": "line"}}).run(with_request(state("rivers"), {}), None)
    assert result.outputs == {"topic": "rivers"}


async def test_no_inputs_and_no_form_give_no_outputs():
    assert (await begin().run(with_request(state("hi"), {}), None)).outputs == {}


def test_mode_must_be_known():
    _, diags = diagnose({"components": {"begin": {"obj": {"component_name": "Begin", "params": {"mode": "chat"}}, "downstream": []}}})
    assert [(d.component_id, d.field) for d in diags if d.severity == "error"] == [("begin", "params.mode")]
