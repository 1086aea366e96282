"""One `canvas2graph serve` per database (SQLite, then PostgreSQL) for the protocol tests of a module,
with alice and bob as tenants.

The scripted model takes 40 ms per streamed piece, so a turn of many steps lasts long enough for a
test to cancel it mid-way (`long_dsl`)."""
from __future__ import annotations

import os
import uuid

import pytest

from tests.runtime.checkpointers import postgres_url
from tests.server.helpers import SCRIPT, Api, Server, cpn, make_token

PACED_SCRIPT = {**SCRIPT, "chunk_interval_ms": 40}


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def server(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"protocols-{request.param}")
    db = str(tmp / "server.db") if request.param == "sqlite" else postgres_url()
    # a retrieval's own time limit (12 s) is meant for a live service: on a machine busy with other test
    # runs, the embedded store's first search (loading its tokenizer) may take longer
    config = tmp / "retrieval.toml"
    config.write_text("timeout = 300\n")
    with Server(db, tmp, PACED_SCRIPT, env={**os.environ, "CANVAS2GRAPH_RETRIEVAL_CONFIG": str(config)}) as running:
        yield running


@pytest.fixture(scope="module")
def alice(server):
    api = Api(server, make_token(server.db, f"alice-{uuid.uuid4().hex[:6]}"))
    yield api
    api.close()


@pytest.fixture(scope="module")
def bob(server):
    api = Api(server, make_token(server.db, f"bob-{uuid.uuid4().hex[:6]}"))
    yield api
    api.close()


def long_dsl(steps: int = 40) -> dict:
    """begin -> LLM:S1 -> ... -> LLM:S<steps> -> Message:M: a turn of many steps, to cancel mid-way."""
    components = {"begin": cpn("Begin", {}, ["LLM:S1"])}
    for i in range(1, steps + 1):
        components[f"LLM:S{i}"] = cpn("LLM", {"llm_id": "gpt-4o@OpenAI", "prompts": [
            {"role": "user", "content": "{sys.query}"}]}, [f"LLM:S{i + 1}" if i < steps else "Message:M"])
    components["Message:M"] = cpn("Message", {"content": [f"{{LLM:S{steps}@content}}"]})
    return {"components": components}
