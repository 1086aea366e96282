"""Generated RAGFlow DSLs for the benchmark.

Every generator takes a `salt` that lands in Begin's prologue, so each repetition compiles a DSL
with different content (`compile_dsl` caches by content hash).

Component counts include `begin`: a chain of n components is begin + (n - 1) workers.
"""
from __future__ import annotations

from typing import Any

LLM_ID = "gpt-4o@OpenAI"
# Query routed by the branching DSL: it matches the second case, so the Switch evaluates two conditions.
BRANCH_QUERY = "tell me about beta"


def _component(name: str, params: dict, downstream: list[str], upstream: list[str]) -> dict:
    return {"obj": {"component_name": name, "params": params}, "downstream": downstream, "upstream": upstream}


def _canvas(components: dict[str, dict]) -> dict:
    nodes = []
    for cid, c in components.items():
        label = c["obj"]["component_name"]
        nodes.append({"id": cid, "data": {"name": cid.split(":", 1)[-1], "label": label}})
    return {
        "components": components,
        "history": [], "path": [], "retrieval": [],
        "globals": {"sys.query": "", "sys.user_id": "", "sys.conversation_turns": 0, "sys.files": []},
        "graph": {"nodes": nodes, "edges": []},
    }


def _begin(salt: Any, downstream: list[str]) -> dict:
    return _component("Begin", {"mode": "conversational", "prologue": f"Hi! ({salt})"}, downstream, [])


def message_params(text: str) -> dict:
    return {"content": [text], "stream": False}


def message_chain(n: int, salt: Any = 0) -> dict:
    """begin -> Message:M1 -> ... -> Message:M{n-1}; each Message quotes the previous one's content."""
    ids = [f"Message:M{i}" for i in range(1, n)]
    comps = {"begin": _begin(salt, ids[:1])}
    for i, cid in enumerate(ids, start=1):
        prev = "{sys.query}" if i == 1 else "{" + ids[i - 2] + "@content}"
        comps[cid] = _component("Message", message_params(f"m{i}<-{prev}"),
                                ids[i:i + 1], ["begin"] if i == 1 else [ids[i - 2]])
    return _canvas(comps)


def string_transform_available() -> bool:
    try:
        from canvas2graph.nodes.registry import lookup
        return lookup("StringTransform") is not None
    except Exception:          # nodes/transforms.py may be mid-edit by someone else
        return False


def transform_chain(n: int, salt: Any = 0) -> dict:
    """begin -> StringTransform:T1 -> ...; each merges the previous result into a new text."""
    ids = [f"StringTransform:T{i}" for i in range(1, n)]
    comps = {"begin": _begin(salt, ids[:1])}
    for i, cid in enumerate(ids, start=1):
        prev = "{sys.query}" if i == 1 else "{" + ids[i - 2] + "@result}"
        comps[cid] = _component("StringTransform", {"method": "merge", "script": f"t{i}<-{prev}",
                                                    "delimiters": [","]},
                                ids[i:i + 1], ["begin"] if i == 1 else [ids[i - 2]])
    return _canvas(comps)


def llm_chain(n: int, salt: Any = 0) -> dict:
    """begin -> LLM:L1 -> ... -> LLM:L{n-1}; no Message follows, so no LLM streams."""
    ids = [f"LLM:L{i}" for i in range(1, n)]
    comps = {"begin": _begin(salt, ids[:1])}
    for i, cid in enumerate(ids, start=1):
        params = {"llm_id": LLM_ID, "sys_prompt": "", "prompts": [{"role": "user", "content": "Question: {sys.query}"}],
                  "cite": False}
        comps[cid] = _component("LLM", params, ids[i:i + 1], ["begin"] if i == 1 else [ids[i - 2]])
    return _canvas(comps)


BRANCHES = ("A", "B", "C")


def branch(chain_len: int = 5, salt: Any = 0) -> dict:
    """begin -> Switch (case 1: 'alpha', case 2: 'beta', else) -> 3 chains of `chain_len` Messages."""
    heads = [f"Message:{b}1" for b in BRANCHES]
    comps = {"begin": _begin(salt, ["Switch:Route"])}
    comps["Switch:Route"] = _component("Switch", {
        "conditions": [
            {"logical_operator": "and", "to": [heads[0]],
             "items": [{"cpn_id": "sys.query", "operator": "contains", "value": "alpha"}]},
            {"logical_operator": "and", "to": [heads[1]],
             "items": [{"cpn_id": "sys.query", "operator": "contains", "value": "beta"}]},
        ],
        "end_cpn_ids": [heads[2]],
    }, heads, ["begin"])
    for b in BRANCHES:
        ids = [f"Message:{b}{i}" for i in range(1, chain_len + 1)]
        for i, cid in enumerate(ids, start=1):
            prev = "{sys.query}" if i == 1 else "{" + ids[i - 2] + "@content}"
            comps[cid] = _component("Message", message_params(f"{b.lower()}{i}<-{prev}"),
                                    ids[i:i + 1], ["Switch:Route"] if i == 1 else [ids[i - 2]])
    return _canvas(comps)


def branch_executed(chain_len: int = 5) -> int:
    """Components that run in one turn of `branch`: begin, the Switch and one chain."""
    return 2 + chain_len


# --------------------------------------------------------------------------------------------
# containers: a Loop and an Iteration with cheap bodies
# --------------------------------------------------------------------------------------------

def loop_body_kind() -> str:
    """The loop body's work component: a StringTransform merge, or a Message if transforms do not import."""
    return "StringTransform" if string_transform_available() else "Message"


def loop_counter(passes: int = 1000, salt: Any = 0) -> dict:
    """begin -> Loop:Count (count = 0; stop when count >= passes; maximum_loop_count = passes) -> Message:Done.

    The body: LoopItem:Body -> VariableAssigner:Inc (count += 1) -> one cheap work component
    (StringTransform merge, or a Message) that formats the counter; it returns to LoopItem:Body.
    """
    loop, item, inc, final = "Loop:Count", "LoopItem:Body", "VariableAssigner:Inc", "Message:Done"
    kind = loop_body_kind()
    work = f"{kind}:Work"
    comps = {"begin": _begin(salt, [loop])}
    comps[loop] = _component("Loop", {
        "loop_variables": [{"variable": "count", "input_mode": "constant", "value": 0, "type": "number"}],
        "loop_termination_condition": [{"variable": f"{loop}@count", "operator": "≥", "value": passes,
                                        "input_mode": "constant"}],
        "logical_operator": "and",
        "maximum_loop_count": passes,
    }, [final], ["begin"])
    comps[item] = {**_component("LoopItem", {}, [inc], []), "parent_id": loop}
    comps[inc] = {**_component("VariableAssigner", {"variables": [
        {"variable": f"{loop}@count", "operator": "+=", "parameter": 1}]}, [work], [item]), "parent_id": loop}
    text = "pass {" + loop + "@count}"
    params = ({"method": "merge", "script": text, "delimiters": [","]} if kind == "StringTransform"
              else message_params(text))
    comps[work] = {**_component(kind, params, [], [inc]), "parent_id": loop}
    result = f"{work}@{'result' if kind == 'StringTransform' else 'content'}"
    comps[final] = _component("Message", message_params("done: {" + loop + "@count} passes, last {" + result + "}"),
                              [], [loop])
    return _canvas(comps)


def iteration_query(items: int) -> str:
    """The query the Iteration case splits: `items` comma-separated words."""
    return ",".join(f"w{i}" for i in range(items))


def iteration_map(salt: Any = 0) -> dict:
    """begin -> StringTransform:Split (sys.query on ',') -> Iteration:Each -> Message:Out.

    The body is one StringTransform merge `<{IterationItem:Start@item}>` (a merge script does not
    take the `{item}` shorthand: like RAGFlow's, it reads full references only); the Iteration collects its result per item
    (`outputs: {"results": {"ref": "StringTransform:Wrap@result"}}`), the Message shows the list.
    """
    split, it, start, wrap, out = ("StringTransform:Split", "Iteration:Each", "IterationItem:Start",
                                   "StringTransform:Wrap", "Message:Out")
    comps = {"begin": _begin(salt, [split])}
    comps[split] = _component("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","],
                                                  "outputs": {"result": {"type": "Array<string>", "value": []}}},
                              [it], ["begin"])
    comps[it] = _component("Iteration", {"items_ref": f"{split}@result",
                                         "outputs": {"results": {"type": "Array<string>", "ref": f"{wrap}@result"}}},
                           [out], [split])
    comps[start] = {**_component("IterationItem", {}, [wrap], []), "parent_id": it}
    comps[wrap] = {**_component("StringTransform", {"method": "merge", "script": "<{" + start + "@item}>",
                                                 "delimiters": [","]},
                                [], [start]), "parent_id": it}
    comps[out] = _component("Message", message_params("results: {" + it + "@results}"), [], [it])
    return _canvas(comps)
