"""The Agent against an OpenAI-compatible provider, over HTTP: the path a live run takes.

The provider is a local server speaking OpenAI's wire protocol (tests/openai_server.py), so the tool
schemas langchain-openai sends, tool calls streamed as argument fragments, and the tool results sent
back are the real ones; only the model's words are scripted. `canvas2graph run` is the real command.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nodes.tools.support import CODE_TOOL, agent_dsl
from tests.openai_server import OpenAIServer

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "def main():\n    return {'product': 6 * 7}\n"
REPLIES = [{"tool_calls": [{"name": "execute_code_0", "arguments": {"lang": "python", "script": SCRIPT}}]},
           "Six times seven is 42."]


def run_cli(dsl: dict, server: OpenAIServer, tmp_path: Path) -> list[dict]:
    dsl_path = tmp_path / "agent.json"
    dsl_path.write_text(json.dumps(dsl))
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith("CANVAS2GRAPH_")}
    env.update({"OPENAI_API_COMPATIBLE_BASE_URL": server.url, "OPENAI_API_COMPATIBLE_API_KEY": "sk-local",
                "CANVAS2GRAPH_ARTIFACTS_DIR": str(tmp_path / "artifacts")})
    done = subprocess.run([sys.executable, "-m", "canvas2graph.cli", "run", str(dsl_path), "--format", "jsonl",
                           "--db", str(tmp_path / "sessions.db"), "--query", "What is 6 times 7?"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def provider_agent(*, stream: bool) -> dict:
    dsl = agent_dsl(CODE_TOOL, cite=False)
    dsl["components"]["Agent:A"]["obj"]["params"]["llm_id"] = "my-model@OpenAI-API-Compatible"
    if not stream:                      # no Message downstream: the Agent calls the model without streaming
        dsl["components"]["Agent:A"]["downstream"] = []
        del dsl["components"]["Message:M"]
    return dsl


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "blocking"])
def test_the_tool_loop_runs_over_the_providers_protocol(tmp_path, stream):
    with OpenAIServer(list(REPLIES)) as server:
        events = run_cli(provider_agent(stream=stream), server, tmp_path)
    first, second = (r["body"] for r in server.requests)
    assert server.requests[0]["auth"] == "Bearer sk-local"
    assert first["model"] == "my-model" and bool(first.get("stream")) is stream
    [tool] = first["tools"]
    assert tool["function"]["name"] == "execute_code_0"
    assert tool["function"]["parameters"]["required"] == ["lang", "script"]
    # the second request replays the call and carries the code's result for it
    call = second["messages"][-2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"lang": "python", "script": SCRIPT}
    result = second["messages"][-1]
    assert result["role"] == "tool" and result["tool_call_id"] == call["id"]
    assert json.loads(result["content"])["result"] == {"product": 42}
    assert events[-1]["event"] == "workflow_finished"
    assert events[-1]["data"]["outputs"]["content"].endswith("Six times seven is 42.")
    if stream:
        assert "".join(e["data"]["content"] for e in events if e["event"] == "message").endswith("Six times seven is 42.")
