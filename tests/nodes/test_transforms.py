"""StringTransform, ListOperations and DataOperations behave like RAGFlow's (SPEC 3.12-3.14)."""
from __future__ import annotations

import pytest

from canvas2graph.compiler.canvas import diagnose

GLOBALS = {"sys.query": "x", "env.city": "Paris"}


def canvas(components: dict) -> dict:
    """A DSL with a Begin and the given {component_id: (component_name, params)}."""
    comps = {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": list(components)}}
    for cid, (name, params) in components.items():
        comps[cid] = {"obj": {"component_name": name, "params": params}, "downstream": []}
    return {"components": comps, "globals": dict(GLOBALS)}


def node(name: str, params: dict, cid: str | None = None, **others):
    cid = cid or f"{name}:Test"
    compiled, diags = diagnose(canvas({cid: (name, params), **others}))
    assert compiled is not None, [str(d) for d in diags]
    return compiled.plan.nodes[cid]


def param_error(name: str, params: dict, cid: str | None = None):
    cid = cid or f"{name}:Test"
    compiled, diags = diagnose(canvas({cid: (name, params)}))
    assert compiled is None
    errors = [d for d in diags if d.severity == "error"]
    assert len(errors) == 1, [str(d) for d in errors]
    assert errors[0].code == "invalid-param"
    assert errors[0].component_id == cid
    return errors[0]


def state(**channels) -> dict:
    """A hand-made state: keyword `cpn` becomes the channel of component `cpn` (':' written as '__')."""
    s = {"globals": dict(GLOBALS)}
    for cid, outputs in channels.items():
        s.setdefault("outputs", {})[cid.replace("__", ":")] = outputs
    return s


async def run(n, st):
    return await n.run(st, ctx=None)


# ---------------------------------------------------------------------------------------------
# StringTransform
# ---------------------------------------------------------------------------------------------

def split(split_ref="begin@items", delimiters=(";",)):
    return node("StringTransform", {"method": "split", "split_ref": split_ref, "delimiters": list(delimiters)},
                cid="StringTransform:Split")


def merge(script, delimiters=(" + ",)):
    return node("StringTransform", {"method": "merge", "script": script, "delimiters": list(delimiters)},
                cid="StringTransform:Merge", **{"ListOperations:Top": ("ListOperations", {"query": "begin@items"})})


async def test_split_cuts_the_text_on_the_delimiter_and_reports_no_inputs():
    r = await run(split(), state(begin={"items": "a;b;c;d"}))
    assert r.outputs == {"result": ["a", "b", "c", "d"]}
    assert r.inputs == {}


async def test_split_accepts_a_braced_reference():
    r = await run(split("{begin@items}"), state(begin={"items": "a;b"}))
    assert r.outputs["result"] == ["a", "b"]


async def test_split_uses_every_delimiter_literally():
    r = await run(split(delimiters=["|", ".", "*"]), state(begin={"items": "a.b|c*d"}))
    assert r.outputs["result"] == ["a", "b", "c", "d"]


async def test_split_keeps_empty_pieces():
    r = await run(split(), state(begin={"items": ";a;;b;"}))
    assert r.outputs["result"] == ["", "a", "", "b", ""]


async def test_split_of_a_missing_value_gives_one_empty_piece():
    r = await run(split(), state())
    assert r.outputs["result"] == [""]


async def test_split_of_a_non_text_value_fails():
    with pytest.raises(TypeError, match="The input variable is not a string"):
        await run(split(), state(begin={"items": ["a", "b"]}))


def test_split_thoughts():
    assert split().thoughts(state()) == "It's spliting."


def test_merge_thoughts():
    assert merge("{sys.query}").thoughts(state()) == "It's mergeing."


async def test_merge_joins_a_list_with_the_first_delimiter_and_reports_the_joined_text():
    n = merge("{ListOperations:Top@result}", delimiters=[" + ", ","])
    r = await run(n, state(ListOperations__Top={"result": ["a", "b"]}))
    assert r.outputs == {"result": "a + b"}
    assert r.inputs == {"ListOperations:Top@result": "a + b"}


async def test_merge_keeps_the_spaces_around_references():
    r = await run(merge("Q: {sys.query} / {env.city} ."), state())
    assert r.outputs["result"] == "Q: x / Paris ."


async def test_merge_turns_double_braces_into_single_braces():
    r = await run(merge("{{sys.query}}"), state())
    assert r.outputs["result"] == "{x}"


async def test_merge_prints_objects_as_json_and_none_as_nothing():
    n = merge("[{ListOperations:Top@first}][{ListOperations:Top@last}]")
    r = await run(n, state(ListOperations__Top={"first": {"k": "é"}, "last": None}))
    assert r.outputs["result"] == '[{"k": "é"}][]'


async def test_merge_renders_jinja():
    n = merge("{% for i in [1, 2] %}{{ i }}-{% endfor %}{sys.query}")
    r = await run(n, state())
    assert r.outputs["result"] == "1-2-x"


def test_merge_with_broken_jinja_is_rejected():
    e = param_error("StringTransform", {"method": "merge", "script": "{% for x in %}", "delimiters": [","]})
    assert e.field == "params.script"
    assert "Jinja" in e.message


def test_unknown_method_is_rejected():
    e = param_error("StringTransform", {"method": "join", "split_ref": "sys.query"})
    assert e.field == "params.method"
    assert "split" in e.message and "merge" in e.message


def test_empty_delimiters_are_rejected():
    e = param_error("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": []})
    assert e.field == "params.delimiters"
    assert "empty" in e.message


def test_split_without_a_reference_is_rejected():
    e = param_error("StringTransform", {"method": "split", "split_ref": ""})
    assert e.field == "params.split_ref"


# ---------------------------------------------------------------------------------------------
# ListOperations
# ---------------------------------------------------------------------------------------------

def listop(operations="nth", **params):
    return node("ListOperations", {"query": "StringTransform:Split@result", "operations": operations, **params},
                cid="ListOperations:Top",
                **{"StringTransform:Split": ("StringTransform", {"method": "split", "split_ref": "sys.query"})})


def items(values):
    return state(StringTransform__Split={"result": values})


async def test_topn_is_head_and_reports_the_input_list():
    r = await run(listop("topN", n=2), items(["a", "b", "c", "d"]))
    assert r.outputs == {"result": ["a", "b"], "first": "a", "last": "b"}
    assert r.inputs == {"StringTransform:Split@result": ["a", "b", "c", "d"]}


def test_list_operation_thoughts():
    assert listop().thoughts(items([])) == "ListOperation in progress"


@pytest.mark.parametrize("n, expected", [(1, ["a"]), (3, ["c"]), (-1, ["c"]), (-3, ["a"]), (0, []), (4, []), (-4, [])])
async def test_nth_is_one_based_and_counts_negatives_from_the_end(n, expected):
    r = await run(listop("nth", n=n), items(["a", "b", "c"]))
    assert r.outputs["result"] == expected


@pytest.mark.parametrize("n", [0, 4, -4])
async def test_strict_nth_out_of_range_fails(n):
    with pytest.raises(ValueError, match="valid range in strict mode"):
        await run(listop("nth", n=n, strict=True), items(["a", "b", "c"]))


async def test_n_given_as_text_is_read_as_a_number():
    r = await run(listop("nth", n="2"), items(["a", "b", "c"]))
    assert r.outputs["result"] == ["b"]


@pytest.mark.parametrize("op, n, expected", [
    ("head", 2, ["a", "b"]), ("head", 9, ["a", "b", "c"]), ("head", 0, []),
    ("tail", 2, ["b", "c"]), ("tail", 9, ["a", "b", "c"]), ("tail", -1, []),
])
async def test_head_and_tail_take_n_items(op, n, expected):
    r = await run(listop(op, n=n), items(["a", "b", "c"]))
    assert r.outputs["result"] == expected


@pytest.mark.parametrize("op", ["head", "tail"])
async def test_strict_head_and_tail_need_n_within_the_list(op):
    with pytest.raises(ValueError, match=f"{op} requires n"):
        await run(listop(op, n=4, strict="true"), items(["a", "b", "c"]))


@pytest.mark.parametrize("operator, value, expected", [
    ("=", "1", [1]),
    ("≠", "1", ["apple", "banana", 12, None]),
    ("contains", "an", ["banana"]),
    ("start with", "1", [1, 12]),
    ("end with", "e", ["apple"]),
    ("unknown", "1", []),
])
async def test_filter_compares_the_text_of_each_item(operator, value, expected):
    r = await run(listop("filter", filter={"operator": operator, "value": value}),
                  items(["apple", "banana", 1, 12, None]))
    assert r.outputs["result"] == expected


async def test_sort_orders_scalars_ascending_or_descending():
    asc = await run(listop("sort"), items([3, 1, 2]))
    desc = await run(listop("sort", sort_method="desc"), items([3, 1, 2]))
    assert asc.outputs["result"] == [1, 2, 3]
    assert desc.outputs == {"result": [3, 2, 1], "first": 3, "last": 1}


async def test_sort_orders_objects_by_the_sort_by_keys():
    rows = [{"a": 2, "b": 1}, {"a": 1, "b": 2}, {"a": 1, "b": 1}]
    r = await run(listop("sort", sort_by="a, b"), items(rows))
    assert r.outputs["result"] == [{"a": 1, "b": 1}, {"a": 1, "b": 2}, {"a": 2, "b": 1}]


async def test_sort_orders_objects_by_their_content_without_sort_by():
    rows = [{"b": 1}, {"a": 2}, {"a": 1}]
    r = await run(listop("sort"), items(rows))
    assert r.outputs["result"] == [{"a": 1}, {"a": 2}, {"b": 1}]


async def test_drop_duplicates_compares_deeply():
    rows = [{"a": [1, 2]}, "x", {"a": [1, 2]}, "x", {"a": [2, 1]}]
    r = await run(listop("drop_duplicates"), items(rows))
    assert r.outputs["result"] == [{"a": [1, 2]}, "x", {"a": [2, 1]}]


async def test_an_empty_result_has_no_first_or_last():
    r = await run(listop("head", n=2), items([]))
    assert r.outputs == {"result": [], "first": None, "last": None}


async def test_a_non_list_input_fails():
    with pytest.raises(TypeError, match="should be an array"):
        await run(listop(), items("a,b"))


async def test_an_empty_operation_means_nth():
    r = await run(listop("", n=1), items(["a", "b"]))
    assert r.outputs["result"] == ["a"]


def test_empty_query_is_rejected():
    e = param_error("ListOperations", {"query": ""})
    assert e.field == "params.query"
    assert "empty" in e.message


def test_query_that_is_not_a_reference_is_rejected():
    e = param_error("ListOperations", {"query": "a, b"})
    assert e.field == "params.query"
    assert "reference" in e.message


def test_unknown_list_operation_is_rejected():
    e = param_error("ListOperations", {"query": "sys.query", "operations": "reverse"})
    assert e.field == "params.operations"
    assert "drop_duplicates" in e.message


def test_filter_without_an_operator_is_rejected():
    e = param_error("ListOperations", {"query": "sys.query", "operations": "filter", "filter": {"value": "a"}})
    assert "operator" in e.message


# ---------------------------------------------------------------------------------------------
# DataOperations
# ---------------------------------------------------------------------------------------------

def dataop(operations, query=("begin@rows",), **params):
    return node("DataOperations", {"query": list(query), "operations": operations, **params}, cid="DataOperations:D")


ROWS = [{"name": "Ann", "age": 31, "city": "Paris"}, {"name": "Bob", "age": 25, "city": "Lyon"}]


def rows(value=None):
    return state(begin={"rows": ROWS if value is None else value, "one": {"name": "Cy", "age": 40}})


def test_data_operation_thoughts():
    assert dataop("combine").thoughts(rows()) == "DataOperation in progress"


async def test_inputs_are_flattened_into_objects_and_non_objects_dropped():
    r = await run(dataop("remove_keys", query=["begin@rows", "{begin@one}", "sys.query"]), rows([ROWS[0], "x", 3]))
    assert r.outputs["result"] == [ROWS[0], {"name": "Cy", "age": 40}]
    assert r.inputs == {"begin@rows": [ROWS[0], "x", 3], "{begin@one}": {"name": "Cy", "age": 40}, "sys.query": "x"}


async def test_a_single_query_reference_is_accepted():
    n = node("DataOperations", {"query": "begin@one", "operations": "remove_keys"})
    r = await run(n, rows())
    assert r.outputs["result"] == [{"name": "Cy", "age": 40}]


async def test_select_keys_keeps_only_the_listed_keys():
    r = await run(dataop("select_keys", select_keys=["name", "missing"]), rows())
    assert r.outputs["result"] == [{"name": "Ann"}, {"name": "Bob"}]


async def test_literal_eval_turns_literal_text_into_values():
    data = [{"a": "[1, 2]", "b": "{'k': (1, 2)}", "c": "True", "d": "3.5", "e": "hello", "f": "[broken"}]
    r = await run(dataop("literal_eval"), rows(data))
    assert r.outputs["result"] == [{"a": [1, 2], "b": {"k": [1, 2]}, "c": True, "d": 3.5, "e": "hello", "f": "[broken"}]


async def test_combine_merges_all_objects_into_one_with_lists_for_repeated_keys():
    data = [{"a": 1, "b": [1]}, {"a": 2, "b": 2}, {"a": [3, 4], "c": 5}]
    r = await run(dataop("combine"), rows(data))
    assert r.outputs["result"] == {"a": [1, 2, 3, 4], "b": [1, 2], "c": 5}
    assert data[0]["b"] == [1]          # the upstream value is not mutated


@pytest.mark.parametrize("operator, value, names", [
    ("=", "Ann", ["Ann"]),
    ("≠", "Ann", ["Bob"]),
    ("contains", "o", ["Bob"]),
    ("start with", "B", ["Bob"]),
    ("end with", "n", ["Ann"]),
    ("=", "31", ["Ann"]),
])
async def test_filter_values_keeps_objects_matching_the_rule(operator, value, names):
    key = "age" if value == "31" else "name"
    r = await run(dataop("filter_values", filter_values=[{"key": key, "operator": operator, "value": value}]), rows())
    assert [o["name"] for o in r.outputs["result"]] == names


async def test_filter_values_needs_every_rule_to_match():
    rules = [{"key": "city", "operator": "=", "value": "Paris"}, {"key": "age", "operator": "=", "value": "25"}]
    r = await run(dataop("filter_values", filter_values=rules), rows())
    assert r.outputs["result"] == []


async def test_filter_value_may_be_a_reference():
    r = await run(dataop("filter_values", filter_values=[{"key": "city", "operator": "=", "value": "{env.city}"}]), rows())
    assert [o["name"] for o in r.outputs["result"]] == ["Ann"]


async def test_filter_values_drops_objects_without_the_key():
    r = await run(dataop("filter_values", filter_values=[{"key": "zip", "operator": "≠", "value": "x"}]), rows())
    assert r.outputs["result"] == []


async def test_filter_rule_without_operator_never_matches():
    # RAGFlow defaults the operator to "equals", which is not one of its operators.
    r = await run(dataop("filter_values", filter_values=[{"key": "name", "value": "Ann"}]), rows())
    assert r.outputs["result"] == []


async def test_no_filter_rules_keep_every_object():
    r = await run(dataop("filter_values"), rows())
    assert r.outputs["result"] == ROWS


async def test_append_or_update_sets_keys_with_interpolated_values():
    updates = [{"key": "city", "value": "{env.city}"}, {"key": " tag ", "value": "new"}, {"key": "", "value": "skip"},
               {"key": "n", "value": 7}]
    r = await run(dataop("append_or_update", updates=updates), rows())
    assert r.outputs["result"] == [{"name": "Ann", "age": 31, "city": "Paris", "tag": "new", "n": 7},
                                   {"name": "Bob", "age": 25, "city": "Paris", "tag": "new", "n": 7}]


async def test_append_or_update_keeps_the_raw_value_when_interpolation_is_empty():
    r = await run(dataop("append_or_update", updates=[{"key": "x", "value": "{begin@nothing}"}]), rows())
    assert r.outputs["result"][0]["x"] == "{begin@nothing}"


async def test_remove_keys_drops_the_listed_keys():
    r = await run(dataop("remove_keys", remove_keys=["age", "city", 3]), rows())
    assert r.outputs["result"] == [{"name": "Ann"}, {"name": "Bob"}]


async def test_rename_keys_renames_present_keys():
    pairs = [{"old_key": "name", "new_key": "who"}, {"old_key": "zip", "new_key": "z"}, {"old_key": "age", "new_key": "age"}]
    r = await run(dataop("rename_keys", rename_keys=pairs), rows())
    assert r.outputs["result"] == [{"age": 31, "city": "Paris", "who": "Ann"}, {"age": 25, "city": "Lyon", "who": "Bob"}]


def test_unknown_data_operation_is_rejected():
    e = param_error("DataOperations", {"query": ["sys.query"], "operations": "merge"})
    assert e.field == "params.operations"
    assert "literal_eval" in e.message


def test_old_spaced_operation_name_is_rejected_with_a_hint():
    e = param_error("DataOperations", {"query": ["sys.query"], "operations": "select keys"})
    assert "'select_keys'" in e.message


def test_data_query_entries_must_be_references():
    e = param_error("DataOperations", {"query": ["sys.query", "rows"], "operations": "combine"})
    assert e.field == "params.query.1"
