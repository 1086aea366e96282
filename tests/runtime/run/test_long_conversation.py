"""A 400-turn conversation killed with SIGKILL in the middle of a turn resumes in another process, on SQLite
and PostgreSQL: its history and globals are rebuilt from LangGraph's `DeltaChannel` snapshots and the writes
after them (runtime/graph/state.py), across several snapshots (one every `SNAPSHOT_EVERY` updates).

The 999 turns before the killed one run in this process with a scripted model (about a minute per store on
two cores); the killed turn and its resume run in `canvas2graph run` processes against a local model server."""
from __future__ import annotations

import json
import os
import signal
import subprocess

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from canvas2graph.runtime.services.models import ModelFactory
from canvas2graph.runtime.services.scripted import Script
from canvas2graph.runtime.run.runner import Runner, TurnRequest
from canvas2graph.runtime.graph.state import SNAPSHOT_EVERY
from tests.runtime.checkpointers import new_session
from tests.runtime.run.test_durable_sessions import (CHAIN_DSL, REPO, ModelServer, cli_args, events_of, names, run_cli,
                                                 session_state)

TURNS = 400


async def test_a_400_turn_conversation_killed_mid_turn_resumes(tmp_path, durable_url):
    assert 2 * TURNS > 4 * SNAPSHOT_EVERY          # the state is rebuilt across several snapshots
    session = new_session()
    async with open_checkpointer(durable_url) as saver:
        script = Script.load({"auto_reply": "Noted."})
        runner = Runner(compile_dsl(CHAIN_DSL), saver, ModelFactory(script=script), script)
        for turn in range(1, TURNS):
            async for _ in runner.run_turn(session, TurnRequest(query=f"question {turn}")):
                pass
            assert runner.outcome.status == "finished", (turn, runner.outcome.error)

    server = ModelServer({"Step A": "Alpha answer.", "Step B": "Bravo short."}, hold="Step B")
    env = {**os.environ, "OPENAI_API_COMPATIBLE_BASE_URL": server.url}
    try:
        proc = subprocess.Popen(cli_args(tmp_path, CHAIN_DSL, durable_url, session, query=f"question {TURNS}"),
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert server.arrived["Step B"].wait(60), "LLM:B's request never reached the server"
        finally:
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        assert "workflow_finished" not in names([json.loads(line) for line in out.splitlines()])
        server.hold = None
        again = run_cli(tmp_path, CHAIN_DSL, durable_url, session, env=env)
    finally:
        server.close()
    assert again.returncode == 0, again.stderr
    resumed = events_of(again)
    assert server.calls == ["Step A", "Step B", "Step B"]       # only the cut-off call runs again
    assert names(resumed)[-1] == "workflow_finished"
    assert resumed[-1]["data"]["outputs"]["content"] == "Bravo short."

    snapshot, _ = await session_state(CHAIN_DSL, durable_url, session)
    state = snapshot.values
    assert snapshot.next == () and state["request"]["open"] is False
    assert [c for r, c in state["history"] if r == "user"] == [f"question {n}" for n in range(1, TURNS + 1)]
    assert [r for r, _ in state["history"]] == ["user", "assistant"] * TURNS
    assert state["history"][-1] == ["assistant", resumed[-1]["data"]["outputs"]]
    assert all(c["content"] == "Noted." for r, c in state["history"][:-1] if r == "assistant")
    assert state["globals"]["sys.conversation_turns"] == TURNS
    assert len(state["globals"]["sys.history"]) == 2 * TURNS
    assert state["globals"]["sys.history"][-2] == f"user: question {TURNS}"
    assert state["globals"]["sys.query"] == f"question {TURNS}"
