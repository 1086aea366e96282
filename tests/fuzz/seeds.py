"""The DSLs the fuzzers start from: small canvases that compile and run offline, one per component
family, plus the demo agents and, when `../shared` is beside the checkout, RAGFlow's templates and the
recorded parity cases. Mutating a DSL that works reaches deeper than generating one from nothing: most
mutants still load, plan and run, so the mutated value meets the code that uses it.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
LLM_ID = "gpt-4o@OpenAI"


def cpn(name: str, params: dict | None = None, downstream: list | None = None, parent: str | None = None) -> dict:
    entry: dict[str, Any] = {"obj": {"component_name": name, "params": params or {}}, "downstream": downstream or []}
    if parent:
        entry["parent_id"] = parent
    return entry


def llm(prompt: str = "{sys.query}", **params: Any) -> dict:
    return {"llm_id": LLM_ID, "sys_prompt": "Be brief.", "prompts": [{"role": "user", "content": prompt}], **params}


def message(*texts: str) -> dict:
    return {"content": list(texts)}


def inc(target: str, operator: str = "+=", parameter: Any = 1) -> dict:
    return {"variables": [{"variable": target, "operator": operator, "parameter": parameter}]}


BUILT_IN: dict[str, dict] = {
    "chat": {"components": {
        "begin": cpn("Begin", {"prologue": "Hi"}, ["LLM:A"]),
        "LLM:A": cpn("LLM", llm("Turn {sys.conversation_turns}: {sys.query}"), ["Message:M"]),
        "Message:M": cpn("Message", message("{LLM:A@content}")),
    }},
    "route": {"components": {
        "begin": cpn("Begin", {}, ["Categorize:C"]),
        "Categorize:C": cpn("Categorize", {"llm_id": LLM_ID, "query": "sys.query", "category_description": {
            "billing": {"description": "money", "examples": ["refund"], "to": ["Switch:S"]},
            "other": {"description": "the rest", "to": ["Message:Other"]}}}),
        "Switch:S": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["Message:Yes"], "items": [
            {"cpn_id": "sys.query", "operator": "contains", "value": "twice"}]}], "end_cpn_ids": ["Message:Other"]}),
        "Message:Yes": cpn("Message", message("refund {sys.query}"), ["VariableAggregator:J"]),
        "Message:Other": cpn("Message", message("other"), ["VariableAggregator:J"]),
        "VariableAggregator:J": cpn("VariableAggregator", {"groups": [{"group_name": "out", "type": "string", "variables": [
            {"value": "Message:Yes@content"}, {"value": "Message:Other@content"}]}]}, ["Message:End"]),
        "Message:End": cpn("Message", message("{VariableAggregator:J@out}")),
    }},
    "loop": {"components": {
        "begin": cpn("Begin", {}, ["Loop:L"]),
        "Loop:L": cpn("Loop", {"loop_variables": [
            {"variable": "n", "input_mode": "constant", "value": 0, "type": "number"},
            {"variable": "text", "input_mode": "variable", "value": "sys.query", "type": "string"}],
            "loop_termination_condition": [{"variable": "Loop:L@n", "operator": "≥", "value": 3, "input_mode": "constant"}],
            "logical_operator": "and", "maximum_loop_count": 5}, ["Message:Out"]),
        "LoopItem:S": cpn("LoopItem", {}, ["VariableAssigner:Inc"], "Loop:L"),
        "VariableAssigner:Inc": cpn("VariableAssigner", inc("Loop:L@n"), ["Switch:Stop"], "Loop:L"),
        "Switch:Stop": cpn("Switch", {"conditions": [{"logical_operator": "and", "to": ["ExitLoop:X"], "items": [
            {"cpn_id": "Loop:L@n", "operator": "=", "value": "2"}]}], "end_cpn_ids": ["VariableAssigner:Grow"]}, [], "Loop:L"),
        "VariableAssigner:Grow": cpn("VariableAssigner", inc("Loop:L@text", "set", "{Loop:L@text}!"), [], "Loop:L"),
        "ExitLoop:X": cpn("ExitLoop", {}, [], "Loop:L"),
        "Message:Out": cpn("Message", message("n={Loop:L@n} {Loop:L@text}")),
    }},
    "iteration": {"components": {
        "begin": cpn("Begin", {}, ["StringTransform:Split"]),
        "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","]},
                                     ["Iteration:I"]),
        "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result", "outputs": {
            "out": {"ref": "StringTransform:Fmt@result", "type": "Array<string>"}}}, ["ListOperations:Top"]),
        "IterationItem:S": cpn("IterationItem", {}, ["StringTransform:Fmt"], "Iteration:I"),
        "StringTransform:Fmt": cpn("StringTransform", {"method": "merge", "script": "<{item}#{index}>", "delimiters": [","]},
                                   [], "Iteration:I"),
        "ListOperations:Top": cpn("ListOperations", {"query": "Iteration:I@out", "operations": "head", "n": 2},
                                  ["DataOperations:D"]),
        "DataOperations:D": cpn("DataOperations", {"query": ["ListOperations:Top@result"], "operations": "literal_eval"},
                                ["Message:Out"]),
        "Message:Out": cpn("Message", message("{ListOperations:Top@result} {DataOperations:D@result}")),
    }},
    "form": {"components": {
        "begin": cpn("Begin", {"mode": "conversational"}, ["UserFillUp:Ask"]),
        "UserFillUp:Ask": cpn("UserFillUp", {"enable_tips": True, "tips": "About {sys.query}?", "inputs": {
            "feedback": {"type": "line", "name": "Feedback", "optional": False}}}, ["LLM:Final"]),
        "LLM:Final": cpn("LLM", llm("Use {UserFillUp:Ask@feedback}"), ["Message:Out"]),
        "Message:Out": cpn("Message", message("{LLM:Final@content}")),
    }},
    "agent": {"components": {
        "begin": cpn("Begin", {"mode": "task", "inputs": {"topic": {"name": "Topic", "type": "line", "optional": True}}},
                     ["Agent:A"]),
        "Agent:A": cpn("Agent", {**llm("{sys.query} {begin@topic}"), "max_rounds": 2, "tools": [
            {"component_name": "Agent", "name": "helper", "params": {**llm("help"), "description": "a helper"}},
            {"component_name": "CodeExec", "name": "code", "params": {"lang": "python",
                                                                   "script": "def main():\n    return {'x': 1}"}}]},
            ["StringTransform:Fmt"], ),
        "StringTransform:Fmt": cpn("StringTransform", {"method": "merge", "script": "{{ a }} {Agent:A@content}",
                                                      "delimiters": [","]}, ["Message:Out"]),
        "Message:Out": cpn("Message", message("{StringTransform:Fmt@result}", "{Agent:A@content}")),
    }},
    "failing": {"components": {
        "begin": cpn("Begin", {}, ["Invoke:I"]),
        "Invoke:I": cpn("Invoke", {"url": "http://127.0.0.1:9/x", "method": "get", "timeout": 1,
                                   "exception_method": "goto", "exception_goto": ["Retrieval:R"]}, ["Message:M"]),
        "Retrieval:R": cpn("Retrieval", {"query": "sys.query", "kb_ids": ["kb"], "exception_method": "comment",
                                         "exception_default_value": "no answer"}, ["Message:M"]),
        "Message:M": cpn("Message", message("{Invoke:I@result} {Retrieval:R@formalized_content}")),
    }},
}


def _documents(folder: Path, pattern: str) -> dict[str, dict]:
    found = {}
    for path in sorted(folder.glob(pattern)):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            found[f"{path.parent.name}/{path.name}"] = doc
    return found


@lru_cache(maxsize=None)
def seeds() -> dict[str, dict]:
    """Every seed DSL by name: the built-in ones, the demos and, when present, ../shared's."""
    found = {f"builtin/{k}": v for k, v in BUILT_IN.items()}
    found.update(_documents(REPO / "fixtures" / "demo", "*[!t].json"))      # not the *.script.json files
    found.update(_documents(REPO / "fixtures" / "kb", "*[!t].json"))
    if SHARED.is_dir():
        found.update(_documents(SHARED / "ragflow" / "templates", "*.json"))
        found.update(_documents(SHARED / "parity" / "cases", "*/dsl.json"))
    return found
