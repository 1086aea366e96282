"""A session that ran (`canvas2graph run`, the server, live models included) turned into a regression
case: its turns as the case's turns, the models' and tools' actual replies (read from the checkpoints'
step trace) as the script, and what each turn did as its expectations (`canvas2graph record`, and the
server's `.../sessions/{sid}/record`).

What the checkpoints keep decides what the script holds:
- an LLM's reply is its `content` output, a Categorize's its `category_name`; an Agent's rounds are its
  recorded tool calls (one round per model call the step counted, in call order) and then its `content`;
- a tool's reply is its recorded result (its first 2,000 characters, as the trace keeps it), queued
  under the tool's function name; a tool placed on the canvas (TavilySearch, CodeExec, ...) replays its
  outputs, queued under its component id;
- a Retrieval's chunks (its `json` output, from the first Retrieval that ran) become the script's
  `retrieval`, so the case runs without the knowledge base.
Expectations: each turn's status, answer and path; every component's small outputs (Begin's and the
Messages' aside: the answer covers them), and the prompts of LLMs and Agents (so a changed prompt is a
difference).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from canvas2graph.server.backend.agent_tests.case import FORMAT, VERSION, CASE_FILE
from canvas2graph.server.backend.agent_tests.observe import PROMPTED_TYPES, observe_session

__all__ = ["RecordError", "record_session", "case_from_turns", "script_from_turns", "write_case", "case_files"]

LONG_TEXT = 2000            # an output longer than this is expected by its first PREFIX characters
PREFIX = 200
LEFT_OUT = ("Begin", "Message", "UserFillUp")


class RecordError(ValueError):
    """The session cannot be recorded (unknown, without steps, or without its DSL)."""


def _rounds(calls: list[dict], model_calls: int) -> list[list[dict]]:
    """An Agent's tool calls grouped into the rounds its model calls made (the trace keeps their order,
    not which round asked for which: the first rounds take one call each, the last the rest)."""
    rounds = max(model_calls - 1, 1)
    if not calls:
        return []
    groups = [[c] for c in calls[: rounds - 1]]
    if calls[rounds - 1:]:
        groups.append(calls[rounds - 1:])
    return groups


def _model_replies(step: dict) -> list[Any]:
    outputs = step.get("outputs") or {}
    kind = step["component_type"]
    if kind == "Categorize":
        return [str(outputs.get("category_name") or "")]
    content = outputs.get("content")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
    final: Any = {"content": text, "reasoning": step["reasoning"]} if step.get("reasoning") else text
    if kind != "Agent":
        return [final]
    calls = step.get("usage", {}).get("calls", 1)
    replies: list[Any] = [{"tool_calls": [{"name": c["name"], "arguments": c.get("arguments") or {}} for c in group]}
                          for group in _rounds(step.get("tool_calls") or [], calls)]
    return replies + [final]


def _chunk(raw: dict) -> dict:
    return {"id": raw.get("chunk_id", ""), "content": raw.get("content_with_weight", ""), "doc_id": raw.get("doc_id", ""),
            "docnm_kwd": raw.get("docnm_kwd", ""), "kb_id": raw.get("kb_id", ""),
            "similarity": raw.get("similarity", 0.9)}


def _is_tool(component_type: str) -> bool:
    """A tool placed on the canvas (TavilySearch, CodeExec, ...): its outputs are what the script replays."""
    from canvas2graph.nodes.registry import lookup
    from canvas2graph.nodes.tool import Tool
    spec = lookup(component_type)
    return spec is not None and issubclass(spec.node, Tool)


def script_from_turns(turns: list[dict]) -> dict:
    """The models' and tools' replies of every turn, in the order the session consumed them."""
    by_component: dict[str, list] = {}
    tool_results: dict[str, list] = {}
    retrieval = None
    for turn in turns:
        for step in turn["steps"]:
            if step.get("usage") or (step["component_type"] in ("LLM", "Agent", "Categorize") and not step.get("error")
                                     and step.get("messages")):
                by_component.setdefault(step["component_id"], []).extend(_model_replies(step))
            for call in step.get("tool_calls") or ():
                tool_results.setdefault(call["name"], []).append(str(call.get("result") or ""))
            if not step.get("error") and _is_tool(step["component_type"]):
                outputs = {k: v for k, v in (step.get("outputs") or {}).items() if not k.startswith("_")}
                tool_results.setdefault(step["component_id"], []).append({"outputs": outputs})
            if step["component_type"] == "Retrieval" and retrieval is None and isinstance((step["outputs"] or {}).get("json"), list):
                retrieval = [_chunk(c) for c in step["outputs"]["json"] if isinstance(c, dict)]
    script: dict[str, Any] = {"by_component": by_component}
    if tool_results:
        script["tool_results"] = tool_results
    if retrieval is not None:
        script["retrieval"] = retrieval
    return script


def _expected_output(value: Any) -> Any:
    """An output as a case expects it; None when it is too large to review (left out)."""
    if isinstance(value, str):
        return value if len(value) <= LONG_TEXT else {"contains": value[:PREFIX]}
    if len(json.dumps(value, ensure_ascii=False, default=str)) > LONG_TEXT:
        return None
    return value


def expectations(observed: dict) -> dict:
    """A turn's expectations from what it did."""
    expect: dict[str, Any] = {"status": observed["status"], "answer": observed["answer"], "path": observed["path"]}
    components: dict[str, dict] = {}
    for cid, seen in observed["components"].items():
        if seen.get("type") in LEFT_OUT:
            continue
        item: dict[str, Any] = {}
        outputs = {k: e for k, v in (seen.get("outputs") or {}).items() if (e := _expected_output(v)) is not None}
        if outputs:
            item["outputs"] = outputs
        if seen.get("type") in PROMPTED_TYPES and seen.get("messages"):
            item["messages"] = seen["messages"]
        if item:
            components[cid] = item
    if components:
        expect["components"] = components
    return expect


def _turn_request(observed: dict) -> dict:
    """What the turn was asked: its query and, for a form it answered, the form's values."""
    turn: dict[str, Any] = {"query": observed.get("query") or ""}
    first = observed["steps"][0] if observed.get("steps") else None
    if first and first["component_type"] in ("UserFillUp", "Begin") and first.get("inputs"):
        inputs = {k: v for k, v in first["inputs"].items() if not str(k).startswith("sys.")}
        if inputs:
            turn["inputs"] = inputs
    return turn


def case_from_turns(turns: list[dict], *, name: str, dsl_file: str = "agent.json") -> dict:
    case_turns = [{**_turn_request(t), "expect": expectations(t)} for t in turns if t.get("steps")]
    return {"format": FORMAT, "version": VERSION, "name": name, "dsl": dsl_file, "script": "script.json",
            "turns": case_turns}


def _dsl_json(source: Any) -> Any:
    if isinstance(source, (bytes, str)):
        return json.loads(source)
    return source


async def record_session(session_id: str, *, db: str, dsl: str | None = None, name: str | None = None) -> dict[str, Any]:
    """{file name: content} of the case recorded from `session_id` in `db` (with `dsl`, the file a
    `canvas2graph run` session ran; a server session brings its own)."""
    from canvas2graph.compiler.canvas import compile_dsl
    from canvas2graph.server.backend.store import open_store
    async with open_store(db) as store:
        if dsl:
            try:
                source: Any = Path(dsl).read_bytes()
            except OSError as e:
                raise RecordError(f"cannot read {dsl}: {e.strerror}")
        else:
            source = await store.session_dsl(session_id)
            if source is None:
                raise RecordError(f"{db} stores no DSL for session {session_id} (sessions of `canvas2graph run` "
                                  "keep none): give it with --dsl FILE")
        graph = compile_dsl(source).graph(store.checkpointer)
        turns = await observe_session(graph, session_id)
    return case_files(turns, _dsl_json(source), name=name or f"session {session_id}")


def case_files(turns: list[dict], dsl: Any, *, name: str) -> dict[str, Any]:
    if not any(t.get("steps") for t in turns):
        raise RecordError(f"{name} has no steps to record")
    return {CASE_FILE: case_from_turns(turns, name=name), "agent.json": dsl, "script.json": script_from_turns(turns)}


def write_case(files: dict[str, Any], out: str | Path) -> Path:
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return folder


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:60] or "case"
