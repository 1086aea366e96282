"""One turn of an Iteration stores bytes in proportion to its items, and resumes after a kill with its collected
lists whole: a pass stores the item it collects as an append, not the list again (docs/performance.md, Storage).

Each test runs against a SQLite file and PostgreSQL (`durable_url`, tests/runtime/checkpointers.py)."""
from __future__ import annotations

import copy
import json
import os
import secrets

import pytest

from bench.storage import session_bytes
from canvas2graph.runtime.run.checkpoint import open_checkpointer
from tests.conftest import cpn
from tests.runtime.checkpointers import new_session
from tests.runtime.run.test_durable_sessions import (ModelServer, events_of, finished, killed_at, run_cli, run_turn,
                                                     session_state)

# begin -> Split (the query by commas) -> Iteration over the parts { IterationItem -> LLM } -> Message
ITERATION_DSL = {"components": {
    "begin": cpn("Begin", downstream=["StringTransform:Split"]),
    "StringTransform:Split": cpn("StringTransform", {"method": "split", "split_ref": "sys.query", "delimiters": [","],
                                                     "outputs": {"result": {"type": "Array<string>", "value": []}}},
                                 downstream=["Iteration:Each"]),
    "Iteration:Each": cpn("Iteration", {"items_ref": "StringTransform:Split@result", "outputs": {
        "summaries": {"type": "Array<string>", "ref": "LLM:Describe@content"}}}, downstream=["Message:Out"]),
    "IterationItem:Start": cpn("IterationItem", {}, downstream=["LLM:Describe"], parent_id="Iteration:Each"),
    "LLM:Describe": cpn("LLM", {"llm_id": "tiny@OpenAI-API-Compatible", "prompts": [
        {"role": "user", "content": "Describe {IterationItem:Start@item} in three words."}]}, parent_id="Iteration:Each"),
    "Message:Out": cpn("Message", {"content": ["{Iteration:Each@summaries}"]}),
}}


# the same, its items run eight at a time (compiler/parallel.py), from a form field rather than the query
PARALLEL_DSL = copy.deepcopy(ITERATION_DSL)
PARALLEL_DSL["components"]["begin"] = cpn("Begin", {"inputs": {"list": {"type": "paragraph", "name": "List",
                                                                       "optional": False}}},
                                          downstream=["StringTransform:Split"])
PARALLEL_DSL["components"]["StringTransform:Split"]["obj"]["params"]["split_ref"] = "begin@list"
PARALLEL_DSL["components"]["Iteration:Each"]["obj"]["params"]["max_concurrency"] = 8


def _items(n: int) -> list[str]:
    """Items that do not compress into each other, as real data would not."""
    return [f"item{i}-{secrets.token_hex(12)}" for i in range(n)]


async def _bytes_of_one_turn(url: str, dsl: dict, items: list[str]) -> tuple[int, list]:
    session, text = new_session(), ",".join(items)
    request = {"query": text} if dsl is ITERATION_DSL else {"query": "go", "inputs": {"list": text}}
    async with open_checkpointer(url) as saver:
        await run_turn(saver, dsl, session, {"auto_reply": "Three words here."}, **request)
        snapshot, _ = await session_state(dsl, url, session)
        return await session_bytes(url, session), snapshot.values["outputs"]["Iteration:Each"]["summaries"]


@pytest.mark.parametrize("dsl", [ITERATION_DSL, PARALLEL_DSL], ids=["one-at-a-time", "eight-at-a-time"])
async def test_a_turn_stores_bytes_in_proportion_to_its_items(durable_url, tmp_path, dsl):
    sizes = {}
    for n in (50, 400):
        url = durable_url if durable_url.startswith("postgresql") else str(tmp_path / f"{n}.db")
        stored, summaries = await _bytes_of_one_turn(url, dsl, _items(n))
        assert summaries == ["Three words here."] * n
        sizes[n] = stored / n
    # rewriting the items or the collected list at every pass, or sending every parallel item a copy of the
    # list, made the bytes per item grow with the items
    assert sizes[400] <= 1.25 * sizes[50], sizes


async def test_an_iteration_killed_mid_pass_resumes_with_every_item_collected_once(tmp_path, durable_url):
    fruits = ["apple", "banana", "cherry", "damson", "elder"]
    replies = {fruit: f"{fruit.title()} is tasty." for fruit in fruits}
    session = new_session()
    server = ModelServer(replies, hold="cherry")
    env = {**os.environ, "OPENAI_API_COMPATIBLE_BASE_URL": server.url}
    try:
        killed_at(tmp_path, ITERATION_DSL, durable_url, session, server, "cherry", env, query=",".join(fruits))
        server.hold = None
        again = run_cli(tmp_path, ITERATION_DSL, durable_url, session, env=env)
    finally:
        server.close()
    assert again.returncode == 0, again.stderr
    assert server.calls == ["apple", "banana", "cherry", "cherry", "damson", "elder"]   # only the cut-off call again
    expected = [replies[f] for f in fruits]
    assert finished(events_of(again), "Iteration:Each")["outputs"]["summaries"] == expected
    snapshot, _ = await session_state(ITERATION_DSL, durable_url, session)
    assert snapshot.values["outputs"]["Iteration:Each"]["summaries"] == expected
    assert json.loads(snapshot.values["outputs"]["Message:Out"]["content"]) == expected
