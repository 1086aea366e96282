"""VariableAssigner and VariableAggregator behave like RAGFlow's (SPEC 3.10, 3.11, 4.3)."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose

GLOBALS = {"sys.query": "x", "env.n": 0, "env.items": [], "env.more": [], "env.text": "", "env.obj": {}, "env.v": None}
LIST = "ListOperations:L"          # a component whose outputs the assigner may write into


def canvas(components: dict) -> dict:
    comps = {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": list(components)}}
    for cid, (name, params) in components.items():
        comps[cid] = {"obj": {"component_name": name, "params": params}, "downstream": []}
    return {"components": comps, "globals": dict(GLOBALS)}


def others() -> dict:
    return {LIST: ("ListOperations", {"query": "begin@items"}),
            "LLM:FR": ("LLM", {"llm_id": "fake@Test"}),
            "LLM:EN": ("LLM", {"llm_id": "fake@Test"})}


def build(name: str, params: dict, cid: str):
    compiled, diags = diagnose(canvas({cid: (name, params), **others()}))
    assert compiled is not None, [str(d) for d in diags]
    return compiled.plan.nodes[cid]


def errors_of(name: str, params: dict, cid: str):
    compiled, diags = diagnose(canvas({cid: (name, params), **others()}))
    assert compiled is None
    return [d for d in diags if d.severity == "error"]


def param_error(name: str, params: dict, cid: str):
    errors = errors_of(name, params, cid)
    assert len(errors) == 1, [str(d) for d in errors]
    assert errors[0].code == "invalid-param"
    assert errors[0].component_id == cid
    return errors[0]


def state(globals_: dict | None = None, **channels) -> dict:
    s = {"globals": {**GLOBALS, **(globals_ or {})}}
    for cid, outputs in channels.items():
        s.setdefault("outputs", {})[cid.replace("__", ":")] = outputs
    return s


# ---------------------------------------------------------------------------------------------
# VariableAssigner
# ---------------------------------------------------------------------------------------------

ASSIGNER = "VariableAssigner:A"


def assigner(*items):
    return build("VariableAssigner", {"variables": list(items)}, ASSIGNER)


def item(variable, operator, parameter=None):
    d = {"variable": variable, "operator": operator}
    if parameter is not None:
        d["parameter"] = parameter
    return d


async def assign_global(name, value, operator, parameter=None, **globals_):
    """Run one item on global `name` holding `value`; return the value written."""
    r = await assigner(item(name, operator, parameter)).run(state({name: value, **globals_}), ctx=None)
    return r.writes["globals"][name]


def assigner_error(*items):
    return param_error("VariableAssigner", {"variables": list(items)}, ASSIGNER)


def test_assigner_thoughts():
    assert assigner().thoughts(state()) == "Assign variables from canvas."


async def test_assigner_has_no_outputs_of_its_own_and_reports_no_inputs():
    r = await assigner(item("env.n", "+=", 1)).run(state(), ctx=None)
    assert r.outputs == {}
    assert r.inputs == {}
    assert r.writes == {"globals": {"env.n": 1}}


async def test_overwrite_copies_another_variable():
    assert await assign_global("env.text", "old", "overwrite", "sys.query") == "x"


async def test_overwrite_reads_a_component_output():
    r = await assigner(item("env.items", "overwrite", f"{{{LIST}@result}}")).run(
        state(**{LIST: {"result": ["a"]}}), ctx=None)
    assert r.writes["globals"]["env.items"] == ["a"]


def test_overwrite_with_a_constant_is_rejected():
    e = assigner_error(item("env.text", "overwrite", "hello"))
    assert e.field == "params.variables.0.parameter"
    assert "set" in e.message


@pytest.mark.parametrize("value, empty", [
    (["a"], []), ("abc", ""), ({"k": 1}, {}), (True, False), (5, 0), (2.5, 0.0), (None, None),
])
async def test_clear_empties_the_variable_by_type(value, empty):
    written = await assign_global("env.v", value, "clear")
    assert written == empty and type(written) is type(empty)


async def test_set_interpolates_references_into_text_variables():
    # get_value_with_variable drops the spaces next to a reference (SPEC 4.1)
    assert await assign_global("env.text", "", "set", "Hi {sys.query} ! {env.obj}", **{"env.obj": {"a": 1}}) == 'Hix!{"a": 1}'


async def test_set_interpolates_into_an_unset_variable():
    assert await assign_global("env.text", None, "set", "{sys.query}") == "x"


async def test_set_stores_the_raw_parameter_for_other_types():
    assert await assign_global("env.n", 3, "set", "{sys.query}") == "{sys.query}"
    assert await assign_global("env.items", ["a"], "set", [1, 2]) == [1, 2]


async def test_set_on_text_needs_a_text_parameter():
    with pytest.raises(TypeError, match="parameter must be text"):
        await assign_global("env.text", "", "set", 5)


async def test_append_adds_the_referenced_value():
    assert await assign_global("env.items", ["a"], "append", "sys.query") == ["a", "x"]


async def test_append_to_an_unset_variable_starts_a_list():
    assert await assign_global("env.items", None, "append", "sys.query") == ["x"]


async def test_append_to_a_non_list_writes_an_error():
    assert await assign_global("env.items", "a", "append", "sys.query") == "ERROR:VARIABLE_NOT_LIST"


async def test_append_of_another_element_type_writes_an_error():
    assert await assign_global("env.items", [1], "append", "sys.query") == "ERROR:PARAMETER_NOT_LIST_ELEMENT_TYPE"


async def test_append_does_not_change_the_list_it_read():
    st = state({"env.items": ["a"]})
    r = await assigner(item("env.items", "append", "sys.query")).run(st, ctx=None)
    assert r.writes["globals"]["env.items"] == ["a", "x"]
    assert st["globals"]["env.items"] == ["a"]


def test_append_needs_a_reference():
    e = assigner_error(item("env.items", "append", "plain"))
    assert e.field == "params.variables.0.parameter"


async def test_extend_concatenates_the_referenced_list():
    assert await assign_global("env.items", ["a"], "extend", "env.more", **{"env.more": ["b", "c"]}) == ["a", "b", "c"]


async def test_extend_with_a_non_list_writes_an_error():
    assert await assign_global("env.items", ["a"], "extend", "sys.query") == "ERROR:PARAMETER_NOT_LIST"


async def test_extend_of_a_non_list_writes_an_error():
    assert await assign_global("env.items", 1, "extend", "env.more", **{"env.more": ["b"]}) == "ERROR:VARIABLE_NOT_LIST"


async def test_extend_with_another_element_type_writes_an_error():
    written = await assign_global("env.items", ["a"], "extend", "env.more", **{"env.more": [1]})
    assert written == "ERROR:PARAMETER_NOT_LIST_ELEMENT_TYPE"


@pytest.mark.parametrize("operator, value, expected", [
    ("remove_first", ["a", "b", "c"], ["b", "c"]),
    ("remove_last", ["a", "b", "c"], ["a", "b"]),
    ("remove_first", [], []),
    ("remove_last", [], []),
    ("remove_first", "abc", "ERROR:VARIABLE_NOT_LIST"),
    ("remove_last", None, "ERROR:VARIABLE_NOT_LIST"),
])
async def test_remove_first_and_last(operator, value, expected):
    assert await assign_global("env.items", value, operator) == expected


@pytest.mark.parametrize("operator, value, parameter, expected", [
    ("+=", 5, 2, 7), ("-=", 5, 2, 3), ("*=", 5, 2, 10), ("/=", 5, 2, 2.5), ("+=", 1.5, 1, 2.5),
])
async def test_arithmetic_operators(operator, value, parameter, expected):
    assert await assign_global("env.n", value, operator, parameter) == expected


@pytest.mark.parametrize("value, parameter", [(True, 1), (1, True), ("1", 1), (1, "1"), (None, 1)])
async def test_arithmetic_on_non_numbers_writes_an_error(value, parameter):
    written = await assign_global("env.n", value, "+=", parameter)
    assert written == "ERROR:VARIABLE_NOT_NUMBER or PARAMETER_NOT_NUMBER"


async def test_division_by_zero_writes_an_error():
    assert await assign_global("env.n", 5, "/=", 0) == "ERROR:DIVIDE_BY_ZERO"


async def test_items_run_in_order_and_see_earlier_writes():
    r = await assigner(item("env.n", "+=", 2), item("env.n", "*=", 10), item("env.text", "set", "{env.n}")).run(
        state({"env.n": 1}), ctx=None)
    assert r.writes["globals"] == {"env.n": 30, "env.text": "30"}


async def test_assigning_a_component_output_writes_that_components_channel():
    r = await assigner(item(f"{LIST}@result", "append", "sys.query")).run(state(**{LIST: {"result": ["a"], "first": "a"}}),
                                                                         ctx=None)
    assert r.writes == {f"out:{LIST}": {"result": ["a", "x"]}}


async def test_nested_path_creates_the_missing_objects():
    r = await assigner(item(f"{LIST}@first.a.b", "set", "{sys.query}")).run(state(), ctx=None)
    assert r.writes[f"out:{LIST}"] == {"first": {"a": {"b": "x"}}}


async def test_nested_path_keeps_sibling_keys_and_replaces_non_objects_on_the_way():
    st = state(**{LIST: {"first": {"keep": 1, "a": "text"}}})
    r = await assigner(item(f"{LIST}@first.a.b", "set", "v")).run(st, ctx=None)
    assert r.writes[f"out:{LIST}"] == {"first": {"keep": 1, "a": {"b": "v"}}}
    assert st["outputs"][LIST]["first"] == {"keep": 1, "a": "text"}


async def test_nested_path_under_a_non_object_output_fails():
    with pytest.raises(TypeError, match="not an object"):
        await assigner(item(f"{LIST}@result.a", "set", "v")).run(state(**{LIST: {"result": ["a"]}}), ctx=None)


async def test_nested_path_reads_the_current_nested_value():
    r = await assigner(item(f"{LIST}@first.count", "+=", 1)).run(state(**{LIST: {"first": {"count": 4}}}), ctx=None)
    assert r.writes[f"out:{LIST}"] == {"first": {"count": 5}}


async def test_variables_that_are_not_a_list_do_nothing():
    n = build("VariableAssigner", {"variables": "env.n"}, ASSIGNER)
    r = await n.run(state(), ctx=None)
    assert r.outputs == {} and r.writes == {}


def test_item_without_variable_is_rejected():
    e = assigner_error({"operator": "clear"})
    assert e.field == "params.variables.0.variable"


def test_item_without_operator_is_rejected():
    e = assigner_error({"variable": "env.n", "parameter": 1})
    assert e.field == "params.variables.0.operator"


def test_unsupported_operator_is_rejected():
    e = assigner_error(item("env.n", "%=", 2))
    assert e.field == "params.variables.0.operator"
    assert "'%='" in e.message


@pytest.mark.parametrize("operator", ["set", "+=", "append"])
def test_operators_with_a_parameter_need_one(operator):
    e = assigner_error(item("env.n", operator))
    assert e.field == "params.variables.0.parameter"


@pytest.mark.parametrize("operator", ["clear", "remove_first", "remove_last"])
def test_clear_and_remove_need_no_parameter(operator):
    assigner(item("env.items", operator))


def test_a_zero_parameter_is_a_parameter():
    assigner(item("env.n", "+=", 0))


def test_variable_must_be_a_reference():
    e = assigner_error(item("counter", "+=", 1))
    assert e.field == "params.variables.0.variable"


def test_assigning_an_unknown_component_is_reported():
    errors = errors_of("VariableAssigner", {"variables": [item("Nope:X@v", "clear")]}, ASSIGNER)
    assert [(e.code, e.field) for e in errors] == [("dangling-reference", "params.variables.0.variable")]


# ---------------------------------------------------------------------------------------------
# VariableAggregator
# ---------------------------------------------------------------------------------------------

AGG = "VariableAggregator:J"
ANSWER = {"group_name": "answer", "variables": [{"value": "LLM:FR@content"}, {"value": "LLM:EN@content"}]}


def aggregator(*groups):
    return build("VariableAggregator", {"groups": list(groups)}, AGG)


def aggregator_error(groups):
    return param_error("VariableAggregator", {"groups": groups}, AGG)


def test_aggregator_thoughts():
    assert aggregator(ANSWER).thoughts(state()) == "Aggregating variables from canvas and grouping as configured."


async def test_aggregator_takes_the_branch_that_ran_and_reports_the_candidates():
    r = await aggregator(ANSWER).run(state(LLM__FR={"content": "Je vais bien."}), ctx=None)
    assert r.outputs == {"answer": "Je vais bien."}
    assert r.inputs == {"answer.variables": [{"value": "LLM:FR@content"}, {"value": "LLM:EN@content"}]}


async def test_aggregator_takes_the_first_truthy_value_in_order():
    r = await aggregator(ANSWER).run(state(LLM__FR={"content": ""}, LLM__EN={"content": "Fine."}), ctx=None)
    assert r.outputs == {"answer": "Fine."}
    r = await aggregator(ANSWER).run(state(LLM__FR={"content": "Bien."}, LLM__EN={"content": "Fine."}), ctx=None)
    assert r.outputs == {"answer": "Bien."}


async def test_a_group_with_no_truthy_value_stays_unset():
    other = {"group_name": "count", "variables": [{"value": "env.n"}, {"value": "{sys.query}"}]}
    r = await aggregator(ANSWER, other).run(state({"env.n": 0}), ctx=None)
    assert r.outputs == {"count": "x"}
    assert set(r.inputs) == {"answer.variables", "count.variables"}


def test_aggregator_declares_its_group_names_as_outputs():
    compiled, diags = diagnose(canvas({
        AGG: ("VariableAggregator", {"groups": [ANSWER]}), **others(),
        "StringTransform:M": ("StringTransform", {"method": "merge", "script": "{VariableAggregator:J@answer}"}),
        "StringTransform:N": ("StringTransform", {"method": "merge", "script": "{VariableAggregator:J@other}"}),
    }))
    assert compiled is not None
    warned = [(d.component_id, d.code) for d in diags if d.severity == "warning"]
    assert ("StringTransform:N", "unknown-output") in warned
    assert ("StringTransform:M", "unknown-output") not in warned


def test_empty_groups_are_rejected():
    e = aggregator_error([])
    assert e.field == "params.groups"
    assert "empty" in e.message


def test_group_without_name_is_rejected():
    e = aggregator_error([{"variables": [{"value": "sys.query"}]}])
    assert e.field == "params.groups"
    assert "group_name" in e.message


def test_group_without_variables_is_rejected():
    e = aggregator_error([{"group_name": "g", "variables": []}])
    assert "variables of group `g`" in e.message


def test_group_variables_must_be_reference_objects():
    e = aggregator_error([{"group_name": "g", "variables": ["sys.query"]}])
    assert e.field == "params.groups.0.variables.0"
    e = aggregator_error([{"group_name": "g", "variables": [{"value": "not a ref"}]}])
    assert e.field == "params.groups.0.variables.0.value"
