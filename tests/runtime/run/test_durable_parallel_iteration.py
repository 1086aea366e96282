"""A process killed in the middle of a parallel Iteration resumes only the items that had not finished.

The items of an Iteration with `max_concurrency` above 1 are tasks of one LangGraph superstep; the
checkpointer keeps the writes of every task that finished, so the next process runs only the others.
Each test runs real `canvas2graph run` processes against SQLite and PostgreSQL (`durable_url`) with
the models served by a local OpenAI-compatible server that holds one item's answer until released.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess

from canvas2graph.compiler.canvas import compile_dsl
from canvas2graph.compiler.parallel import ITEMS_PREFIX
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from tests.conftest import cpn
from tests.runtime.checkpointers import new_session
from tests.runtime.run.test_durable_sessions import REPO, ModelServer, cli_args, events_of, finished, run_cli

ITEMS = ["alpha", "bravo", "charlie", "delta"]
ANSWERS = {f"Item {item}": item.upper() for item in ITEMS}

# begin -> Split(sys.query) -> Iteration:I (4 at once: IterationItem:S -> LLM:Each) -> Message:Out
PARALLEL_DSL = {"components": {
    "begin": cpn("Begin", downstream=["StringTransform:Split"]),
    "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","]},
                                 ["Iteration:I"]),
    "Iteration:I": cpn("Iteration", {"items_ref": "StringTransform:Split@result", "max_concurrency": 4,
                                     "outputs": {"out": {"ref": "LLM:Each@content"}}}, ["Message:Out"]),
    "IterationItem:S": cpn("IterationItem", {}, ["LLM:Each"], parent_id="Iteration:I"),
    "LLM:Each": cpn("LLM", {"llm_id": "tiny@OpenAI-API-Compatible",
                            "prompts": [{"role": "user", "content": "Item {IterationItem:S@item}"}]}, parent_id="Iteration:I"),
    "Message:Out": cpn("Message", {"content": ["{Iteration:I@out}"], "stream": False}),
}}


async def finished_items(db: str, session: str) -> int:
    """How many item tasks of the running superstep have their writes in the checkpointer."""
    async with open_checkpointer(db) as saver:
        graph = compile_dsl(PARALLEL_DSL).graph(saver)
        snapshot = await graph.aget_state({"configurable": {"thread_id": session}})
        return sum(1 for t in snapshot.tasks if t.name.startswith(ITEMS_PREFIX) and t.result is not None)


async def wait_for_finished_items(db: str, session: str, count: int, proc) -> None:
    """Until `count` item tasks are stored (at most 30 s; the process must still be running)."""
    for _ in range(300):
        assert proc.poll() is None, proc.stderr.read()
        if await finished_items(db, session) >= count:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{count} items never finished")


async def test_a_process_killed_mid_iteration_resumes_only_the_unfinished_items(tmp_path, durable_url):
    session = new_session()
    server = ModelServer(ANSWERS, hold="Item delta")
    env = {**os.environ, "OPENAI_API_COMPATIBLE_BASE_URL": server.url}
    try:
        proc = subprocess.Popen(cli_args(tmp_path, PARALLEL_DSL, durable_url, session, query=",".join(ITEMS)),
                                cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            assert server.arrived["Item delta"].wait(30), "the fourth item's request never reached the server"
            await wait_for_finished_items(durable_url, session, 3, proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        killed = [json.loads(line) for line in out.splitlines()]
        assert "workflow_finished" not in [e["event"] for e in killed]

        server.hold = None                                  # the server now answers at once
        again = run_cli(tmp_path, PARALLEL_DSL, durable_url, session, env=env)
    finally:
        server.close()
    assert again.returncode == 0, again.stderr
    # every item was asked once, and only the one cut off is asked again
    assert sorted(server.calls) == sorted(ANSWERS) + ["Item delta"]
    assert server.calls[-1] == "Item delta"
    resumed = events_of(again)
    items = [e["data"]["outputs"]["item"] for e in resumed
             if e["event"] == "node_finished" and e["data"]["component_id"] == "IterationItem:S"]
    assert items == ["delta"]                               # the finished items do not run again
    assert finished(resumed, "Iteration:I")["outputs"]["out"] == ["ALPHA", "BRAVO", "CHARLIE", "DELTA"]
    assert resumed[-1]["event"] == "workflow_finished"
    assert resumed[-1]["data"]["outputs"]["content"] == '["ALPHA", "BRAVO", "CHARLIE", "DELTA"]'
