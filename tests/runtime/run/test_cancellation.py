"""A running turn can be cancelled: it stops at the next node boundary and the session stays usable."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script, ScriptedChatModel
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from tests.canvas2graph.cli.test_run import REPO, SlowModelServer

class SlowModel(ScriptedChatModel):
    """The scripted model, taking a moment to answer (so a cancel can arrive meanwhile)."""

    async def _agenerate(self, messages, *args, **kwargs):
        await asyncio.sleep(0.3)
        return await super()._agenerate(messages, *args, **kwargs)


class SlowFactory(ModelFactory):
    def __init__(self, script):
        super().__init__(script=script)
        self._script = script

    def chat_model(self, llm_id, *, component_id=None, gen_conf=None):
        return SlowModel(script=self._script, component_id=component_id)


def two_llms() -> dict:
    llm = lambda prompt: {"obj": {"component_name": "LLM", "params": {"llm_id": "m@OpenAI", "prompts": [{"role": "user", "content": prompt}]}}}
    return {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": ["LLM:A"]},
        "LLM:A": {**llm("first {sys.query}"), "downstream": ["LLM:B"]},
        "LLM:B": {**llm("second {LLM:A@content}"), "downstream": []},
    }}


async def test_cancel_stops_at_the_next_node_boundary_and_the_session_goes_on():
    script = Script.load({"auto_reply": "answer {n}"})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(two_llms()), saver, SlowFactory(script), script)
        events = []

        async def consume():
            async for e in runner.run_turn("s", TurnRequest(query="go")):
                events.append(e)
                if e["event"] == "node_started" and e["data"]["component_id"] == "LLM:A":
                    # cancel while LLM:A waits for its model: it finishes, LLM:B never starts
                    asyncio.get_running_loop().call_later(0.1, lambda: runner.cancel(at_once=False))

        await consume()
        assert runner.outcome.status == "cancelled"
        finished = [e["data"]["component_id"] for e in events if e["event"] == "node_finished"]
        assert finished == ["begin", "LLM:A"]
        assert events[-1]["event"] == "workflow_finished"
        assert events[-1]["data"]["outputs"] == "Task has been canceled"
        assert script.calls == 1

        again = [e async for e in runner.run_turn("s", TurnRequest(query="again"))]
    assert runner.outcome.status == "finished"
    assert [e["data"]["component_id"] for e in again if e["event"] == "node_finished"] == ["begin", "LLM:A", "LLM:B"]


async def test_cancel_at_once_stops_a_model_mid_answer_and_the_session_goes_on():
    script = Script.load({"auto_reply": "answer {n}"})
    async with open_checkpointer(None) as saver:
        runner = Runner(compile_dsl(two_llms()), saver, SlowFactory(script), script)
        events, cancelled_at = [], []

        async def consume():
            async for e in runner.run_turn("s", TurnRequest(query="go")):
                events.append(e)
                if e["event"] == "node_started" and e["data"]["component_id"] == "LLM:A":
                    # cancel while LLM:A waits 0.3 s for its model: it stops there, unfinished
                    def cancel():
                        cancelled_at.append(asyncio.get_running_loop().time())
                        runner.cancel()
                    asyncio.get_running_loop().call_later(0.05, cancel)

        await consume()
        took = asyncio.get_running_loop().time() - cancelled_at[0]
        assert runner.outcome.status == "cancelled"
        assert took < 0.2, f"the cancel took {took:.2f} s"          # the model's 0.3 s were not waited for
        finished = [(e["data"]["component_id"], e["data"]["error"]) for e in events if e["event"] == "node_finished"]
        assert finished == [("begin", None), ("LLM:A", "Task has been canceled")]
        assert events[-1]["data"]["outputs"] == "Task has been canceled"
        again = [e async for e in runner.run_turn("s", TurnRequest(query="again"))]
    assert runner.outcome.status == "finished" and runner.outcome.resumed is None
    assert again[0]["event"] == "workflow_started"
    assert [e["data"]["component_id"] for e in again if e["event"] == "node_finished"] == ["begin", "LLM:A", "LLM:B"]


def test_ctrl_c_in_the_cli_cancels_after_the_running_step(tmp_path):
    server = SlowModelServer()
    dsl = two_llms()
    for cid in ("LLM:A", "LLM:B"):
        dsl["components"][cid]["obj"]["params"]["llm_id"] = "tiny@OpenAI-API-Compatible"
    path = tmp_path / "dsl.json"
    path.write_text(json.dumps(dsl))
    db = str(tmp_path / "s.db")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "canvas2graph.cli", "run", str(path), "--query", "go", "--format", "jsonl",
                                 "--db", db, "--session", "c1"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env={**os.environ, "OPENAI_API_COMPATIBLE_BASE_URL": server.url})
        assert server.received.wait(30)           # LLM:A is running, waiting on the server
        proc.send_signal(signal.SIGINT)
        server.release.set()
        rest = [json.loads(line) for line in proc.stdout]
        code = proc.wait(30)
        stderr = proc.stderr.read()
    finally:
        server.close()
    assert code == 130, stderr
    assert "cancelling after the running step" in stderr
    assert [e["data"].get("component_id") for e in rest if e["event"] == "node_finished"] == ["begin", "LLM:A"]
    assert rest[-1]["data"]["outputs"] == "Task has been canceled"
