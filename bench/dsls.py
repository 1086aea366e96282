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
        from nodes.registry import lookup
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
