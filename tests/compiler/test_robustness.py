"""Broken input never crashes the compiler.

`diagnose` never raises; `compile_dsl` raises nothing but `CompileError`. Fed truncated JSON, random
type substitutions (seeded, so failures reproduce), downstream cycles, huge and deeply nested
documents, it returns diagnostics or a compiled canvas.
"""
from __future__ import annotations

import copy
import json
import random
import time
from typing import Any, Iterator

import pytest

from canvas2graph.types import CompileError

from canvas2graph.compiler.canvas import compile_dsl, diagnose
from tests.conftest import cpn, dsl, require_shared_file, shared_json_params


def outcome(source: Any):
    """diagnose() must not raise; compile_dsl() may raise only CompileError, and they must agree."""
    compiled, diags = diagnose(copy.deepcopy(source) if isinstance(source, dict) else source)
    assert all(d.code and d.message for d in diags)
    try:
        compile_dsl(source)
        ok = True
    except CompileError as e:
        assert e.diagnostics, "a CompileError carries at least one diagnostic"
        ok = False
    assert ok == (compiled is not None)
    return compiled, diags


def rich_dsl() -> dict:
    """Every component family this version runs, wired together; it compiles cleanly."""
    doc = dsl(**{
        "Categorize:Kind": cpn("Categorize", {
            "llm_id": "m", "query": "begin@topic",
            "category_description": {"facts": {"description": "d", "examples": ["x"], "to": ["LLM:Answer"]},
                                     "chat": {"to": ["Switch:Check"]}}}),
        "LLM:Answer": cpn("LLM", {"llm_id": "m", "sys_prompt": "Topic {begin@topic}",
                                  "prompts": [{"role": "user", "content": "{sys.query}"}], "temperature": 0.2},
                          ["VariableAggregator:Join"]),
        "Switch:Check": cpn("Switch", {
            "conditions": [{"logical_operator": "and", "to": ["StringTransform:Fmt"],
                            "items": [{"cpn_id": "sys.query", "operator": "contains", "value": "x"}]}],
            "end_cpn_ids": ["VariableAggregator:Join"]}),
        "StringTransform:Fmt": cpn("StringTransform", {"method": "merge", "delimiters": [","],
                                                       "script": "{sys.query}!", "split_ref": ""},
                                   ["VariableAggregator:Join"]),
        "VariableAggregator:Join": cpn("VariableAggregator", {
            "groups": [{"group_name": "out", "type": "string",
                        "variables": [{"value": "LLM:Answer@content"}, {"value": "StringTransform:Fmt@result"}]}]},
            ["Message:Show"]),
        "Message:Show": cpn("Message", {"content": ["{VariableAggregator:Join@out}", "{{sys.query}}"]}),
    })
    doc["components"]["begin"]["obj"]["params"] = {"mode": "task", "inputs": {
        "topic": {"name": "Topic", "type": "line", "optional": False}}}
    doc["variables"] = {"city": {"name": "city", "type": "string", "value": "Paris"}}
    return doc


def test_the_rich_dsl_used_for_fuzzing_compiles_cleanly():
    compiled, diags = outcome(rich_dsl())
    assert compiled is not None and diags == []


# --- truncated JSON ----------------------------------------------------------------------------

def cut_points(text: str) -> list[int]:
    end = len(text.rstrip())
    return sorted({0, 1, 2, end - 1} | {end * k // 13 for k in range(1, 13)})


def assert_truncations_are_invalid_json(text: str) -> None:
    for cut in cut_points(text):
        part = text[:cut]
        compiled, diags = outcome(part)
        assert compiled is None
        [d] = diags
        assert d.code == "invalid-json", (cut, str(d))
        assert 1 <= d.line <= part.count("\n") + 1 and d.column >= 1


def test_a_truncated_inline_dsl_is_invalid_json_at_every_cut():
    assert_truncations_are_invalid_json(json.dumps(rich_dsl(), indent=2))


@pytest.mark.parametrize("path", shared_json_params("templates", "examples"))
def test_a_truncated_template_is_invalid_json_at_every_cut(path):
    assert_truncations_are_invalid_json(require_shared_file(path).read_text(encoding="utf-8"))


def test_truncated_bytes_inside_a_multibyte_character_are_reported():
    raw = json.dumps({"components": {"begin": cpn("Begin", {"prologue": "héllo"})}}, ensure_ascii=False).encode()
    cut = raw.index("é".encode()) + 1
    compiled, diags = outcome(raw[:cut])
    assert compiled is None and diags[0].code == "invalid-encoding"


# --- random type substitutions -----------------------------------------------------------------

REPLACEMENTS: list[Any] = [
    None, True, False, 0, -1, 3.5, 1e308, "", "x", "{sys.query}", "{Gone:X@y}", "begin@topic", "Message:Show",
    [], [None], [1, 2], ["x"], ["begin"], [[["deep"]]], {}, {"a": 1}, {"to": 5}, {"content": None},
    {"obj": None}, [{"role": 1}], "\u0000\ud7ff😀",
]


def locations(value: Any, path: tuple = ()) -> Iterator[tuple]:
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from locations(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from locations(v, path + (i,))


def mutate(doc: dict, rng: random.Random, within: str) -> dict:
    """Replace 1-3 values somewhere under `within` ("components", a params dict...) with random types."""
    doc = copy.deepcopy(doc)
    inner = doc.get("dsl", doc)
    places = [p for p in locations(inner) if len(p) > 1 and p[0] == "components" and within in p]
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(places)
        target = inner
        for key in path[:-1]:
            target = target[key] if _has(target, key) else None
        if _has(target, path[-1]):      # an earlier substitution may have removed this place
            target[path[-1]] = copy.deepcopy(rng.choice(REPLACEMENTS))
    return doc


def _has(container: Any, key: Any) -> bool:
    if isinstance(container, dict):
        return isinstance(key, str) and key in container
    return isinstance(container, list) and isinstance(key, int) and key < len(container)


@pytest.mark.parametrize("within", ["params", "downstream", "obj", "components"])
def test_random_type_substitutions_in_the_rich_dsl_never_crash(within):
    rng = random.Random(f"rich-{within}")
    base = rich_dsl()
    for _ in range(250):
        doc = mutate(base, rng, within)
        outcome(doc)
        outcome(json.dumps(doc))


@pytest.mark.parametrize("path", shared_json_params("templates", "examples"))
def test_random_type_substitutions_in_a_template_never_crash(path):
    base = json.loads(require_shared_file(path).read_text(encoding="utf-8"))
    rng = random.Random(path.name)
    for within in ("params", "downstream", "obj", "components"):
        for _ in range(40):
            outcome(mutate(base, rng, within))


@pytest.mark.parametrize("components", [None, 0, "x", [], [cpn("Begin")], True])
def test_components_of_the_wrong_type_are_a_diagnostic(components):
    compiled, diags = outcome({"components": components})
    assert compiled is None and diags[0].field == "components"


@pytest.mark.parametrize("source", [None, 42, [], "null", "true", '"text"', "[]", b"", "  ", "{}", {"dsl": None}])
def test_documents_that_are_not_dsls_are_diagnosed(source):
    compiled, diags = outcome(source)
    assert compiled is None and len(diags) == 1


def test_nan_and_infinity_in_params_do_not_crash():
    doc = rich_dsl()
    doc["components"]["LLM:Answer"]["obj"]["params"]["temperature"] = float("nan")
    doc["components"]["LLM:Answer"]["obj"]["params"]["top_p"] = float("inf")
    compiled, diags = outcome(json.dumps(doc))
    assert compiled is None and {d.field for d in diags} >= {"params.top_p"}


# --- cycles ------------------------------------------------------------------------------------

def test_a_downstream_cycle_outside_any_container_is_diagnosed_not_hung():
    doc = dsl(**{f"Message:{i}": cpn("Message", {"content": [str(i)]}, [f"Message:{(i + 1) % 50}"]) for i in range(50)})
    compiled, diags = outcome(doc)
    assert compiled is None and [d.code for d in diags] == ["cycle"]


def test_many_overlapping_cycles_are_each_reported_once():
    comps = {f"Message:{i}": cpn("Message", {"content": ["x"]}, [f"Message:{j}" for j in range(20) if j != i])
             for i in range(20)}
    compiled, diags = outcome(dsl(**comps))
    cycles = [d.message for d in diags if d.code == "cycle"]
    assert compiled is None and cycles and len(cycles) == len(set(cycles))


# --- huge and deep documents -------------------------------------------------------------------

def chain(n: int) -> dict:
    ids = [f"Message:M{i}" for i in range(n)]
    return dsl(**{cid: cpn("Message", {"content": [f"{{sys.query}} step {i}"]}, ids[i + 1:i + 2])
                  for i, cid in enumerate(ids)})


def test_a_5000_component_chain_compiles_in_reasonable_time():
    started = time.perf_counter()
    compiled, diags = outcome(chain(5000))
    assert compiled is not None and diags == [] and len(compiled.component_ids) == 5001
    assert time.perf_counter() - started < 60


def test_a_5000_component_chain_with_one_defect_at_the_end_reports_it():
    doc = chain(5000)
    doc["components"]["Message:M4999"]["downstream"] = ["Message:M0"]
    compiled, diags = outcome(doc)
    assert compiled is None and [d.code for d in diags] == ["cycle"]


def test_a_5000_way_fan_out_compiles():
    doc = dsl(**{f"Message:M{i}": cpn("Message", {"content": ["x"]}) for i in range(5000)})
    doc["components"]["begin"]["downstream"] = [f"Message:M{i}" for i in range(5000)]
    compiled, diags = outcome(json.dumps(doc))
    assert compiled is not None and diags == []


def test_5000_unreachable_components_give_5000_warnings():
    doc = dsl(**{f"Message:M{i}": cpn("Message", {"content": ["x"]}) for i in range(5000)})
    doc["components"]["begin"]["downstream"] = []
    compiled, diags = outcome(doc)
    assert compiled is not None and len(diags) == 5000 and {d.code for d in diags} == {"unreachable"}


def nested_list(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


def deep_dsl(depth: int) -> dict:
    return dsl(**{"Message:A": cpn("Message", {"content": ["x"], "ui_state": nested_list(depth)})})


def test_a_10000_deep_list_in_params_as_text_is_refused_with_a_diagnostic():
    text = json.dumps(deep_dsl(1))[:-1].replace("[[]]", "[" * 10000 + "]" * 10000) + "}"
    compiled, diags = outcome(text)
    assert compiled is None and [d.code for d in diags] == ["too-deep"]


def test_a_10000_deep_list_in_params_as_a_dict_is_diagnosed():
    compiled, diags = diagnose(deep_dsl(10000))
    assert compiled is None and [d.code for d in diags] == ["too-deep"]


def test_compile_dsl_refuses_a_10000_deep_dict_with_compile_error():
    with pytest.raises(CompileError):
        compile_dsl(deep_dsl(10000))


def test_a_deep_dsl_stored_as_a_string_inside_a_template_is_refused():
    doc = {"title": "t", "dsl": json.dumps(deep_dsl(500))}
    compiled, diags = outcome(doc)
    assert compiled is None and [d.code for d in diags] == ["too-deep"]


def test_nesting_below_the_limit_is_kept_as_an_extra_param():
    compiled, diags = outcome(deep_dsl(150))
    assert compiled is not None and diags == []


def test_a_huge_text_param_compiles():
    doc = dsl(**{"Message:A": cpn("Message", {"content": ["{sys.query} " * 200_000]})})
    compiled, _ = outcome(doc)
    assert compiled is not None
    assert len(compiled.plan.nodes["Message:A"].templates[0].refs) == 200_000


def test_non_string_component_ids_are_diagnosed_by_diagnose():
    doc = rich_dsl()
    doc["components"][7] = cpn("Message", {"content": ["x"]})
    compiled, diags = diagnose(doc)
    assert compiled is None and [d.code for d in diags] == ["bad-component-id"]


def test_compile_dsl_refuses_non_string_component_ids_with_compile_error():
    doc = rich_dsl()
    doc["components"][7] = cpn("Message", {"content": ["x"]})
    with pytest.raises(CompileError):
        compile_dsl(doc)
