"""Switch: the first matching condition wins, otherwise the else branch (SPEC 3.7)."""
from __future__ import annotations

import pytest

from canvas2graph.nodes.switch import compare
from tests.nodes.helpers import build, errors, state


def switch(*conditions, end=("Message:Else",)):
    return build("Switch:S", "Switch", {"conditions": list(conditions), "end_cpn_ids": list(end)},
                 **{t: {"component_name": "Message", "params": {"content": ["x"]}} for t in ["Message:A", "Message:B", "Message:Else"]})


def cond(*items, logic="and", to="Message:A"):
    return {"logical_operator": logic, "items": [{"cpn_id": v, "operator": op, "value": val} for v, op, val in items], "to": [to]}


@pytest.mark.parametrize("op, left, right, expected", [
    ("contains", "Hello World", "WORLD", True),
    ("not contains", "Hello", "x", True),
    ("start with", "Alice", "a", True),
    ("end with", "report.PDF", ".pdf", True),
    ("empty", "", "", True),
    ("empty", [], "", True),
    ("not empty", "x", "", True),
    ("=", "fr", "fr", True),
    ("≠", "fr", "en", True),
    ("=", 30, "30", True),           # a numeric variable turns the value into a float
    (">", 30, "18", True),
    ("≥", 18, "18", True),
    ("<", "3", "10", True),          # both sides as floats when they parse
    ("≤", "b", "a", False),          # otherwise raw comparison
    ("contains", None, "", True),    # None reads as ""
])
def test_operators(op, left, right, expected):
    assert compare(op, left, right) is expected


def test_comparing_a_boolean_with_true_is_an_error_as_in_ragflow():
    with pytest.raises(ValueError):
        compare("=", True, "true")


async def test_the_first_matching_condition_routes():
    node = switch(cond(("begin@age", "≥", "18")), cond(("begin@name", "contains", "bob"), to="Message:B"))
    result = await node.run(state(**{"begin": {"age": 30, "name": "Bob"}}), None)
    assert result.outputs["_next"] == ["Message:A"]


async def test_or_needs_one_true_item_and_and_needs_all():
    node = switch(cond(("begin@age", "<", "0"), ("begin@name", "contains", "bob"), logic="or", to="Message:B"),
                  cond(("begin@age", "≥", "18"), ("begin@name", "start with", "z")))
    result = await node.run(state(**{"begin": {"age": 30, "name": "Bobby"}}), None)
    assert result.outputs["_next"] == ["Message:B"]
    result = await node.run(state(**{"begin": {"age": 30, "name": "Alice"}}), None)
    assert result.outputs["_next"] == ["Message:Else"]


async def test_no_match_takes_the_else_branch_and_reports_display_names():
    node = switch(cond(("sys.query", "=", "yes")))
    result = await node.run(state("no"), None)
    assert result.outputs["_next"] == ["Message:Else"]
    assert result.inputs == {"sys.query": "no"}


async def test_a_condition_whose_items_have_no_variable_never_matches():
    node = switch(cond(("", "=", "x")))
    assert (await node.run(state("x"), None)).outputs["_next"] == ["Message:Else"]


def test_branches_are_routes_with_case_labels():
    node = switch(cond(("sys.query", "=", "a")), cond(("sys.query", "=", "b"), to="Message:B"))
    assert node.routes() == [("Case 1", ["Message:A"]), ("Case 2", ["Message:B"]), ("else", ["Message:Else"])]


@pytest.mark.parametrize("params, field", [
    ({"conditions": [], "end_cpn_ids": ["X"]}, "params.conditions"),
    ({"conditions": [{"items": [], "to": []}], "end_cpn_ids": ["X"]}, "params.conditions.0.to"),
    ({"conditions": [{"items": [], "to": ["X"]}], "end_cpn_ids": []}, "params.end_cpn_ids"),
])
def test_check_rules(params, field):
    assert field in [d.field for d in errors("Switch", params)]


def test_an_unknown_operator_is_a_compile_error_naming_the_item():
    found = errors("Switch", {"conditions": [cond(("sys.query", "~", "a"), to="begin")], "end_cpn_ids": ["begin"]})
    assert [d.field for d in found] == ["params.conditions.0.items.0.operator"]
