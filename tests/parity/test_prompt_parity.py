"""What RAGFlow's engine sends its model when a turn has files, replayed through canvas2graph (docs/compatibility.md).

Each case in `prompts/cases` holds a DSL, the turn's `sys.files` as RAGFlow's canvas holds them once parsed
(a text per document, a data URI per image) and the messages RAGFlow's LLM or Agent sent, recorded with
the oracle (`prompts/record.py`: the oracle cannot take an upload, so the files start in the canvas's
globals). canvas2graph takes the same parsed `sys.files` (strings stand for read files) and must send the
same messages: system prompt, prompts, and the documents' text on the last user message. One difference is
deliberate: RAGFlow hands images to the model apart, and the oracle's chat model (like any RAGFlow chat
model that is not a vision model) drops them; canvas2graph sends them with the last user message as image
parts, so they are compared apart from the text.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest

CASES = Path(__file__).resolve().parent / "prompts" / "cases"
ROLES = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}


@pytest.mark.parametrize("name", sorted(p.stem for p in CASES.glob("*.json")))
async def test_the_model_gets_what_ragflow_sends_it(name):
    case = json.loads((CASES / f"{name}.json").read_text(encoding="utf-8"))
    script = Script.load(case["script"])
    runner = Runner(compile_dsl(case["dsl"]), InMemorySaver(), ModelFactory(script=script), script)
    events = [e async for e in runner.run_turn("s", TurnRequest(query=case["query"], files=case["sys_files"]))]
    assert events[-1]["event"] == "workflow_finished"
    assert not [e for e in events if e["event"] == "node_finished" and e["data"].get("error")]
    assert {e["data"]["component_id"]: e["data"]["thoughts"] for e in events
            if e["event"] == "node_started" and e["data"].get("thoughts")} == case["thoughts"]
    images = [f for f in case["sys_files"] if f.startswith("data:image/")]
    assert case["recorded"] and len(script.requests) >= len(case["recorded"])
    for recorded, sent in zip(case["recorded"], script.requests):
        assert sent["component_id"] == recorded["component_id"]
        assert [{"role": ROLES[m["role"]], "content": m["content"]} for m in sent["messages"]] == recorded["messages"]
        # the deliberate difference: the images ride on the last user message
        [user] = [m for m in sent["messages"] if m["role"] == "human"][-1:]
        assert user.get("images", []) == images
        assert not any(m.get("images") for m in sent["messages"] if m is not user)
