"""Hypothesis strategies for what users and attackers send: DSL documents, queries, scripts, argv.

Three ways to a DSL, mixed by `documents()`:
- `mutants()`: a seed DSL (tests/fuzz/seeds.py) with 1-4 mutations: a value anywhere replaced by a
  hostile one, a component re-parented (to itself, a cycle, a non-container) or rewired across a
  container boundary, a key dropped, a component renamed to a reserved or misspelt name;
- `canvases()`: a canvas built from nothing: components of every family with plausible or hostile
  params, wired at random;
- `texts_of()`: the same documents as JSON text, cut short, padded or broken, as bytes sometimes.

The hostile values are the ones that broke canvas2graph before (issue 12): lone surrogates, NaN,
infinity, integers beyond 64 bits or beyond 4,300 digits, text full of `{` or spaces, deep nesting,
lists or objects where a number belongs.
"""
from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

from tests.fuzz.seeds import LLM_ID, seeds

HOSTILE_TEXTS = [
    "", " ", "\ud800", "a\udfffb", "\x00", "😀", "\u202e", "null", "{", "}", "{{", "}}",
    "{" * 3000, " " * 3000, "{ " * 1500, "{%" * 1000, "{sys.query}", "{sys.nope}", "{env.x}", "{SYS.QUERY}",
    "{begin@x}", "{Message:M@content}", "{Gone:X@y}", "{LLM:A@content.items.0}", "{{sys.query}}",
    "{item}", "{index}", "{% for i in range(3) %}{{ i }}{% endfor %}", "{{ 'ab' * 3 }}", "{{ x.y.z }}",
    "<think>why</think>answer", "sys.query", "begin@x", "Loop:L@n", "1e400", "NaN", "__start__",
]
HOSTILE_NUMBERS = [0, -1, 1, 3, 2 ** 63 - 1, 2 ** 63, -2 ** 63 - 1, 10 ** 30, float("nan"), float("inf"),
                   float("-inf"), 1e308, 0.5, -0.0]
HOSTILE_IDS = ["__start__", "__end__", "__canvas_finish__", "__input__", "__interrupt__", "__error_handler__x",
               "outputs", "globals", "a|b", "a:b", "a.b", "Message.M", "Message:M~2", "", " ", "\ud800", "begin"]
FAMILIES = ["Begin", "Message", "LLM", "Agent", "Categorize", "Switch", "Iteration", "IterationItem", "Loop",
            "LoopItem", "ExitLoop", "UserFillUp", "VariableAssigner", "VariableAggregator", "StringTransform",
            "ListOperations", "DataOperations", "Retrieval", "Invoke", "CodeExec", "TavilySearch", "Email",
            "ExeSQL", "Wikipedia"]
ODD_NAMES = ["Categorise", "message", "Nope", "Browser", "Note", "Splitter", "", "Begin ", "LLm"]


def texts() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(HOSTILE_TEXTS), st.text(max_size=30),
                     st.text(alphabet="{} @.:_sysqueryitemenvLoop0", max_size=40))


def numbers() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from(HOSTILE_NUMBERS), st.integers(-5, 50),
                     st.integers(-(2 ** 70), 2 ** 70), st.floats(allow_nan=True, allow_infinity=True))


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), st.booleans(), numbers(), texts())


def json_values(max_leaves: int = 8) -> st.SearchStrategy[Any]:
    return st.recursive(scalars(), lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts(), inner, max_size=3),
                        max_leaves=max_leaves)


def nested(depth: int) -> Any:
    value: Any = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def hostile_values() -> st.SearchStrategy[Any]:
    """What replaces a value in a mutant: anything JSON holds, and a few shapes that hurt."""
    return st.one_of(json_values(), st.sampled_from([[], {}, [[[[]]]], {"ref": "Gone:X@y"}]),
                     st.integers(150, 260).map(nested))


# --- mutants of the seeds ---------------------------------------------------------------------------
def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    found = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, path + (i,))
    return found


def _get(doc: Any, path: tuple) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _like(value: Any) -> st.SearchStrategy[Any]:
    """A value of the same JSON type, hostile within it: odd text, extreme but storable numbers."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, str):
        return texts()
    if isinstance(value, int):
        return st.one_of(st.integers(-5, 50), st.sampled_from([0, -1, 2 ** 62, 10 ** 9]))
    if isinstance(value, float):
        return st.floats(allow_nan=False, allow_infinity=False)
    if isinstance(value, list):
        return st.lists(_like(value[0]), max_size=4) if value else st.just([])
    if isinstance(value, dict):
        return st.dictionaries(texts(), texts(), max_size=2) if not value else st.just(value)
    return st.none()


def _set(doc: Any, path: tuple, value: Any) -> None:
    target = doc
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value


def _components(doc: dict) -> dict:
    comps = doc.get("components")
    return comps if isinstance(comps, dict) else {}


@st.composite
def mutants(draw, names: list[str] | None = None, mild: bool = False) -> dict:
    """A seed with 1-4 mutations; `mild` ones (for runs) change values inside params and rewire,
    so that most mutants still compile and the changed value meets the code that runs it."""
    all_seeds = seeds()
    name = draw(st.sampled_from(names or sorted(all_seeds)))
    doc = copy.deepcopy(all_seeds[name])
    doc = doc.get("dsl", doc) if isinstance(doc.get("dsl"), dict) else doc
    kinds = (["value"] * 6 + ["wire", "global"]) if mild else \
        ["value", "value", "value", "parent", "wire", "drop", "rename", "global"]
    for _ in range(draw(st.integers(1, 3 if mild else 4))):
        comps = _components(doc)
        ids = sorted(comps, key=str)
        kind = draw(st.sampled_from(kinds))
        if kind == "value" or not ids:
            paths = [p for p in _paths(doc) if p and (not mild or p[3:4] == ("params",) and len(p) > 4)]
            if paths:
                path = draw(st.sampled_from(paths))
                _set(doc, path, draw(_like(_get(doc, path)) if mild else hostile_values()))
            continue
        cid = draw(st.sampled_from(ids))
        entry = comps[cid]
        if not isinstance(entry, dict):
            continue
        if kind == "parent":
            entry["parent_id"] = draw(st.sampled_from(ids + [cid, "Gone:X"]))
        elif kind == "wire":
            entry["downstream"] = draw(st.lists(st.sampled_from(ids + ["Gone:X"]), max_size=3))
        elif kind == "drop":
            key = draw(st.sampled_from(["obj", "downstream", "parent_id", "params"]))
            (entry.get("obj") if key == "params" and isinstance(entry.get("obj"), dict) else entry).pop(key, None)
        elif kind == "rename" and isinstance(entry.get("obj"), dict):
            entry["obj"]["component_name"] = draw(st.sampled_from(ODD_NAMES + FAMILIES))
        elif kind == "rename":
            pass
        elif mild:
            globals_ = doc.setdefault("globals", {}) if isinstance(doc.get("globals", {}), dict) else {}
            globals_[draw(st.sampled_from(["sys.query", "env.x"]))] = draw(texts())
        else:
            globals_ = doc.setdefault("globals", {}) if isinstance(doc.get("globals", {}), dict) else {}
            key = draw(st.sampled_from(["sys.conversation_turns", "sys.query", "sys.files", "sys.history",
                                        "sys.user_id", "sys.date", "env.x"]))
            globals_[key] = draw(st.one_of(numbers(), json_values(4)))
        if kind in ("rename",) and draw(st.booleans()):      # move the component to a reserved id
            new_id = draw(st.sampled_from(HOSTILE_IDS))
            comps[new_id] = comps.pop(cid)
    return doc


# --- canvases from nothing -----------------------------------------------------------------------
def _params(family: str, ids: list[str]) -> st.SearchStrategy[dict]:
    ref = st.sampled_from(["sys.query", "begin@x"] + [f"{i}@content" for i in ids] + [f"{i}@result" for i in ids])
    target = st.lists(st.sampled_from(ids + ["Gone:X"]), min_size=1, max_size=2)
    text = st.one_of(texts(), ref.map(lambda r: "{" + r + "}"))
    common = {
        "Message": st.fixed_dictionaries({"content": st.lists(text, max_size=3)}),
        "LLM": st.fixed_dictionaries({"llm_id": st.just(LLM_ID), "prompts": st.just([{"role": "user", "content": "{sys.query}"}]),
                                      "sys_prompt": text, "temperature": st.one_of(st.just(0.2), numbers())}),
        "Agent": st.fixed_dictionaries({"llm_id": st.just(LLM_ID), "sys_prompt": text, "max_rounds": st.integers(0, 3),
                                        "prompts": st.just([{"role": "user", "content": "{sys.query}"}])}),
        "Categorize": st.fixed_dictionaries({"llm_id": st.just(LLM_ID), "query": ref, "category_description": st.dictionaries(
            texts(), st.fixed_dictionaries({"description": texts(), "to": target}), min_size=1, max_size=3)}),
        "Switch": st.fixed_dictionaries({"conditions": st.lists(st.fixed_dictionaries({
            "logical_operator": st.sampled_from(["and", "or"]), "to": target, "items": st.lists(st.fixed_dictionaries({
                "cpn_id": ref, "operator": st.sampled_from(["contains", "=", "≥", "empty", "~"]), "value": scalars()}),
                max_size=2)}), max_size=2), "end_cpn_ids": target}),
        "Iteration": st.fixed_dictionaries({"items_ref": ref}),
        "Loop": st.fixed_dictionaries({"loop_variables": st.just([{"variable": "n", "input_mode": "constant", "value": 0,
                                                                   "type": "number"}]),
                                       "loop_termination_condition": st.lists(st.fixed_dictionaries({
                                           "variable": ref, "operator": st.sampled_from(["≥", "=", "contains", "empty"]),
                                           "value": scalars(), "input_mode": st.just("constant")}), max_size=2),
                                       "maximum_loop_count": st.one_of(st.integers(0, 20), numbers())}),
        "VariableAssigner": st.fixed_dictionaries({"variables": st.lists(st.fixed_dictionaries({
            "variable": ref, "operator": st.sampled_from(["overwrite", "set", "append", "extend", "+=", "*=", "/=", "clear"]),
            "parameter": st.one_of(ref, scalars())}), max_size=2)}),
        "StringTransform": st.one_of(
            st.fixed_dictionaries({"method": st.just("split"), "split_ref": ref, "delimiters": st.lists(texts(), max_size=2)}),
            st.fixed_dictionaries({"method": st.just("merge"), "script": text, "delimiters": st.just([","])})),
        "ListOperations": st.fixed_dictionaries({"query": ref, "operations": st.sampled_from(["nth", "head", "sort", "filter"]),
                                                 "n": numbers()}),
        "UserFillUp": st.fixed_dictionaries({"tips": text, "inputs": st.dictionaries(texts(), st.fixed_dictionaries(
            {"type": st.sampled_from(["line", "paragraph"]), "name": texts()}), max_size=2)}),
    }
    return common.get(family, st.dictionaries(texts(), json_values(4), max_size=3))


@st.composite
def canvases(draw) -> dict:
    n = draw(st.integers(1, 7))
    families = draw(st.lists(st.sampled_from(FAMILIES + ODD_NAMES), min_size=n, max_size=n))
    ids = [f"{f or 'X'}:{i}" for i, f in enumerate(families)]
    if draw(st.booleans()):
        ids[draw(st.integers(0, n - 1))] = draw(st.sampled_from(HOSTILE_IDS))
    ids = list(dict.fromkeys(ids))
    components: dict[str, Any] = {"begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ids[:1]}}
    containers = [i for i, f in zip(ids, families) if f in ("Iteration", "Loop")]
    for cid, family in zip(ids, families):
        entry = {"obj": {"component_name": family, "params": draw(_params(family, ids))},
                 "downstream": draw(st.lists(st.sampled_from(ids + ["begin"]), max_size=2))}
        if containers and draw(st.booleans()):
            entry["parent_id"] = draw(st.sampled_from(containers + [cid]))
        components[cid] = entry
    doc: dict[str, Any] = {"components": components}
    if draw(st.booleans()):
        doc["globals"] = draw(st.dictionaries(st.sampled_from(["sys.query", "sys.conversation_turns", "sys.files", "env.x"]),
                                              json_values(3), max_size=2))
    return doc


def documents() -> st.SearchStrategy[Any]:
    """Any document a user could hand to `compile`: mostly DSLs, some anything-at-all JSON."""
    return st.one_of(mutants(), mutants(), mutants(), canvases(), json_values())


@st.composite
def texts_of(draw) -> str | bytes:
    """A document as JSON text (surrogates escaped), cut, padded or made invalid UTF-8."""
    doc = draw(documents())
    text = json.dumps(doc, ensure_ascii=draw(st.booleans()), allow_nan=True)
    how = draw(st.sampled_from(["whole", "whole", "cut", "pad", "bytes", "bad-bytes", "template", "big-number"]))
    if how == "big-number":                   # longer than Python converts (4,300 digits)
        return '{"components": {"begin": {"obj": {"component_name": "Begin", "params": {"n": ' + "7" * 5000 + "}}}}}"
    if how == "cut":
        return text[:draw(st.integers(0, len(text)))]
    if how == "pad":
        return draw(st.sampled_from([" ", "\ufeff", "\n"])) + text + draw(st.sampled_from(["", " ", "x", "}"]))
    if how == "template":
        return json.dumps({"id": 1, "title": "t", "dsl": text if draw(st.booleans()) else doc}, ensure_ascii=True)
    data = text.encode("utf-8", "surrogatepass")
    if how == "bad-bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + data[at:]
    return data if how in ("bytes", "bad-bytes") else text


# --- runs ----------------------------------------------------------------------------------------
def queries() -> st.SearchStrategy[str]:
    return st.one_of(st.just("I was charged twice, a,b,c"), texts(), st.text(max_size=60))


def scripts() -> st.SearchStrategy[dict]:
    """Model scripts: every model answers, some answers hostile (braces, surrogates, think tags, JSON)."""
    reply = st.one_of(texts(), st.just('{"answer": 1}'), st.just('```json\n{"a": [1, 2]}\n```'),
                      st.fixed_dictionaries({"content": texts(), "reasoning": texts()}),
                      st.fixed_dictionaries({"error": texts()}))
    return st.fixed_dictionaries({"replies": st.lists(reply, max_size=4), "auto_reply": texts().filter(bool) | st.just("ok"),
                                  "stream_chunks": st.integers(1, 4)})


def form_inputs() -> st.SearchStrategy[dict | None]:
    return st.one_of(st.none(), st.dictionaries(st.sampled_from(["x", "topic", "feedback", "\ud800"]),
                                                st.one_of(json_values(3), st.fixed_dictionaries({"value": json_values(3)})),
                                                max_size=2))
